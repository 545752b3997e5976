//! One non-directory entry: looking at what is already at its destination
//! name, opening its source, hard links, symlinks and special files.

use super::node::{DirNode, Existing, Item, LinkCell, LinkTarget, SourceFile};
use super::worker::Worker;
use crate::copy::meta::{self, Target};
use crate::error::{Op, Refusal};
use crate::events::{Change, ChangeKind, EntryKind};
use crate::options::CopyOptions;
use crate::paths::join_name;
use crate::sys::AsFd;
use crate::sys::Name;
use crate::sys::{self, Fd, FileKind, Stat};
use std::io;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl<'scope, 'env, 'a> Worker<'scope, 'env, 'a> {
    pub(crate) fn open_src(
        &self,
        dir: &DirNode,
        name: &Name,
        is_dir: bool,
        follow: bool,
    ) -> io::Result<Fd> {
        if self.sh.noatime.load(Ordering::Relaxed) {
            match sys::open_source(dir.src.as_fd(), name, is_dir, follow, true) {
                Err(e) if sys::noatime_refused(&e) => {
                    self.sh.noatime.store(false, Ordering::Relaxed);
                }
                r => return r,
            }
        }
        sys::open_source(dir.src.as_fd(), name, is_dir, follow, false)
    }

    /// Looks at what is at a destination name before a non-directory is
    /// put there: a directory or the source itself is refused; with
    /// `--no-clobber` anything is kept; with `--resume` an entry that is
    /// already a complete copy is kept.
    /// A hard link passes `resume_keeps` false: a whole file under its name
    /// is kept only if it already is that link. `src_fd`: the open source
    /// of a regular file, for `--checksum`.
    pub(crate) fn existing(
        &self,
        dir: &DirNode,
        dst_name: &Name,
        (src, src_fd): (&Stat, Option<&Fd>),
        resume_keeps: bool,
    ) -> Existing {
        let Ok(d) = sys::stat_at(dir.dst.as_fd(), dst_name, false) else {
            return Existing::Absent;
        };
        if d.kind() == FileKind::Dir {
            // -n and -u (when it is not older than the source) leave it,
            // as cp skips it, and -i when the answer is no; else refused,
            // as cp refuses it (with -i after a yes).
            let opts = self.sh.opts;
            let declined = || {
                let path = join_name(&dir.dst_path, dst_name);
                !self.sh.reporter.confirm_replace(&path)
            };
            if opts.skips(&d, src) || (opts.interactive && declined()) {
                self.sh.kept(&dir.dst_path, dst_name);
                return Existing::Refused;
            }
            self.dst_refusal(dir, dst_name, Refusal::NonDirOverDir { source: None });
            return Existing::Refused;
        }
        // Another name of the source: with --backup it is kept as the
        // backup and replaced by a copy (cp's), else refused.
        if (d.dev, d.ino) == (src.dev, src.ino) && self.sh.opts.backup.is_none() {
            // Already the hard link `-l` would make.
            if self.sh.opts.link_files == Some(crate::options::LinkFiles::Hard) {
                self.sh.kept(&dir.dst_path, dst_name);
                return Existing::Keep;
            }
            let same = Refusal::SameFile {
                source: join_name(&dir.src_path, dst_name),
                dest: join_name(&dir.dst_path, dst_name),
            };
            self.dst_refusal(dir, dst_name, same);
            return Existing::Refused;
        }
        let same = || {
            let open = || sys::open_source(dir.dst.as_fd(), dst_name, false, false, false);
            match (src_fd, open()) {
                (Some(s), Ok(dfd)) => sys::same_data(s.as_fd(), dfd.as_fd(), src.size),
                _ => false,
            }
        };
        if keeps(self.sh.opts, &d, src, dir.staged, resume_keeps, same) {
            self.sh.kept(&dir.dst_path, dst_name);
            return Existing::Keep;
        }
        if self.sh.opts.interactive {
            let path = join_name(&dir.dst_path, dst_name);
            if !self.sh.reporter.confirm_replace(&path) {
                // Declined: left as it is, and not a copy of this source
                // (so its hard links are not made to it).
                self.sh.kept(&dir.dst_path, dst_name);
                return Existing::Refused;
            }
        }
        if let Some(kind) = self.sh.opts.backup {
            // Not replaced without its backup.
            if let Err(e) = self.back_up(dir, dst_name, kind, (src.dev, src.ino)) {
                self.dst_error(dir, dst_name, Op::Backup, &e);
                return Existing::Refused;
            }
        }
        Existing::Replace(d)
    }

    /// Opens a source entry and stats it on the descriptor (one lookup);
    /// `None` when that failed (reported).
    pub(crate) fn open_and_stat(
        &self,
        dir: &DirNode,
        name: &Name,
        is_dir: bool,
        follow: bool,
    ) -> Option<(Fd, Stat)> {
        let src = match self.open_src(dir, name, is_dir, follow) {
            Ok(fd) => fd,
            Err(e) => {
                self.src_error(dir, name, Op::Open, &e);
                return None;
            }
        };
        match sys::fstat(src.as_fd()) {
            Ok(st) => Some((src, st)),
            Err(e) => {
                self.src_error(dir, name, Op::Stat, &e);
                None
            }
        }
    }

    /// Copies the regular file `item` (or, named as a source, a FIFO or
    /// device read for its data) to `dst_name` in `dir`'s destination.
    pub(crate) fn file(&mut self, dir: &Arc<DirNode>, item: &Item, dst_name: &Name) {
        let name = item.name.as_c_str();
        if self.kept_unopened(dir, item, dst_name) {
            return;
        }
        let Some((src, st)) = self.open_and_stat(dir, name, false, item.follow) else {
            return;
        };
        let data = match st.kind() {
            FileKind::File => true,
            FileKind::Fifo | FileKind::CharDevice | FileKind::BlockDevice | FileKind::Socket => {
                item.read_data
            }
            _ => false,
        };
        if !data {
            let e = io::Error::other("changed type while being copied");
            return self.src_error(dir, name, Op::Open, &e);
        }
        let f = SourceFile {
            dir,
            src: &src,
            st: &st,
            name,
            dst_name,
            write_into: item.write_into,
        };
        self.file_opened(&f, None);
    }

    /// `-n` and `-u` decide by the names' stats: a source whose copy they
    /// keep is never opened, so one that cannot be read is no error (cp's).
    /// Another name of the source itself goes the usual way.
    fn kept_unopened(&self, dir: &DirNode, item: &Item, dst_name: &Name) -> bool {
        let opts = self.sh.opts;
        if !(opts.no_clobber || opts.update) || dir.fresh || item.write_into {
            return false;
        }
        let Ok(d) = sys::stat_at(dir.dst.as_fd(), dst_name, false) else {
            return false;
        };
        let Ok(s) = sys::stat_at(dir.src.as_fd(), &item.name, item.follow) else {
            return false;
        };
        let keep = (d.dev, d.ino) != (s.dev, s.ino) && opts.skips(&d, &s);
        if keep {
            self.sh.kept(&dir.dst_path, dst_name);
        }
        keep
    }

    /// The one cell per source inode that the first of its names fills
    /// with its copy and the others wait on.
    fn link_cell(&self, st: &Stat) -> LinkCell {
        self.sh
            .links
            .lock()
            .expect("links lock")
            .entry((st.dev, st.ino))
            .or_default()
            .clone()
    }

    /// Copies a regular file whose source is open, or links it to an
    /// earlier copy of the same inode. `created`: its new file, already
    /// created under `dst_name` ([`Ahead`]).
    pub(crate) fn file_opened(&mut self, f: &SourceFile, created: Option<io::Result<Fd>>) {
        let (dir, st) = (f.dir, f.st);
        // With -L a file reached by a symlink too is one inode met twice,
        // made one inode in the copy (cp -aL's), whatever its link count.
        let opts = self.sh.opts;
        // So is one named twice on the command line through symlinks (-H).
        let linked = st.nlink > 1
            || opts.follow == crate::options::Follow::Always
            || (opts.follow == crate::options::Follow::CommandLine && dir.stages);
        if created.is_some() || !(opts.preserve.links && linked) {
            self.copy_file(f, created);
            return;
        }
        if let Some(later) = &self.sh.deferred_links {
            let rel = dir.rel.join(sys::os_str(f.name));
            later.lock().expect("deferred lock").push(rel);
            return;
        }
        // The first worker to meet this inode copies it; any other waits for
        // that copy, then links to it.
        let cell = self.link_cell(st);
        let mut copied_here = false;
        let target = cell.get_or_init(|| {
            copied_here = true;
            self.copy_file(f, None).map(|name| LinkTarget {
                dir: dir.clone(),
                name,
                dst_name: f.dst_name.to_owned(),
            })
        });
        if copied_here {
            return;
        }
        match target {
            Some(t) => self.hard_link(dir, (f.name, f.dst_name), t, st),
            None => {
                self.copy_file(f, None);
            }
        }
    }

    pub(crate) fn hard_link(
        &mut self,
        dir: &DirNode,
        (src_name, dst_name): (&Name, &Name),
        target: &LinkTarget,
        st: &Stat,
    ) {
        let (tdir, tname) = (target.dir.dst.as_fd(), target.name.as_c_str());
        let make = |n: &Name| sys::link_at(tdir, tname, dir.dst.as_fd(), n);
        // Already that link (a resumed run's, or a merge into a copy
        // whose links are there): renaming a second name of one inode
        // over the first does nothing, so it is kept as it is.
        if !dir.fresh {
            let here = sys::stat_at(dir.dst.as_fd(), dst_name, false);
            let there = sys::stat_at(tdir, tname, false);
            if let (Ok(a), Ok(b)) = (here, there) {
                if (a.dev, a.ino) == (b.dev, b.ino) {
                    self.sh.kept(&dir.dst_path, dst_name);
                    return;
                }
            }
        }
        let linked = |w: &Self, old| {
            w.sh.counters.hardlinks.fetch_add(1, Ordering::Relaxed);
            let first =
                w.sh.opts
                    .report_changes
                    .then(|| join_name(&target.dir.dst_path, &target.dst_name));
            w.changed(
                dir,
                (src_name, dst_name),
                EntryKind::HardLink,
                old,
                st,
                first.as_deref(),
            );
        };
        if self.sh.place.defers(&dir.dest()) {
            // A visible name may only appear once the data is durable.
            let old = match self.existing(dir, dst_name, (st, None), false) {
                Existing::Keep | Existing::Refused => return,
                Existing::Absent => None,
                Existing::Replace(d) => Some(d),
            };
            let tmp = self.sh.place.tmp_name();
            match make(&tmp) {
                Ok(()) => {
                    self.sh.place.defer(&dir.dest(), tmp, dst_name);
                    linked(self, old);
                }
                Err(e) => self.dst_error(dir, dst_name, Op::Link, &e),
            }
            return;
        }
        match self.make_or_replace(dir, dst_name, st, false, make) {
            Some(Ok(old)) => linked(self, old),
            Some(Err(e)) => self.dst_error(dir, dst_name, Op::Link, &e),
            None => {}
        }
    }

    /// Makes a new entry with `make`. If the name is taken, makes it under a
    /// temporary name and renames it over, so the old entry stays whole until
    /// the new one replaces it. `None`: kept or refused (already counted or
    /// reported).
    pub(crate) fn make_or_replace(
        &self,
        dir: &DirNode,
        dst_name: &Name,
        st: &Stat,
        resume_keeps: bool,
        make: impl Fn(&Name) -> io::Result<()>,
    ) -> Option<io::Result<Option<Stat>>> {
        match make(dst_name) {
            // --attributes-only never puts another entry in place of one
            // that is there (its data would be lost; cp: "File exists").
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && self.sh.opts.attributes_only => {
                Some(Err(e))
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let old = match self.existing(dir, dst_name, (st, None), resume_keeps) {
                    Existing::Keep | Existing::Refused => return None,
                    Existing::Absent => None,
                    Existing::Replace(d) => Some(d),
                };
                let tmp = self.sh.place.tmp_name();
                Some(
                    make(&tmp)
                        .and_then(|()| {
                            sys::rename_at(dir.dst.as_fd(), &tmp, dir.dst.as_fd(), dst_name)
                                .inspect_err(|_| {
                                    let _ = sys::unlink_at(dir.dst.as_fd(), &tmp, false);
                                })
                        })
                        .map(|()| old),
                )
            }
            r => Some(r.map(|()| None)),
        }
    }

    pub(crate) fn symlink(&mut self, dir: &Arc<DirNode>, name: &Name, dst_name: &Name) {
        let st = match sys::stat_at(dir.src.as_fd(), name, false) {
            Ok(st) => st,
            Err(e) => return self.src_error(dir, name, Op::Stat, &e),
        };
        if self.sh.opts.link_files.is_some() {
            return self.link_entry(dir, name, dst_name, &st);
        }
        self.once_per_inode(dir, (name, dst_name), &st, Self::make_symlink);
    }

    /// Makes the symlink `name` of the source again as `dst_name`. Whether
    /// it was made.
    fn make_symlink(&mut self, dir: &DirNode, (name, dst_name): (&Name, &Name), st: &Stat) -> bool {
        let target = match sys::read_link_at(dir.src.as_fd(), name) {
            Ok(t) => t,
            Err(e) => {
                self.src_error(dir, name, Op::Readlink, &e);
                return false;
            }
        };
        let make = |n: &Name| sys::symlink_at(&target, dir.dst.as_fd(), n);
        let shown = (EntryKind::Symlink, Some(Path::new(sys::os_str(&target))));
        let made = self.create_or_replace(dir, (name, dst_name), st, (Op::Symlink, shown), make);
        if made {
            self.sh.counters.symlinks.fetch_add(1, Ordering::Relaxed);
        }
        made
    }

    pub(crate) fn special(
        &mut self,
        dir: &Arc<DirNode>,
        name: &Name,
        dst_name: &Name,
        follow: bool,
    ) {
        let st = match sys::stat_at(dir.src.as_fd(), name, follow) {
            Ok(st) => st,
            Err(e) => return self.src_error(dir, name, Op::Stat, &e),
        };
        if self.sh.opts.link_files.is_some() {
            return self.link_entry(dir, name, dst_name, &st);
        }
        self.once_per_inode(dir, (name, dst_name), &st, Self::make_special);
    }

    /// Makes a symlink or special file with `make`, once per source inode
    /// where hard links are kept: its other names become hard links to the
    /// first one made, as regular files' do.
    fn once_per_inode(
        &mut self,
        dir: &Arc<DirNode>,
        (name, dst_name): (&Name, &Name),
        st: &Stat,
        make: fn(&mut Self, &DirNode, (&Name, &Name), &Stat) -> bool,
    ) {
        if !(self.sh.opts.preserve.links && st.nlink > 1 && self.sh.deferred_links.is_none()) {
            make(self, dir, (name, dst_name), st);
            return;
        }
        let cell = self.link_cell(st);
        let mut made_here = false;
        let target = cell.get_or_init(|| {
            made_here = true;
            make(self, dir, (name, dst_name), st).then(|| LinkTarget {
                dir: dir.clone(),
                name: dst_name.to_owned(),
                dst_name: dst_name.to_owned(),
            })
        });
        match (made_here, target) {
            (true, _) => {}
            (false, Some(t)) => self.hard_link(dir, (name, dst_name), t, st),
            (false, None) => {
                make(self, dir, (name, dst_name), st);
            }
        }
    }

    /// Makes the FIFO, socket or device node `st` under `dst_name`.
    /// Whether it was made.
    fn make_special(&mut self, dir: &DirNode, (name, dst_name): (&Name, &Name), st: &Stat) -> bool {
        let mode = st.type_and_perm();
        let make = |n: &Name| sys::mknod_at(dir.dst.as_fd(), n, mode, st.rdev);
        let shown = (EntryKind::Special, None);
        let made = self.create_or_replace(dir, (name, dst_name), st, (Op::Mknod, shown), make);
        if made {
            self.sh.counters.specials.fetch_add(1, Ordering::Relaxed);
        }
        made
    }

    /// cp's `-l`/`-s` for a symlink or special file: a hard link to it, or
    /// a symbolic link naming it.
    fn link_entry(&mut self, dir: &DirNode, name: &Name, dst_name: &Name, st: &Stat) {
        let (src, dst) = (dir.src.as_fd(), dir.dst.as_fd());
        let target = match self.sh.opts.link_files {
            Some(crate::options::LinkFiles::Symbolic) => match self.source_target(dir, name) {
                Ok(target) => Some(target),
                Err(e) => return self.dst_error(dir, dst_name, Op::Symlink, &e),
            },
            _ => None,
        };
        let op = match target {
            Some(_) => Op::Symlink,
            None => Op::Link,
        };
        let make = |n: &Name| match &target {
            Some(t) => sys::symlink_at(t, dst, n),
            None => sys::link_at(src, name, dst, n),
        };
        // No metadata is applied: a hard link is the source's own inode.
        match self.make_or_replace(dir, dst_name, st, true, make) {
            None => {}
            Some(Err(e)) => self.dst_error(dir, dst_name, op, &e),
            Some(Ok(old)) => {
                self.changed(dir, (name, dst_name), EntryKind::HardLink, old, st, None);
                self.sh.counters.hardlinks.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Creates a symlink or special file with `make` (replacing an existing
    /// entry atomically), then applies its metadata by name. `how`: the
    /// operation named in errors, and the kind and target reported.
    pub(crate) fn create_or_replace(
        &mut self,
        dir: &DirNode,
        (src_name, dst_name): (&Name, &Name),
        st: &Stat,
        how: (Op, (EntryKind, Option<&Path>)),
        make: impl Fn(&Name) -> io::Result<()>,
    ) -> bool {
        let (op, (kind, shown)) = how;
        match self.make_or_replace(dir, dst_name, st, true, make) {
            None => return false,
            Some(Err(e)) => {
                self.dst_error(dir, dst_name, op, &e);
                return false;
            }
            Some(Ok(old)) => self.changed(dir, (src_name, dst_name), kind, old, st, shown),
        }
        let now = meta::Now {
            perm: st.perm() & 0o777 & !self.sh.umask,
            owner: self.new_owner(dir, || sys::stat_at(dir.dst.as_fd(), dst_name, false)),
        };
        let target = Target::At(dir.dst.as_fd(), dst_name);
        let w = meta::apply(
            target,
            (None, st),
            meta::Before::Nothing,
            now,
            &self.sh.opts.preserve,
            self.sh.umask,
        );
        if !w.is_empty() {
            self.warnings(&join_name(&dir.dst_path, dst_name), w);
        }
        true
    }
}

impl Worker<'_, '_, '_> {
    /// Reports (with `report_changes`) that `name` in `dir` was created, or
    /// replaced `old`, as a copy of `new` (named `src_name` in the source).
    pub(crate) fn changed(
        &self,
        dir: &DirNode,
        (src_name, name): (&Name, &Name),
        kind: EntryKind,
        old: Option<Stat>,
        new: &Stat,
        target: Option<&Path>,
    ) {
        if !self.sh.opts.report_changes {
            return;
        }
        let change = match old {
            None => ChangeKind::Created,
            Some(d) => {
                let file = kind == EntryKind::File;
                ChangeKind::replaced(&d, new, file, &self.sh.opts.preserve)
            }
        };
        self.sh.reporter.change(&Change {
            path: &join_name(&dir.dst_path, name),
            source: Some(&join_name(&dir.src_path, src_name)),
            kind,
            change,
            target,
        });
    }
}

/// Whether the existing destination entry `d` stays in place of a copy of
/// `src`: always with `--no-clobber`; with `--update` unless the source is
/// newer; with `--checksum`, a regular file whose content is the source's
/// (`same` compares them); with `--resume` when it is already a complete
/// copy (`resume_keeps` false for a hard link, which is kept only if it is
/// that link). `staged`: it is inside a staged tree.
pub(crate) fn keeps(
    opts: &CopyOptions,
    d: &Stat,
    src: &Stat,
    staged: bool,
    resume_keeps: bool,
    same: impl FnOnce() -> bool,
) -> bool {
    if opts.skips(d, src) {
        return true;
    }
    if opts.checksum && resume_keeps && src.kind() == FileKind::File {
        return d.kind() == FileKind::File && d.size == src.size && same();
    }
    opts.resume && resume_keeps && complete(opts, d, src, staged)
}

/// Whether a destination entry is a finished copy of `src`. Outside a
/// staged tree, files are renamed to their final names only when whole,
/// so what was in flight is a leftover temporary. Inside one, files are
/// written in place with their times set last: a file cut short keeps
/// the time of its last write, not the source's. So a regular file must
/// match in size and modification time; when times are not kept, files
/// in a resumed staged tree are copied again.
fn complete(opts: &CopyOptions, d: &Stat, src: &Stat, staged: bool) -> bool {
    match src.kind() {
        FileKind::File => {
            d.kind() == FileKind::File
                && d.size == src.size
                && if opts.preserve.times {
                    d.mtime == src.mtime
                } else {
                    !staged
                }
        }
        k => d.kind() == k,
    }
}
