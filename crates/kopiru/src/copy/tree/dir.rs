//! One directory entry: made (or merged into), staged when it is a new
//! top-level tree, then queued to be listed. Also the macOS whole-tree
//! clone, used when nothing in a tree needs per-file treatment.

use super::node::{is_ancestor, DirNode, Item, Task};
use super::worker::Worker;
use crate::copy::place::StagedTree;
use crate::error::{Error, Op, Refusal, Side};
use crate::events::{EntryKind, Method};
use crate::options::Follow;
use crate::paths::join;
use crate::paths::join_name;
use crate::sys::{self, AsFd, Fd, FileKind, Name, NameBuf, Stat};
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl<'scope, 'env, 'a> Worker<'scope, 'env, 'a> {
    pub(crate) fn dir(&mut self, parent: &Arc<DirNode>, item: &Item, dst_name: &Name) {
        let (name, follow) = (item.name.as_c_str(), item.follow);
        let Some((src, st)) = self.open_and_stat(parent, name, true, follow) else {
            return;
        };
        if self.refused_dir(parent, name, &st) {
            return;
        }
        let place = &self.sh.place;
        let staged_tmp = match parent.stages {
            true => match place.stage((parent.dst.as_fd(), &parent.dst_path), dst_name, self.sh) {
                Ok(tmp) => tmp,
                Err(()) => return,
            },
            false => None,
        };
        // What the directory is made as: its final name, or the staged one.
        let target = staged_tmp.as_deref().unwrap_or(dst_name);
        // Proof of which source this is, for the record of copies.
        let source = match (&staged_tmp, &self.sh.opts.copies_record) {
            (Some(_), Some(_)) => sys::identity(src.as_fd()).ok(),
            _ => None,
        };
        if sys::CLONES_TREES
            && self.whole_clone_allowed()
            && self.clone_whole_dir(parent, &src, name, target)
        {
            if let Some(tmp) = staged_tmp {
                self.stage_tree(parent, (tmp, name, dst_name), source, None);
            }
            return;
        }
        let Some(mut made) = self.make_dir(parent, &st, target, dst_name) else {
            // Nothing below it is copied: counted, so that the summary
            // accounts for every entry.
            let c = &self.sh.counters;
            c.dirs_not_made.fetch_add(1, Ordering::Relaxed);
            c.not_copied.fetch_add(count_below(&src), Ordering::Relaxed);
            return;
        };
        // Another rank of a sharded copy made this listed directory in the
        // run's fresh staged tree (as a parent of its entries): made by this
        // run all the same.
        made.fresh |= item.shallow && parent.fresh && parent.staged;
        if made.fresh {
            self.changed(parent, (name, dst_name), EntryKind::Dir, None, &st, None);
        }
        let dst_path = join_name(&parent.dst_path, dst_name);
        let lock = match &staged_tmp {
            Some(tmp) => {
                let at = (parent.dst.as_fd(), tmp.as_c_str());
                match self.sh.place.lock_staged(at, &made.dst, &dst_path, self.sh) {
                    Some(fd) => Some(fd),
                    None => return,
                }
            }
            None => None,
        };
        if made.dst_dev != parent.dst_dev {
            let place = &self.sh.place;
            place.add_filesystem(made.dst_dev, &made.dst, &dst_path, self.sh);
        }
        let fresh = made.fresh;
        let staged = parent.staged || staged_tmp.is_some();
        let (node, enter) = self.dir_node(parent, item, (src, st), made, dst_path, staged);
        if let Some(tmp) = staged_tmp {
            self.stage_tree(parent, (tmp, name, dst_name), source, lock);
        }
        parent.pending.fetch_add(1, Ordering::SeqCst);
        self.sh.counters.dirs.fetch_add(1, Ordering::Relaxed);
        if !fresh {
            self.sh.counters.dirs_merged.fetch_add(1, Ordering::Relaxed);
        }
        match enter {
            true => self.push(Task::List(node)),
            false => self.release(node),
        }
    }

    /// Whether the source directory `st` (`name` in `parent`) is refused,
    /// reported: following a symlink to it would loop, or it is one of the
    /// destination's top directories (a copy into itself through a path
    /// the planner could not see, such as a bind mount).
    fn refused_dir(&self, parent: &DirNode, name: &Name, st: &Stat) -> bool {
        if self.sh.opts.follow != Follow::Never && is_ancestor(parent, st) {
            let e = sys::loop_error();
            self.src_error(parent, name, Op::Follow, &e);
            return true;
        }
        let roots = self.sh.dst_roots.lock().expect("roots lock");
        if !roots.contains(&(st.dev, st.ino)) {
            return false;
        }
        drop(roots);
        let path = join_name(&parent.src_path, name);
        let why = Refusal::IntoItself { dest: None };
        self.sh
            .error(Error::refused(Side::Source, path, Op::Copy, why));
        true
    }

    /// Hands the staged tree `tmp` (to become `dst_name` in `parent`) to
    /// placement, to be put in place at the end.
    fn stage_tree(
        &self,
        parent: &DirNode,
        (tmp, src_name, dst_name): (NameBuf, &Name, &Name),
        source: Option<Vec<u8>>,
        lock: Option<Fd>,
    ) {
        match parent.dst.try_clone() {
            Ok(fd) => self.sh.place.stage_tree(StagedTree {
                parent: fd,
                parent_path: parent.dst_path.clone(),
                dev: parent.dst_dev,
                tmp,
                name: dst_name.to_owned(),
                source,
                _lock: lock,
                src_path: Some(join_name(&parent.src_path, src_name)),
                merge: false,
            }),
            Err(e) => self.dst_error(parent, dst_name, Op::Open, &e),
        }
    }

    /// The copy's node for the directory `made` from `src` (`item` in
    /// `parent`), and whether it is entered: under `-x` a directory on
    /// another filesystem is made, not entered; so is a directory listed by
    /// itself, whose metadata the caller applies.
    fn dir_node(
        &self,
        parent: &Arc<DirNode>,
        item: &Item,
        (src, st): (Fd, Stat),
        made: MadeDir,
        dst_path: std::path::PathBuf,
        staged: bool,
    ) -> (Arc<DirNode>, bool) {
        let name = sys::os_str(&item.name);
        let dst_name = item.dst_name.as_deref().unwrap_or(&item.name);
        let src_path = join(&parent.src_path, name);
        let mut node = DirNode::new(
            src,
            made.dst,
            src_path,
            dst_path,
            made.dst_dev,
            Some(parent.clone()),
        );
        node.root_dev = st.dev;
        node.basis = parent
            .basis_of(dst_name)
            .and_then(|(b, n)| sys::open_dir(b.as_fd(), n).ok());
        if !parent.stages {
            node.rel = parent.rel.join(name);
            node.root_dev = parent.root_dev;
        }
        let enter = !item.shallow && (!self.sh.opts.one_file_system || st.dev == node.root_dev);
        node.stat = (!item.shallow).then_some(st);
        if item.shallow {
            let dirs = &self.sh.shallow_dirs;
            dirs.lock().expect("dirs lock").push(node.rel.clone());
        }
        node.created_perm = made.created_perm;
        node.staged = staged;
        node.fresh = made.fresh;
        (Arc::new(node), enter)
    }

    /// Makes the destination directory `target` in `parent` (or finds it
    /// there, to merge into) and opens it. `None`: failed, reported.
    fn make_dir(
        &self,
        parent: &DirNode,
        st: &Stat,
        target: &Name,
        dst_name: &Name,
    ) -> Option<MadeDir> {
        let top_level = parent.stages;
        let umask = self.sh.umask;
        // Made with its final permission bits when they let us fill it, so no
        // chmod is needed at the end; otherwise owner-only until it is full.
        // (Special bits come last: a setgid directory would pass its group to
        // what is created in it.)
        // Owner-only, too, while an owner other than ours is to come: the
        // wrong group must not read it meanwhile (cp's rule).
        let perm = st.perm() & 0o777;
        let owner_changes = self.sh.opts.preserve.owner && st.uid != self.sh.euid;
        let mkdir_mode = match perm & 0o300 == 0o300 && !owner_changes {
            true => perm,
            false => 0o700,
        };
        let mut fresh = true;
        let created_perm = match sys::mkdir_at(parent.dst.as_fd(), target, mkdir_mode) {
            Ok(()) => mkdir_mode & !umask,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                fresh = false;
                match sys::stat_at(parent.dst.as_fd(), target, false) {
                    Ok(d) if d.kind() == FileKind::Dir => d.perm(),
                    Ok(_) => {
                        let why = Refusal::DirOverNonDir { source: None };
                        self.dst_refusal(parent, dst_name, why);
                        return None;
                    }
                    Err(e) => {
                        self.dst_error(parent, dst_name, Op::Stat, &e);
                        return None;
                    }
                }
            }
            Err(e) => {
                self.dst_error(parent, dst_name, Op::Mkdir, &e);
                return None;
            }
        };
        if fresh {
            if let Err(e) = self.sh.place.sync_dir(parent.dst.as_fd()) {
                self.dst_error(parent, dst_name, Op::Sync, &e);
                return None;
            }
        }
        let dst = match sys::open_dir(parent.dst.as_fd(), target) {
            Ok(fd) => fd,
            Err(e) => {
                self.dst_error(parent, dst_name, Op::Open, &e);
                return None;
            }
        };
        // A directory we made is on its parent's filesystem; one that was
        // there may be a mount point.
        let dst_dev = match !fresh || top_level {
            false => parent.dst_dev,
            true => match sys::fstat(dst.as_fd()) {
                Ok(d) => {
                    if top_level {
                        self.sh
                            .dst_roots
                            .lock()
                            .expect("roots lock")
                            .push((d.dev, d.ino));
                    }
                    d.dev
                }
                Err(e) => {
                    self.dst_error(parent, dst_name, Op::Stat, &e);
                    return None;
                }
            },
        };
        Some(MadeDir {
            dst,
            created_perm,
            fresh,
            dst_dev,
        })
    }

    /// Whether the options allow a whole directory to be one clone (macOS):
    /// clonefile keeps mode, times, xattrs and ACLs, and the owner only when
    /// we are privileged.
    pub(crate) fn whole_clone_allowed(&self) -> bool {
        use crate::options::{MethodChoice, SparseMode};
        let o = self.sh.opts;
        matches!(o.method, MethodChoice::Auto | MethodChoice::Clone)
            && o.sparse != SparseMode::Never
            && o.follow == Follow::Never
            && o.filter.is_empty()
            && !o.one_file_system
            && !o.report_changes
            && (!o.preserve.owner || sys::euid() == 0)
    }

    /// Clones the directory `name` whole, in one call, if nothing in it
    /// needs per-file treatment (a read-only pre-walk, which also counts what
    /// it holds). False means "copy it entry by entry".
    pub(crate) fn clone_whole_dir(
        &self,
        parent: &DirNode,
        src: &Fd,
        name: &Name,
        dst_name: &Name,
    ) -> bool {
        let mut tally = Tally::default();
        if !plain_tree(src, self.sh.opts.preserve.links, &mut tally).unwrap_or(false) {
            return false;
        }
        if sys::clone_tree(parent.src.as_fd(), name, parent.dst.as_fd(), dst_name).is_err() {
            return false; // exists already (merge), or another volume: per file
        }
        let c = &self.sh.counters;
        c.dirs.fetch_add(tally.dirs + 1, Ordering::Relaxed);
        c.files.fetch_add(tally.files, Ordering::Relaxed);
        c.bytes.fetch_add(tally.bytes, Ordering::Relaxed);
        c.symlinks.fetch_add(tally.symlinks, Ordering::Relaxed);
        c.specials.fetch_add(tally.specials, Ordering::Relaxed);
        c.methods[Method::Clone as usize].fetch_add(tally.files, Ordering::Relaxed);
        self.sh.reporter.bytes(tally.bytes);
        true
    }
}

/// How many entries the directory `root` holds at every depth (those
/// that can be listed).
fn count_below(root: &Fd) -> u64 {
    let mut n = 0;
    let mut stack = match sys::open_dir(root.as_fd(), sys::DOT) {
        Ok(fd) => vec![fd],
        Err(_) => return 0,
    };
    while let Some(dir) = stack.pop() {
        let Ok(entries) = sys::read_dir(dir.as_fd()) else {
            continue;
        };
        for e in entries {
            n += 1;
            let is_dir = match e.kind {
                Some(k) => k == FileKind::Dir,
                None => sys::stat_at(dir.as_fd(), &e.name, false)
                    .is_ok_and(|st| st.kind() == FileKind::Dir),
            };
            if is_dir {
                if let Ok(fd) = sys::open_dir(dir.as_fd(), &e.name) {
                    stack.push(fd);
                }
            }
        }
    }
    n
}

/// What a tree holds, counted by [`plain_tree`].
#[derive(Default)]
struct Tally {
    files: u64,
    bytes: u64,
    dirs: u64,
    symlinks: u64,
    specials: u64,
}

/// Whether a tree can be cloned whole: no regular file with setuid/setgid
/// bits (clonefile clears them) and, when hard links are kept, none with
/// several links. Walks with an explicit stack of open directories.
fn plain_tree(root: &Fd, links: bool, tally: &mut Tally) -> io::Result<bool> {
    let mut stack = vec![sys::open_dir(root.as_fd(), sys::DOT)?];
    while let Some(dir) = stack.pop() {
        for e in sys::read_dir(dir.as_fd())? {
            let st = sys::stat_at(dir.as_fd(), &e.name, false)?;
            match st.kind() {
                FileKind::File => {
                    if st.perm() & 0o6000 != 0 || (links && st.nlink > 1) {
                        return Ok(false);
                    }
                    tally.files += 1;
                    tally.bytes += st.size;
                }
                FileKind::Dir => {
                    tally.dirs += 1;
                    stack.push(sys::open_dir(dir.as_fd(), &e.name)?);
                }
                FileKind::Symlink => tally.symlinks += 1,
                _ => tally.specials += 1,
            }
        }
    }
    Ok(true)
}

/// A destination directory made or found by [`Worker::make_dir`].
struct MadeDir {
    dst: Fd,
    /// Permission bits it was created with (or has, if it was there).
    created_perm: u32,
    /// Made by this run.
    fresh: bool,
    dst_dev: u64,
}
