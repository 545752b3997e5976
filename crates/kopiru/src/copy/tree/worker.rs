//! The scheduler: worker threads serving the shared LIFO queue, listing
//! directories, sharing large ones, and applying a directory's metadata when
//! its last entry is done.

use super::ahead::Ahead;
use super::node::{DirNode, Item, Shard, Task};
use super::{Shared, SHARE_ABOVE};
use crate::copy::data::PairCaps;
use crate::copy::meta::{self, Target};
use crate::error::{Error, Op, Refusal, Side};
use crate::options::Follow;
use crate::paths::join_name;
use crate::sys::{self, AsFd, FileKind, Name, Stat};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A directory with more subdirectories than this queues them as tasks of
/// their own ([`Worker::defer_subdirectories`]).
const DEFER_SUBDIRECTORIES_ABOVE: usize = 32;

pub(crate) struct Worker<'scope, 'env, 'a> {
    pub(crate) sh: &'env Shared<'a>,
    /// Where more workers are started, when there is work for them.
    pub(crate) scope: &'scope std::thread::Scope<'scope, 'env>,
    /// The stream buffer, allocated on first use and reused for every file.
    pub(crate) buf: Vec<u8>,
    /// The last device pair's capabilities, to skip the shared map.
    pub(crate) caps: Option<((u64, u64), Arc<PairCaps>)>,
}

impl<'scope, 'env, 'a> Worker<'scope, 'env, 'a> {
    pub(crate) fn new(
        sh: &'env Shared<'a>,
        scope: &'scope std::thread::Scope<'scope, 'env>,
    ) -> Self {
        Worker {
            sh,
            scope,
            buf: Vec::new(),
            caps: None,
        }
    }

    pub(crate) fn serve(mut self) {
        loop {
            if self.surplus() {
                return;
            }
            let task = {
                let mut q = self.sh.queue.lock().expect("queue lock");
                loop {
                    if let Some(t) = q.pop_back() {
                        break t;
                    }
                    if self.sh.outstanding.load(Ordering::SeqCst) == 0 {
                        return;
                    }
                    self.sh.idle.fetch_add(1, Ordering::Relaxed);
                    q = self.sh.wake.wait(q).expect("queue lock");
                    self.sh.idle.fetch_sub(1, Ordering::Relaxed);
                }
            };
            match task {
                Task::List(dir) => self.list(dir),
                Task::Items(dir, items) => {
                    for item in &items {
                        self.item(&dir, item);
                    }
                    self.release(dir);
                }
                Task::Share(shard) => self.work_shard(&shard, false),
            }
            // Under the lock, so a worker about to wait cannot miss the end.
            let _q = self.sh.queue.lock().expect("queue lock");
            if self.sh.outstanding.fetch_sub(1, Ordering::SeqCst) == 1 {
                self.sh.wake.notify_all();
            }
        }
    }

    /// This worker is one more than the count now allowed (lowered on a
    /// share where more did not pay, tree/latency.rs), and leaves, between
    /// tasks. One always stays: the count is never below one.
    fn surplus(&self) -> bool {
        let sh = self.sh;
        let max = sh.latency.max_workers();
        sh.started.load(Ordering::Relaxed) > max
            && sh
                .started
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                    (n > max).then_some(n - 1)
                })
                .is_ok()
    }

    /// Workers not waiting for work.
    fn busy(&self) -> usize {
        let sh = self.sh;
        let started = sh.started.load(Ordering::Relaxed);
        started.saturating_sub(sh.idle.load(Ordering::Relaxed))
    }

    /// Queues a task. Workers past the first are started only once there
    /// is work waiting for them: a shared directory, or a second queued
    /// task. A copy of one file or a few needs no thread (starting one cost
    /// ~0.4 ms, a fifth of cloning one file on Btrfs).
    pub(crate) fn push(&self, task: Task) {
        let sh = self.sh;
        let share = matches!(task, Task::Share(_));
        let waiting = sh.push(task);
        if (share || waiting >= 2)
            && sh.started.load(Ordering::Relaxed) < sh.latency.max_workers()
            && sh
                .started
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                    (n < sh.latency.max_workers()).then_some(n + 1)
                })
                .is_ok()
        {
            sh.most_started
                .fetch_max(sh.started.load(Ordering::Relaxed), Ordering::Relaxed);
            let scope = self.scope;
            scope.spawn(move || Worker::new(sh, scope).serve());
        }
    }

    pub(crate) fn list(&mut self, dir: Arc<DirNode>) {
        if self.sh.opts.cancel.is_cancelled() {
            return self.release(dir);
        }
        if !dir.fresh {
            *dir.partials.lock().expect("partials lock") =
                self.sh.place.clean_temps(&dir.dst, &dir.dst_path, self.sh);
        }
        match sys::read_dir(dir.src.as_fd()) {
            Err(e) => self
                .sh
                .error(Error::dst(&dir.src_path, Op::ReadDirectory, &e)),
            Ok(mut entries) => {
                // Subdirectories first, so other workers get work as early
                // as possible, in the order listed; then files in inode
                // order, which reads the source in on-disk order (gnulib
                // fts). Not subdirectories by inode: XFS and ext4 number
                // inodes by allocation group, so workers taking neighbours
                // would copy in one group and queue on its locks (XFS:
                // ~1,800 context switches in the AGF lock on n16384, 50
                // in listed order).
                entries.sort_by_key(|e| match e.kind == Some(FileKind::Dir) {
                    true => (false, 0),
                    false => (true, e.ino),
                });
                let follow = self.sh.opts.follow == Follow::Always;
                if !self.sh.opts.filter.is_empty() {
                    entries.retain(|e| !self.excluded(&dir, e, follow));
                }
                let mut items: Vec<Item> = entries
                    .into_iter()
                    .map(|e| Item {
                        name: e.name,
                        dst_name: None,
                        kind: e.kind,
                        follow,
                        shallow: false,
                        // --copy-contents: FIFOs and devices read for data.
                        read_data: self.sh.opts.copy_contents,
                        write_into: false,
                    })
                    .collect();
                self.defer_subdirectories(&dir, &mut items);
                if items.len() > self.sh.latency.share_above() {
                    dir.pending.fetch_add(1, Ordering::SeqCst);
                    let left = AtomicUsize::new(items.len());
                    let is_file = |i: &Item| i.kind == Some(FileKind::File);
                    // Every name in a staged directory this run made is
                    // new, so its files can be created ahead of their
                    // copies, on the filesystems where that pays (macOS
                    // clones and Windows' CopyFile2 create the file
                    // themselves; a basis file is linked, or cloned,
                    // before anything is created).
                    let (items, ahead) = if dir.staged
                        && dir.fresh
                        && !sys::CLONE_CREATES_FILE
                        && !crate::copy::data::copy_creating_applies(self.sh.opts)
                        && dir.basis.is_none()
                        && items.iter().filter(|i| is_file(i)).count() > SHARE_ABOVE
                        && Ahead::pays_on(dir.dst.as_fd())
                    {
                        let (files, other) = items.into_iter().partition(is_file);
                        (other, Some(Ahead::new(files)))
                    } else {
                        (items, None)
                    };
                    let shard = Arc::new(Shard {
                        dir: dir.clone(),
                        left,
                        items,
                        next: AtomicUsize::new(0),
                        ahead,
                    });
                    // One helper; with round trips, a few more: creating a
                    // name takes the directory's lock on the client (the
                    // VFS's), so more than a few workers in one directory
                    // only queue there; the others serve other directories.
                    let helpers = match (&shard.ahead, self.sh.latency.round_trips()) {
                        (None, true) => (shard.items.len() / self.sh.latency.slice())
                            .clamp(1, super::ROUND_TRIP_HELPERS),
                        _ => 1,
                    };
                    for _ in 0..helpers {
                        self.push(Task::Share(shard.clone()));
                    }
                    self.work_shard(&shard, true);
                } else {
                    for item in &items {
                        self.item(&dir, item);
                    }
                }
            }
        }
        self.release(dir);
    }

    /// Many subdirectories of one directory go on the queue as tasks of
    /// their own, each made and opened when taken: handled in the listing,
    /// each would hold two descriptors until it is done, and a directory
    /// of thousands of subdirectories ran out of them (EMFILE). Listed
    /// first (see `list`), they are a prefix of `items`.
    fn defer_subdirectories(&self, dir: &Arc<DirNode>, items: &mut Vec<Item>) {
        let dirs = items
            .iter()
            .take_while(|i| i.kind == Some(FileKind::Dir))
            .count();
        if dirs <= DEFER_SUBDIRECTORIES_ABOVE {
            return;
        }
        for item in items.drain(..dirs).rev() {
            dir.pending.fetch_add(1, Ordering::SeqCst);
            self.push(Task::Items(dir.clone(), vec![item]));
        }
    }

    /// Whether `--exclude`/`--include` leave the listed entry `e` of `dir`
    /// out. Its kind is looked up (one stat) only when the listing did not
    /// give it and a directory-only pattern matches its path.
    fn excluded(&self, dir: &DirNode, e: &sys::DirEntry, follow: bool) -> bool {
        let rel = dir.rel.join(sys::os_str(&e.name));
        let is_dir = || {
            match e.kind {
                Some(FileKind::Symlink) if follow => None,
                k => k,
            }
            .or_else(|| {
                sys::stat_at(dir.src.as_fd(), &e.name, follow)
                    .ok()
                    .map(|st| st.kind())
            }) == Some(FileKind::Dir)
        };
        self.sh.opts.filter.excludes(&rel, is_dir)
    }

    /// Copies slices of a shared directory until none is left; whoever
    /// finishes the last entry releases the directory. `lister`: the
    /// worker that listed it, which is the one that creates files ahead.
    pub(crate) fn work_shard(&mut self, shard: &Shard, lister: bool) {
        let len = shard.items.len();
        loop {
            let slice = self.sh.latency.slice();
            let start = shard.next.fetch_add(slice, Ordering::Relaxed);
            if start >= len {
                break;
            }
            let end = (start + slice).min(len);
            for item in &shard.items[start..end] {
                self.item(&shard.dir, item);
            }
            self.shard_done(shard, end - start);
        }
        match &shard.ahead {
            Some(a) if lister => self.create_ahead(shard, a),
            Some(a) => self.help_ahead(shard, a),
            None => {}
        }
    }

    pub(crate) fn shard_done(&mut self, shard: &Shard, n: usize) {
        if shard.left.fetch_sub(n, Ordering::AcqRel) == n {
            self.release(shard.dir.clone());
        }
    }

    /// Marks one piece of `dir` done; the last one applies the directory's
    /// metadata and passes the completion up to its parent.
    pub(crate) fn release(&mut self, dir: Arc<DirNode>) {
        let mut cur = dir;
        loop {
            if cur.pending.fetch_sub(1, Ordering::AcqRel) != 1 {
                return;
            }
            // A cancelled run leaves a directory as it was made (writable
            // by us), so that --resume can finish filling it; its final
            // mode and times come when that run completes it.
            let cancelled = self.sh.opts.cancel.is_cancelled();
            if !cancelled {
                let left = std::mem::take(&mut *cur.partials.lock().expect("partials lock"));
                self.sh.place.drop_partials(&cur.dest(), left, self.sh);
            }
            if let (Some(st), false) = (&cur.stat, cancelled) {
                let opts = self.sh.opts;
                let owner_now = match (&cur.parent, cur.fresh) {
                    (Some(p), true) => p.new_owner.get().copied().flatten(),
                    _ => None,
                };
                // A directory merged into keeps its own mode (cp's rule).
                let before = match cur.fresh {
                    true => meta::Before::Nothing,
                    false => meta::Before::Same,
                };
                // Made in a directory with a default ACL: its bits are
                // that ACL's, and a kept mode is set whatever they are.
                let unknown = cur.fresh
                    && opts.preserve.mode
                    && cur.parent.as_ref().is_some_and(|p| p.inherits_acl());
                let now = meta::Now {
                    perm: match unknown {
                        true => u32::MAX,
                        false => cur.created_perm,
                    },
                    owner: owner_now,
                };
                let w = meta::apply(
                    Target::Fd(cur.dst.as_fd()),
                    (Some(cur.src.as_fd()), st),
                    before,
                    now,
                    &opts.preserve,
                    self.sh.umask,
                );
                self.warnings(&cur.dst_path, w);
            }
            let complete = cur.stat.is_some() && !cancelled;
            self.sh.place.dir_done(&cur, complete, self.sh);
            match cur.parent.clone() {
                Some(p) => cur = p,
                None => return,
            }
        }
    }

    /// With `-a`, the owner a new entry in `dir` already has: stat the
    /// first one (`first`), then the same for every other.
    pub(crate) fn new_owner(
        &self,
        dir: &DirNode,
        first: impl FnOnce() -> io::Result<Stat>,
    ) -> Option<(u32, u32)> {
        if !self.sh.opts.preserve.owner {
            return None;
        }
        *dir.new_owner
            .get_or_init(|| first().ok().map(|st| (st.uid, st.gid)))
    }

    pub(crate) fn warnings(&self, path: &Path, warnings: Vec<meta::Warning>) {
        for (op, e) in warnings {
            self.sh.warn(Error::dst(path, op, &e));
        }
    }

    pub(crate) fn item(&mut self, dir: &Arc<DirNode>, item: &Item) {
        if self.sh.opts.cancel.is_cancelled() {
            return;
        }
        let dst_name = item.dst_name.as_deref().unwrap_or(&item.name);
        let kind = match item.kind {
            Some(FileKind::Symlink) if item.follow => None,
            k => k,
        };
        let kind = match kind {
            Some(k) => k,
            None => match sys::stat_at(dir.src.as_fd(), &item.name, item.follow) {
                Ok(st) => st.kind(),
                Err(e) => return self.src_error(dir, &item.name, Op::Stat, &e),
            },
        };
        match kind {
            FileKind::File => self.file(dir, item, dst_name),
            FileKind::Dir => self.dir(dir, item, dst_name),
            FileKind::Symlink => self.symlink(dir, &item.name, dst_name),
            FileKind::Fifo | FileKind::CharDevice | FileKind::BlockDevice | FileKind::Socket
                if item.read_data =>
            {
                self.file(dir, item, dst_name)
            }
            _ => self.special(dir, &item.name, dst_name, item.follow),
        }
        self.sh.latency.entry_finished(|| self.busy());
    }

    pub(crate) fn src_error(&self, dir: &DirNode, name: &Name, op: Op, e: &io::Error) {
        self.sh
            .error(Error::src(join_name(&dir.src_path, name), op, e));
    }

    pub(crate) fn dst_error(&self, dir: &DirNode, name: &Name, op: Op, e: &io::Error) {
        self.sh
            .error(Error::dst(join_name(&dir.dst_path, name), op, e));
    }

    pub(crate) fn dst_refusal(&self, dir: &DirNode, name: &Name, why: Refusal) {
        let path = join_name(&dir.dst_path, name);
        self.sh
            .error(Error::refused(Side::Destination, path, Op::Copy, why));
    }

    pub(crate) fn pair_caps(&mut self, src_dev: u64, dst_dev: u64) -> Arc<PairCaps> {
        match &self.caps {
            Some((key, caps)) if *key == (src_dev, dst_dev) => caps.clone(),
            _ => {
                let caps = self.sh.caps.get(src_dev, dst_dev);
                self.caps = Some(((src_dev, dst_dev), caps.clone()));
                caps
            }
        }
    }
}
