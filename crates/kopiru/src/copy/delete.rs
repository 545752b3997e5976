//! `--delete`: after the copy, removes what the destination holds that the
//! source does not, walking both trees again (each directory listed once
//! more on both sides). Entries the filter excludes are protected, as in
//! rsync, and so are backups (names ending in `~`) with `--backup`; directories `-x` did not enter are not entered here either. A
//! source directory that cannot be read deletes nothing in its copy. With
//! `dry_run` the deletions are only reported.

use crate::error::{Error, Op, Refusal, Side};
use crate::events::{Change, ChangeKind, EntryKind, Reporter, Summary};
use crate::options::{CopyOptions, Follow, SyncMode};
use crate::paths::join_name;
use crate::sys::{self, AsFd, Fd, FileKind, Name, NameBuf};
use std::path::{Path, PathBuf};

/// Deletes (or, with `dry_run`, reports) what each destination in `pairs`
/// (source, destination) holds that its source does not.
pub(crate) fn run(
    pairs: &[(PathBuf, PathBuf)],
    opts: &CopyOptions,
    reporter: &dyn Reporter,
    summary: &mut Summary,
) {
    let mut d = Deleter {
        opts,
        reporter,
        summary,
        changed: Vec::new(),
    };
    for (src, dst) in pairs {
        let follow = opts.follow != Follow::Never;
        let is_dir = |p: &Path, f| sys::stat_path(p, f).is_ok_and(|s| s.kind() == FileKind::Dir);
        if !is_dir(src, follow) || !is_dir(dst, false) {
            continue;
        }
        let open = |p: &Path| {
            let (parent, name) = sys::open_parent(p)?;
            open_dir(&parent, &name)
        };
        match (open(src), open(dst)) {
            (Ok(s), Ok(t)) => {
                let root_dev = sys::fstat(s.as_fd()).map(|st| st.dev).unwrap_or(0);
                let at = Pair {
                    src: &s,
                    dst: &t,
                    src_path: src,
                    dst_path: dst,
                    rel: Path::new(""),
                    root_dev,
                };
                d.dir(&at);
            }
            (Err(e), _) => d.error(Error::src(src, Op::Open, &e)),
            (_, Err(e)) => d.error(Error::dst(dst, Op::Open, &e)),
        }
    }
    // What was deleted before a cancel is made durable too.
    d.flush();
}

struct Deleter<'a> {
    opts: &'a CopyOptions,
    reporter: &'a dyn Reporter,
    summary: &'a mut Summary,
    /// One directory per destination filesystem where something was
    /// deleted, flushed at the end (`--sync end`).
    changed: Vec<(u64, Fd, PathBuf)>,
}

/// A source directory and its copy.
struct Pair<'p> {
    src: &'p Fd,
    dst: &'p Fd,
    src_path: &'p Path,
    dst_path: &'p Path,
    /// Its path inside the copied directory, for the filter.
    rel: &'p Path,
    root_dev: u64,
}

impl Deleter<'_> {
    fn error(&mut self, e: Error) {
        self.reporter.error(&e);
        self.summary.errors.push(e);
    }

    fn dir(&mut self, at: &Pair) {
        let follow = self.opts.follow == Follow::Always;
        let mut names: Vec<NameBuf> = match sys::read_dir(at.src.as_fd()) {
            Ok(v) => v.into_iter().map(|e| e.name).collect(),
            Err(e) => return self.error(Error::src(at.src_path, Op::ReadDirectory, &e)),
        };
        names.sort();
        let theirs = match sys::read_dir(at.dst.as_fd()) {
            Ok(v) => v,
            Err(e) => return self.error(Error::dst(at.dst_path, Op::ReadDirectory, &e)),
        };
        let mut deleted_here = false;
        for e in theirs {
            if self.opts.cancel.is_cancelled() {
                self.summary.cancelled = true;
                break;
            }
            let rel = at.rel.join(sys::os_str(&e.name));
            let dst_st = sys::stat_at(at.dst.as_fd(), &e.name, false);
            let dst_is_dir = dst_st.as_ref().is_ok_and(|s| s.kind() == FileKind::Dir);
            if names.binary_search(&e.name).is_err() {
                if !self.protects(&rel, &e.name, dst_is_dir) {
                    let path = join_name(at.dst_path, &e.name);
                    let (n, _) = self.remove(at.dst, &e.name, (&path, &rel), dst_is_dir);
                    deleted_here |= n > 0;
                }
                continue;
            }
            // In both, but excluded: the copy left it alone, so it is the
            // destination's own, kept whole (rsync's), or with
            // --delete-excluded deleted as if the source lacked it.
            if self.opts.filter.excludes(&rel, || dst_is_dir) {
                if self.opts.delete_excluded {
                    let path = join_name(at.dst_path, &e.name);
                    let (n, _) = self.remove(at.dst, &e.name, (&path, &rel), dst_is_dir);
                    deleted_here |= n > 0;
                }
                continue;
            }
            // In both: a directory in both is walked, unless -x left it.
            let Ok(s) = sys::stat_at(at.src.as_fd(), &e.name, follow) else {
                continue;
            };
            if !dst_is_dir || s.kind() != FileKind::Dir {
                continue;
            }
            if self.opts.one_file_system && s.dev != at.root_dev {
                continue;
            }
            let open_src = sys::open_source(at.src.as_fd(), &e.name, true, follow, false);
            let open_dst = open_dir(at.dst, &e.name);
            let (src_path, dst_path) = (
                join_name(at.src_path, &e.name),
                join_name(at.dst_path, &e.name),
            );
            match (open_src, open_dst) {
                (Ok(s), Ok(t)) => self.dir(&Pair {
                    src: &s,
                    dst: &t,
                    src_path: &src_path,
                    dst_path: &dst_path,
                    rel: &rel,
                    root_dev: at.root_dev,
                }),
                (Err(e), _) => self.error(Error::src(src_path, Op::Open, &e)),
                (_, Err(e)) => self.error(Error::dst(dst_path, Op::Open, &e)),
            }
        }
        if deleted_here && !self.opts.dry_run {
            self.restore_times(at);
            self.made_changes(at.dst, at.dst_path);
        }
    }

    /// Whether the entry at `rel` (named `name`) the source lacks is kept:
    /// an `--exclude` protects it (unless `--delete-excluded`), or it is
    /// a backup (a name ending in `~`) under `--backup`.
    fn protects(&self, rel: &Path, name: &Name, is_dir: bool) -> bool {
        let suffix = self.opts.backup_suffix().as_encoded_bytes();
        let backup =
            self.opts.backup.is_some() && sys::os_str(name).as_encoded_bytes().ends_with(suffix);
        backup || (!self.opts.delete_excluded && self.opts.filter.excludes(rel, || is_dir))
    }

    /// Removes `name` from `dir` (a directory with everything in it,
    /// deepest first), reporting each entry as it goes. An entry inside
    /// that an `--exclude` protects is kept, and so is every directory
    /// above it, with a warning naming the directory (as rsync keeps
    /// them). With `--backup` a file is kept under its backup name instead
    /// (rsync's), and a directory holding such backups stays. Returns how
    /// many entries were deleted, and what became of `name`.
    fn remove(
        &mut self,
        dir: &Fd,
        name: &Name,
        (path, rel): (&Path, &Path),
        is_dir: bool,
    ) -> (u64, Fate) {
        let kind = if is_dir {
            EntryKind::Dir
        } else {
            EntryKind::File
        };
        let mut removed = 0;
        if is_dir {
            let inner = match open_dir(dir, name) {
                Ok(fd) => fd,
                Err(e) => {
                    self.error(Error::dst(path, Op::Open, &e));
                    return (0, Fate::Kept);
                }
            };
            let entries = match sys::read_dir(inner.as_fd()) {
                Ok(entries) => entries,
                Err(e) => {
                    self.error(Error::dst(path, Op::ReadDirectory, &e));
                    return (0, Fate::Kept);
                }
            };
            let mut fate = Fate::Gone;
            for e in entries {
                let sub = join_name(path, &e.name);
                let sub_rel = rel.join(sys::os_str(&e.name));
                let sub_is_dir = sys::stat_at(inner.as_fd(), &e.name, false)
                    .is_ok_and(|s| s.kind() == FileKind::Dir);
                if self.protects(&sub_rel, &e.name, sub_is_dir) {
                    fate = Fate::Kept;
                    continue;
                }
                let (n, f) = self.remove(&inner, &e.name, (&sub, &sub_rel), sub_is_dir);
                removed += n;
                fate = fate.max(f);
            }
            match fate {
                Fate::Gone => {}
                Fate::BackedUp => return (removed, fate),
                Fate::Kept => {
                    let why = Refusal::HoldsProtected;
                    let w = Error::refused(Side::Destination, path, Op::Remove, why);
                    self.reporter.warning(&w);
                    self.summary.warnings.push(w);
                    return (removed, fate);
                }
            }
        }
        let backup = !is_dir && self.opts.backup.is_some();
        if !self.opts.dry_run {
            let done = match backup {
                true => self.back_up(dir, name),
                false => sys::unlink_at(dir.as_fd(), name, is_dir),
            };
            if let Err(e) = done {
                let op = if backup { Op::Backup } else { Op::Remove };
                self.error(Error::dst(path, op, &e));
                return (removed, Fate::Kept);
            }
        }
        self.summary.deleted += 1;
        self.reporter.change(&Change {
            path,
            source: None,
            kind,
            change: ChangeKind::Deleted,
            target: None,
        });
        let fate = if backup { Fate::BackedUp } else { Fate::Gone };
        (removed + 1, fate)
    }

    /// `--backup`: a file the source lacks keeps its data under its backup
    /// name (the suffix added) instead of being deleted, as rsync keeps it.
    fn back_up(&self, dir: &Fd, name: &Name) -> std::io::Result<()> {
        let mut b = std::ffi::OsString::from(sys::os_str(name));
        b.push(self.opts.backup_suffix());
        let b = sys::cstring(&b)?;
        sys::rename_at(dir.as_fd(), name, dir.as_fd(), &b)
    }

    /// Deleting changed the times of a directory the copy gave its
    /// source's: they are set again.
    fn restore_times(&mut self, at: &Pair) {
        if !self.opts.preserve.times {
            return;
        }
        let set = sys::fstat(at.src.as_fd())
            .and_then(|st| sys::futimens(at.dst.as_fd(), st.atime, st.mtime));
        if let Err(e) = set {
            let e = Error::dst(at.dst_path, Op::SetTimes, &e);
            self.reporter.warning(&e);
            self.summary.warnings.push(e);
        }
    }

    /// Something was deleted in `dir`: with `--sync file` it is flushed
    /// now; with `--sync end` its filesystem is flushed at the end.
    fn made_changes(&mut self, dir: &Fd, path: &Path) {
        match self.opts.sync {
            SyncMode::None => {}
            SyncMode::File => {
                if let Err(e) = sys::sync_file(dir.as_fd()) {
                    self.error(Error::dst(path, Op::Sync, &e));
                }
            }
            SyncMode::End => {
                let Ok(st) = sys::fstat(dir.as_fd()) else {
                    return;
                };
                if self.changed.iter().any(|(dev, _, _)| *dev == st.dev) {
                    return;
                }
                match sys::open_dir(dir.as_fd(), sys::DOT) {
                    Ok(fd) => self.changed.push((st.dev, fd, path.to_path_buf())),
                    Err(e) => self.error(Error::dst(path, Op::Open, &e)),
                }
            }
        }
    }

    /// `--sync end`: one flush per destination filesystem where something
    /// was deleted, so the deletions are durable when the copy returns.
    fn flush(&mut self) {
        for (_, fd, path) in std::mem::take(&mut self.changed) {
            if let Err(e) = sys::sync_fs(fd.as_fd()) {
                self.error(Error::dst(path, Op::Sync, &e));
            }
        }
    }
}

/// What [`Deleter::remove`] made of an entry, worst last.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fate {
    Gone,
    /// Kept under its backup name (a directory: holding backups).
    BackedUp,
    /// Kept: protected, or not removable (reported).
    Kept,
}

/// Opens the directory `name` in `dir` to read it, leaving its access time
/// alone where permitted (a dry run changes nothing at all).
fn open_dir(dir: &Fd, name: &Name) -> std::io::Result<Fd> {
    sys::open_source(dir.as_fd(), name, true, false, true)
        .or_else(|_| sys::open_source(dir.as_fd(), name, true, false, false))
}
