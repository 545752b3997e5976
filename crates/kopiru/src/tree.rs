//! The parallel copy: every command-line source and every directory becomes a
//! task on one shared LIFO queue served by worker threads (LIFO keeps the walk
//! depth-first, so few directories are open at once). Directories are read
//! once, with large getdents64 buffers, and entries are opened relative to
//! their directory's descriptor; a large directory is split into chunks so all
//! workers share it, and a large new one is copied as a pipeline ([`Ahead`]:
//! one worker creates, the others open and finish). A directory's metadata is
//! applied when its last entry is done (post-order), counted by `pending`.

use crate::data::{self, Caps, PairCaps};
use crate::error::{Error, Op, Refusal, Side};
use crate::events::{FileDone, Method, Reporter, Summary};
use crate::meta::{self, Target};
use crate::options::{CopyOptions, Follow, SyncMode};
use crate::plan::Job;
use crate::sys::{self, Fd, FileKind, Stat};
use crate::verify::{SourceHash, SourceHashes};
use std::collections::{HashMap, VecDeque};
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

/// A directory with more entries than this is shared: its lister works
/// through it, and idle workers join in.
const SHARE_ABOVE: usize = 128;
/// Entries claimed at a time from a shared directory.
const SLICE: usize = 32;
/// How often `--sync end` flushes while copying (50 ms measured best of 10,
/// 25, 50 and 100 on ext4 and XFS; see docs/BENCHMARKS.md).
const FLUSH_EVERY: std::time::Duration = std::time::Duration::from_millis(50);
/// Every temporary name kopiru makes starts with this, so leftovers are
/// recognisable (and removed by `--resume`).
pub const TMP_PREFIX: &str = ".kopiru-tmp.";

/// A directory being copied: both descriptors stay open until its last entry
/// is done and its metadata is applied.
struct DirNode {
    src: Fd,
    dst: Fd,
    src_path: PathBuf,
    dst_path: PathBuf,
    dst_dev: u64,
    /// The source directory's stat; `None` for the parent directory of a
    /// command-line source, whose metadata is not ours to change.
    stat: Option<Stat>,
    /// Permission bits the destination directory was created with.
    created_perm: u32,
    /// Tasks and subdirectories not finished yet, plus one for the listing.
    pending: AtomicUsize,
    parent: Option<Arc<DirNode>>,
    /// Inside a tree that is built under a temporary name and renamed into
    /// place at the end: nothing in it is visible under its final path yet.
    staged: bool,
    /// Made by this run, so it holds only what this run put there.
    fresh: bool,
    /// Renames (temporary → final name) of files in a visible directory that
    /// wait until their data is durable (`--sync end`).
    deferred: Mutex<Vec<(CString, CString)>>,
    /// With `-a`: the owner every entry this run creates here gets (our
    /// fsuid; our group, or the directory's if it is setgid or mounted
    /// `grpid`), learned from the first one, so a chown to that same owner
    /// is skipped (coreutils skips it too, with an fstat per file).
    new_owner: OnceLock<Option<(u32, u32)>>,
}

impl DirNode {
    fn new(
        src: Fd,
        dst: Fd,
        src_path: PathBuf,
        dst_path: PathBuf,
        dst_dev: u64,
        parent: Option<Arc<DirNode>>,
    ) -> DirNode {
        DirNode {
            src,
            dst,
            src_path,
            dst_path,
            dst_dev,
            stat: None,
            created_perm: 0,
            pending: AtomicUsize::new(1),
            parent,
            staged: false,
            fresh: false,
            deferred: Mutex::new(Vec::new()),
            new_owner: OnceLock::new(),
        }
    }
}

/// A top-level directory built under a temporary name beside its
/// destination, renamed into place once it is complete (and durable).
struct StagedTree {
    /// The destination's parent.
    parent: Arc<DirNode>,
    tmp: CString,
    name: CString,
}

/// What is already at a destination name.
enum Existing {
    Absent,
    /// Complete (`--resume`) or not to be touched (`--no-clobber`).
    Keep,
    /// Refused, already reported.
    Refused,
    Replace,
}

/// One entry to copy.
struct Item {
    name: CString,
    /// A different destination name (command-line sources only).
    dst_name: Option<CString>,
    kind: Option<FileKind>,
    /// Follow this entry if it is a symlink.
    follow: bool,
}

enum Task {
    List(Arc<DirNode>),
    Items(Arc<DirNode>, Vec<Item>),
    /// A large directory's entries, claimed a slice at a time by whoever has
    /// nothing better to do (queued at the low-priority end).
    Share(Arc<Shard>),
}

/// The entries of a large directory, shared between its lister and idle
/// workers. Workers in different directories do not contend for a
/// directory's lock; sharing one is only worth it when there is nothing else.
struct Shard {
    dir: Arc<DirNode>,
    items: Vec<Item>,
    next: AtomicUsize,
    left: AtomicUsize,
    /// Set when the directory's files are copied through [`Ahead`]; `items`
    /// then holds its other entries.
    ahead: Option<Ahead>,
}

/// A large directory this run made, whose regular files are copied as a
/// pipeline: its lister only creates the new files, in order, and helpers
/// open the sources ahead of it and finish the files behind it (data,
/// metadata, close). Creating is the one step that takes the destination
/// directory's lock exclusively, so one creator never contends for it,
/// where workers each copying whole files queued on it (XFS flat100k:
/// 21% of samples spinning on that lock). Alone, the lister does all three
/// steps itself, a slice at a time.
struct Ahead {
    files: Vec<Item>,
    /// Per slice of [`SLICE`] files: the opened sources and created
    /// destinations, from opening until finished.
    slices: Vec<Mutex<Vec<Opened>>>,
    opened: Vec<AtomicBool>,
    /// Next slice to open, slices created so far, next slice to finish.
    next_open: AtomicUsize,
    created: AtomicUsize,
    next_finish: AtomicUsize,
    /// Helpers that have joined; until one does, the lister copies each
    /// file whole.
    helpers: AtomicUsize,
    /// Workers blocked on someone else's step, and where they wait.
    waiting: AtomicUsize,
    lock: Mutex<()>,
    progress: Condvar,
}

/// One file of an [`Ahead`] slice, its source open.
struct Opened {
    index: usize,
    src: Fd,
    st: Stat,
    /// The new file, once created; never created for a file that may turn
    /// out to be a hard link (it takes the usual way).
    created: Option<io::Result<Fd>>,
}

/// How long a worker waiting on an [`Ahead`] step spins before sleeping.
const SPIN_FOR: std::time::Duration = std::time::Duration::from_millis(2);
/// Slices an [`Ahead`] helper opens beyond the last created one.
const OPEN_AHEAD: usize = 2;
/// Created slices the lister lets wait for a helper before finishing one
/// itself.
const FINISH_LAG: usize = 2;

impl Ahead {
    fn new(files: Vec<Item>) -> Ahead {
        let n = files.len().div_ceil(SLICE);
        Ahead {
            files,
            slices: (0..n).map(|_| Mutex::new(Vec::new())).collect(),
            opened: (0..n).map(|_| AtomicBool::new(false)).collect(),
            next_open: AtomicUsize::new(0),
            created: AtomicUsize::new(0),
            next_finish: AtomicUsize::new(0),
            helpers: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            lock: Mutex::new(()),
            progress: Condvar::new(),
        }
    }

    fn range(&self, slice: usize) -> std::ops::Range<usize> {
        slice * SLICE..((slice + 1) * SLICE).min(self.files.len())
    }

    /// Claims slice `k` for `next` if that is where it stands.
    fn claim(next: &AtomicUsize, k: usize) -> bool {
        next.compare_exchange(k, k + 1, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }

    /// Wakes blocked workers after a step; a futex call only if one waits.
    fn advanced(&self) {
        if self.waiting.load(Ordering::SeqCst) > 0 {
            drop(self.lock.lock().expect("ahead lock"));
            self.progress.notify_all();
        }
    }

    /// Blocks until `ready` holds. Spins first (yielding the CPU to
    /// anything else runnable), as a slice takes well under a millisecond
    /// to create: a helper put to sleep was woken onto the lister's CPU
    /// and preempted it (XFS flat100k: the lister off the CPU for 0.9 s of
    /// 2.7 s, 400–700 involuntary switches; 1.6 s spinning).
    fn wait_until(&self, ready: impl Fn() -> bool) {
        let spinning = std::time::Instant::now();
        while spinning.elapsed() < SPIN_FOR {
            for _ in 0..64 {
                std::hint::spin_loop();
            }
            if ready() {
                return;
            }
            std::thread::yield_now();
        }
        let mut g = self.lock.lock().expect("ahead lock");
        self.waiting.fetch_add(1, Ordering::SeqCst);
        while !ready() {
            g = self.progress.wait(g).expect("ahead lock");
        }
        self.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Where the first copy of a multiply-linked inode went.
struct LinkTarget {
    dir: Arc<DirNode>,
    name: CString,
}

type LinkCell = Arc<OnceLock<Option<LinkTarget>>>;

#[derive(Default)]
struct Counters {
    files: AtomicU64,
    bytes: AtomicU64,
    dirs: AtomicU64,
    symlinks: AtomicU64,
    specials: AtomicU64,
    hardlinks: AtomicU64,
    skipped: AtomicU64,
    /// Entries counted above and then removed by a failed final flush.
    withdrawn: AtomicU64,
    methods: [AtomicU64; 4],
}

struct Shared<'a> {
    opts: &'a CopyOptions,
    reporter: &'a dyn Reporter,
    umask: u32,
    /// Cleared after the first EPERM: we do not own the source files.
    noatime: AtomicBool,
    caps: Caps,
    links: Mutex<HashMap<(u64, u64), LinkCell>>,
    /// Popped from the back (LIFO: depth-first); shared directories are
    /// pushed to the front, so they are joined only when nothing else waits.
    queue: Mutex<VecDeque<Task>>,
    wake: Condvar,
    /// Tasks queued or running; the run ends when it reaches zero.
    outstanding: AtomicUsize,
    /// Worker threads started, and how many may be.
    started: AtomicUsize,
    max_workers: usize,
    /// (device, inode) of each top-level destination directory: meeting one
    /// in a source means copying into itself through a path the planner
    /// could not see (a bind mount), so it is refused there.
    dst_roots: Mutex<Vec<(u64, u64)>>,
    counters: Counters,
    errors: Mutex<Vec<Error>>,
    warnings: Mutex<Vec<Error>>,
    tmp_counter: AtomicU64,
    /// Visible directories with deferred renames, kept open for the end.
    finish: Mutex<Vec<Arc<DirNode>>>,
    /// Trees to rename into place at the end.
    staged: Mutex<Vec<StagedTree>>,
    /// `--verify`: the hash of each file's source as it was read, for the
    /// files whose data kopiru read itself.
    source_hashes: Mutex<Vec<SourceHash>>,
    /// One descriptor per destination filesystem, opened before anything is
    /// written there: the flush at the end goes through it, and `syncfs`
    /// reports write-back errors that happened after it was opened.
    filesystems: Mutex<Vec<(u64, Fd, PathBuf)>>,
}

/// Runs every job to completion on the worker threads. Also returns the
/// source hashes taken while copying (`--verify`).
pub(crate) fn run(
    jobs: Vec<Job>,
    opts: &CopyOptions,
    reporter: &dyn Reporter,
    refused: Vec<Error>,
) -> (Summary, SourceHashes) {
    sys::raise_fd_limit();
    let sh = Shared {
        opts,
        reporter,
        umask: sys::umask(),
        noatime: AtomicBool::new(true),
        caps: Caps::default(),
        links: Mutex::new(HashMap::new()),
        queue: Mutex::new(VecDeque::new()),
        wake: Condvar::new(),
        outstanding: AtomicUsize::new(0),
        started: AtomicUsize::new(1),
        max_workers: opts.worker_count(),
        dst_roots: Mutex::new(Vec::new()),
        counters: Counters::default(),
        errors: Mutex::new(Vec::new()),
        warnings: Mutex::new(Vec::new()),
        tmp_counter: AtomicU64::new(0),
        finish: Mutex::new(Vec::new()),
        staged: Mutex::new(Vec::new()),
        source_hashes: Mutex::new(Vec::new()),
        filesystems: Mutex::new(Vec::new()),
    };
    for e in refused {
        sh.error(e);
    }
    // Pushed in reverse so the LIFO queue starts with the first source.
    for job in jobs.into_iter().rev() {
        let dst_dev = match sys::fstat(job.dst_dir.as_fd()) {
            Ok(st) => st.dev,
            Err(e) => {
                sh.error(Error::dst(&job.dst_parent, Op::Stat, &e));
                continue;
            }
        };
        sh.add_filesystem(dst_dev, &job.dst_dir, &job.dst_parent);
        if opts.resume {
            clean_temps(&sh, &job.dst_dir, &job.dst_parent);
        }
        let node = Arc::new(DirNode::new(
            job.src_dir,
            job.dst_dir,
            job.src_parent,
            job.dst_parent,
            dst_dev,
            None,
        ));
        let item = Item {
            name: job.src_name,
            dst_name: Some(job.dst_name),
            kind: None,
            follow: job.follow,
        };
        sh.push(Task::Items(node, vec![item]));
    }
    let copying = (Mutex::new(true), Condvar::new());
    std::thread::scope(|s| {
        if opts.sync == SyncMode::End && sys::FS_SYNC_WRITES_FILES {
            s.spawn(|| sh.flush_while_copying(&copying));
        }
        std::thread::scope(|w| {
            // Several command-line sources are work for several workers at
            // once; otherwise they start as the tree shows work for them.
            let sources = sh.outstanding.load(Ordering::SeqCst);
            let more = sources.min(sh.max_workers).saturating_sub(1);
            sh.started.fetch_add(more, Ordering::SeqCst);
            for _ in 0..more {
                w.spawn(|| Worker::new(&sh, w).serve());
            }
            Worker::new(&sh, w).serve()
        });
        *copying.0.lock().expect("copying lock") = false;
        copying.1.notify_all();
    });
    sh.publish();
    let hashes = std::mem::take(&mut *sh.source_hashes.lock().expect("hashes lock"));
    (sh.into_summary(), SourceHashes::new(hashes))
}

/// `dir/name` for messages, without a leading "./".
pub(crate) fn join(dir: &Path, name: &std::ffi::OsStr) -> PathBuf {
    if dir == Path::new(".") {
        PathBuf::from(name)
    } else {
        dir.join(name)
    }
}

impl Shared<'_> {
    /// Queues a task (a shared directory at the low-priority end) and wakes
    /// a waiting worker; returns how many tasks wait now.
    fn push(&self, task: Task) -> usize {
        let waiting = {
            let mut q = self.queue.lock().expect("queue lock");
            self.outstanding.fetch_add(1, Ordering::SeqCst);
            match task {
                Task::Share(_) => q.push_front(task),
                _ => q.push_back(task),
            }
            q.len()
        };
        self.wake.notify_one();
        waiting
    }

    fn error(&self, e: Error) {
        self.reporter.error(&e);
        self.errors.lock().expect("errors lock").push(e);
    }

    fn warn(&self, e: Error) {
        self.reporter.warning(&e);
        self.warnings.lock().expect("warnings lock").push(e);
    }

    /// `--sync end`: flushes every destination filesystem every
    /// [`FLUSH_EVERY`] while the workers copy, so the device writes while
    /// kopiru copies and the flush at the end finds little left. (Starting
    /// write-back per file with `sync_file_range` measured slower on small
    /// files than no early flush at all.) Uses descriptors of its own: a
    /// `syncfs` error is reported once per open file, and the final flush
    /// must still see it.
    fn flush_while_copying(&self, copying: &(Mutex<bool>, Condvar)) {
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
                    if let Ok(fd) = sys::open_dir(fd.as_fd(), c".") {
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
    fn add_filesystem(&self, dev: u64, fd: &Fd, path: &Path) {
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
    fn publish(&self) {
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
                    failed.insert(*dev, e.raw_os_error().unwrap_or(libc::EIO));
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
                match self.rename_final(dir.dst.as_fd(), &tmp, &name) {
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
            let parent = t.parent.dst.as_fd();
            let path = join(&t.parent.dst_path, sys::os_str(&t.name));
            let dev = t.parent.dst_dev;
            let outcome = match failed.get(&dev) {
                Some(&errno) => Err((Op::Sync, io::Error::from_raw_os_error(errno))),
                None => sys::rename_noreplace(parent, &t.tmp, parent, &t.name)
                    .map_err(|e| (Op::Rename, e)),
            };
            match outcome {
                Ok(()) => {
                    renamed_on.push(dev);
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
    fn rename_final(&self, dir: sys::FdRef, tmp: &CStr, name: &CStr) -> io::Result<bool> {
        if !self.opts.no_clobber {
            return sys::rename_at(dir, tmp, dir, name).map(|()| true);
        }
        match sys::rename_noreplace(dir, tmp, dir, name) {
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                let _ = sys::unlink_at(dir, tmp, false);
                self.counters.skipped.fetch_add(1, Ordering::Relaxed);
                Ok(false)
            }
            r => r.map(|()| true),
        }
    }

    fn into_summary(self) -> Summary {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Summary {
            files: get(&c.files),
            bytes: get(&c.bytes),
            dirs: get(&c.dirs),
            symlinks: get(&c.symlinks),
            specials: get(&c.specials),
            hardlinks: get(&c.hardlinks),
            skipped: get(&c.skipped),
            withdrawn: get(&c.withdrawn),
            verified_files: 0,
            methods: std::array::from_fn(|i| get(&c.methods[i])),
            errors: self.errors.into_inner().expect("errors lock"),
            warnings: self.warnings.into_inner().expect("warnings lock"),
            elapsed: Default::default(),
            cancelled: self.opts.cancel.is_cancelled(),
        }
    }
}

struct Worker<'scope, 'env, 'a> {
    sh: &'env Shared<'a>,
    /// Where more workers are started, when there is work for them.
    scope: &'scope std::thread::Scope<'scope, 'env>,
    /// The stream buffer, allocated on first use and reused for every file.
    buf: Vec<u8>,
    /// The last device pair's capabilities, to skip the shared map.
    caps: Option<((u64, u64), Arc<PairCaps>)>,
}

impl<'scope, 'env, 'a> Worker<'scope, 'env, 'a> {
    fn new(sh: &'env Shared<'a>, scope: &'scope std::thread::Scope<'scope, 'env>) -> Self {
        Worker {
            sh,
            scope,
            buf: Vec::new(),
            caps: None,
        }
    }

    fn serve(mut self) {
        loop {
            let task = {
                let mut q = self.sh.queue.lock().expect("queue lock");
                loop {
                    if let Some(t) = q.pop_back() {
                        break t;
                    }
                    if self.sh.outstanding.load(Ordering::SeqCst) == 0 {
                        return;
                    }
                    q = self.sh.wake.wait(q).expect("queue lock");
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

    /// Queues a task. Workers past the first are started only once there
    /// is work waiting for them: a shared directory, or a second queued
    /// task. A copy of one file or a few needs no thread (starting one cost
    /// ~0.4 ms, a fifth of cloning one file on Btrfs).
    fn push(&self, task: Task) {
        let sh = self.sh;
        let share = matches!(task, Task::Share(_));
        let waiting = sh.push(task);
        if (share || waiting >= 2)
            && sh.started.load(Ordering::Relaxed) < sh.max_workers
            && sh
                .started
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                    (n < sh.max_workers).then_some(n + 1)
                })
                .is_ok()
        {
            let scope = self.scope;
            scope.spawn(move || Worker::new(sh, scope).serve());
        }
    }

    fn list(&mut self, dir: Arc<DirNode>) {
        if self.sh.opts.resume && !dir.fresh {
            clean_temps(self.sh, &dir.dst, &dir.dst_path);
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
                let items: Vec<Item> = entries
                    .into_iter()
                    .map(|e| Item {
                        name: e.name,
                        dst_name: None,
                        kind: e.kind,
                        follow,
                    })
                    .collect();
                if items.len() > SHARE_ABOVE {
                    dir.pending.fetch_add(1, Ordering::SeqCst);
                    let left = AtomicUsize::new(items.len());
                    let is_file = |i: &Item| i.kind == Some(FileKind::File);
                    // Every name in a staged directory this run made is
                    // new, so its files can be created ahead of their
                    // copies (macOS clones create the file themselves).
                    let (items, ahead) = if dir.staged
                        && dir.fresh
                        && !sys::CLONE_CREATES_FILE
                        && items.iter().filter(|i| is_file(i)).count() > SHARE_ABOVE
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
                    self.push(Task::Share(shard.clone()));
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

    /// Copies slices of a shared directory until none is left; whoever
    /// finishes the last entry releases the directory. `lister`: the
    /// worker that listed it, which is the one that creates files ahead.
    fn work_shard(&mut self, shard: &Shard, lister: bool) {
        let len = shard.items.len();
        loop {
            let start = shard.next.fetch_add(SLICE, Ordering::Relaxed);
            if start >= len {
                break;
            }
            let end = (start + SLICE).min(len);
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

    fn shard_done(&mut self, shard: &Shard, n: usize) {
        if shard.left.fetch_sub(n, Ordering::AcqRel) == n {
            self.release(shard.dir.clone());
        }
    }

    /// The lister's part of [`Ahead`]: creates every slice in order
    /// (opening it first unless a helper has), and finishes slices itself
    /// when no helper keeps up.
    fn create_ahead(&mut self, shard: &Shard, a: &Ahead) {
        let n = a.slices.len();
        for k in 0..n {
            if Ahead::claim(&a.next_open, k) {
                // Alone, copy each file whole: the same work without the
                // batching (more descriptors open, colder inodes).
                if a.helpers.load(Ordering::SeqCst) == 0 && Ahead::claim(&a.next_finish, k) {
                    for index in a.range(k) {
                        self.item(&shard.dir, &a.files[index]);
                    }
                    self.shard_done(shard, a.range(k).len());
                    a.created.store(k + 1, Ordering::SeqCst);
                    a.advanced();
                    continue;
                }
                self.open_slice(shard, a, k);
            } else {
                a.wait_until(|| a.opened[k].load(Ordering::SeqCst));
            }
            self.create_slice(shard, a, k);
            a.created.store(k + 1, Ordering::SeqCst);
            a.advanced();
            while k + 1 - a.next_finish.load(Ordering::SeqCst) > FINISH_LAG {
                let f = a.next_finish.load(Ordering::SeqCst);
                if Ahead::claim(&a.next_finish, f) {
                    self.finish_slice(shard, a, f);
                }
            }
        }
        self.finish_created(shard, a);
    }

    /// A helper's part of [`Ahead`]: finishes created slices, else opens
    /// the next one if it is not too far ahead, else waits for the lister.
    fn help_ahead(&mut self, shard: &Shard, a: &Ahead) {
        let n = a.slices.len();
        a.helpers.fetch_add(1, Ordering::SeqCst);
        let can_open = || {
            let o = a.next_open.load(Ordering::SeqCst);
            (o < n && o < a.created.load(Ordering::SeqCst) + OPEN_AHEAD).then_some(o)
        };
        let can_finish = || {
            let f = a.next_finish.load(Ordering::SeqCst);
            f >= n || f < a.created.load(Ordering::SeqCst)
        };
        loop {
            if can_finish() {
                if a.next_finish.load(Ordering::SeqCst) >= n {
                    return;
                }
                self.finish_created(shard, a);
            } else if let Some(o) = can_open() {
                if Ahead::claim(&a.next_open, o) {
                    self.open_slice(shard, a, o);
                }
            } else {
                a.wait_until(|| can_finish() || can_open().is_some());
            }
        }
    }

    /// Finishes created slices until none is waiting.
    fn finish_created(&mut self, shard: &Shard, a: &Ahead) {
        loop {
            let f = a.next_finish.load(Ordering::SeqCst);
            if f >= a.created.load(Ordering::SeqCst) {
                return;
            }
            if Ahead::claim(&a.next_finish, f) {
                self.finish_slice(shard, a, f);
            }
        }
    }

    fn open_slice(&mut self, shard: &Shard, a: &Ahead, k: usize) {
        let mut opened = Vec::with_capacity(SLICE);
        for index in a.range(k) {
            let item = &a.files[index];
            let dir = &shard.dir;
            let Some((src, st)) = self.open_and_stat(dir, &item.name, false, item.follow) else {
                continue;
            };
            if st.kind() != FileKind::File {
                let e = io::Error::other("changed type while being copied");
                self.src_error(dir, &item.name, Op::Open, &e);
                continue;
            }
            opened.push(Opened {
                index,
                src,
                st,
                created: None,
            });
        }
        *a.slices[k].lock().expect("slice lock") = opened;
        a.opened[k].store(true, Ordering::SeqCst);
        a.advanced();
    }

    fn create_slice(&self, shard: &Shard, a: &Ahead, k: usize) {
        let links = self.sh.opts.preserve.links;
        for f in a.slices[k].lock().expect("slice lock").iter_mut() {
            if links && f.st.nlink > 1 {
                continue;
            }
            let name = &a.files[f.index].name;
            let perm = f.st.perm() & 0o777;
            f.created = Some(sys::create_new(shard.dir.dst.as_fd(), name, perm));
        }
    }

    fn finish_slice(&mut self, shard: &Shard, a: &Ahead, k: usize) {
        let opened = std::mem::take(&mut *a.slices[k].lock().expect("slice lock"));
        for f in opened {
            let name = &a.files[f.index].name;
            self.file_opened(&shard.dir, f.src, f.st, name, name, f.created);
        }
        self.shard_done(shard, a.range(k).len());
        a.advanced();
    }

    /// Marks one piece of `dir` done; the last one applies the directory's
    /// metadata and passes the completion up to its parent.
    fn release(&mut self, dir: Arc<DirNode>) {
        let mut cur = dir;
        loop {
            if cur.pending.fetch_sub(1, Ordering::AcqRel) != 1 {
                return;
            }
            if let Some(st) = &cur.stat {
                let opts = self.sh.opts;
                let owner_now = match (&cur.parent, cur.fresh) {
                    (Some(p), true) => p.new_owner.get().copied().flatten(),
                    _ => None,
                };
                let w = meta::apply(
                    Target::Fd(cur.dst.as_fd()),
                    Some(cur.src.as_fd()),
                    st,
                    cur.created_perm,
                    owner_now,
                    &opts.preserve,
                    self.sh.umask,
                );
                self.warnings(&cur.dst_path, w);
                if self.sh.opts.sync == SyncMode::File {
                    if let Err(e) = sys::sync_file(cur.dst.as_fd()) {
                        self.sh.error(Error::dst(&cur.dst_path, Op::Sync, &e));
                    }
                }
            }
            if !cur.deferred.lock().expect("deferred lock").is_empty() {
                self.sh
                    .finish
                    .lock()
                    .expect("finish lock")
                    .push(cur.clone());
            }
            match cur.parent.clone() {
                Some(p) => cur = p,
                None => return,
            }
        }
    }

    /// With `-a`, the owner a new entry in `dir` already has: stat the
    /// first one (`first`), then the same for every other.
    fn new_owner(
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

    fn warnings(&self, path: &Path, warnings: Vec<meta::Warning>) {
        for (op, e) in warnings {
            self.sh.warn(Error::dst(path, op, &e));
        }
    }

    fn item(&mut self, dir: &Arc<DirNode>, item: &Item) {
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
            FileKind::File => self.file(dir, &item.name, dst_name, item.follow),
            FileKind::Dir => self.dir(dir, &item.name, dst_name, item.follow),
            FileKind::Symlink => self.symlink(dir, &item.name, dst_name),
            _ => self.special(dir, &item.name, dst_name, item.follow),
        }
    }

    fn src_error(&self, dir: &DirNode, name: &CStr, op: Op, e: &io::Error) {
        self.sh
            .error(Error::src(join(&dir.src_path, sys::os_str(name)), op, e));
    }

    fn dst_error(&self, dir: &DirNode, name: &CStr, op: Op, e: &io::Error) {
        self.sh
            .error(Error::dst(join(&dir.dst_path, sys::os_str(name)), op, e));
    }

    fn dst_refusal(&self, dir: &DirNode, name: &CStr, why: Refusal) {
        let path = join(&dir.dst_path, sys::os_str(name));
        self.sh
            .error(Error::refused(Side::Destination, path, Op::Copy, why));
    }

    fn open_src(&self, dir: &DirNode, name: &CStr, is_dir: bool, follow: bool) -> io::Result<Fd> {
        if self.sh.noatime.load(Ordering::Relaxed) {
            match sys::open_source(dir.src.as_fd(), name, is_dir, follow, true) {
                Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                    self.sh.noatime.store(false, Ordering::Relaxed);
                }
                r => return r,
            }
        }
        sys::open_source(dir.src.as_fd(), name, is_dir, follow, false)
    }

    fn tmp_name(&self) -> CString {
        let n = self.sh.tmp_counter.fetch_add(1, Ordering::Relaxed);
        CString::new(format!(".kopiru-tmp.{}.{n}", std::process::id())).expect("no NUL")
    }

    fn pair_caps(&mut self, src_dev: u64, dst_dev: u64) -> Arc<PairCaps> {
        match &self.caps {
            Some((key, caps)) if *key == (src_dev, dst_dev) => caps.clone(),
            _ => {
                let caps = self.sh.caps.get(src_dev, dst_dev);
                self.caps = Some(((src_dev, dst_dev), caps.clone()));
                caps
            }
        }
    }

    /// Looks at what is at a destination name before a non-directory is
    /// put there: a directory or the source itself is refused; with
    /// `--no-clobber` anything is kept; with `--resume` an entry that is
    /// already a complete copy is kept.
    /// A hard link passes `resume_keeps` false: a whole file under its name
    /// is kept only if it already is that link.
    fn existing(&self, dir: &DirNode, dst_name: &CStr, src: &Stat, resume_keeps: bool) -> Existing {
        let Ok(d) = sys::stat_at(dir.dst.as_fd(), dst_name, false) else {
            return Existing::Absent;
        };
        if d.kind() == FileKind::Dir {
            self.dst_refusal(dir, dst_name, Refusal::NonDirOverDir { source: None });
            return Existing::Refused;
        }
        if (d.dev, d.ino) == (src.dev, src.ino) {
            let same = Refusal::SameFile {
                source: join(&dir.src_path, sys::os_str(dst_name)),
                dest: join(&dir.dst_path, sys::os_str(dst_name)),
            };
            self.dst_refusal(dir, dst_name, same);
            return Existing::Refused;
        }
        let opts = self.sh.opts;
        let complete = || self.complete(&d, src, dir.staged);
        if opts.no_clobber || (opts.resume && resume_keeps && complete()) {
            self.sh.counters.skipped.fetch_add(1, Ordering::Relaxed);
            return Existing::Keep;
        }
        Existing::Replace
    }

    /// Whether a destination entry is a finished copy of `src`. Outside a
    /// staged tree, files are renamed to their final names only when whole,
    /// so what was in flight is a leftover temporary. Inside one, files are
    /// written in place with their times set last: a file cut short keeps
    /// the time of its last write, not the source's. So a regular file must
    /// match in size and modification time; when times are not kept, files
    /// in a resumed staged tree are copied again.
    fn complete(&self, d: &Stat, src: &Stat, staged: bool) -> bool {
        match src.kind() {
            FileKind::File => {
                d.kind() == FileKind::File
                    && d.size == src.size
                    && if self.sh.opts.preserve.times {
                        d.mtime == src.mtime
                    } else {
                        !staged
                    }
            }
            k => d.kind() == k,
        }
    }

    /// Opens a source entry and stats it on the descriptor (one lookup);
    /// `None` when that failed (reported).
    fn open_and_stat(
        &self,
        dir: &DirNode,
        name: &CStr,
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

    fn file(&mut self, dir: &Arc<DirNode>, name: &CStr, dst_name: &CStr, follow: bool) {
        let Some((src, st)) = self.open_and_stat(dir, name, false, follow) else {
            return;
        };
        if st.kind() != FileKind::File {
            let e = io::Error::other("changed type while being copied");
            return self.src_error(dir, name, Op::Open, &e);
        }
        self.file_opened(dir, src, st, name, dst_name, None);
    }

    /// Copies a regular file whose source is open, or links it to an
    /// earlier copy of the same inode. `created`: its new file, already
    /// created under `dst_name` ([`Ahead`]).
    fn file_opened(
        &mut self,
        dir: &Arc<DirNode>,
        src: Fd,
        st: Stat,
        name: &CStr,
        dst_name: &CStr,
        created: Option<io::Result<Fd>>,
    ) {
        if created.is_some() || !(self.sh.opts.preserve.links && st.nlink > 1) {
            self.copy_file(dir, &src, &st, name, dst_name, created);
            return;
        }
        // The first worker to meet this inode copies it; any other waits for
        // that copy, then links to it.
        let cell: LinkCell = self
            .sh
            .links
            .lock()
            .expect("links lock")
            .entry((st.dev, st.ino))
            .or_default()
            .clone();
        let mut copied_here = false;
        let target = cell.get_or_init(|| {
            copied_here = true;
            self.copy_file(dir, &src, &st, name, dst_name, None)
                .map(|name| LinkTarget {
                    dir: dir.clone(),
                    name,
                })
        });
        if copied_here {
            return;
        }
        match target {
            Some(t) => self.hard_link(dir, dst_name, t, &st),
            None => {
                self.copy_file(dir, &src, &st, name, dst_name, None);
            }
        }
    }

    fn hard_link(&mut self, dir: &DirNode, dst_name: &CStr, target: &LinkTarget, st: &Stat) {
        let (tdir, tname) = (target.dir.dst.as_fd(), target.name.as_c_str());
        let make = |n: &CStr| sys::link_at(tdir, tname, dir.dst.as_fd(), n);
        if self.sh.opts.resume && !dir.fresh {
            let here = sys::stat_at(dir.dst.as_fd(), dst_name, false);
            let there = sys::stat_at(tdir, tname, false);
            if let (Ok(a), Ok(b)) = (here, there) {
                if (a.dev, a.ino) == (b.dev, b.ino) {
                    self.sh.counters.skipped.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            }
        }
        if self.defers(dir) {
            // A visible name may only appear once the data is durable.
            match self.existing(dir, dst_name, st, false) {
                Existing::Keep | Existing::Refused => return,
                Existing::Absent | Existing::Replace => {}
            }
            let tmp = self.tmp_name();
            match make(&tmp) {
                Ok(()) => {
                    dir.deferred
                        .lock()
                        .expect("deferred lock")
                        .push((tmp, dst_name.to_owned()));
                    self.sh.counters.hardlinks.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => self.dst_error(dir, dst_name, Op::Link, &e),
            }
            return;
        }
        match self.make_or_replace(dir, dst_name, st, false, make) {
            Some(Ok(())) => {
                self.sh.counters.hardlinks.fetch_add(1, Ordering::Relaxed);
            }
            Some(Err(e)) => self.dst_error(dir, dst_name, Op::Link, &e),
            None => {}
        }
    }

    /// Whether files finished in `dir` wait for the end-of-run flush before
    /// getting their final names (`--sync end` in a visible directory).
    fn defers(&self, dir: &DirNode) -> bool {
        self.sh.opts.sync == SyncMode::End && !dir.staged
    }

    /// Makes a new entry with `make`. If the name is taken, makes it under a
    /// temporary name and renames it over, so the old entry stays whole until
    /// the new one replaces it. `None`: kept or refused (already counted or
    /// reported).
    fn make_or_replace(
        &self,
        dir: &DirNode,
        dst_name: &CStr,
        st: &Stat,
        resume_keeps: bool,
        make: impl Fn(&CStr) -> io::Result<()>,
    ) -> Option<io::Result<()>> {
        match make(dst_name) {
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                match self.existing(dir, dst_name, st, resume_keeps) {
                    Existing::Keep | Existing::Refused => return None,
                    Existing::Absent | Existing::Replace => {}
                }
                let tmp = self.tmp_name();
                Some(make(&tmp).and_then(|()| {
                    sys::rename_at(dir.dst.as_fd(), &tmp, dir.dst.as_fd(), dst_name).inspect_err(
                        |_| {
                            let _ = sys::unlink_at(dir.dst.as_fd(), &tmp, false);
                        },
                    )
                }))
            }
            r => Some(r),
        }
    }

    /// Copies one regular file's data and metadata. In a staged tree this run
    /// made, the file is written under its final name: the tree is invisible
    /// until it is whole, and a rename per file would cost half as much again
    /// on ext4 (measured). Elsewhere it is written under a temporary name and
    /// given its final name once whole: at once, or at the end of the run
    /// under `--sync end` in a visible directory. Returns the name the
    /// finished data has now (hard links are made to it); `None` if it failed
    /// (reported, nothing partial left), was refused or kept. `created`:
    /// the new file, created ahead under `dst_name` in such a staged tree.
    fn copy_file(
        &mut self,
        dir: &DirNode,
        src: &Fd,
        st: &Stat,
        name: &CStr,
        dst_name: &CStr,
        created: Option<io::Result<Fd>>,
    ) -> Option<CString> {
        if !dir.fresh {
            match self.existing(dir, dst_name, st, true) {
                Existing::Keep => return Some(dst_name.to_owned()),
                Existing::Refused => return None,
                Existing::Absent | Existing::Replace => {}
            }
        }
        let direct = dir.staged && dir.fresh;
        let tmp = match direct {
            true => dst_name.to_owned(),
            false => self.tmp_name(),
        };
        let cloned = match created {
            Some(_) => None,
            None => self.clone_new(dir, src, &tmp),
        };
        let (moved, hashed) = match cloned {
            Some(Ok(())) => {
                let moved = data::Moved {
                    method: Method::Clone,
                    bytes: st.size,
                    why_not: None,
                    source_hash: None,
                };
                (moved, None)
            }
            Some(Err(e)) => {
                self.dst_error(dir, dst_name, Op::Clone, &e);
                return None;
            }
            None => self.write_tmp(dir, src, st, name, dst_name, &tmp, created)?,
        };
        let done = |w: &Self| {
            if let Some(h) = hashed {
                w.sh.source_hashes.lock().expect("hashes lock").push(h);
            }
            w.file_done(
                dir,
                name,
                moved.bytes,
                moved.method,
                moved.why_not.as_deref(),
            );
        };
        if direct {
            if self.sh.opts.sync == SyncMode::File {
                if let Err(e) = sys::sync_file(dir.dst.as_fd()) {
                    let _ = sys::unlink_at(dir.dst.as_fd(), &tmp, false);
                    self.dst_error(dir, dst_name, Op::Sync, &e);
                    return None;
                }
            }
            done(self);
            return Some(tmp);
        }
        if self.defers(dir) {
            dir.deferred
                .lock()
                .expect("deferred lock")
                .push((tmp.clone(), dst_name.to_owned()));
            done(self);
            return Some(tmp);
        }
        match self.sh.rename_final(dir.dst.as_fd(), &tmp, dst_name) {
            Ok(true) => {}
            Ok(false) => return None,
            Err(e) => {
                let _ = sys::unlink_at(dir.dst.as_fd(), &tmp, false);
                self.dst_error(dir, dst_name, Op::Rename, &e);
                return None;
            }
        }
        if self.sh.opts.sync == SyncMode::File {
            // The name is durable once its directory is.
            if let Err(e) = sys::sync_file(dir.dst.as_fd()) {
                self.dst_error(dir, dst_name, Op::Sync, &e);
                return None;
            }
        }
        done(self);
        Some(dst_name.to_owned())
    }

    /// Creates `tmp` (a new name) and fills it with the source's data and
    /// metadata, times last (which `--resume` relies on), made
    /// durable (`--sync file`) or on its way to the device (`--sync end`).
    /// Also returns the source's hash, when it was hashed, keyed by the new
    /// file's device and inode. `None`: failed, reported, and `tmp` removed.
    /// `created`: `tmp` was already created, with the source's permissions.
    #[allow(clippy::too_many_arguments)]
    fn write_tmp(
        &mut self,
        dir: &DirNode,
        src: &Fd,
        st: &Stat,
        name: &CStr,
        dst_name: &CStr,
        tmp: &CStr,
        created: Option<io::Result<Fd>>,
    ) -> Option<(data::Moved, Option<SourceHash>)> {
        let opts = self.sh.opts;
        let pair = self.pair_caps(st.dev, dir.dst_dev);
        let perm = st.perm() & 0o777;
        let created_perm = perm & !self.sh.umask;
        let created = created.unwrap_or_else(|| sys::create_new(dir.dst.as_fd(), tmp, perm));
        let dst = match created {
            Ok(fd) => fd,
            Err(e) => {
                self.dst_error(dir, dst_name, Op::Create, &e);
                return None;
            }
        };
        let fail = |w: &Self, op: Op, e: &io::Error| {
            let _ = sys::unlink_at(dir.dst.as_fd(), tmp, false);
            if matches!(op, Op::Read | Op::Seek) {
                w.src_error(dir, name, op, e);
            } else {
                w.dst_error(dir, dst_name, op, e);
            }
        };
        let moved = data::copy_data(
            src.as_fd(),
            st,
            dst.as_fd(),
            &pair,
            opts,
            &mut self.buf,
            self.sh.reporter,
        );
        let moved = match moved {
            Ok(m) => m,
            Err((op, e)) => {
                drop(dst);
                fail(self, op, &e);
                return None;
            }
        };
        // One fstat of the new file serves both the hash's key and, with
        // -a, the owner new entries here get.
        let dst_stat = moved.source_hash.map(|_| sys::fstat(dst.as_fd()));
        let hashed = match (moved.source_hash, &dst_stat) {
            (Some(hash), Some(Ok(d))) => Some(SourceHash {
                dev: d.dev,
                ino: d.ino,
                hash,
            }),
            _ => None,
        };
        let owner_now = self.new_owner(dir, || dst_stat.unwrap_or_else(|| sys::fstat(dst.as_fd())));
        let warnings = meta::apply(
            Target::Fd(dst.as_fd()),
            Some(src.as_fd()),
            st,
            created_perm,
            owner_now,
            &opts.preserve,
            self.sh.umask,
        );
        let synced = match opts.sync {
            SyncMode::None => Ok(()),
            // Cloned data is the source's blocks: nothing to write.
            SyncMode::End if moved.method == Method::Clone => Ok(()),
            SyncMode::End => sys::before_fs_sync(dst.as_fd()),
            SyncMode::File => sys::sync_file(dst.as_fd()),
        };
        if let Err(e) = synced {
            drop(dst);
            fail(self, Op::Sync, &e);
            return None;
        }
        if let Err(e) = sys::close(dst) {
            fail(self, Op::Close, &e);
            return None;
        }
        if !warnings.is_empty() {
            self.warnings(&join(&dir.dst_path, sys::os_str(dst_name)), warnings);
        }
        Some((moved, hashed))
    }

    fn file_done(
        &self,
        dir: &DirNode,
        name: &CStr,
        bytes: u64,
        method: Method,
        why_not: Option<&str>,
    ) {
        let c = &self.sh.counters;
        c.files.fetch_add(1, Ordering::Relaxed);
        c.bytes.fetch_add(bytes, Ordering::Relaxed);
        c.methods[method as usize].fetch_add(1, Ordering::Relaxed);
        self.sh.reporter.file_done(&FileDone {
            src_dir: &dir.src_path,
            dst_dir: &dir.dst_path,
            name: sys::os_str(name),
            bytes,
            method,
            why_not,
        });
    }

    /// macOS: `fclonefileat` creates the copy, data and metadata, in one
    /// call. `None` means "not cloned, copy it the usual way".
    fn clone_new(&self, dir: &DirNode, src: &Fd, tmp: &CStr) -> Option<io::Result<()>> {
        use crate::options::{MethodChoice, SparseMode};
        let opts = self.sh.opts;
        if !sys::CLONE_CREATES_FILE
            || !matches!(opts.method, MethodChoice::Auto | MethodChoice::Clone)
            || opts.sparse == SparseMode::Never
        {
            return None;
        }
        let made = sys::clone_new(src.as_fd(), dir.dst.as_fd(), tmp).and_then(|()| {
            if opts.sync != SyncMode::File {
                return Ok(());
            }
            let synced = sys::open_source(dir.dst.as_fd(), tmp, false, false, false)
                .and_then(|fd| sys::sync_file(fd.as_fd()));
            if synced.is_err() {
                let _ = sys::unlink_at(dir.dst.as_fd(), tmp, false);
            }
            synced
        });
        match made {
            Ok(()) => Some(Ok(())),
            Err(e) if opts.method == MethodChoice::Clone => Some(Err(e)),
            Err(_) => None,
        }
    }

    fn dir(&mut self, parent: &Arc<DirNode>, name: &CStr, dst_name: &CStr, follow: bool) {
        let Some((src, st)) = self.open_and_stat(parent, name, true, follow) else {
            return;
        };
        if self.sh.opts.follow != Follow::Never && is_ancestor(parent, &st) {
            let e = io::Error::from_raw_os_error(libc::ELOOP);
            return self.src_error(parent, name, Op::Follow, &e);
        }
        if self
            .sh
            .dst_roots
            .lock()
            .expect("roots lock")
            .contains(&(st.dev, st.ino))
        {
            let path = join(&parent.src_path, sys::os_str(name));
            let why = Refusal::IntoItself { dest: None };
            return self
                .sh
                .error(Error::refused(Side::Source, path, Op::Copy, why));
        }
        let top_level = parent.stat.is_none();
        let staged_tmp = match top_level {
            true => match self.stage(parent, dst_name) {
                Ok(tmp) => tmp,
                Err(()) => return,
            },
            false => None,
        };
        // What the directory is made as: its final name, or the staged one.
        let target = staged_tmp.as_deref().unwrap_or(dst_name);
        let stage_it = |w: &Self| {
            if let Some(tmp) = &staged_tmp {
                w.sh.staged.lock().expect("staged lock").push(StagedTree {
                    parent: parent.clone(),
                    tmp: tmp.clone(),
                    name: dst_name.to_owned(),
                });
            }
        };
        if sys::CLONES_TREES
            && self.whole_clone_allowed()
            && self.clone_whole_dir(parent, &src, name, target)
        {
            return stage_it(self);
        }
        let umask = self.sh.umask;
        // Made with its final permission bits when they let us fill it, so no
        // chmod is needed at the end; otherwise owner-only until it is full.
        // (Special bits come last: a setgid directory would pass its group to
        // what is created in it.)
        let perm = st.perm() & 0o777;
        let mkdir_mode = if perm & 0o300 == 0o300 { perm } else { 0o700 };
        let mut fresh = true;
        let created_perm = match sys::mkdir_at(parent.dst.as_fd(), target, mkdir_mode) {
            Ok(()) => mkdir_mode & !umask,
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                fresh = false;
                match sys::stat_at(parent.dst.as_fd(), target, false) {
                    Ok(d) if d.kind() == FileKind::Dir => d.perm(),
                    Ok(_) => {
                        let why = Refusal::DirOverNonDir { source: None };
                        return self.dst_refusal(parent, dst_name, why);
                    }
                    Err(e) => return self.dst_error(parent, dst_name, Op::Stat, &e),
                }
            }
            Err(e) => return self.dst_error(parent, dst_name, Op::Mkdir, &e),
        };
        if fresh && self.sh.opts.sync == SyncMode::File {
            if let Err(e) = sys::sync_file(parent.dst.as_fd()) {
                return self.dst_error(parent, dst_name, Op::Sync, &e);
            }
        }
        let dst = match sys::open_dir(parent.dst.as_fd(), target) {
            Ok(fd) => fd,
            Err(e) => return self.dst_error(parent, dst_name, Op::Open, &e),
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
                Err(e) => return self.dst_error(parent, dst_name, Op::Stat, &e),
            },
        };
        let dst_path = join(&parent.dst_path, sys::os_str(dst_name));
        if dst_dev != parent.dst_dev {
            self.sh.add_filesystem(dst_dev, &dst, &dst_path);
        }
        let mut node = DirNode::new(
            src,
            dst,
            join(&parent.src_path, sys::os_str(name)),
            dst_path,
            dst_dev,
            Some(parent.clone()),
        );
        node.stat = Some(st);
        node.created_perm = created_perm;
        node.staged = parent.staged || staged_tmp.is_some();
        node.fresh = fresh;
        let node = Arc::new(node);
        stage_it(self);
        parent.pending.fetch_add(1, Ordering::SeqCst);
        self.sh.counters.dirs.fetch_add(1, Ordering::Relaxed);
        self.push(Task::List(node));
    }

    /// For a top-level directory: if its destination does not exist yet, the
    /// name to build it under (a leftover of an interrupted run is removed,
    /// or reused with `--resume`). `Err`: failed, reported.
    fn stage(&self, parent: &DirNode, dst_name: &CStr) -> Result<Option<CString>, ()> {
        match sys::stat_at(parent.dst.as_fd(), dst_name, false) {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
            _ => return Ok(None),
        }
        let tmp = staged_name(dst_name);
        if !self.sh.opts.resume {
            match remove_tree(parent.dst.as_fd(), &tmp, &mut 0) {
                Err(e) if e.raw_os_error() != Some(libc::ENOENT) => {
                    let path = join(&parent.dst_path, sys::os_str(&tmp));
                    self.sh.error(Error::dst(path, Op::Remove, &e));
                    return Err(());
                }
                _ => {}
            }
        }
        Ok(Some(tmp))
    }

    /// Whether the options allow a whole directory to be one clone (macOS):
    /// clonefile keeps mode, times, xattrs and ACLs, and the owner only when
    /// we are privileged.
    fn whole_clone_allowed(&self) -> bool {
        use crate::options::{MethodChoice, SparseMode};
        let o = self.sh.opts;
        matches!(o.method, MethodChoice::Auto | MethodChoice::Clone)
            && o.sparse != SparseMode::Never
            && o.follow == Follow::Never
            && (!o.preserve.owner || sys::euid() == 0)
    }

    /// Clones the directory `name` whole, in one call, if nothing in it
    /// needs per-file treatment (a read-only pre-walk, which also counts what
    /// it holds). False means "copy it entry by entry".
    fn clone_whole_dir(&self, parent: &DirNode, src: &Fd, name: &CStr, dst_name: &CStr) -> bool {
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

    fn symlink(&mut self, dir: &DirNode, name: &CStr, dst_name: &CStr) {
        let st = match sys::stat_at(dir.src.as_fd(), name, false) {
            Ok(st) => st,
            Err(e) => return self.src_error(dir, name, Op::Stat, &e),
        };
        let target = match sys::read_link_at(dir.src.as_fd(), name) {
            Ok(t) => t,
            Err(e) => return self.src_error(dir, name, Op::Readlink, &e),
        };
        let make = |n: &CStr| sys::symlink_at(&target, dir.dst.as_fd(), n);
        if self.create_or_replace(dir, dst_name, &st, Op::Symlink, make) {
            self.sh.counters.symlinks.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn special(&mut self, dir: &DirNode, name: &CStr, dst_name: &CStr, follow: bool) {
        let st = match sys::stat_at(dir.src.as_fd(), name, follow) {
            Ok(st) => st,
            Err(e) => return self.src_error(dir, name, Op::Stat, &e),
        };
        let mode = st.type_and_perm();
        let make = |n: &CStr| sys::mknod_at(dir.dst.as_fd(), n, mode, st.rdev);
        if self.create_or_replace(dir, dst_name, &st, Op::Mknod, make) {
            self.sh.counters.specials.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Creates a symlink or special file with `make` (replacing an existing
    /// entry atomically), then applies its metadata by name.
    fn create_or_replace(
        &mut self,
        dir: &DirNode,
        dst_name: &CStr,
        st: &Stat,
        op: Op,
        make: impl Fn(&CStr) -> io::Result<()>,
    ) -> bool {
        match self.make_or_replace(dir, dst_name, st, true, make) {
            None => return false,
            Some(Err(e)) => {
                self.dst_error(dir, dst_name, op, &e);
                return false;
            }
            Some(Ok(())) => {}
        }
        let created_perm = st.perm() & 0o777 & !self.sh.umask;
        let owner_now = self.new_owner(dir, || sys::stat_at(dir.dst.as_fd(), dst_name, false));
        let target = Target::At(dir.dst.as_fd(), dst_name);
        let w = meta::apply(
            target,
            None,
            st,
            created_perm,
            owner_now,
            &self.sh.opts.preserve,
            self.sh.umask,
        );
        if !w.is_empty() {
            self.warnings(&join(&dir.dst_path, sys::os_str(dst_name)), w);
        }
        true
    }
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
    let mut stack = vec![sys::open_dir(root.as_fd(), c".")?];
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

/// Whether `st` is `dir` or one of its ancestors: following a symlink there
/// would copy forever.
fn is_ancestor(dir: &DirNode, st: &Stat) -> bool {
    let mut cur = Some(dir);
    while let Some(d) = cur {
        if d.stat.is_some_and(|s| (s.dev, s.ino) == (st.dev, st.ino)) {
            return true;
        }
        cur = d.parent.as_deref();
    }
    false
}

/// The name a new top-level tree is built under beside its destination:
/// the same for every run, so `--resume` finds it.
fn staged_name(dst_name: &CStr) -> CString {
    // FNV-1a: short, stable and dependency-free; it only has to tell
    // destinations in one directory apart.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in dst_name.to_bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    CString::new(format!("{TMP_PREFIX}tree.{h:016x}")).expect("no NUL")
}

/// Removes a file, or a directory and everything in it, adding the number
/// of names removed to `removed`.
fn remove_tree(dir: sys::FdRef, name: &CStr, removed: &mut u64) -> io::Result<()> {
    match sys::unlink_at(dir, name, true) {
        Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => {
            sys::unlink_at(dir, name, false)?;
            *removed += 1;
            return Ok(());
        }
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTEMPTY | libc::EEXIST)) => {}
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

/// `--resume`: removes the temporary files an interrupted run left in a
/// destination directory (staged trees, which are directories, are kept:
/// they are resumed).
fn clean_temps(sh: &Shared, dir: &Fd, path: &Path) {
    let entries = match sys::read_dir(dir.as_fd()) {
        Ok(e) => e,
        Err(e) => return sh.warn(Error::dst(path, Op::ReadDirectory, &e)),
    };
    for e in entries {
        if !e.name.to_bytes().starts_with(TMP_PREFIX.as_bytes()) || e.kind == Some(FileKind::Dir) {
            continue;
        }
        if let Err(err) = sys::unlink_at(dir.as_fd(), &e.name, false) {
            if err.raw_os_error() != Some(libc::EISDIR) {
                sh.warn(Error::dst(
                    join(path, sys::os_str(&e.name)),
                    Op::Remove,
                    &err,
                ));
            }
        }
    }
}
