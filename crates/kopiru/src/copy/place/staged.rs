//! Staged trees: a new top-level directory is built under a temporary name
//! beside its destination ([`staged_name`]), locked while it is built, and
//! renamed into place once it is complete and durable. A leftover of an
//! interrupted run is removed, or continued under `--resume`.

use super::leftovers::remove_tree;
use super::names::staged_name;
use super::{Placement, Sink};
use crate::error::{Error, Op, Refusal, Side};
use crate::paths::join_name;
use crate::sys::{self, AsFd, Fd, FileKind, Name, NameBuf};
use std::io;
use std::path::{Path, PathBuf};

/// A top-level directory built under a temporary name beside its
/// destination, renamed into place once it is complete (and durable).
pub(crate) struct StagedTree {
    /// The destination's parent: its own descriptor, its path and device.
    pub(crate) parent: Fd,
    pub(crate) parent_path: PathBuf,
    pub(crate) dev: u64,
    pub(crate) tmp: NameBuf,
    pub(crate) name: NameBuf,
    /// The source directory's identity ([`sys::identity`]), for
    /// [`crate::copy::record`]; `None` when no record is kept or none can be had.
    pub(crate) source: Option<Vec<u8>>,
    /// The staged directory, locked ([`Placement::lock_staged`]) until it
    /// is published or the run ends; `None` for a macOS whole-tree clone.
    pub(crate) _lock: Option<Fd>,
    /// The source directory of a command-line source's tree: such a tree is
    /// put in place only when nothing in it failed (else it stays under its
    /// staged name for the same command to finish). `None`: a listed or
    /// sharded copy's, put in place by its own rules.
    pub(crate) src_path: Option<PathBuf>,
    /// A directory of a listed copy: when its name was made meanwhile (by
    /// another process copying other entries of the same tree), its
    /// entries are moved into that directory ([`merge_into`]) instead of
    /// failing; and it is no copy of a source for [`crate::copy::record`].
    pub(crate) merge: bool,
}

impl StagedTree {
    /// The destination's path.
    pub(crate) fn path(&self) -> PathBuf {
        join_name(&self.parent_path, &self.name)
    }

    /// Renames the staged directory to its final name, which must not
    /// exist, or (a listed copy's, `merge`) merges it into the directory
    /// made there meanwhile. `sync_dirs`: each directory merged into is
    /// flushed; `replace`: a file of this run replaces one there.
    pub(crate) fn put_in_place(&self, sync_dirs: bool, replace: bool) -> io::Result<()> {
        let parent = self.parent.as_fd();
        sys::rename_noreplace(parent, &self.tmp, parent, &self.name).or_else(|e| match e.kind() {
            io::ErrorKind::AlreadyExists | io::ErrorKind::DirectoryNotEmpty if self.merge => {
                merge_into(parent, &self.tmp, &self.name, sync_dirs, replace)
            }
            _ => Err(e),
        })
    }

    /// Notes that the published tree is a copy of its source in the record
    /// of copies `file`, so that the same command run again merges into it
    /// instead of nesting.
    pub(crate) fn record(&self, file: &Path) {
        if let Ok(dir) = sys::open_dir(self.parent.as_fd(), &self.name) {
            crate::copy::record::note(file, self.source.as_deref(), dir.as_fd(), &self.path());
        }
    }
}

impl Placement<'_> {
    /// For a top-level directory `dst_name` in `parent`: if it does not
    /// exist yet, the name to build it under (a leftover of an interrupted
    /// run is removed, or reused with `--resume`). `Err`: failed, reported.
    pub(crate) fn stage(
        &self,
        (parent, parent_path): (sys::FdRef, &Path),
        dst_name: &Name,
        sink: &dyn Sink,
    ) -> Result<Option<NameBuf>, ()> {
        let exists = !matches!(
            sys::stat_at(parent, dst_name, false),
            Err(e) if e.kind() == io::ErrorKind::NotFound
        );
        let tmp = staged_name(dst_name);
        // Only touched when there is one: a read-only destination then
        // fails on the directory itself, with its own name.
        let leftover = sys::stat_at(parent, &tmp, false).is_ok();
        // Held while the leftover is removed, so that a run that has just
        // made it (and not yet locked it) finds it gone once it can.
        let _held = match leftover {
            true => leftover_lock(parent, &tmp, join_name(parent_path, dst_name), sink)?,
            false => None,
        };
        // A leftover beside a destination that exists now cannot be
        // resumed (the copy merges into what is there): removed.
        if leftover && (exists || !self.opts.resume) {
            match remove_tree(parent, &tmp, &mut 0) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    let path = join_name(parent_path, &tmp);
                    sink.error(Error::dst(path, Op::Remove, &e));
                    return Err(());
                }
                _ => {}
            }
        }
        Ok((!exists).then_some(tmp))
    }

    /// Locks a staged tree's directory `dir` (`tmp` in `parent`) for the
    /// rest of the run, so that another kopiru copying to the same
    /// destination neither removes nor reuses it, and checks that it is
    /// still the directory under that name (another run that found it
    /// unlocked before may have removed it). `None`: another holds it
    /// (reported).
    pub(crate) fn lock_staged(
        &self,
        (parent, tmp): (sys::FdRef, &Name),
        dir: &Fd,
        path: &Path,
        sink: &dyn Sink,
    ) -> Option<Fd> {
        let lock = dir.try_clone().and_then(|fd| {
            match sys::try_lock(fd.as_fd())? && still_named(parent, tmp, &fd) {
                true => Ok(Some(fd)),
                false => Ok(None),
            }
        });
        match lock {
            Ok(Some(fd)) => Some(fd),
            Ok(None) => {
                let why = Refusal::Busy;
                sink.error(Error::refused(Side::Destination, path, Op::Copy, why));
                None
            }
            Err(e) => {
                sink.error(Error::dst(path, Op::Open, &e));
                None
            }
        }
    }
}

/// The lock of a leftover staged tree `tmp` in `parent`, taken; `Err`: a
/// live kopiru is building it (it holds the lock:
/// [`Placement::lock_staged`]), reported for the destination `dst_path`. A
/// lock that cannot be tried counts as held: a live run's tree is never
/// removed.
fn leftover_lock(
    parent: sys::FdRef,
    tmp: &Name,
    dst_path: PathBuf,
    sink: &dyn Sink,
) -> Result<Option<Fd>, ()> {
    match try_lock_at(parent, tmp) {
        Ok(Some(fd)) => Ok(Some(fd)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        _ => {
            let why = Refusal::Busy;
            sink.error(Error::refused(Side::Destination, dst_path, Op::Copy, why));
            Err(())
        }
    }
}

/// Opens the directory `name` in `dir` and tries its lock: the
/// descriptor that holds it while it lives, or `None` when another holds
/// it.
pub(crate) fn try_lock_at(dir: sys::FdRef, name: &Name) -> io::Result<Option<Fd>> {
    let fd = sys::open_dir(dir, name)?;
    Ok(sys::try_lock(fd.as_fd())?.then_some(fd))
}

/// Whether `name` in `dir` is still the file open as `fd` (a staged
/// directory locked after it was made: another run that found it unlocked
/// in between may have removed it).
pub(crate) fn still_named(dir: sys::FdRef, name: &Name, fd: &Fd) -> bool {
    let here = sys::stat_at(dir, name, false);
    matches!((sys::fstat(fd.as_fd()), here), (Ok(a), Ok(b)) if (a.dev, a.ino) == (b.dev, b.ino))
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
