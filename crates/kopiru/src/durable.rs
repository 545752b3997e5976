//! Durability and placement, in one room: temporary names, where a
//! finished file goes (its final name at once, at the end of the run, or
//! directly in a staged tree), per-file and per-filesystem flushes
//! (`--sync`), staged trees and their publishing, and the clean-up of what
//! an interrupted run left (`--resume`).

use crate::error::{Error, Op, Refusal, Side};
use crate::events::Method;
use crate::options::SyncMode;
use crate::sys::AsFd;
use crate::sys::{self, Fd, FileKind};
use crate::sys::{Name, NameBuf};
use crate::tree::node::*;
use crate::tree::worker::Worker;
use crate::tree::*;
use std::collections::HashMap;
use std::io;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};

/// How often `--sync end` flushes while copying (50 ms measured best of 10,
/// 25, 50 and 100 on ext4 and XFS; see docs/BENCHMARKS.md).
pub(crate) const FLUSH_EVERY: std::time::Duration = std::time::Duration::from_millis(50);

/// Every temporary name kopiru makes starts with this, so leftovers are
/// recognisable (and removed by the next run once their process is gone).
pub const TMP_PREFIX: &str = ".kopiru-tmp.";

/// A top-level directory built under a temporary name beside its
/// destination, renamed into place once it is complete (and durable).
pub(crate) struct StagedTree {
    /// The destination's parent.
    pub(crate) parent: Arc<DirNode>,
    pub(crate) tmp: NameBuf,
    pub(crate) name: NameBuf,
    /// The source directory's identity ([`sys::identity`]), for
    /// [`crate::record`]; `None` when no record is kept or none can be had.
    pub(crate) source: Option<Vec<u8>>,
    /// The staged directory, locked ([`Worker::lock_staged`]) until it is
    /// published or the run ends; `None` for a macOS whole-tree clone.
    pub(crate) _lock: Option<Fd>,
    /// A directory of a listed copy: when its name was made meanwhile (by
    /// another process copying other entries of the same tree), its
    /// entries are moved into that directory ([`merge_into`]) instead of
    /// failing; and it is no copy of a source for [`crate::record`].
    pub(crate) merge: bool,
}

impl Shared<'_> {
    /// Notes that the published tree `t` is a copy of its source, so that
    /// the same command run again merges into it instead of nesting.
    fn record_copy(&self, t: &StagedTree) {
        let Some(file) = &self.opts.copies_record else {
            return;
        };
        let path = join(&t.parent.dst_path, sys::os_str(&t.name));
        if let Ok(dir) = sys::open_dir(t.parent.dst.as_fd(), &t.name) {
            crate::record::note(file, t.source.as_deref(), dir.as_fd(), &path);
        }
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

    /// Registers a destination filesystem for the final flush.
    pub(crate) fn add_filesystem(&self, dev: u64, fd: &Fd, path: &Path) {
        let mut fss = self.filesystems.lock().expect("filesystems lock");
        if fss.iter().any(|(d, _, _)| *d == dev) {
            return;
        }
        match fd.try_clone() {
            Ok(fd) => fss.push((dev, fd, path.to_path_buf())),
            Err(e) => self.error(Error::dst(path, Op::Open, &e)),
        }
    }

    /// The end of the run. `--sync end`: one flush per destination
    /// filesystem makes every file's data durable; only then do the deferred
    /// files and the staged trees move to their final names, and a second
    /// flush makes those names durable. A failed flush fails everything that
    /// was waiting on that filesystem: its temporary files and trees are
    /// removed, never renamed, and the flush is not retried.
    pub(crate) fn publish(&self, walked: bool) {
        let opts = self.opts;
        if opts.sync != SyncMode::None {
            self.reporter.phase(crate::events::Phase::Flushing);
        }
        let finish = std::mem::take(&mut *self.finish.lock().expect("finish lock"));
        let staged = std::mem::take(&mut *self.staged.lock().expect("staged lock"));
        let fss = std::mem::take(&mut *self.filesystems.lock().expect("filesystems lock"));
        // Raw errno per filesystem whose flush failed.
        let mut failed: HashMap<u64, i32> = HashMap::new();
        if opts.sync == SyncMode::End && !(finish.is_empty() && staged.is_empty()) {
            for (dev, fd, _) in &fss {
                if let Err(e) = sys::sync_fs(fd.as_fd()) {
                    failed.insert(*dev, e.raw_os_error().unwrap_or(sys::EIO));
                }
            }
        }
        let mut renamed_on: Vec<u64> = Vec::new();
        for dir in &finish {
            let renames = std::mem::take(&mut *dir.deferred.lock().expect("deferred lock"));
            for (tmp, name) in renames {
                let path = || join(&dir.dst_path, sys::os_str(&name));
                if let Some(&errno) = failed.get(&dir.dst_dev) {
                    if sys::unlink_at(dir.dst.as_fd(), &tmp, false).is_ok() {
                        self.counters.withdrawn.fetch_add(1, Ordering::Relaxed);
                    }
                    let e = io::Error::from_raw_os_error(errno);
                    self.error(Error::dst(path(), Op::Sync, &e));
                    continue;
                }
                match self.rename_final((dir.dst.as_fd(), &dir.dst_path), &tmp, &name) {
                    Ok(_) => {}
                    Err(e) => {
                        let _ = sys::unlink_at(dir.dst.as_fd(), &tmp, false);
                        self.error(Error::dst(path(), Op::Rename, &e));
                    }
                }
            }
            // The renames changed the directory's times; put them back.
            if let (Some(st), true) = (&dir.stat, opts.preserve.times) {
                if let Err(e) = sys::futimens(dir.dst.as_fd(), st.atime, st.mtime) {
                    self.warn(Error::dst(&dir.dst_path, Op::SetTimes, &e));
                }
            }
            renamed_on.push(dir.dst_dev);
        }
        for t in staged {
            if !walked {
                // Kept under its staged name for `--resume` (or removed by
                // the next plain run of the same command).
                continue;
            }
            let parent = t.parent.dst.as_fd();
            let path = join(&t.parent.dst_path, sys::os_str(&t.name));
            let dev = t.parent.dst_dev;
            let outcome = match failed.get(&dev) {
                Some(&errno) => Err((Op::Sync, io::Error::from_raw_os_error(errno))),
                None => sys::rename_noreplace(parent, &t.tmp, parent, &t.name)
                    .or_else(|e| match e.kind() {
                        io::ErrorKind::AlreadyExists | io::ErrorKind::DirectoryNotEmpty
                            if t.merge =>
                        {
                            let sync = opts.sync == SyncMode::File;
                            merge_into(parent, &t.tmp, &t.name, sync, !opts.no_clobber)
                        }
                        _ => Err(e),
                    })
                    .map_err(|e| (Op::Rename, e)),
            };
            match outcome {
                Ok(()) => {
                    renamed_on.push(dev);
                    if !t.merge {
                        self.record_copy(&t);
                    }
                    if opts.sync == SyncMode::File {
                        if let Err(e) = sys::sync_file(parent) {
                            self.error(Error::dst(&t.parent.dst_path, Op::Sync, &e));
                        }
                    }
                }
                Err((op, e)) => {
                    let mut removed = 0;
                    if let Err(re) = remove_tree(parent, &t.tmp, &mut removed) {
                        let tmp_path = join(&t.parent.dst_path, sys::os_str(&t.tmp));
                        self.warn(Error::dst(tmp_path, Op::Remove, &re));
                    }
                    let withdrawn = &self.counters.withdrawn;
                    withdrawn.fetch_add(removed, Ordering::Relaxed);
                    self.error(Error::dst(path, op, &e));
                }
            }
        }
        if opts.sync == SyncMode::End {
            for (dev, fd, path) in &fss {
                if renamed_on.contains(dev) {
                    if let Err(e) = sys::sync_fs(fd.as_fd()) {
                        self.error(Error::dst(path, Op::Sync, &e));
                    }
                }
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
    ) -> io::Result<bool> {
        if !self.opts.no_clobber {
            return sys::rename_at(dir, tmp, dir, name).map(|()| true);
        }
        match sys::rename_noreplace(dir, tmp, dir, name) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let _ = sys::unlink_at(dir, tmp, false);
                self.kept(dir_path, name);
                Ok(false)
            }
            r => r.map(|()| true),
        }
    }
}

impl<'scope, 'env, 'a> Worker<'scope, 'env, 'a> {
    /// A new temporary name: `.kopiru-tmp.<pid>.<n>`, so that a later run
    /// can tell a leftover (its process is gone) from a live run's file.
    pub(crate) fn tmp_name(&self) -> NameBuf {
        let n = self.sh.tmp_counter.fetch_add(1, Ordering::Relaxed);
        sys::name(&format!("{TMP_PREFIX}{}.{n}", self.sh.pid))
    }

    /// Whether files finished in `dir` wait for the end-of-run flush before
    /// getting their final names (`--sync end` in a visible directory).
    pub(crate) fn defers(&self, dir: &DirNode) -> bool {
        self.sh.opts.sync == SyncMode::End && !dir.staged
    }

    /// For a top-level directory: if its destination does not exist yet, the
    /// name to build it under (a leftover of an interrupted run is removed,
    /// or reused with `--resume`). `Err`: failed, reported.
    pub(crate) fn stage(&self, parent: &DirNode, dst_name: &Name) -> Result<Option<NameBuf>, ()> {
        let exists = !matches!(
            sys::stat_at(parent.dst.as_fd(), dst_name, false),
            Err(e) if e.kind() == io::ErrorKind::NotFound
        );
        let tmp = staged_name(dst_name);
        // Only touched when there is one: a read-only destination then
        // fails on the directory itself, with its own name.
        let leftover = sys::stat_at(parent.dst.as_fd(), &tmp, false).is_ok();
        // Held while the leftover is removed, so that a run that has just
        // made it (and not yet locked it) finds it gone once it can.
        let _held = match leftover {
            true => self.leftover_lock(parent, &tmp, dst_name)?,
            false => None,
        };
        // A leftover beside a destination that exists now cannot be
        // resumed (the copy merges into what is there): removed.
        if leftover && (exists || !self.sh.opts.resume) {
            match remove_tree(parent.dst.as_fd(), &tmp, &mut 0) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    let path = join(&parent.dst_path, sys::os_str(&tmp));
                    self.sh.error(Error::dst(path, Op::Remove, &e));
                    return Err(());
                }
                _ => {}
            }
        }
        Ok((!exists).then_some(tmp))
    }

    /// The lock of a leftover staged tree, taken; `Err`: a live kopiru is
    /// building it (it holds the lock: [`Worker::lock_staged`]), reported.
    /// A lock that cannot be tried counts as held: a live run's tree is
    /// never removed.
    fn leftover_lock(
        &self,
        parent: &DirNode,
        tmp: &Name,
        dst_name: &Name,
    ) -> Result<Option<Fd>, ()> {
        match try_lock_at(parent.dst.as_fd(), tmp) {
            Ok((true, fd)) => Ok(Some(fd)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            _ => {
                let path = join(&parent.dst_path, sys::os_str(dst_name));
                let why = Refusal::Busy;
                self.sh
                    .error(Error::refused(Side::Destination, path, Op::Copy, why));
                Err(())
            }
        }
    }

    /// Locks a staged tree's directory `dir` (`tmp` in `parent`) for the
    /// rest of the run, so that another kopiru copying to the same
    /// destination neither removes nor reuses it, and checks that it is
    /// still the directory under that name (another run that found it
    /// unlocked before may have removed it). `None`: another holds it
    /// (reported).
    pub(crate) fn lock_staged(
        &self,
        (parent, tmp): (&DirNode, &Name),
        dir: &Fd,
        path: &Path,
    ) -> Option<Fd> {
        let lock = dir.try_clone().and_then(|fd| {
            match sys::try_lock(fd.as_fd())? && still_named(parent.dst.as_fd(), tmp, &fd) {
                true => Ok(Some(fd)),
                false => Ok(None),
            }
        });
        match lock {
            Ok(Some(fd)) => Some(fd),
            Ok(None) => {
                let why = Refusal::Busy;
                self.sh
                    .error(Error::refused(Side::Destination, path, Op::Copy, why));
                None
            }
            Err(e) => {
                self.sh.error(Error::dst(path, Op::Open, &e));
                None
            }
        }
    }
}

/// Opens the directory `name` in `dir` and tries its lock: (taken, the
/// descriptor that holds it while it lives).
pub(crate) fn try_lock_at(dir: sys::FdRef, name: &Name) -> io::Result<(bool, Fd)> {
    let fd = sys::open_dir(dir, name)?;
    Ok((sys::try_lock(fd.as_fd())?, fd))
}

/// Whether `name` in `dir` is still the file open as `fd` (a staged
/// directory locked after it was made: another run that found it unlocked
/// in between may have removed it).
pub(crate) fn still_named(dir: sys::FdRef, name: &Name, fd: &Fd) -> bool {
    let here = sys::stat_at(dir, name, false);
    matches!((sys::fstat(fd.as_fd()), here), (Ok(a), Ok(b)) if (a.dev, a.ino) == (b.dev, b.ino))
}

/// FNV-1a of a name: short, stable and dependency-free; it only has to
/// tell destinations in one directory apart.
pub(crate) fn name_hash(name: &Name) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in sys::name_bytes(name) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The name a new top-level tree is built under beside its destination:
/// the same for every run, so `--resume` finds it.
pub(crate) fn staged_name(dst_name: &Name) -> NameBuf {
    let h = name_hash(dst_name);
    sys::name(&format!("{TMP_PREFIX}tree.{h:016x}"))
}

/// The name a file's partial copy is kept under (`--partial`) in its
/// destination directory: the same for every run, so a later run finds it.
pub(crate) fn partial_name(dst_name: &Name) -> NameBuf {
    let h = name_hash(dst_name);
    sys::name(&format!("{TMP_PREFIX}{PARTIAL}{h:016x}"))
}

/// What follows [`TMP_PREFIX`] in a partial copy's name.
const PARTIAL: &str = "part.";

/// The process id in a temporary name `.kopiru-tmp.<pid>.<n>`.
fn leftover_pid(name: &Name) -> Option<u32> {
    let rest = sys::name_bytes(name).strip_prefix(TMP_PREFIX.as_bytes())?;
    let rest = std::str::from_utf8(rest).ok()?;
    let (pid, n) = rest.split_once('.')?;
    n.parse::<u64>().ok()?;
    pid.parse().ok()
}

/// Moves every entry of the staged directory `tmp` into the directory
/// `name` beside it in `dir`, then removes `tmp`. An entry there already:
/// two directories are merged in turn; a file of this run replaces what is
/// there (another process's copy of the same source entry) when `replace`
/// (not `--no-clobber`). An entry that cannot be moved does not stop the
/// others; the first such error is returned, and what is left in `tmp`
/// is then removed by the caller. `sync` (`--sync file`): each directory
/// moved into is flushed.
fn merge_into(
    dir: sys::FdRef,
    tmp: &Name,
    name: &Name,
    sync: bool,
    replace: bool,
) -> io::Result<()> {
    let from = sys::open_dir(dir, tmp)?;
    let to = sys::open_dir(dir, name)?;
    merge_dir(from.as_fd(), to.as_fd(), sync, replace)?;
    drop(from);
    sys::unlink_at(dir, tmp, true)
}

fn merge_dir(from: sys::FdRef, to: sys::FdRef, sync: bool, replace: bool) -> io::Result<()> {
    let mut first_error = None;
    for e in sys::read_dir(from)? {
        let moved = sys::rename_noreplace(from, &e.name, to, &e.name).or_else(|x| {
            if x.kind() != io::ErrorKind::AlreadyExists {
                return Err(x);
            }
            let ours = sys::stat_at(from, &e.name, false)?.kind();
            let theirs = sys::stat_at(to, &e.name, false)?.kind();
            match (ours == FileKind::Dir, theirs == FileKind::Dir) {
                (true, true) => {
                    let sub_from = sys::open_dir(from, &e.name)?;
                    let sub_to = sys::open_dir(to, &e.name)?;
                    merge_dir(sub_from.as_fd(), sub_to.as_fd(), sync, replace)?;
                    sys::unlink_at(from, &e.name, true)
                }
                (false, false) if replace => sys::rename_at(from, &e.name, to, &e.name),
                (false, false) => sys::unlink_at(from, &e.name, false),
                _ => Err(x),
            }
        });
        if let Err(x) = moved {
            first_error.get_or_insert(x);
        }
    }
    if sync {
        sys::sync_file(to)?;
    }
    first_error.map_or(Ok(()), Err)
}

/// Removes a file, or a directory and everything in it, adding the number
/// of names removed to `removed`.
pub(crate) fn remove_tree(dir: sys::FdRef, name: &Name, removed: &mut u64) -> io::Result<()> {
    match sys::unlink_at(dir, name, true) {
        Err(e) if e.kind() == io::ErrorKind::NotADirectory => {
            sys::unlink_at(dir, name, false)?;
            *removed += 1;
            return Ok(());
        }
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::DirectoryNotEmpty | io::ErrorKind::AlreadyExists
            ) => {}
        r => {
            *removed += u64::from(r.is_ok());
            return r;
        }
    }
    let sub = sys::open_dir(dir, name)?;
    // Copied directories can be read-only; their entries must go first.
    let _ = sys::fchmod(sub.as_fd(), 0o700);
    for e in sys::read_dir(sub.as_fd())? {
        let is_dir = match e.kind {
            Some(k) => k == FileKind::Dir,
            None => sys::stat_at(sub.as_fd(), &e.name, false)?.kind() == FileKind::Dir,
        };
        if is_dir {
            remove_tree(sub.as_fd(), &e.name, removed)?;
        } else {
            sys::unlink_at(sub.as_fd(), &e.name, false)?;
            *removed += 1;
        }
    }
    sys::unlink_at(dir, name, true)?;
    *removed += 1;
    Ok(())
}

/// Removes the temporary files an interrupted run left in a destination
/// directory this run merges into: `.kopiru-tmp.<pid>.<n>` whose process
/// is gone. (Staged trees are directories, resumed or removed by
/// [`Worker::stage`].) Partial copies ([`partial_name`]) are returned, to
/// be continued, under `--partial` or `--resume`; otherwise removed too.
pub(crate) fn clean_temps(sh: &Shared, dir: &Fd, path: &Path) -> Vec<NameBuf> {
    let mut partials = Vec::new();
    let entries = match sys::read_dir(dir.as_fd()) {
        Ok(e) => e,
        Err(e) => {
            sh.warn(Error::dst(path, Op::ReadDirectory, &e));
            return partials;
        }
    };
    for e in entries {
        match leftover(&e) {
            None => continue,
            Some(Leftover::Partial) if sh.opts.partial || sh.opts.resume => {
                partials.push(e.name);
                continue;
            }
            Some(_) => {}
        }
        if let Err(err) = sys::unlink_at(dir.as_fd(), &e.name, false) {
            if err.kind() != io::ErrorKind::IsADirectory {
                sh.warn(Error::dst(
                    join(path, sys::os_str(&e.name)),
                    Op::Remove,
                    &err,
                ));
            }
        }
    }
    partials
}

/// Removes what interrupted runs left in `dir` once no process of this
/// run writes there any more (a shard's rank 0, at the end): temporary
/// files whose process is gone, as [`clean_temps`], and every partial copy.
pub(crate) fn remove_leftovers(dir: sys::FdRef) -> io::Result<()> {
    for e in sys::read_dir(dir)? {
        if leftover(&e).is_none() {
            continue;
        }
        match sys::unlink_at(dir, &e.name, false) {
            Err(err)
                if !matches!(
                    err.kind(),
                    io::ErrorKind::IsADirectory | io::ErrorKind::NotFound
                ) =>
            {
                return Err(err)
            }
            _ => {}
        }
    }
    Ok(())
}

/// What an interrupted run may leave in a destination directory.
enum Leftover {
    /// A partial copy ([`partial_name`]), to be continued or removed.
    Partial,
    /// A temporary file (`.kopiru-tmp.<pid>.<n>`) whose process is gone.
    Orphan,
}

/// Whether `e` is a leftover: not a directory (staged trees are dealt
/// with elsewhere), and a partial copy or an orphaned temporary file; a
/// live process's temporary file, or a name without a pid, is not.
fn leftover(e: &sys::DirEntry) -> Option<Leftover> {
    let bytes = sys::name_bytes(&e.name);
    if !bytes.starts_with(TMP_PREFIX.as_bytes()) || e.kind == Some(FileKind::Dir) {
        return None;
    }
    let partial = bytes[TMP_PREFIX.len()..].starts_with(PARTIAL.as_bytes());
    match partial {
        true => Some(Leftover::Partial),
        false => match leftover_pid(&e.name).is_none_or(sys::process_alive) {
            true => None,
            false => Some(Leftover::Orphan),
        },
    }
}

impl Worker<'_, '_, '_> {
    /// Removes the partial copies found in `dir` that no file of this run
    /// continued (their source is gone, excluded or failed again before
    /// its data): nothing is kept that no run would use.
    pub(crate) fn drop_partials(&self, dir: &DirNode) {
        let left = std::mem::take(&mut *dir.partials.lock().expect("partials lock"));
        for name in left {
            match sys::unlink_at(dir.dst.as_fd(), &name, false) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    let path = join(&dir.dst_path, sys::os_str(&name));
                    self.sh.warn(Error::dst(path, Op::Remove, &e));
                }
                _ => {}
            }
        }
    }

    /// After a file's data failed or was cancelled part-way (`--partial`):
    /// keeps what `written` holds under the file's partial name, for a later
    /// run to continue; an empty one is removed. True if kept.
    pub(crate) fn keep_partial(&self, dir: &DirNode, written: &Name, dst_name: &Name) -> bool {
        let part = partial_name(dst_name);
        let has_data = sys::stat_at(dir.dst.as_fd(), written, false).is_ok_and(|st| st.size > 0);
        has_data
            && (written == part.as_c_str()
                || sys::rename_at(dir.dst.as_fd(), written, dir.dst.as_fd(), &part).is_ok())
    }

    /// The name a new file is written under: its final name in a staged
    /// tree this run made (nobody can see it yet, and a rename per file
    /// cost half as much again on ext4, measured), else a new temporary
    /// name, so that its final name only ever shows a whole file.
    pub(crate) fn write_name(&self, dir: &DirNode, dst_name: &Name) -> NameBuf {
        match dir.staged && dir.fresh {
            true => dst_name.to_owned(),
            false => self.tmp_name(),
        }
    }

    /// Starts or waits for a written file's durability as `--sync` asks:
    /// nothing (`none`); write-back started for the end-of-run flush
    /// (`end`; a clone shares the source's blocks, so there is nothing to
    /// write); fsync now (`file`).
    pub(crate) fn sync_written(&self, fd: sys::FdRef, method: Method) -> io::Result<()> {
        match self.sh.opts.sync {
            SyncMode::None => Ok(()),
            SyncMode::End if method == Method::Clone => Ok(()),
            SyncMode::End => sys::before_fs_sync(fd),
            SyncMode::File => sys::sync_file(fd),
        }
    }

    /// Gives a finished file (written as `written`, from
    /// [`Worker::write_name`]) its final name `dst_name`: already there in
    /// a staged tree; at the end of the run, once its data is durable
    /// (`--sync end` in a visible directory); else now. Under `--sync file`
    /// the name is made durable with its directory. Returns the name the
    /// data has now; `None`: failed (reported, the temporary removed) or
    /// kept by `--no-clobber`.
    pub(crate) fn place(
        &self,
        dir: &DirNode,
        written: NameBuf,
        dst_name: &Name,
    ) -> Option<NameBuf> {
        let file_sync = self.sh.opts.sync == SyncMode::File;
        if dir.staged && dir.fresh {
            if file_sync {
                if let Err(e) = sys::sync_file(dir.dst.as_fd()) {
                    let _ = sys::unlink_at(dir.dst.as_fd(), &written, false);
                    self.dst_error(dir, dst_name, Op::Sync, &e);
                    return None;
                }
            }
            return Some(written);
        }
        if self.defers(dir) {
            dir.deferred
                .lock()
                .expect("deferred lock")
                .push((written.clone(), dst_name.to_owned()));
            return Some(written);
        }
        match self
            .sh
            .rename_final((dir.dst.as_fd(), &dir.dst_path), &written, dst_name)
        {
            Ok(true) => {}
            Ok(false) => return None,
            Err(e) => {
                let _ = sys::unlink_at(dir.dst.as_fd(), &written, false);
                self.dst_error(dir, dst_name, Op::Rename, &e);
                return None;
            }
        }
        if file_sync {
            if let Err(e) = sys::sync_file(dir.dst.as_fd()) {
                self.dst_error(dir, dst_name, Op::Sync, &e);
                return None;
            }
        }
        Some(dst_name.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staged_and_file_names_are_stable_and_distinct() {
        let a = staged_name(&sys::name("copy"));
        assert_eq!(a, staged_name(&sys::name("copy")));
        assert_ne!(a, staged_name(&sys::name("copy2")));
        assert!(sys::name_bytes(&a).starts_with(b".kopiru-tmp.tree."));
    }

    #[test]
    fn leftovers_name_their_process() {
        assert_eq!(leftover_pid(&sys::name(".kopiru-tmp.1234.7")), Some(1234));
        assert_eq!(leftover_pid(&sys::name(".kopiru-tmp.tree.00ff")), None);
        assert_eq!(leftover_pid(&sys::name(".kopiru-tmp.file.00ff")), None);
        assert_eq!(leftover_pid(&sys::name("other.1234.7")), None);
        assert_eq!(leftover_pid(&sys::name(".kopiru-tmp.12x.7")), None);
    }
}
