//! Text made from the engine's values: paths with kopiru's lossless escape
//! (`\xHH` for bytes that are not UTF-8, `\\` for a backslash; see
//! docs/copy.md, "Refusals"). Errors as JSON: `kopiru::json`.

use kopiru::paths::Escaped;
use std::path::Path;

/// A path as text, losslessly.
pub fn path(p: &Path) -> String {
    Escaped(p.as_os_str()).to_string()
}

/// A setting as the command line spells it: its flag.
fn flag(s: kopiru::Setting) -> &'static str {
    use kopiru::Setting;
    match s {
        Setting::NoTargetDirectory => "-T",
        Setting::Delete => "--delete",
        Setting::DryRun => "--dry-run",
        Setting::Verify => "--verify",
        Setting::FilesFrom => "--files-from",
        Setting::Shard => "--shard",
        Setting::NoClobber => "-n (--no-clobber)",
        Setting::Backup => "--backup",
        Setting::Partial => "--partial",
        Setting::CloneMethod => "--method clone",
        Setting::LinkDest => "--link-dest",
        Setting::CloneDest => "--clone-dest",
        Setting::Parents => "--parents",
        _ => s.id(),
    }
}

/// A refused request in the command's words: its flags (`-T`,
/// `--delete`), where the engine's text names settings neutrally. The
/// engine's [`kopiru::PlanError::id`] decides which.
pub fn plan_error(e: &kopiru::PlanError) -> String {
    use kopiru::PlanError as P;
    let esc = |p: &Path| kopiru::paths::escape(p.as_os_str());
    match e {
        P::OneSourceAsItself => {
            "-T (no target directory) takes one source and one destination".into()
        }
        P::DeleteNeedsItself => "--delete removes from DEST what the source does not have, so \
                                 DEST must be the copy itself: give -T (SOURCE DEST), or write \
                                 SOURCE/. to copy the contents of SOURCE into DEST"
            .into(),
        P::DeleteNested {
            source,
            dest,
            source_inside: true,
        } => format!(
            "--delete: the source '{}' is '{}' or inside it, so deleting what the source \
             lacks would delete the source itself; nothing was copied",
            esc(source),
            esc(dest)
        ),
        P::DeleteNested { source, dest, .. } => format!(
            "--delete: the destination '{}' is inside the source '{}'; nothing was copied",
            esc(dest),
            esc(source)
        ),
        P::ParentsNeedDirectory { dest } => format!(
            "with --parents, the destination must be a directory: '{}' is not one",
            esc(dest)
        ),
        P::BasisNotADirectory {
            setting,
            given,
            looked,
        } => format!(
            "{} {}: {} is not a directory{}",
            flag(*setting),
            esc(given),
            esc(looked),
            match given.is_relative() {
                true => " (a relative DIR is taken from DEST, as rsync takes it)",
                false => "",
            }
        ),
        P::ListedNeedsOneSource { what } => format!(
            "{} copies from one SOURCE directory (the paths are inside it) to DEST",
            flag(*what)
        ),
        // Only -S gets here: clap refuses -b and --backup with -n.
        P::Excludes {
            first: kopiru::Setting::NoClobber,
            second: kopiru::Setting::Backup,
        } => "-S makes backups, and -n (--no-clobber) replaces nothing to back up: use one \
              of them"
            .into(),
        P::Excludes { first, second } => format!(
            "{} and {} exclude each other: use one of them",
            flag(*first),
            flag(*second)
        ),
        P::NotWith { what, other } => {
            format!("{} does not work with {} yet", flag(*what), flag(*other))
        }
        P::NotOnThisPlatform { what } => {
            format!("{} is not supported on Windows yet", flag(*what))
        }
        // The engine's text names no flag here.
        _ => e.to_string(),
    }
}

/// An error of flash or image as `path: reason` for a refusal (nothing
/// was tried), else `path: operation: reason`.
pub fn refused(e: &kopiru::Error) -> String {
    match e.refusal() {
        Some(r) => format!("{}: {}", path(&e.path), refusal(r)),
        None => error(e),
    }
}

/// The command line's `--json`: refusals in its words ([`refusal`]).
pub const JSON: kopiru::json::Json = kopiru::json::Json::COMMAND_LINE.with_words(refusal);

/// A refusal in the command's words: its flags (`--force`, `-T`), where
/// the engine's text names settings neutrally; the engine's text for a
/// refusal that names no setting. Every place that prints a refusal
/// (text, `--json`) spells it here.
pub fn refusal(r: &kopiru::Refusal) -> String {
    use kopiru::flash::{Found, NotAnImage};
    use kopiru::{image::ImageRefusal as I, DeviceRefusal as D, Refusal as R, ShardRefusal as S};
    let force = |what: &str| format!("{what} (--force to write it anyway)");
    match r {
        R::AlreadyCopied { source, dest } => {
            let (s, d) = (path(source), path(dest));
            format!(
                "'{d}' is the copy of '{s}' that an earlier kopiru run made: nothing copied, \
                 so nothing changed in it since is overwritten (to update it from '{s}': -T, \
                 kopiru copy -T '{s}' '{d}')"
            )
        }
        R::Incomplete { staged, failed } => format!(
            "not put in place: {failed} {} in it; what was copied is kept under '{}': run \
             the same command with --resume to finish it",
            match failed {
                1 => "failure",
                _ => "failures",
            },
            path(staged)
        ),
        R::Shard(S::ShardFailed { rank }) => format!(
            "{}: the copy was not put in place; run the same command with --resume to \
             finish it",
            match rank {
                Some(r) => format!("rank {r} failed, stopped or never started"),
                None => "another rank failed, stopped or never started".into(),
            }
        ),
        R::HoldsProtected => "cannot delete non-empty directory: it holds entries an \
                              --exclude protects (--delete-excluded deletes them too)"
            .into(),
        R::KeptExisting => "kept as it is (--no-clobber or --update)".into(),
        R::CannotClone { why } => {
            format!("cannot clone here ({why}); nothing was copied (--method auto falls back)")
        }
        R::Device(D::NoSuchDevice { under_dev: false }) => {
            "no such device (give --file to write the image to a new file)".into()
        }
        R::Device(D::NotABlockDevice { regular_file: true }) => {
            "not a block device (give --file to write a regular file)".into()
        }
        R::Device(D::Partition) => force("is a partition, not a whole device"),
        R::Device(D::HoldsRootFs) => force("holds the root filesystem"),
        R::Device(D::HoldsImage) => force("holds the image being written"),
        R::Device(D::Mounted { at }) => {
            format!("is mounted (at {at}); unmount it first, or --force")
        }
        R::Device(D::InUse { chain }) => format!(
            "is in use: {chain}; nothing written (unmount or detach that first, or --force)"
        ),
        R::NotAnImage(NotAnImage::Mismatch {
            claimed,
            by_name: false,
            found,
        }) => format!(
            "--format {claimed} was given, but its bytes are not {claimed}: {found}; nothing \
             written"
        ),
        R::NotAnImage(NotAnImage::Unrecognised(
            found @ (Found::Html | Found::Text | Found::Empty),
        )) => {
            format!("not a disk image: {found}; nothing written (--format raw writes it as it is)")
        }
        R::NotAnImage(NotAnImage::Unrecognised(_)) => format!(
            "not a known image format: no {} header, no partition table or filesystem at its \
             start, and not named as a raw image (.img, .iso, .raw, ...); nothing written \
             (--format raw writes it as it is)",
            kopiru::Format::compressed_names()
        ),
        R::Image(I::NotADevice { regular_file: true }) => {
            "not a block device (give --file to read a regular file)".into()
        }
        R::Image(I::MountedReadWrite { at }) => format!(
            "is mounted read-write (at {at}): its image would not be consistent; unmount it \
             or remount it read-only, or --force"
        ),
        R::Image(I::OutputExists) => {
            "exists (--force replaces it, once the new image is complete and verified)".into()
        }
        R::Image(I::NoPartitionTable) => {
            "--partitions-only: no partition table (MBR or GPT) found".into()
        }
        R::Image(I::PartitionPastEnd {
            table,
            number,
            end,
            device,
        }) => format!(
            "--partitions-only: {table} partition {number} ends at byte {end}, past the end \
             of the device ({device} bytes): the table was made for a larger device"
        ),
        // The engine's text names no setting here.
        _ => r.to_string(),
    }
}

/// An error's reason in the command's words: the OS's message, or the
/// refusal's ([`refusal`]).
pub fn reason(e: &kopiru::Error) -> String {
    e.reason_with(refusal)
}

/// An error as `path: operation: reason`, in the command's words.
pub fn error(e: &kopiru::Error) -> String {
    format!("{}: {}: {}", path(&e.path), e.op, reason(e))
}
