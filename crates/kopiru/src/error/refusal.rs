//! [`Refusal`]: a request the engine turned down itself. Its variants'
//! data of a command's own (a block map's error, an image's refusal) are in
//! that command's file of this folder.

use super::{copy, flash};
use super::{BmapError, ImageRefusal, LeastSize, Mismatch, NotAnImage};
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
    /// A sharded copy (`shard`) was not published because another rank
    /// failed or stopped; the same command with `resume` finishes it.
    ShardFailed {
        /// The rank that failed, when known.
        rank: Option<usize>,
    },
    /// This rank listed the source differently from the rank that listed it
    /// first (it changed meanwhile, or a directory could be read by one and
    /// not the other): their pieces would not match.
    ShardListDiffers,
    /// A sharded copy was put in place, but entries failed on other ranks.
    ShardErrors {
        /// How many, on the other ranks.
        errors: u64,
    },
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
    /// `kopiru flash`: the target does not exist (and is not created: not
    /// without `allow_file`, never under `/dev`).
    NoSuchDevice {
        /// It is under `/dev` and `allow_file` was given.
        under_dev: bool,
    },
    /// `kopiru flash`: the target is not a block device.
    NotABlockDevice {
        /// It is a regular file (`allow_file` would allow it).
        regular_file: bool,
    },
    /// `kopiru flash`: the target file is the image itself.
    IsTheImage,
    /// `kopiru flash`: the target is a partition, not a whole device.
    Partition,
    /// `kopiru flash`: the target holds the root filesystem.
    HoldsRootFs,
    /// `kopiru flash`: the target holds the image being written.
    HoldsImage,
    /// `kopiru flash`: the target (or one of its partitions) is mounted.
    Mounted {
        /// Where.
        at: String,
    },
    /// `kopiru flash`: something built on the target (or on one of its
    /// partitions) is mounted or holds it.
    InUse {
        /// The chain, as a sentence: "/dev/loop3 is mounted on /mnt/x and
        /// is backed by /dev/sdb".
        chain: String,
    },
    /// `kopiru flash`: the kernel will not open the target exclusively
    /// (EBUSY): a filesystem, a device-mapper or RAID set, or another
    /// program holds it.
    DeviceBusy,
    /// `kopiru flash`: the target was named already, under this name or
    /// another (a symlink such as `/dev/disk/by-id/...`), or it is a
    /// partition of a device named too.
    DeviceNamedTwice {
        /// The name given first.
        first: PathBuf,
        /// It is a partition of `first` (else the same device).
        partition: bool,
    },
    /// `kopiru flash`: the target is smaller than the image.
    TooSmall {
        /// The image's size in bytes.
        image: u64,
        /// `image` is only a size it has at least, and where it came from
        /// (`None`: it is the image's size).
        at_least: Option<LeastSize>,
        /// The device's size in bytes.
        device: u64,
    },
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
            Refusal::ShardFailed { .. } => "shard-failed",
            Refusal::ShardListDiffers => "shard-list-differs",
            Refusal::ShardErrors { .. } => "shard-errors",
            Refusal::OutsideSource => "outside-source",
            Refusal::NamedTwice { .. } => "named-twice",
            Refusal::SameDestination { .. } => "same-destination",
            Refusal::CannotClone { .. } => "cannot-clone",
            Refusal::NoSuchDevice { .. } => "no-such-device",
            Refusal::NotABlockDevice { .. } => "not-a-block-device",
            Refusal::IsTheImage => "is-the-image",
            Refusal::Partition => "partition",
            Refusal::HoldsRootFs => "holds-root-filesystem",
            Refusal::HoldsImage => "holds-image",
            Refusal::Mounted { .. } => "mounted",
            Refusal::InUse { .. } => "in-use",
            Refusal::DeviceBusy => "device-busy",
            Refusal::DeviceNamedTwice { .. } => "device-named-twice",
            Refusal::TooSmall { .. } => "too-small",
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
            Refusal::ShardFailed { rank } => copy::shard_failed(f, *rank),
            Refusal::ShardListDiffers => f.write_str(
                "this rank listed the source differently from another (did it change?); \
                 nothing copied by this rank, and the copy is not put in place",
            ),
            Refusal::ShardErrors { errors } => write!(
                f,
                "{errors} entries failed on other ranks (see their messages); the rest is in place"
            ),
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
            Refusal::NoSuchDevice { under_dev } => f.write_str(flash::no_such_device(*under_dev)),
            Refusal::NotABlockDevice { regular_file } => {
                f.write_str(flash::not_a_block_device(*regular_file))
            }
            Refusal::IsTheImage => f.write_str("is the image itself"),
            Refusal::Partition => {
                f.write_str("is a partition, not a whole device (force writes it anyway)")
            }
            Refusal::HoldsRootFs => {
                f.write_str("holds the root filesystem (force writes it anyway)")
            }
            Refusal::HoldsImage => {
                f.write_str("holds the image being written (force writes it anyway)")
            }
            Refusal::Mounted { at } => {
                write!(f, "is mounted (at {at}); unmount it first, or force")
            }
            Refusal::InUse { chain } => write!(
                f,
                "is in use: {chain}; nothing written (unmount or detach that first, or force)"
            ),
            Refusal::DeviceBusy => f.write_str(
                "is in use: the kernel will not open it exclusively (Device or resource \
                 busy): a filesystem, a device-mapper or RAID set, or another program \
                 holds it; nothing written",
            ),
            Refusal::DeviceNamedTwice { first, partition } => write!(
                f,
                "{} '{}'; nothing written",
                match partition {
                    false => "is named twice: it is the same device as",
                    true => "is named twice over: it is a partition of",
                },
                crate::paths::Escaped(first.as_os_str())
            ),
            Refusal::TooSmall {
                image,
                at_least,
                device,
            } => flash::too_small(f, *image, *at_least, *device),
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
    use crate::error::{Found, ImageRefusal as I, NotAnImage};

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
            Refusal::ShardFailed { rank: Some(1) },
            Refusal::ShardFailed { rank: None },
            Refusal::CannotClone {
                why: "EXDEV".into(),
            },
            Refusal::NoSuchDevice { under_dev: false },
            Refusal::NoSuchDevice { under_dev: true },
            Refusal::NotABlockDevice { regular_file: true },
            Refusal::Partition,
            Refusal::HoldsRootFs,
            Refusal::HoldsImage,
            Refusal::Mounted { at: "/m".into() },
            Refusal::InUse { chain: "x".into() },
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
}
