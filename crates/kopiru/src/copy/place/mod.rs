//! Placement and durability, in one room: a file's way from written to
//! durable under its final name. Temporary names and writing under them
//! (or without a name), where a finished file goes (its final name at
//! once, at the end of the run, or directly in a staged tree), flushing as
//! `--sync` asks, staged trees and their publishing (a shard's too), and
//! what an interrupted run left (`--resume`, `--partial`).
//!
//! The copy ([`crate::copy::tree`]) walks and copies; it asks this room, through
//! [`Placement`] and a directory's [`Dest`], where to write and when a
//! name may appear, and hears of failures through a [`Sink`]. Nothing here
//! knows the walk.

mod leftovers;
pub(crate) mod names;
pub(crate) mod publish;
mod staged;

pub(crate) use leftovers::{remove_leftovers, remove_tree};
pub use names::TMP_PREFIX;
pub(crate) use names::{partial_name, staged_name};
pub(crate) use publish::flush_written;
pub(crate) use staged::{still_named, try_lock_at, StagedTree};

use crate::error::{Error, Op};
use crate::events::Method;
use crate::options::{CopyOptions, SyncMode};
use crate::paths::join_name;
use crate::sys::{self, AsFd, Fd, Name, NameBuf, Timespec};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Where placement reports what went wrong, and what it left alone.
pub(crate) trait Sink {
    fn error(&self, e: Error);
    fn warn(&self, e: Error);
    /// An existing destination entry left as it was (`--no-clobber`).
    fn kept(&self, dir: &Path, name: &Name);
    /// How many failures were reported for paths at or under `dst` or
    /// `src` (a staged tree and its source).
    fn failures_under(&self, dst: &Path, src: &Path) -> usize;
}

/// A destination directory as placement sees it.
#[derive(Clone, Copy)]
pub(crate) struct Dest<'a> {
    pub(crate) fd: sys::FdRef<'a>,
    pub(crate) path: &'a Path,
    pub(crate) dev: u64,
    /// Inside a tree built under a staged name: nothing in it is visible
    /// under its final path yet.
    pub(crate) staged: bool,
    /// Made by this run, so it holds only what this run put there.
    pub(crate) fresh: bool,
    pub(crate) deferred: &'a Deferred,
}

impl Dest<'_> {
    /// Files are written under their final names here: a staged tree's
    /// directory this run made, which nobody can see yet.
    fn named_as_written(&self) -> bool {
        self.staged && self.fresh
    }

    fn error(&self, sink: &dyn Sink, name: &Name, op: Op, e: &io::Error) {
        sink.error(Error::dst(join_name(self.path, name), op, e));
    }
}

/// A destination directory that outlives the walk's use of it, so that
/// its deferred renames are made at the end ([`Placement::dir_done`]).
pub(crate) trait DestDir: Send + Sync {
    fn dest(&self) -> Dest<'_>;
    /// The source directory's access and modification times, put back
    /// after the renames (which change them) under `--preserve times`.
    fn times(&self) -> Option<(Timespec, Timespec)>;
}

/// A directory's renames (temporary → final name) of finished files that
/// wait until their data is durable (`--sync end`).
#[derive(Default)]
pub(crate) struct Deferred(Mutex<Vec<(NameBuf, NameBuf)>>);

impl Deferred {
    fn push(&self, tmp: NameBuf, name: NameBuf) {
        self.0.lock().expect("deferred lock").push((tmp, name));
    }

    fn is_empty(&self) -> bool {
        self.0.lock().expect("deferred lock").is_empty()
    }

    fn take(&self) -> Vec<(NameBuf, NameBuf)> {
        std::mem::take(&mut *self.0.lock().expect("deferred lock"))
    }
}

/// The placement policy of one run and what waits for its end.
pub(crate) struct Placement<'a> {
    opts: &'a CopyOptions,
    /// This process's id, for temporary names (`getpid` is a system call).
    pid: u32,
    counter: AtomicU64,
    /// New files in visible directories are made without a name and named
    /// once whole (`O_TMPFILE`), instead of under a temporary name renamed
    /// at the end; cleared once a filesystem refuses it.
    anonymous: AtomicBool,
    /// Visible directories with deferred renames, kept open for the end.
    waiting: Mutex<Vec<Arc<dyn DestDir + 'a>>>,
    /// Trees to rename into place at the end.
    staged: Mutex<Vec<StagedTree>>,
    /// One descriptor per destination filesystem, opened before anything is
    /// written there: the flush at the end goes through it, and `syncfs`
    /// reports write-back errors that happened after it was opened.
    filesystems: Mutex<Vec<(u64, Fd, PathBuf)>>,
}

impl<'a> Placement<'a> {
    pub(crate) fn new(opts: &'a CopyOptions, staged: Vec<StagedTree>) -> Self {
        Placement {
            opts,
            pid: std::process::id(),
            counter: AtomicU64::new(0),
            anonymous: AtomicBool::new(sys::HAS_ANONYMOUS && Path::new("/proc/self/fd").is_dir()),
            waiting: Mutex::new(Vec::new()),
            staged: Mutex::new(staged),
            filesystems: Mutex::new(Vec::new()),
        }
    }

    /// A new temporary name: `.kopiru-tmp.<pid>.<n>`.
    pub(crate) fn tmp_name(&self) -> NameBuf {
        names::temporary(self.pid, self.counter.fetch_add(1, Ordering::Relaxed))
    }

    /// Whether files finished in `d` wait for the end-of-run flush before
    /// getting their final names (`--sync end` in a visible directory).
    pub(crate) fn defers(&self, d: &Dest) -> bool {
        self.opts.sync == SyncMode::End && !d.staged
    }

    /// Notes that the finished entry `tmp` in `d` gets its final name
    /// `dst_name` at the end of the run ([`Placement::defers`]).
    pub(crate) fn defer(&self, d: &Dest, tmp: NameBuf, dst_name: &Name) {
        d.deferred.push(tmp, dst_name.to_owned());
    }

    /// The name a new file is written under: its final name in a staged
    /// tree this run made (nobody can see it yet, and a rename per file
    /// cost half as much again on ext4, measured), else a new temporary
    /// name, so that its final name only ever shows a whole file.
    pub(crate) fn write_name(&self, d: &Dest, dst_name: &Name) -> NameBuf {
        match d.named_as_written() {
            true => dst_name.to_owned(),
            false => self.tmp_name(),
        }
    }

    /// Whether a new file in `d` is made without a name and named once
    /// whole: where the system can, in a visible directory whose names
    /// are placed as files finish (not deferred to the end, not a staged
    /// tree's, where files are written under their final names), and
    /// without `--partial` (which keeps a failed file's data under a
    /// name). One name made instead of a temporary one made and renamed:
    /// less work for the filesystem, and nothing left behind by a process
    /// that dies. Not under `--sync file`: Btrfs does not log an inode
    /// fsynced while it had no name, so the directory's fsync recorded the
    /// new name with size 0 (a dm-log-writes replay found such files empty
    /// after exit 0; issue 27). A named temporary, fsynced and renamed,
    /// holds there; an fsync after `linkat` held too but cost Btrfs 41 %
    /// (4,270 files: 32.1 s against 22.7 s), where named temporaries cost
    /// nothing measurable (21.5 s; ext4 4.7 s against 4.9 s).
    pub(crate) fn writes_anonymous(&self, d: &Dest) -> bool {
        self.anonymous.load(Ordering::Relaxed)
            && self.opts.sync != SyncMode::File
            && !d.named_as_written()
            && !self.defers(d)
            && !self.opts.partial
    }

    /// Creates a new file in `d` without a name, or `None` where that
    /// cannot be done. No `O_TMPFILE` on this filesystem (EOPNOTSUPP;
    /// EISDIR before Linux 3.11): temporary names from now on. Any other
    /// error is the directory's, met again (and reported) when the file is
    /// made under a name.
    pub(crate) fn create_anonymous(&self, d: &Dest, perm: u32) -> Option<Fd> {
        match sys::create_anonymous(d.fd, perm) {
            Ok(fd) => Some(fd),
            Err(e) => {
                if matches!(
                    e.kind(),
                    io::ErrorKind::Unsupported | io::ErrorKind::IsADirectory
                ) {
                    self.anonymous.store(false, Ordering::Relaxed);
                }
                None
            }
        }
    }

    /// Names the whole nameless file `fd` in `d`: its final name at once,
    /// or, when that name was taken meanwhile (another process made it),
    /// `tmp`, which [`Placement::place`] then renames over it as for any
    /// file. True: it has its final name. An error stops nameless files for
    /// the rest of the run.
    pub(crate) fn name_anonymous(
        &self,
        d: &Dest,
        fd: sys::FdRef,
        (tmp, dst_name): (&Name, &Name),
    ) -> io::Result<bool> {
        let linked = match sys::link_anonymous(fd, d.fd, dst_name) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                sys::link_anonymous(fd, d.fd, tmp).map(|()| false)
            }
            r => r.map(|()| true),
        };
        if linked.is_err() {
            self.anonymous.store(false, Ordering::Relaxed);
        }
        linked
    }

    /// Starts or waits for a written file's durability as `--sync` asks:
    /// nothing (`none`); write-back started for the end-of-run flush
    /// (`end`; a clone shares the source's blocks, so there is nothing to
    /// write); fsync now (`file`).
    pub(crate) fn sync_written(&self, fd: sys::FdRef, method: Method) -> io::Result<()> {
        match self.opts.sync {
            SyncMode::None => Ok(()),
            SyncMode::End if method == Method::Clone => Ok(()),
            SyncMode::End => sys::before_fs_sync(fd),
            SyncMode::File => sys::sync_file(fd),
        }
    }

    /// `--sync file` for a file made whole by one call under `name` in
    /// `dir` (a macOS `fclonefileat`): opened and flushed; removed if that
    /// fails.
    pub(crate) fn sync_made(&self, dir: sys::FdRef, name: &Name) -> io::Result<()> {
        if self.opts.sync != SyncMode::File {
            return Ok(());
        }
        let synced = sys::open_source(dir, name, false, false, false)
            .and_then(|fd| sys::sync_file(fd.as_fd()));
        if synced.is_err() {
            let _ = sys::unlink_at(dir, name, false);
        }
        synced
    }

    /// Under `--sync file`, makes the entries of `d` durable (a name made
    /// in it, or the directory's own metadata once complete). `Err`: the
    /// flush failed.
    pub(crate) fn sync_dir(&self, d: sys::FdRef) -> io::Result<()> {
        match self.opts.sync {
            SyncMode::File => sys::sync_file(d),
            _ => Ok(()),
        }
    }

    /// Gives a finished file (written as `written`, from
    /// [`Placement::write_name`]) its final name `dst_name`: already there
    /// in a staged tree; at the end of the run, once its data is durable
    /// (`--sync end` in a visible directory); else now. Under `--sync file`
    /// the name is made durable with its directory. Returns the name the
    /// data has now; `None`: failed (reported, the temporary removed) or
    /// kept by `--no-clobber`.
    pub(crate) fn place(
        &self,
        d: &Dest,
        written: NameBuf,
        dst_name: &Name,
        sink: &dyn Sink,
    ) -> Option<NameBuf> {
        if d.named_as_written() {
            if let Err(e) = self.sync_dir(d.fd) {
                let _ = sys::unlink_at(d.fd, &written, false);
                d.error(sink, dst_name, Op::Sync, &e);
                return None;
            }
            return Some(written);
        }
        if self.defers(d) {
            self.defer(d, written.clone(), dst_name);
            return Some(written);
        }
        match self.rename_final((d.fd, d.path), &written, dst_name, sink) {
            Ok(true) => {}
            Ok(false) => return None,
            Err(e) => {
                let _ = sys::unlink_at(d.fd, &written, false);
                d.error(sink, dst_name, Op::Rename, &e);
                return None;
            }
        }
        self.placed(d, dst_name, sink)
    }

    /// A file that has its final name already (named as it was finished):
    /// under `--sync file` that name is made durable with its directory.
    pub(crate) fn placed(&self, d: &Dest, dst_name: &Name, sink: &dyn Sink) -> Option<NameBuf> {
        if let Err(e) = self.sync_dir(d.fd) {
            d.error(sink, dst_name, Op::Sync, &e);
            return None;
        }
        Some(dst_name.to_owned())
    }

    /// After a file's data failed or was cancelled part-way: under
    /// `--partial`, keeps what `written` holds in `d` under the file's
    /// partial name, for a later run to continue (an empty one is not
    /// kept). True if kept; else the caller removes it.
    pub(crate) fn keep_partial(&self, d: &Dest, written: &Name, dst_name: &Name) -> bool {
        self.opts.partial && leftovers::keep_partial(d.fd, written, dst_name)
    }

    /// Removes the temporary files an interrupted run left in the
    /// directory `dir` this run merges into, and returns the partial
    /// copies there, to be continued (`--partial`, `--resume`).
    pub(crate) fn clean_temps(&self, dir: &Fd, path: &Path, sink: &dyn Sink) -> Vec<NameBuf> {
        let keep = self.opts.partial || self.opts.resume;
        leftovers::clean_temps(dir, path, keep, sink)
    }

    /// Removes the partial copies `left` in `d` that no file continued.
    pub(crate) fn drop_partials(&self, d: &Dest, left: Vec<NameBuf>, sink: &dyn Sink) {
        leftovers::drop_partials(d.fd, d.path, left, sink)
    }

    /// A directory is complete (its last entry done). `complete`: not
    /// cancelled, its metadata applied; under `--sync file` it is then
    /// made durable. Its deferred renames, if any, wait for the end.
    /// (Kept, by a clone of `dir`, only when it has renames waiting.)
    pub(crate) fn dir_done<D: DestDir + 'a>(&self, dir: &Arc<D>, complete: bool, sink: &dyn Sink) {
        let d = dir.dest();
        if complete {
            if let Err(e) = self.sync_dir(d.fd) {
                sink.error(Error::dst(d.path, Op::Sync, &e));
            }
        }
        if !d.deferred.is_empty() {
            let dir: Arc<dyn DestDir + 'a> = dir.clone();
            self.waiting.lock().expect("waiting lock").push(dir);
        }
    }

    /// A staged tree, to be put in place at the end.
    pub(crate) fn stage_tree(&self, t: StagedTree) {
        self.staged.lock().expect("staged lock").push(t);
    }
}
