//! What the engine reports while it works, and the summary it returns.

use crate::error::Error;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How one file's data was moved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Method {
    /// Blocks shared with the source (reflink / clonefile).
    Clone,
    /// In-kernel copy (`copy_file_range`).
    Offload,
    /// Read and written through a buffer.
    Stream,
    /// Only the data ranges copied, holes kept.
    Sparse,
    /// A hard link to the unchanged file of `--link-dest` (no data moved).
    Link,
}

impl Method {
    /// Every method, in ladder order.
    pub const ALL: [Method; 5] = [
        Method::Clone,
        Method::Offload,
        Method::Stream,
        Method::Sparse,
        Method::Link,
    ];

    /// The lowercase name used in output.
    pub fn name(self) -> &'static str {
        match self {
            Method::Clone => "clone",
            Method::Offload => "offload",
            Method::Stream => "stream",
            Method::Sparse => "sparse",
            Method::Link => "link",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// One regular file finished.
#[derive(Debug)]
pub struct FileDone<'a> {
    /// The source directory the file is in (as named by the caller).
    pub src_dir: &'a Path,
    /// The destination directory it went to.
    pub dst_dir: &'a Path,
    /// The file's name in the source.
    pub name: &'a OsStr,
    /// Its name in the destination (differs for a file copied to a new
    /// name).
    pub dst_name: &'a OsStr,
    /// Bytes of data in the file.
    pub bytes: u64,
    /// How the data was moved.
    pub method: Method,
    /// Why faster methods were not used, when they were tried or skipped.
    pub why_not: Option<&'a str>,
}

impl FileDone<'_> {
    /// The source file's path, as messages show it (`name` alone in the
    /// current directory). Made on asking: joining paths is most of the
    /// engine's own CPU on a tree of small files.
    pub fn source_path(&self) -> PathBuf {
        crate::paths::join(self.src_dir, self.name)
    }

    /// The copy's path, as messages show it.
    pub fn dest_path(&self) -> PathBuf {
        crate::paths::join(self.dst_dir, self.dst_name)
    }
}

/// What kind of entry a [`Change`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link; [`Change::target`] is what it points to.
    Symlink,
    /// A FIFO, socket or device node.
    Special,
    /// Another name of a file copied earlier; [`Change::target`] is that
    /// copy's path.
    HardLink,
}

/// What happens (or, with `dry_run`, would happen) to a destination entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    /// Made where nothing was.
    Created,
    /// Put in place of an existing entry, which differed in `size` and/or
    /// modification `time` (both false: in something else, e.g. content).
    Replaced {
        /// The sizes differ.
        size: bool,
        /// The modification times differ.
        time: bool,
        /// The permission bits differ, and the source's are kept.
        perms: bool,
        /// The owners differ, and the source's is kept.
        owner: bool,
        /// The groups differ, and the source's is kept.
        group: bool,
    },
    /// Removed: not in the source (`--delete`).
    Deleted,
}

/// One destination entry created, replaced or deleted (reported once it is
/// done, or as planned with `dry_run`). Directories merged into and entries
/// left as they were are not reported.
#[derive(Debug)]
pub struct Change<'a> {
    /// The entry's destination path.
    pub path: &'a Path,
    /// The source entry it is a copy of (`None` for a deletion, and in a
    /// dry run).
    pub source: Option<&'a Path>,
    /// Its kind.
    pub kind: EntryKind,
    /// What happens to it.
    pub change: ChangeKind,
    /// A symlink's target, or the first copy a hard link is made to.
    pub target: Option<&'a Path>,
}

/// What a copy is doing, for a progress display.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Phase {
    /// Copying entries.
    Copying,
    /// Waiting for the destination to be durable (`--sync end`), then
    /// moving finished names into place.
    Flushing,
    /// Reading the copy back to compare it with its source (`--verify`).
    Verifying,
    /// This rank's share is done; waiting for the other ranks of a sharded
    /// copy (`--shard`) and for the copy to be put in place.
    Waiting,
}

/// Receives events from a running copy. Every method has a default that does
/// nothing; calls come from worker threads, concurrently.
pub trait Reporter: Sync {
    /// A regular file was copied.
    fn file_done(&self, _done: &FileDone) {}
    /// Some bytes of data were copied (batched per file or per large chunk).
    fn bytes(&self, _n: u64) {}
    /// A file, link or directory could not be copied.
    fn error(&self, _err: &Error) {}
    /// Something was copied but a piece of metadata could not be kept.
    fn warning(&self, _err: &Error) {}
    /// The copy moved on to another phase.
    fn phase(&self, _phase: Phase) {}
    /// A destination entry was created, replaced or deleted; with
    /// `dry_run`, would be (nothing is written then).
    fn change(&self, _change: &Change) {}
    /// An existing destination entry was left as it was (complete under
    /// `--resume`, `--no-clobber`, not newer under `--update`, declined
    /// under `-i`): counted in [`Summary::skipped`].
    fn kept(&self, _path: &Path) {}
    /// With [`crate::CopyOptions::interactive`] (cp's `-i`): whether the
    /// existing destination entry `path` may be replaced. Asked from a
    /// worker thread, which waits for the answer; `false` leaves the entry
    /// as it is (counted as skipped).
    fn confirm_replace(&self, _path: &Path) -> bool {
        true
    }
}

/// The observer that ignores everything: every operation's observer
/// ([`Reporter`] for the tree operations, [`DeviceProgress`] and
/// [`crate::flash::FlashEvents`] for the device ones) is implemented by it,
/// so a caller that wants no events passes `&Noop` to any verb.
#[derive(Clone, Copy, Debug, Default)]
pub struct Noop;
impl Reporter for Noop {}
impl DeviceProgress for Noop {}

/// What a copy did, returned at the end.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct Summary {
    /// Regular files copied.
    pub files: u64,
    /// Bytes of file data copied.
    pub bytes: u64,
    /// Directories created or merged into.
    pub dirs: u64,
    /// Of `dirs`, those that existed already (merged into).
    pub dirs_merged: u64,
    /// Symbolic links copied.
    pub symlinks: u64,
    /// FIFOs, device nodes and sockets re-created.
    pub specials: u64,
    /// Hard links re-created as hard links.
    pub hardlinks: u64,
    /// Entries left as they were: already complete (`--resume`) or existing
    /// (`--no-clobber`).
    pub skipped: u64,
    /// Entries counted above that were removed again because the final
    /// flush of their filesystem failed (under `--sync end`): none of them
    /// is at the destination.
    pub withdrawn: u64,
    /// Directories that could not be made (each also an error).
    pub dirs_not_made: u64,
    /// Entries inside those directories, at any depth, not copied
    /// because of it (no error of their own).
    pub not_copied: u64,
    /// Destination entries removed (or, with `dry_run`, to be removed)
    /// because the source does not have them (`--delete`).
    pub deleted: u64,
    /// Files compared with their source after copying (`--verify`).
    pub verified_files: u64,
    /// Files per [`Method`], indexed in [`Method::ALL`] order.
    pub methods: [u64; 5],
    /// Failures, one per file or directory.
    pub errors: Vec<Error>,
    /// Of `errors`, the first this many are sources turned down whole
    /// before anything was written: missing, the destination itself or
    /// inside it, a directory over a file, `--method clone` where nothing
    /// can be cloned. A copy whose every error is one of these refused the
    /// request (the Node binding's `KOPIRU_REFUSED`).
    pub refused: u64,
    /// Metadata that could not be kept.
    pub warnings: Vec<Error>,
    /// Wall time.
    pub elapsed: Duration,
    /// The copy was stopped by its cancel handle before it finished.
    pub cancelled: bool,
    /// Worker threads that ran at once, at most (on a share the count
    /// changes during the copy; for a sharded copy, the most of its parts).
    pub workers: u64,
    /// The filesystem, source's or destination's, whose operations are round
    /// trips to a server ("nfs", "smb", "fuse", ...), for which the default
    /// worker count was raised (not with `-j`).
    pub round_trips: Option<String>,
    /// Files whose data the server moved: clones and in-kernel copies
    /// (offloads) into a destination on a share known by its type
    /// ([`Summary::round_trips`]; not one found by timing, which may be
    /// local; not counted with `-i` or `--shard`). Both stay within one
    /// filesystem, so there they are the share's: NFS 4.2 CLONE (always
    /// the server's) and COPY (the server's where it has COPY; else the
    /// client's kernel reads and writes the data), SMB3 copychunk, a FUSE
    /// server's copy_file_range.
    pub server_side_files: u64,
    /// On a share without `-j`: the worker counts tried in turn, each with
    /// the rate of finished entries it gave (the count doubles while the
    /// rate rises; tree/latency.rs).
    pub worker_steps: Vec<WorkerStep>,
}

/// One worker count tried on a share, and what it gave.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct WorkerStep {
    /// The most workers allowed during the stretch measured.
    pub workers: u64,
    /// Entries (files, directories, links) finished per second in it.
    pub entries_per_second: f64,
}

impl Summary {
    /// Adds the counts, failures and warnings of `other`, a later part of
    /// the same copy.
    pub(crate) fn absorb(&mut self, other: Summary) {
        let Summary {
            files,
            bytes,
            dirs,
            dirs_merged,
            symlinks,
            specials,
            hardlinks,
            skipped,
            withdrawn,
            dirs_not_made,
            not_copied,
            deleted,
            verified_files,
            methods,
            errors,
            refused,
            warnings,
            elapsed,
            cancelled,
            workers,
            round_trips,
            server_side_files,
            worker_steps,
        } = other;
        self.files += files;
        self.bytes += bytes;
        self.dirs += dirs;
        self.dirs_merged += dirs_merged;
        self.symlinks += symlinks;
        self.specials += specials;
        self.hardlinks += hardlinks;
        self.skipped += skipped;
        self.withdrawn += withdrawn;
        self.dirs_not_made += dirs_not_made;
        self.not_copied += not_copied;
        self.refused += refused;
        self.deleted += deleted;
        self.verified_files += verified_files;
        for (m, n) in self.methods.iter_mut().zip(methods) {
            *m += n;
        }
        self.errors.extend(errors);
        self.warnings.extend(warnings);
        self.elapsed += elapsed;
        self.cancelled |= cancelled;
        self.workers = self.workers.max(workers);
        if self.round_trips.is_none() {
            self.round_trips = round_trips;
        }
        self.server_side_files += server_side_files;
        self.worker_steps.extend(worker_steps);
    }

    /// Count of files copied with `m`.
    pub fn method_count(&self, m: Method) -> u64 {
        self.methods[m.index()]
    }

    /// Whether anything at all was created and kept (or deleted, with
    /// `--delete`).
    pub fn copied_anything(&self) -> bool {
        let made = self.files + self.dirs + self.symlinks + self.specials + self.hardlinks;
        made - self.dirs_merged + self.skipped + self.deleted > self.withdrawn
    }
}

impl ChangeKind {
    /// An existing entry `old` replaced by a copy of `new` (`file`: a
    /// regular file, whose size counts), as far as `preserve` keeps each
    /// piece.
    pub(crate) fn replaced(
        old: &crate::sys::Stat,
        new: &crate::sys::Stat,
        file: bool,
        preserve: &crate::Preserve,
    ) -> ChangeKind {
        ChangeKind::Replaced {
            size: file && old.size != new.size,
            time: old.mtime != new.mtime,
            perms: preserve.mode && old.perm() != new.perm(),
            owner: preserve.owner && old.uid != new.uid,
            group: preserve.owner && old.gid != new.gid,
        }
    }
}

/// Progress of an image's bytes between a file and block devices, for a
/// front end's bar: `flash` (written to the devices) and `image` (read
/// from the device and encoded) report the same three things, so each
/// front end has one adapter for both.
pub trait DeviceProgress: Sync {
    /// `n` more bytes of the image done: acknowledged by every remaining
    /// device (`flash`); read and encoded, compressed and written, not
    /// merely handed to the encoder (`image`).
    fn done(&self, _n: u64) {}
    /// The read-back has begun: `total` bytes to read back (all devices
    /// together for `flash`; the image, decoded, for `image`).
    fn verifying(&self, _total: u64) {}
    /// `n` more bytes read back.
    fn verified(&self, _n: u64) {}
    /// An image downloaded from a URL (`flash`): `received` bytes of the
    /// file as published (compressed) had so far, each counted once, of
    /// `total` (its Content-Length, when the server gave one), after
    /// `resumes` connections resumed. Said as data arrives (at most about
    /// once per MiB, and at each resume), from the reader's thread.
    fn downloaded(&self, _received: u64, _total: Option<u64>, _resumes: u64) {}
    /// An image downloaded from a URL (`flash`): the connection was lost
    /// (dropped, or silent past the stall timeout); try `attempt` of `of`
    /// to resume it comes after a pause. The next [`Self::downloaded`]
    /// (bytes again, or a resume counted) means it is back.
    fn reconnecting(&self, _attempt: u32, _of: u32) {}
}
