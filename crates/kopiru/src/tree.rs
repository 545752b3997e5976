//! The parallel copy: every command-line source and every directory becomes a
//! task on one shared LIFO queue served by worker threads (LIFO keeps the walk
//! depth-first, so few directories are open at once). Directories are read
//! once, with large getdents64 buffers, and entries are opened relative to
//! their directory's descriptor; a large directory is split into chunks so all
//! workers share it. A directory's metadata is applied when its last entry is
//! done (post-order), counted by `pending`.

use crate::data::{self, Caps, PairCaps};
use crate::events::{FileDone, Method, Reporter, Summary};
use crate::meta::{self, Target};
use crate::options::{CopyOptions, Follow};
use crate::plan::Job;
use crate::sys::{self, Fd, FileKind, Stat};
use crate::CopyError;
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
    /// (device, inode) of each top-level destination directory: meeting one
    /// in a source means copying into itself through a path the planner
    /// could not see (a bind mount), so it is refused there.
    dst_roots: Mutex<Vec<(u64, u64)>>,
    counters: Counters,
    errors: Mutex<Vec<CopyError>>,
    warnings: Mutex<Vec<CopyError>>,
    tmp_counter: AtomicU64,
}

/// Runs every job to completion on the worker threads.
pub(crate) fn run(
    jobs: Vec<Job>,
    opts: &CopyOptions,
    reporter: &dyn Reporter,
    refused: Vec<CopyError>,
) -> Summary {
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
        dst_roots: Mutex::new(Vec::new()),
        counters: Counters::default(),
        errors: Mutex::new(Vec::new()),
        warnings: Mutex::new(Vec::new()),
        tmp_counter: AtomicU64::new(0),
    };
    for e in refused {
        sh.error(e);
    }
    // Pushed in reverse so the LIFO queue starts with the first source.
    for job in jobs.into_iter().rev() {
        let dst_dev = match sys::fstat(job.dst_dir.as_fd()) {
            Ok(st) => st.dev,
            Err(e) => {
                sh.error(CopyError::io(&job.dst_parent, "stat", &e));
                continue;
            }
        };
        let node = Arc::new(DirNode {
            src: job.src_dir,
            dst: job.dst_dir,
            src_path: job.src_parent,
            dst_path: job.dst_parent,
            dst_dev,
            stat: None,
            created_perm: 0,
            pending: AtomicUsize::new(1),
            parent: None,
        });
        let item = Item {
            name: job.src_name,
            dst_name: Some(job.dst_name),
            kind: None,
            follow: job.follow,
        };
        sh.push(Task::Items(node, vec![item]));
    }
    let workers = opts.worker_count();
    std::thread::scope(|s| {
        for _ in 1..workers {
            s.spawn(|| Worker::new(&sh).serve());
        }
        Worker::new(&sh).serve();
    });
    sh.into_summary()
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
    fn push(&self, task: Task) {
        self.outstanding.fetch_add(1, Ordering::SeqCst);
        self.queue.lock().expect("queue lock").push_back(task);
        self.wake.notify_one();
    }

    fn push_low(&self, task: Task) {
        self.outstanding.fetch_add(1, Ordering::SeqCst);
        self.queue.lock().expect("queue lock").push_front(task);
        self.wake.notify_one();
    }

    fn error(&self, e: CopyError) {
        self.reporter.error(&e);
        self.errors.lock().expect("errors lock").push(e);
    }

    fn warn(&self, e: CopyError) {
        self.reporter.warning(&e);
        self.warnings.lock().expect("warnings lock").push(e);
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
            methods: std::array::from_fn(|i| get(&c.methods[i])),
            errors: self.errors.into_inner().expect("errors lock"),
            warnings: self.warnings.into_inner().expect("warnings lock"),
            elapsed: Default::default(),
        }
    }
}

struct Worker<'s, 'a> {
    sh: &'s Shared<'a>,
    /// The stream buffer, allocated on first use and reused for every file.
    buf: Vec<u8>,
    /// The last device pair's capabilities, to skip the shared map.
    caps: Option<((u64, u64), Arc<PairCaps>)>,
}

impl<'s, 'a> Worker<'s, 'a> {
    fn new(sh: &'s Shared<'a>) -> Self {
        Worker {
            sh,
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
                Task::Share(shard) => self.work_shard(&shard),
            }
            // Under the lock, so a worker about to wait cannot miss the end.
            let _q = self.sh.queue.lock().expect("queue lock");
            if self.sh.outstanding.fetch_sub(1, Ordering::SeqCst) == 1 {
                self.sh.wake.notify_all();
            }
        }
    }

    fn list(&mut self, dir: Arc<DirNode>) {
        match sys::read_dir(dir.src.as_fd()) {
            Err(e) => self
                .sh
                .error(CopyError::io(&dir.src_path, "read directory", &e)),
            Ok(mut entries) => {
                // Subdirectories first, so other workers get work as early
                // as possible; then inode order, which reads the source in
                // on-disk order (gnulib fts).
                entries.sort_unstable_by_key(|e| (e.kind != Some(FileKind::Dir), e.ino));
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
                    let shard = Arc::new(Shard {
                        dir: dir.clone(),
                        left: AtomicUsize::new(items.len()),
                        items,
                        next: AtomicUsize::new(0),
                    });
                    self.sh.push_low(Task::Share(shard.clone()));
                    self.work_shard(&shard);
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
    /// finishes the last entry releases the directory.
    fn work_shard(&mut self, shard: &Shard) {
        let len = shard.items.len();
        loop {
            let start = shard.next.fetch_add(SLICE, Ordering::Relaxed);
            if start >= len {
                return;
            }
            let end = (start + SLICE).min(len);
            for item in &shard.items[start..end] {
                self.item(&shard.dir, item);
            }
            if shard.left.fetch_sub(end - start, Ordering::AcqRel) == end - start {
                self.release(shard.dir.clone());
            }
        }
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
                let w = meta::apply(
                    Target::Fd(cur.dst.as_fd()),
                    Some(cur.src.as_fd()),
                    st,
                    cur.created_perm,
                    &opts.preserve,
                    self.sh.umask,
                );
                self.warnings(&cur.dst_path, w);
            }
            match cur.parent.clone() {
                Some(p) => cur = p,
                None => return,
            }
        }
    }

    fn warnings(&self, path: &Path, warnings: Vec<meta::Warning>) {
        for (op, e) in warnings {
            self.sh.warn(CopyError::io(path, op, &e));
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
                Err(e) => return self.src_error(dir, &item.name, "stat", &e),
            },
        };
        match kind {
            FileKind::File => self.file(dir, &item.name, dst_name, item.follow),
            FileKind::Dir => self.dir(dir, &item.name, dst_name, item.follow),
            FileKind::Symlink => self.symlink(dir, &item.name, dst_name),
            _ => self.special(dir, &item.name, dst_name, item.follow),
        }
    }

    fn src_error(&self, dir: &DirNode, name: &CStr, op: &'static str, e: &io::Error) {
        self.sh
            .error(CopyError::io(join(&dir.src_path, sys::os_str(name)), op, e));
    }

    fn dst_error(&self, dir: &DirNode, name: &CStr, op: &'static str, e: &io::Error) {
        self.sh
            .error(CopyError::io(join(&dir.dst_path, sys::os_str(name)), op, e));
    }

    fn dst_refusal(&self, dir: &DirNode, name: &CStr, reason: &str) {
        let path = join(&dir.dst_path, sys::os_str(name));
        self.sh.error(CopyError::refusal(path, "copy", reason));
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

    /// Before replacing an existing destination entry: refuses a directory
    /// (for anything but a directory) and the source itself.
    fn check_replace(&self, dir: &DirNode, dst_name: &CStr, src: &Stat) -> bool {
        match sys::stat_at(dir.dst.as_fd(), dst_name, false) {
            Ok(d) if d.kind() == FileKind::Dir => {
                self.dst_refusal(
                    dir,
                    dst_name,
                    "cannot overwrite directory with non-directory",
                );
                false
            }
            Ok(d) if (d.dev, d.ino) == (src.dev, src.ino) => {
                self.dst_refusal(dir, dst_name, "source and destination are the same file");
                false
            }
            _ => true,
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
                self.src_error(dir, name, "open", &e);
                return None;
            }
        };
        match sys::fstat(src.as_fd()) {
            Ok(st) => Some((src, st)),
            Err(e) => {
                self.src_error(dir, name, "stat", &e);
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
            return self.src_error(dir, name, "open", &e);
        }
        if !(self.sh.opts.preserve.links && st.nlink > 1) {
            self.copy_file(dir, &src, &st, name, dst_name);
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
            self.copy_file(dir, &src, &st, name, dst_name)
                .then(|| LinkTarget {
                    dir: dir.clone(),
                    name: dst_name.to_owned(),
                })
        });
        if copied_here {
            return;
        }
        match target {
            Some(t) => self.hard_link(dir, dst_name, t, &st),
            None => {
                self.copy_file(dir, &src, &st, name, dst_name);
            }
        }
    }

    fn hard_link(&mut self, dir: &DirNode, dst_name: &CStr, target: &LinkTarget, st: &Stat) {
        let (tdir, tname) = (target.dir.dst.as_fd(), target.name.as_c_str());
        let make = |n: &CStr| sys::link_at(tdir, tname, dir.dst.as_fd(), n);
        match self.make_or_replace(dir, dst_name, st, make) {
            Some(Ok(())) => {
                self.sh.counters.hardlinks.fetch_add(1, Ordering::Relaxed);
            }
            Some(Err(e)) => self.dst_error(dir, dst_name, "link", &e),
            None => {}
        }
    }

    /// Makes a new entry with `make`. If the name is taken, makes it under a
    /// temporary name and renames it over, so the old entry stays whole until
    /// the new one replaces it. `None`: refused (already reported).
    fn make_or_replace(
        &self,
        dir: &DirNode,
        dst_name: &CStr,
        st: &Stat,
        make: impl Fn(&CStr) -> io::Result<()>,
    ) -> Option<io::Result<()>> {
        match make(dst_name) {
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                if !self.check_replace(dir, dst_name, st) {
                    return None;
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

    /// Copies one regular file's data and metadata; false if it failed (the
    /// error is reported and no partial file is left).
    fn copy_file(
        &mut self,
        dir: &DirNode,
        src: &Fd,
        st: &Stat,
        name: &CStr,
        dst_name: &CStr,
    ) -> bool {
        let opts = self.sh.opts;
        let pair = self.pair_caps(st.dev, dir.dst_dev);
        if sys::CLONE_CREATES_FILE {
            if let Some(done) = self.clone_new(dir, src, st, name, dst_name) {
                return done;
            }
        }
        let perm = st.perm() & 0o777;
        let created_perm = perm & !self.sh.umask;
        let (dst, tmp) = match sys::create_new(dir.dst.as_fd(), dst_name, perm) {
            Ok(fd) => (fd, None),
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                // Replace an existing file: write a temporary and rename it
                // over, so the old file reads whole until the new one is.
                if !self.check_replace(dir, dst_name, st) {
                    return false;
                }
                let tmp = self.tmp_name();
                match sys::create_new(dir.dst.as_fd(), &tmp, perm) {
                    Ok(fd) => (fd, Some(tmp)),
                    Err(e) => {
                        self.dst_error(dir, dst_name, "create", &e);
                        return false;
                    }
                }
            }
            Err(e) => {
                self.dst_error(dir, dst_name, "create", &e);
                return false;
            }
        };
        let written_name = tmp.as_deref().unwrap_or(dst_name);
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
                let _ = sys::unlink_at(dir.dst.as_fd(), written_name, false);
                if op == "read" || op == "seek" {
                    self.src_error(dir, name, op, &e);
                } else {
                    self.dst_error(dir, dst_name, op, &e);
                }
                return false;
            }
        };
        let warnings = meta::apply(
            Target::Fd(dst.as_fd()),
            Some(src.as_fd()),
            st,
            created_perm,
            &opts.preserve,
            self.sh.umask,
        );
        let finished = sys::close(dst).and_then(|()| match &tmp {
            Some(tmp) => sys::rename_at(dir.dst.as_fd(), tmp, dir.dst.as_fd(), dst_name),
            None => Ok(()),
        });
        if let Err(e) = finished {
            let _ = sys::unlink_at(dir.dst.as_fd(), written_name, false);
            self.dst_error(
                dir,
                dst_name,
                if tmp.is_some() { "rename" } else { "close" },
                &e,
            );
            return false;
        }
        if !warnings.is_empty() {
            self.warnings(&join(&dir.dst_path, sys::os_str(dst_name)), warnings);
        }
        self.file_done(
            dir,
            name,
            moved.bytes,
            moved.method,
            moved.why_not.as_deref(),
        );
        true
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

    /// macOS: `fclonefileat` creates the copy with data and metadata in one
    /// call. `None` means "not cloned, copy it the usual way".
    fn clone_new(
        &mut self,
        dir: &DirNode,
        src: &Fd,
        st: &Stat,
        name: &CStr,
        dst_name: &CStr,
    ) -> Option<bool> {
        use crate::options::{MethodChoice, SparseMode};
        let opts = self.sh.opts;
        if !matches!(opts.method, MethodChoice::Auto | MethodChoice::Clone)
            || opts.sparse == SparseMode::Never
        {
            return None;
        }
        match sys::clone_new(src.as_fd(), dir.dst.as_fd(), dst_name) {
            Ok(()) => {
                self.file_done(dir, name, st.size, Method::Clone, None);
                Some(true)
            }
            Err(e) if opts.method == MethodChoice::Clone => {
                self.dst_error(dir, dst_name, "clone", &e);
                Some(false)
            }
            Err(_) => None,
        }
    }

    fn dir(&mut self, parent: &Arc<DirNode>, name: &CStr, dst_name: &CStr, follow: bool) {
        let Some((src, st)) = self.open_and_stat(parent, name, true, follow) else {
            return;
        };
        if self.sh.opts.follow != Follow::Never && is_ancestor(parent, &st) {
            let e = io::Error::from_raw_os_error(libc::ELOOP);
            return self.src_error(parent, name, "follow", &e);
        }
        if self
            .sh
            .dst_roots
            .lock()
            .expect("roots lock")
            .contains(&(st.dev, st.ino))
        {
            let path = join(&parent.src_path, sys::os_str(name));
            let why = "cannot copy a directory into itself (the destination is inside the source)";
            return self.sh.error(CopyError::refusal(path, "copy", why));
        }
        if sys::CLONES_TREES
            && self.whole_clone_allowed()
            && self.clone_whole_dir(parent, &src, name, dst_name)
        {
            return;
        }
        let umask = self.sh.umask;
        // Made with its final permission bits when they let us fill it, so no
        // chmod is needed at the end; otherwise owner-only until it is full.
        // (Special bits come last: a setgid directory would pass its group to
        // what is created in it.)
        let perm = st.perm() & 0o777;
        let mkdir_mode = if perm & 0o300 == 0o300 { perm } else { 0o700 };
        let mut merged = false;
        let created_perm = match sys::mkdir_at(parent.dst.as_fd(), dst_name, mkdir_mode) {
            Ok(()) => mkdir_mode & !umask,
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                merged = true;
                match sys::stat_at(parent.dst.as_fd(), dst_name, false) {
                    Ok(d) if d.kind() == FileKind::Dir => d.perm(),
                    Ok(_) => {
                        return self.dst_refusal(
                            parent,
                            dst_name,
                            "cannot overwrite non-directory with directory",
                        )
                    }
                    Err(e) => return self.dst_error(parent, dst_name, "stat", &e),
                }
            }
            Err(e) => return self.dst_error(parent, dst_name, "mkdir", &e),
        };
        let dst = match sys::open_dir(parent.dst.as_fd(), dst_name) {
            Ok(fd) => fd,
            Err(e) => return self.dst_error(parent, dst_name, "open", &e),
        };
        // A directory we made is on its parent's filesystem; one that was
        // there may be a mount point.
        let top_level = parent.stat.is_none();
        let dst_dev = match merged || top_level {
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
                Err(e) => return self.dst_error(parent, dst_name, "stat", &e),
            },
        };
        let node = Arc::new(DirNode {
            src,
            dst,
            src_path: join(&parent.src_path, sys::os_str(name)),
            dst_path: join(&parent.dst_path, sys::os_str(dst_name)),
            dst_dev,
            stat: Some(st),
            created_perm,
            pending: AtomicUsize::new(1),
            parent: Some(parent.clone()),
        });
        parent.pending.fetch_add(1, Ordering::SeqCst);
        self.sh.counters.dirs.fetch_add(1, Ordering::Relaxed);
        self.sh.push(Task::List(node));
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
            Err(e) => return self.src_error(dir, name, "stat", &e),
        };
        let target = match sys::read_link_at(dir.src.as_fd(), name) {
            Ok(t) => t,
            Err(e) => return self.src_error(dir, name, "readlink", &e),
        };
        let make = |n: &CStr| sys::symlink_at(&target, dir.dst.as_fd(), n);
        if self.create_or_replace(dir, dst_name, &st, "symlink", make) {
            self.sh.counters.symlinks.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn special(&mut self, dir: &DirNode, name: &CStr, dst_name: &CStr, follow: bool) {
        let st = match sys::stat_at(dir.src.as_fd(), name, follow) {
            Ok(st) => st,
            Err(e) => return self.src_error(dir, name, "stat", &e),
        };
        let mode = st.type_and_perm();
        let make = |n: &CStr| sys::mknod_at(dir.dst.as_fd(), n, mode, st.rdev);
        if self.create_or_replace(dir, dst_name, &st, "mknod", make) {
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
        op: &'static str,
        make: impl Fn(&CStr) -> io::Result<()>,
    ) -> bool {
        match self.make_or_replace(dir, dst_name, st, make) {
            None => return false,
            Some(Err(e)) => {
                self.dst_error(dir, dst_name, op, &e);
                return false;
            }
            Some(Ok(())) => {}
        }
        let created_perm = st.perm() & 0o777 & !self.sh.umask;
        let target = Target::At(dir.dst.as_fd(), dst_name);
        let w = meta::apply(
            target,
            None,
            st,
            created_perm,
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
