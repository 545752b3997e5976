//! The end of a run: the destination filesystems flushed (`--sync end`
//! also while copying), then the deferred files and the staged trees moved
//! to their final names, then those names flushed.

use super::leftovers::remove_tree;
use super::{Placement, Sink, StagedTree};
use crate::error::{Error, Op, Refusal, Side};
use crate::options::{CopyOptions, SyncMode};
use crate::paths::join_name;
use crate::sys::{self, AsFd, Fd, Name};
use std::collections::HashMap;
use std::io;
use std::path::Path;
use std::sync::{Condvar, Mutex};

/// How often `--sync end` flushes while copying (50 ms measured best of 10,
/// 25, 50 and 100 on ext4 and XFS; see docs/BENCHMARKS.md).
const FLUSH_EVERY: std::time::Duration = std::time::Duration::from_millis(50);

/// A listed or sharded copy's own end: what this process wrote under
/// `root`'s filesystem made durable by one flush, unless `--sync none`.
pub(crate) fn flush_written(opts: &CopyOptions, root: sys::FdRef) -> io::Result<()> {
    match opts.sync {
        SyncMode::None => Ok(()),
        _ => sys::sync_fs(root),
    }
}

/// Puts the staged tree `t` in place once every process's data in it is
/// durable (a shard's rank 0 at the end): renamed to its final name, noted
/// in the record of copies, and that name made durable unless `--sync
/// none`. `Err`: the step that failed, and the path it failed on. (Unused
/// where the sharded copy is not built: Windows.)
#[allow(dead_code)]
pub(crate) fn publish_alone(opts: &CopyOptions, t: &StagedTree) -> Result<(), Error> {
    if let Err(e) = t.put_in_place(false, false) {
        return Err(Error::dst(t.path(), Op::Rename, &e));
    }
    if let Some(file) = &opts.copies_record {
        t.record(file);
    }
    match opts.sync {
        SyncMode::None => Ok(()),
        _ => sys::sync_file(t.parent.as_fd()).map_err(|e| Error::dst(&t.parent_path, Op::Sync, &e)),
    }
}

/// Raw errno of each filesystem (by device) whose flush failed.
type Failed = HashMap<u64, i32>;

impl Placement<'_> {
    /// Registers a destination filesystem for the final flush.
    pub(crate) fn add_filesystem(&self, dev: u64, fd: &Fd, path: &Path, sink: &dyn Sink) {
        let mut fss = self.filesystems.lock().expect("filesystems lock");
        if fss.iter().any(|(d, _, _)| *d == dev) {
            return;
        }
        match fd.try_clone() {
            Ok(fd) => fss.push((dev, fd, path.to_path_buf())),
            Err(e) => sink.error(Error::dst(path, Op::Open, &e)),
        }
    }

    /// Whether the end of the run flushes (`--sync` other than `none`).
    pub(crate) fn flushes(&self) -> bool {
        self.opts.sync != SyncMode::None
    }

    /// Whether [`Placement::flush_while_copying`] has work to do: `--sync
    /// end` where a filesystem flush writes files' data.
    pub(crate) fn flushes_while_copying(&self) -> bool {
        self.opts.sync == SyncMode::End && sys::FS_SYNC_WRITES_FILES
    }

    /// `--sync end`: flushes every destination filesystem every
    /// [`FLUSH_EVERY`] while the workers copy, so the device writes while
    /// kopiru copies and the flush at the end finds little left. (Starting
    /// write-back per file with `sync_file_range` measured slower on small
    /// files than no early flush at all.) Uses descriptors of its own: a
    /// `syncfs` error is reported once per open file, and the final flush
    /// must still see it.
    pub(crate) fn flush_while_copying(&self, copying: &(Mutex<bool>, Condvar)) {
        let mut own: Vec<(u64, Fd)> = Vec::new();
        let mut running = copying.0.lock().expect("copying lock");
        // Checked before every wait, so the end is never missed while a
        // flush runs.
        while *running {
            running = copying
                .1
                .wait_timeout(running, FLUSH_EVERY)
                .expect("copying lock")
                .0;
            if !*running {
                return;
            }
            for (dev, fd, _) in self.filesystems.lock().expect("filesystems lock").iter() {
                if !own.iter().any(|(d, _)| d == dev) {
                    if let Ok(fd) = sys::open_dir(fd.as_fd(), sys::DOT) {
                        own.push((*dev, fd));
                    }
                }
            }
            drop(running);
            for (_, fd) in &own {
                let _ = sys::sync_fs(fd.as_fd());
            }
            running = copying.0.lock().expect("copying lock");
        }
    }

    /// The end of the run. `--sync end`: one flush per destination
    /// filesystem makes every file's data durable; only then do the
    /// deferred files and the staged trees move to their final names, and a
    /// second flush makes those names durable. A failed flush fails
    /// everything that was waiting on that filesystem: its temporary files
    /// and trees are removed, never renamed, and the flush is not retried.
    /// `walked`: every entry was walked (else the staged trees are kept for
    /// `--resume`). Returns how many entries, counted as copied, were
    /// removed again.
    pub(crate) fn publish(&self, walked: bool, sink: &dyn Sink) -> u64 {
        let waiting = std::mem::take(&mut *self.waiting.lock().expect("waiting lock"));
        let staged = std::mem::take(&mut *self.staged.lock().expect("staged lock"));
        let fss = std::mem::take(&mut *self.filesystems.lock().expect("filesystems lock"));
        let mut failed = Failed::new();
        if self.opts.sync == SyncMode::End && !(waiting.is_empty() && staged.is_empty()) {
            for (dev, fd, _) in &fss {
                if let Err(e) = sys::sync_fs(fd.as_fd()) {
                    failed.insert(*dev, e.raw_os_error().unwrap_or(sys::EIO));
                }
            }
        }
        let mut withdrawn = 0;
        let mut renamed_on: Vec<u64> = Vec::new();
        for dir in &waiting {
            let d = dir.dest();
            withdrawn += self.rename_deferred(&d, dir.times(), &failed, sink);
            renamed_on.push(d.dev);
        }
        for t in staged {
            // Not walked: kept under its staged name for `--resume` (or
            // removed by the next plain run of the same command).
            if walked {
                withdrawn += self.publish_tree(&t, &failed, &mut renamed_on, sink);
            }
        }
        if self.opts.sync == SyncMode::End {
            for (dev, fd, path) in &fss {
                if renamed_on.contains(dev) {
                    if let Err(e) = sys::sync_fs(fd.as_fd()) {
                        sink.error(Error::dst(path, Op::Sync, &e));
                    }
                }
            }
        }
        withdrawn
    }

    /// Gives the deferred files of `d` their final names, or, where its
    /// filesystem's flush failed, removes them. Puts the directory's times
    /// back afterwards. Returns how many were removed.
    fn rename_deferred(
        &self,
        d: &super::Dest,
        times: Option<(sys::Timespec, sys::Timespec)>,
        failed: &Failed,
        sink: &dyn Sink,
    ) -> u64 {
        let mut withdrawn = 0;
        let deferred = d.deferred.take();
        // A directory given a read-only mode (a copy of one) was finished
        // before its renames: writable again for them, then as it was (as
        // rsync makes a directory writable while it works in it).
        let read_only = match deferred.is_empty() {
            true => None,
            false => sys::fstat(d.fd)
                .ok()
                .filter(|st| st.perm() & 0o300 != 0o300),
        };
        if let Some(st) = &read_only {
            let _ = sys::fchmod(d.fd, st.perm() | 0o700);
        }
        for (tmp, name) in deferred {
            let path = || join_name(d.path, &name);
            if let Some(&errno) = failed.get(&d.dev) {
                if sys::unlink_at(d.fd, &tmp, false).is_ok() {
                    withdrawn += 1;
                }
                let e = io::Error::from_raw_os_error(errno);
                sink.error(Error::dst(path(), Op::Sync, &e));
                continue;
            }
            if let Err(e) = self.rename_final((d.fd, d.path), &tmp, &name, sink) {
                let _ = sys::unlink_at(d.fd, &tmp, false);
                sink.error(Error::dst(path(), Op::Rename, &e));
            }
        }
        if let Some(st) = read_only {
            if let Err(e) = sys::fchmod(d.fd, st.perm()) {
                sink.warn(Error::dst(d.path, Op::Chmod, &e));
            }
        }
        // The renames changed the directory's times; put them back.
        if let (Some((atime, mtime)), true) = (times, self.opts.preserve.times) {
            if let Err(e) = sys::futimens(d.fd, atime, mtime) {
                sink.warn(Error::dst(d.path, Op::SetTimes, &e));
            }
        }
        withdrawn
    }

    /// Puts the staged tree `t` in place, or, where that fails (its
    /// filesystem's flush failed), removes it. Returns how many entries
    /// were removed.
    fn publish_tree(
        &self,
        t: &StagedTree,
        failed: &Failed,
        renamed_on: &mut Vec<u64>,
        sink: &dyn Sink,
    ) -> u64 {
        // A new tree with failures in it is not a copy: it stays under its
        // staged name (not removed: the same command finishes it).
        if let Some(src) = &t.src_path {
            let failures = sink.failures_under(&t.path(), src);
            if failures > 0 {
                let why = Refusal::Incomplete {
                    staged: join_name(&t.parent_path, &t.tmp),
                    failed: failures,
                };
                sink.error(Error::refused(Side::Destination, t.path(), Op::Copy, why));
                return 0;
            }
        }
        let file_sync = self.opts.sync == SyncMode::File;
        let outcome = match failed.get(&t.dev) {
            Some(&errno) => Err((Op::Sync, io::Error::from_raw_os_error(errno))),
            None => t
                .put_in_place(file_sync, !self.opts.no_clobber)
                .map_err(|e| (Op::Rename, e)),
        };
        let parent = t.parent.as_fd();
        match outcome {
            Ok(()) => {
                renamed_on.push(t.dev);
                if let (false, Some(file)) = (t.merge, &self.opts.copies_record) {
                    t.record(file);
                }
                if let Err(e) = self.sync_dir(parent) {
                    sink.error(Error::dst(&t.parent_path, Op::Sync, &e));
                }
                0
            }
            Err((op, e)) => {
                let mut removed = 0;
                if let Err(re) = remove_tree(parent, &t.tmp, &mut removed) {
                    let tmp_path = join_name(&t.parent_path, &t.tmp);
                    sink.warn(Error::dst(tmp_path, Op::Remove, &re));
                }
                sink.error(Error::dst(t.path(), op, &e));
                removed
            }
        }
    }

    /// Moves a finished temporary to its final name. `Ok(false)`: the name
    /// was taken meanwhile under `--no-clobber`; the temporary is removed.
    pub(crate) fn rename_final(
        &self,
        (dir, dir_path): (sys::FdRef, &Path),
        tmp: &Name,
        name: &Name,
        sink: &dyn Sink,
    ) -> io::Result<bool> {
        if !self.opts.no_clobber {
            return sys::rename_at(dir, tmp, dir, name).map(|()| true);
        }
        match sys::rename_noreplace(dir, tmp, dir, name) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let _ = sys::unlink_at(dir, tmp, false);
                sink.kept(dir_path, name);
                Ok(false)
            }
            r => r.map(|()| true),
        }
    }
}
