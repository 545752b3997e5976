//! [`Refusal`]: a request the engine turned down itself. Its variants'
//! data of a command's own (a block map's error, a flash target's, a
//! sharded copy's or an image's refusal) are in that command's file of
//! this folder.

use super::{BmapError, DeviceRefusal, ImageRefusal, Mismatch, NotAnImage, ShardRefusal};
use std::fmt;
use std::path::PathBuf;

/// A request the engine turned down itself, with no OS error behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// The source and the destination are one file (by any name).
    SameFile {
        /// The source as named.
        source: PathBuf,
        /// The destination it resolves to.
        dest: PathBuf,
    },
    /// A directory would be copied into itself or below itself.
    IntoItself {
        /// The destination, inside the source.
        dest: Option<PathBuf>,
    },
    /// A directory would replace something that is not one.
    DirOverNonDir {
        /// The source directory, when named on the command line.
        source: Option<PathBuf>,
    },
    /// A non-directory would replace a directory.
    NonDirOverDir {
        /// The source, when named on the command line.
        source: Option<PathBuf>,
    },
    /// A path that must be a directory is not one.
    NotADirectory,
    /// An entry changed type between listing and opening it.
    ChangedType,
    /// DEST is the copy of this directory that an earlier kopiru run made
    /// (its record of copies proves it): the same command run again does
    /// not copy over it (that would undo edits made in it since), nor
    /// nest a second copy inside it. Reported as a warning; nothing copied.
    AlreadyCopied {
        /// The source as named.
        source: PathBuf,
        /// The copy.
        dest: PathBuf,
    },
    /// What DEST holds is kept as it is, as `no_clobber` or `update`
    /// asks (a directory where the source has a file): counted as
    /// skipped, without a warning, as cp says nothing.
    KeptExisting,
    /// A new tree was not put in place under its name, since entries in it
    /// failed: what was copied stays under its staged name, for the same
    /// command (with `resume`, keeping what is there) to finish.
    Incomplete {
        /// Where the copy is kept.
        staged: PathBuf,
        /// How many failures were reported in it.
        failed: usize,
    },
    /// `delete`: a directory the source lacks was not deleted, since it
    /// holds entries an exclude rule protects (rsync: "cannot delete
    /// non-empty directory").
    HoldsProtected,
    /// A file would be written through a symlink that points nowhere (cp:
    /// "not writing through dangling symlink").
    DanglingDestination,
    /// A block device named as the destination is mounted, or holds the
    /// root filesystem (where: its mount point): a copy would be written
    /// into a filesystem in use.
    DeviceInUse {
        /// Where it (or one of its partitions) is mounted.
        at: String,
    },
    /// A copy differs from its source.
    Differs(Mismatch),
    /// Another kopiru is copying to this destination now.
    Busy,
    /// A sharded copy (`shard`) was not published, or its ranks disagree.
    Shard(ShardRefusal),
    /// A `files_from` path that does not name an entry inside the source
    /// (`..`, or an absolute path outside it).
    OutsideSource,
    /// The same source named twice (cp: "specified more than once"): it is
    /// copied once, and this is a warning.
    NamedTwice {
        /// The first name it was given by.
        first: PathBuf,
    },
    /// Two sources of one command go to the same destination name.
    SameDestination {
        /// The source that was there first.
        first: PathBuf,
    },
    /// The clone method where the two filesystems cannot clone.
    CannotClone {
        /// Why the clone was refused ("EXDEV", "ext4 cannot clone", ...).
        why: String,
    },
    /// `kopiru flash`: the target refused before anything is written
    /// (and `kopiru image`'s device that does not exist).
    Device(DeviceRefusal),
    /// `kopiru flash`: a block map that cannot be used, or an image that
    /// does not match its block map.
    Bmap(BmapError),
    /// `kopiru flash`: the image is not what its name (or the format given)
    /// says, or of no known format.
    NotAnImage(NotAnImage),
    /// `kopiru image`: the device (or its output) refused before anything
    /// is written.
    Image(ImageRefusal),
}

impl Refusal {
    /// A stable kebab-case name of the refusal, the same in every front
    /// end and in `--json` (`refusal`); the text may change, this does not.
    pub fn id(&self) -> &'static str {
        match self {
            Refusal::SameFile { .. } => "same-file",
            Refusal::IntoItself { .. } => "into-itself",
            Refusal::DirOverNonDir { .. } => "directory-over-non-directory",
            Refusal::NonDirOverDir { .. } => "non-directory-over-directory",
            Refusal::NotADirectory => "not-a-directory",
            Refusal::ChangedType => "changed-type",
            Refusal::AlreadyCopied { .. } => "already-copied",
            Refusal::KeptExisting => "kept-existing",
            Refusal::Incomplete { .. } => "incomplete",
            Refusal::HoldsProtected => "holds-protected",
            Refusal::DanglingDestination => "dangling-destination",
            Refusal::DeviceInUse { .. } => "device-in-use",
            Refusal::Differs(_) => "differs",
            Refusal::Busy => "busy",
            Refusal::Shard(r) => r.id(),
            Refusal::OutsideSource => "outside-source",
            Refusal::NamedTwice { .. } => "named-twice",
            Refusal::SameDestination { .. } => "same-destination",
            Refusal::CannotClone { .. } => "cannot-clone",
            Refusal::Device(r) => r.id(),
            Refusal::Bmap(_) => "bmap",
            Refusal::NotAnImage(_) => "not-an-image",
            Refusal::Image(r) => r.id(),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let quoted = |p: &Option<PathBuf>| match p {
            Some(p) => format!(" '{}'", crate::paths::Escaped(p.as_os_str())),
            None => String::new(),
        };
        match self {
            Refusal::SameFile { source, dest } => write!(
                f,
                "'{}' and '{}' are the same file",
                crate::paths::Escaped(source.as_os_str()),
                crate::paths::Escaped(dest.as_os_str())
            ),
            Refusal::IntoItself { dest: Some(d) } => write!(
                f,
                "cannot copy a directory into itself or its own subdirectory '{}'",
                crate::paths::Escaped(d.as_os_str())
            ),
            Refusal::IntoItself { dest: None } => f.write_str(
                "cannot copy a directory into itself (the destination is inside the source)",
            ),
            Refusal::DirOverNonDir { source } => write!(
                f,
                "cannot overwrite non-directory with directory{}",
                quoted(source)
            ),
            Refusal::NonDirOverDir { source } => write!(
                f,
                "cannot overwrite directory with non-directory{}",
                quoted(source)
            ),
            Refusal::NotADirectory => f.write_str("not a directory"),
            Refusal::ChangedType => f.write_str("changed type while being copied"),
            Refusal::AlreadyCopied { source, dest } => {
                let (s, d) = (
                    crate::paths::Escaped(source.as_os_str()),
                    crate::paths::Escaped(dest.as_os_str()),
                );
                write!(
                    f,
                    "'{d}' is the copy of '{s}' that an earlier kopiru run made: nothing \
                     copied, so nothing changed in it since is overwritten (to update it \
                     from '{s}': copy '{s}' to '{d}' with no target directory)"
                )
            }
            Refusal::Incomplete { staged, failed } => write!(
                f,
                "not put in place: {failed} {} in it; what was copied is kept under '{}': \
                 run the same copy again, resuming, to finish it",
                match failed {
                    1 => "failure",
                    _ => "failures",
                },
                crate::paths::Escaped(staged.as_os_str())
            ),
            Refusal::HoldsProtected => f.write_str(
                "cannot delete non-empty directory: it holds entries an exclude rule \
                 protects (deleting excluded entries too deletes them)",
            ),
            Refusal::DanglingDestination => {
                f.write_str("not writing through a dangling symbolic link")
            }
            Refusal::DeviceInUse { at } => write!(
                f,
                "is a block device in use (mounted at {at}): nothing is written into it \
                 (unmount it first; kopiru flash writes images to devices)"
            ),
            Refusal::Differs(m) => m.fmt(f),
            Refusal::Busy => f.write_str(
                "another kopiru is copying to this destination now (wait for it, or stop it)",
            ),
            Refusal::Shard(e) => e.fmt(f),
            Refusal::OutsideSource => f.write_str("not a path inside the source directory"),
            Refusal::KeptExisting => f.write_str("kept as it is (no-clobber or update)"),
            Refusal::NamedTwice { first } => write!(
                f,
                "the same source as '{}', named before: copied once",
                crate::paths::Escaped(first.as_os_str())
            ),
            Refusal::SameDestination { first } => write!(
                f,
                "will not overwrite the copy of '{}' made by this same command",
                crate::paths::Escaped(first.as_os_str())
            ),
            Refusal::CannotClone { why } => write!(
                f,
                "cannot clone here ({why}); nothing was copied (the auto method falls back)"
            ),
            Refusal::Device(e) => e.fmt(f),
            Refusal::Bmap(e) => e.fmt(f),
            Refusal::NotAnImage(e) => e.fmt(f),
            Refusal::Image(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for Refusal {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{DeviceRefusal as D, Found, ImageRefusal as I, NotAnImage, ShardRefusal};

    /// The engine's text names settings neutrally: no front end's flag
    /// (`--force`, `-T`); each front end spells them in its own words.
    #[test]
    fn texts_name_no_flag() {
        let p = || PathBuf::from("p");
        let all = [
            Refusal::AlreadyCopied {
                source: p(),
                dest: p(),
            },
            Refusal::KeptExisting,
            Refusal::Incomplete {
                staged: p(),
                failed: 2,
            },
            Refusal::HoldsProtected,
            Refusal::Shard(ShardRefusal::ShardFailed { rank: Some(1) }),
            Refusal::Shard(ShardRefusal::ShardFailed { rank: None }),
            Refusal::CannotClone {
                why: "EXDEV".into(),
            },
            Refusal::Device(D::NoSuchDevice { under_dev: false }),
            Refusal::Device(D::NoSuchDevice { under_dev: true }),
            Refusal::Device(D::NotABlockDevice { regular_file: true }),
            Refusal::Device(D::Partition),
            Refusal::Device(D::HoldsRootFs),
            Refusal::Device(D::HoldsImage),
            Refusal::Device(D::Mounted { at: "/m".into() }),
            Refusal::Device(D::InUse { chain: "x".into() }),
            Refusal::NotAnImage(NotAnImage::Mismatch {
                claimed: "xz",
                by_name: false,
                found: Found::Unknown,
            }),
            Refusal::NotAnImage(NotAnImage::Unrecognised(Found::Html)),
            Refusal::NotAnImage(NotAnImage::Unrecognised(Found::Unknown)),
            Refusal::Image(I::NotADevice { regular_file: true }),
            Refusal::Image(I::MountedReadWrite { at: "/m".into() }),
            Refusal::Image(I::OutputExists),
            Refusal::Image(I::NoPartitionTable),
            Refusal::Image(I::PartitionPastEnd {
                table: "MBR",
                number: 1,
                end: 2,
                device: 1,
            }),
        ];
        for r in all {
            let text = r.to_string();
            assert!(
                !text.contains("--") && !text.contains("-T"),
                "{}: {text}",
                r.id()
            );
        }
    }

    /// The nested refusals keep the ids they had as `Refusal`'s own
    /// variants (programs match on them), and `Refusal` shows their text.
    #[test]
    fn nested_ids_are_stable() {
        let p = || PathBuf::from("p");
        let s = |r: ShardRefusal| Refusal::Shard(r);
        let d = |r: D| Refusal::Device(r);
        let all = [
            (s(ShardRefusal::ShardFailed { rank: None }), "shard-failed"),
            (s(ShardRefusal::ShardListDiffers), "shard-list-differs"),
            (s(ShardRefusal::ShardErrors { errors: 2 }), "shard-errors"),
            (d(D::NoSuchDevice { under_dev: true }), "no-such-device"),
            (
                d(D::NotABlockDevice {
                    regular_file: false,
                }),
                "not-a-block-device",
            ),
            (d(D::IsTheImage), "is-the-image"),
            (d(D::Partition), "partition"),
            (d(D::HoldsRootFs), "holds-root-filesystem"),
            (d(D::HoldsImage), "holds-image"),
            (d(D::Mounted { at: "/m".into() }), "mounted"),
            (d(D::InUse { chain: "x".into() }), "in-use"),
            (d(D::DeviceBusy), "device-busy"),
            (
                d(D::DeviceNamedTwice {
                    first: p(),
                    partition: true,
                }),
                "device-named-twice",
            ),
            (
                d(D::TooSmall {
                    image: 2,
                    at_least: None,
                    device: 1,
                }),
                "too-small",
            ),
        ];
        for (r, id) in all {
            assert_eq!(r.id(), id);
            let inner = match &r {
                Refusal::Shard(e) => e.to_string(),
                Refusal::Device(e) => e.to_string(),
                _ => unreachable!(),
            };
            assert_eq!(r.to_string(), inner, "{id}");
        }
    }
}
