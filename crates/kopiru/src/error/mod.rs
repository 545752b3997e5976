//! The one error type of the engine: what was being done ([`Op`]), on which
//! side ([`Side`]), to which path, and why ([`Cause`]: the `io::Error` kept
//! whole, or a refusal the engine made itself). Copy, verify, dedupe and
//! flash all report it; text is made only when it is displayed.
//!
//! The refusals live beside it, each command's data in its own file
//! (`copy.rs`: how a copy differs, a sharded copy's refusals; `flash.rs`:
//! block maps, images that are not one, the target device's refusals;
//! `image.rs`: the image command's). This folder imports no
//! command module: the commands import it.

mod copy;
mod flash;
mod image;
mod refusal;

pub use copy::{Mismatch, ShardRefusal};
pub use flash::{BmapError, DeviceRefusal, Found, LeastSize, NotAnImage};
pub use image::ImageRefusal;
pub use refusal::Refusal;

use std::fmt;
use std::io;
use std::path::PathBuf;

/// The operation that failed. [`Op::name`] is the word used in messages
/// and in `--json` (`path: operation: reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Op {
    /// Reading an entry's metadata.
    Stat,
    /// Opening a file or directory.
    Open,
    /// Reading data.
    Read,
    /// Listing a directory.
    ReadDirectory,
    /// Reading a symlink's target.
    Readlink,
    /// Resolving a path to its real location.
    Resolve,
    /// Turning a path into a name the OS accepts.
    Name,
    /// Following a symlink.
    Follow,
    /// Finding data and holes.
    Seek,
    /// Writing data.
    Write,
    /// Setting a file's length.
    Truncate,
    /// Creating a file.
    Create,
    /// Creating a directory.
    Mkdir,
    /// Creating a symlink.
    Symlink,
    /// Creating a FIFO, socket or device node.
    Mknod,
    /// Creating a hard link.
    Link,
    /// Cloning (sharing blocks).
    Clone,
    /// The in-kernel copy (`copy_file_range`).
    CopyFileRange,
    /// Windows' `CopyFile2`, which creates the copy itself.
    CopyFile2,
    /// Copying as a whole (a refusal before any data moved).
    Copy,
    /// Moving a name into place.
    Rename,
    /// Removing a name.
    Remove,
    /// Giving a replaced entry its backup name (`--backup`).
    Backup,
    /// Making data or names durable.
    Sync,
    /// Closing a written file (where delayed write errors appear).
    Close,
    /// Setting access and modification times.
    SetTimes,
    /// Setting permission bits.
    Chmod,
    /// Setting owner and group.
    Chown,
    /// Setting the owner failed; the group was kept.
    ChownGroupOnly,
    /// Copying extended attributes.
    Xattr,
    /// Copying a Windows security descriptor's DACL (with `-a`).
    Security,
    /// Comparing a copy with its source.
    Verify,
    /// Reading a file's extent map.
    MapExtents,
    /// Sharing blocks between identical files.
    Dedupe,
    /// Flushing a device.
    Flush,
    /// Flashing an image as a whole (a refusal before anything is written).
    Flash,
    /// Zeroing a device (`BLKZEROOUT`, `kopiru flash --zero-first`).
    ZeroOut,
    /// Reading a device into an image as a whole (a refusal before
    /// anything is written).
    Image,
    /// Taking a lock (a sharded copy's coordination).
    Lock,
}

impl Op {
    /// The word used in messages and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Op::Stat => "stat",
            Op::Open => "open",
            Op::Read => "read",
            Op::ReadDirectory => "read directory",
            Op::Readlink => "readlink",
            Op::Resolve => "resolve",
            Op::Name => "name",
            Op::Follow => "follow",
            Op::Seek => "seek",
            Op::Write => "write",
            Op::Truncate => "truncate",
            Op::Create => "create",
            Op::Mkdir => "mkdir",
            Op::Symlink => "symlink",
            Op::Mknod => "mknod",
            Op::Link => "link",
            Op::Clone => "clone",
            Op::CopyFileRange => "copy_file_range",
            Op::CopyFile2 => "CopyFile2",
            Op::Copy => "copy",
            Op::Rename => "rename",
            Op::Remove => "remove",
            Op::Backup => "backup",
            Op::Sync => "sync",
            Op::Close => "close",
            Op::SetTimes => "set times",
            Op::Chmod => "chmod",
            Op::Chown => "chown",
            Op::ChownGroupOnly => "chown (owner kept as yours)",
            Op::Xattr => "xattr",
            Op::Security => "set security descriptor",
            Op::Verify => "verify",
            Op::MapExtents => "map extents",
            Op::Dedupe => "dedupe",
            Op::Flush => "flush",
            Op::Flash => "flash",
            Op::ZeroOut => "zero out",
            Op::Image => "image",
            Op::Lock => "lock",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which side of the operation the path is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// What is read: a copy's source, a flash's image, a file being
    /// hashed.
    Source,
    /// What is written: a copy's destination, a flashed device, a file
    /// whose blocks are shared.
    Destination,
}

impl Side {
    /// "source" or "destination".
    pub fn name(self) -> &'static str {
        match self {
            Side::Source => "source",
            Side::Destination => "destination",
        }
    }
}

/// Why an operation failed.
#[derive(Debug)]
pub enum Cause {
    /// The OS said no; kept whole (its raw error number included).
    Io(io::Error),
    /// The engine refused.
    Refused(Refusal),
}

/// One file or directory that could not be copied, verified, deduplicated
/// or flashed (or whose metadata could not be kept): `path: op: reason`.
#[derive(Debug)]
pub struct Error {
    /// What was being done.
    pub op: Op,
    /// Which side `path` is on.
    pub side: Side,
    /// The path concerned, on `side`.
    pub path: PathBuf,
    /// Why.
    pub cause: Cause,
}

impl Error {
    /// An OS error of `op` on `path`.
    pub fn io(side: Side, path: impl Into<PathBuf>, op: Op, err: io::Error) -> Error {
        Error {
            op,
            side,
            path: path.into(),
            cause: Cause::Io(err),
        }
    }

    /// A refusal of `op` on `path`.
    pub fn refused(side: Side, path: impl Into<PathBuf>, op: Op, why: Refusal) -> Error {
        Error {
            op,
            side,
            path: path.into(),
            cause: Cause::Refused(why),
        }
    }

    /// The OS error number, when there is one.
    pub fn errno(&self) -> Option<i32> {
        match &self.cause {
            Cause::Io(e) => e.raw_os_error(),
            Cause::Refused(_) => None,
        }
    }

    /// The OS error, when there is one.
    pub fn io_error(&self) -> Option<&io::Error> {
        match &self.cause {
            Cause::Io(e) => Some(e),
            Cause::Refused(_) => None,
        }
    }

    /// The refusal, when the engine refused.
    pub fn refusal(&self) -> Option<&Refusal> {
        match &self.cause {
            Cause::Refused(r) => Some(r),
            Cause::Io(_) => None,
        }
    }

    /// The reason as text: the OS's message (without Rust's
    /// " (os error N)"), or the refusal's, in the engine's neutral words.
    pub fn reason(&self) -> String {
        self.reason_with(Refusal::to_string)
    }

    /// The reason as text, with a refusal in a front end's words
    /// (`words`: its flags or option names where the engine names a
    /// setting neutrally).
    pub fn reason_with(&self, words: impl Fn(&Refusal) -> String) -> String {
        match &self.cause {
            Cause::Io(e) => reason(e),
            Cause::Refused(r) => words(r),
        }
    }
}

/// The OS's text for an error, without Rust's " (os error N)" suffix.
pub fn reason(err: &io::Error) -> String {
    let s = err.to_string();
    match s.rfind(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}: {}",
            crate::paths::Escaped(self.path.as_os_str()),
            self.op,
            self.reason()
        )
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.cause {
            Cause::Io(e) => Some(e),
            Cause::Refused(_) => None,
        }
    }
}

/// A copy of an `io::Error` for a second owner: the same raw OS error, or
/// the same kind and text.
pub(crate) fn copy_io(e: &io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(n) => io::Error::from_raw_os_error(n),
        None => io::Error::new(e.kind(), e.to_string()),
    }
}

impl Error {
    /// An OS error on the source side.
    pub(crate) fn src(path: impl Into<PathBuf>, op: Op, e: &io::Error) -> Error {
        Error::io(Side::Source, path, op, copy_io(e))
    }

    /// An OS error on the destination side.
    pub(crate) fn dst(path: impl Into<PathBuf>, op: Op, e: &io::Error) -> Error {
        Error::io(Side::Destination, path, op, copy_io(e))
    }
}
