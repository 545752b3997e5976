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
