//! The parallel copy: every command-line source and every directory becomes a
//! task on one shared LIFO queue served by worker threads (LIFO keeps the walk
//! depth-first, so few directories are open at once). Directories are read
//! once, with large getdents64 buffers, and entries are opened relative to
//! their directory's descriptor; a large directory is split into chunks so all
//! workers share it, and a large new one is copied as a pipeline ([`Ahead`]:
//! one worker creates, the others open and finish). A directory's metadata is
//! applied when its last entry is done (post-order), counted by `pending`.

mod ahead;
mod backup;
mod dir;
mod entry;
mod file;
mod latency;
mod node;
mod worker;

use crate::copy::data::Caps;
use crate::copy::place::{self, Placement, StagedTree};
use crate::copy::plan::Job;
use crate::error::{Error, Op};
use crate::events::{Phase, Reporter, Summary};
use crate::options::CopyOptions;
use crate::paths::join_name;
use crate::sys::{self, AsFd, Name};
use crate::verify::{SourceHash, SourceHashes};
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

pub(crate) use entry::keeps;
use node::{DirNode, LinkCell, Task};
pub(crate) use node::{GroupDir, Item};
use worker::Worker;

/// A directory with more entries than this is shared: its lister works
/// through it, and idle workers join in.
pub(crate) const SHARE_ABOVE: usize = 128;

/// Entries claimed at a time from a shared directory.
pub(crate) const SLICE: usize = 32;

/// With round trips: a directory with more entries than this is shared,
/// in slices of this many, so that its files are copied by many workers.
pub(crate) const ROUND_TRIP_SHARE_ABOVE: usize = 8;
pub(crate) const ROUND_TRIP_SLICE: usize = 4;

/// With round trips: workers sent to help with one shared directory.
pub(crate) const ROUND_TRIP_HELPERS: usize = 3;

#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) files: AtomicU64,
    pub(crate) bytes: AtomicU64,
    pub(crate) dirs: AtomicU64,
    pub(crate) dirs_merged: AtomicU64,
    pub(crate) symlinks: AtomicU64,
    pub(crate) specials: AtomicU64,
    pub(crate) hardlinks: AtomicU64,
    pub(crate) skipped: AtomicU64,
    /// Entries counted above and then removed by a failed final flush.
    pub(crate) withdrawn: AtomicU64,
    /// Directories that could not be made, and the entries below them,
    /// which were therefore not copied.
    pub(crate) dirs_not_made: AtomicU64,
    pub(crate) not_copied: AtomicU64,
    pub(crate) methods: [AtomicU64; 5],
    /// Files the server cloned or copied ([`latency::Latency::server_side`]).
    pub(crate) server_side: AtomicU64,
}

pub(crate) struct Shared<'a> {
    pub(crate) opts: &'a CopyOptions,
    pub(crate) reporter: &'a dyn Reporter,
    pub(crate) umask: u32,
    /// Our effective user id.
    pub(crate) euid: u32,
    /// Cleared after the first EPERM: we do not own the source files.
    pub(crate) noatime: AtomicBool,
    pub(crate) caps: Caps,
    pub(crate) links: Mutex<HashMap<(u64, u64), LinkCell>>,
    /// Popped from the back (LIFO: depth-first); shared directories are
    /// pushed to the front, so they are joined only when nothing else waits.
    pub(crate) queue: Mutex<VecDeque<Task>>,
    pub(crate) wake: Condvar,
    /// Tasks queued or running; the run ends when it reaches zero.
    pub(crate) outstanding: AtomicUsize,
    /// Worker threads running, the most that ran at once, and those
    /// waiting for work.
    pub(crate) started: AtomicUsize,
    pub(crate) most_started: AtomicUsize,
    pub(crate) idle: AtomicUsize,
    /// How many may be, and how finely directories are shared: more of
    /// both on a share.
    pub(crate) latency: latency::Latency,
    /// (device, inode) of each top-level destination directory: meeting one
    /// in a source means copying into itself through a path the planner
    /// could not see (a bind mount), so it is refused there.
    pub(crate) dst_roots: Mutex<Vec<(u64, u64)>>,
    pub(crate) counters: Counters,
    pub(crate) errors: Mutex<Vec<Error>>,
    pub(crate) warnings: Mutex<Vec<Error>>,
    /// Where finished entries go, and when they are durable.
    pub(crate) place: Placement<'a>,
    /// `--verify`: the hash of each file's source as it was read, for the
    /// files whose data kopiru read itself.
    pub(crate) source_hashes: Mutex<Vec<SourceHash>>,
    /// Every entry was walked before any cancel (set when the workers end).
    pub(crate) walked: AtomicBool,
    /// Directories made as entries of their own (`Item::shallow`), by
    /// their path inside the source.
    pub(crate) shallow_dirs: Mutex<Vec<PathBuf>>,
    /// Hard-linked files set aside, by their path inside the source, for
    /// one process to copy together later (a shard's ranks each meet only
    /// some names of an inode); `None`: copied as met.
    pub(crate) deferred_links: Option<Mutex<Vec<PathBuf>>>,
    /// Closes finished destination files: at once on Unix, on a pool of
    /// threads on Windows ([`sys::Closer`]), drained when the workers end.
    pub(crate) closer: sys::Closer,
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
    let sh = Shared::new(opts, reporter, Vec::new());
    for e in refused {
        sh.error(e);
    }
    // Pushed in reverse so the LIFO queue starts with the first source.
    // Each destination directory once, with the partial copies found there.
    let mut cleaned: Vec<((u64, u64), Vec<sys::NameBuf>)> = Vec::new();
    for job in jobs.into_iter().rev() {
        let (dst_dev, partials) = match sys::fstat(job.dst_dir.as_fd()) {
            Ok(st) => {
                let id = (st.dev, st.ino);
                let i = match cleaned.iter().position(|(d, _)| *d == id) {
                    Some(i) => i,
                    None => {
                        // What an interrupted run left beside its destination
                        // (a command-line file's temporary, say).
                        let partials = sh.place.clean_temps(&job.dst_dir, &job.dst_parent, &sh);
                        cleaned.push((id, partials));
                        cleaned.len() - 1
                    }
                };
                let mine = place::partial_name(&job.dst_name);
                let partials = cleaned[i].1.iter().filter(|p| **p == mine).cloned();
                (st.dev, partials.collect())
            }
            Err(e) => {
                sh.error(Error::dst(&job.dst_parent, Op::Stat, &e));
                continue;
            }
        };
        sh.latency
            .follow_type(job.src_dir.as_fd(), job.dst_dir.as_fd(), dst_dev);
        sh.place
            .add_filesystem(dst_dev, &job.dst_dir, &job.dst_parent, &sh);
        let mut node = DirNode::new(
            job.src_dir,
            job.dst_dir,
            job.src_parent,
            job.dst_parent,
            dst_dev,
            None,
        );
        node.partials = Mutex::new(partials);
        if let Some(basis) = &job.basis {
            // No basis where the mirror of this source does not exist.
            if let Ok((dir, name)) = sys::open_parent(basis) {
                node.basis = Some(dir);
                node.basis_top = Some(name);
            }
        }
        node.stages = true;
        let node = Arc::new(node);
        let item = Item {
            name: job.src_name,
            dst_name: Some(job.dst_name),
            kind: None,
            follow: job.follow,
            shallow: false,
            read_data: job.read_data,
            write_into: job.write_into,
        };
        sh.push(Task::Items(node, vec![item]));
    }
    let ran = execute(sh);
    (ran.summary, ran.hashes)
}

/// What a run of the workers leaves besides the copy.
pub(crate) struct Ran {
    pub(crate) summary: Summary,
    pub(crate) hashes: SourceHashes,
    /// The directories made as entries of their own (`Item::shallow`),
    /// relative to the source, whose metadata the caller applies.
    pub(crate) dirs: Vec<PathBuf>,
    /// The hard-linked files set aside (`defer_links`).
    pub(crate) deferred_links: Vec<PathBuf>,
}

/// Entries of one directory to copy, given by the caller rather than found
/// by listing it (`--files-from`, a shard): the directory pair (made and
/// opened by the caller; no metadata of its own is applied) and the items.
pub(crate) struct Group {
    pub(crate) dir: GroupDir,
    pub(crate) items: Vec<Item>,
}

/// How [`run_groups`] treats the groups' entries and directories.
pub(crate) struct GroupsIn {
    /// Hard-linked files are set aside ([`Ran::deferred_links`]), not
    /// copied.
    pub(crate) defer_links: bool,
    /// Other processes (a shard's ranks) write in the groups' directories
    /// now, so temporaries left there are not cleaned as the run starts.
    pub(crate) shared: bool,
}

/// Copies the entries of every group, as [`run`] copies command-line
/// sources, minus the staging of new top-level trees; `staged`: the
/// directories the caller staged, put in place at the end.
pub(crate) fn run_groups(
    groups: Vec<Group>,
    staged: Vec<StagedTree>,
    opts: &CopyOptions,
    reporter: &dyn Reporter,
    refused: Vec<Error>,
    how: GroupsIn,
) -> Ran {
    sys::raise_fd_limit();
    let mut sh = Shared::new(opts, reporter, staged);
    if how.defer_links {
        sh.deferred_links = Some(Mutex::new(Vec::new()));
    }
    for e in refused {
        sh.error(e);
    }
    for g in groups.into_iter().rev() {
        let mut node = DirNode::from(g.dir);
        sh.latency
            .follow_type(node.src.as_fd(), node.dst.as_fd(), node.dst_dev);
        sh.place
            .add_filesystem(node.dst_dev, &node.dst, &node.dst_path, &sh);
        if !how.shared && !node.fresh {
            // Leftovers of an interrupted run, as a listing would find them.
            let partials = sh.place.clean_temps(&node.dst, &node.dst_path, &sh);
            node.partials = Mutex::new(partials);
        }
        sh.push(Task::Items(Arc::new(node), g.items));
    }
    execute(sh)
}

/// Runs the queued tasks to completion on the worker threads, then puts
/// what waits for the end in place.
fn execute(sh: Shared) -> Ran {
    let opts = sh.opts;
    let copying = (Mutex::new(true), Condvar::new());
    std::thread::scope(|s| {
        if sh.place.flushes_while_copying() {
            s.spawn(|| sh.place.flush_while_copying(&copying));
        }
        std::thread::scope(|w| {
            // Several command-line sources are work for several workers at
            // once; otherwise they start as the tree shows work for them.
            let sources = sh.outstanding.load(Ordering::SeqCst);
            let more = sources.min(sh.latency.max_workers()).saturating_sub(1);
            sh.started.fetch_add(more, Ordering::SeqCst);
            sh.most_started.fetch_max(1 + more, Ordering::SeqCst);
            for _ in 0..more {
                w.spawn(|| Worker::new(&sh, w).serve());
            }
            Worker::new(&sh, w).serve()
        });
        *copying.0.lock().expect("copying lock") = false;
        copying.1.notify_all();
    });
    // Every file is closed before staged trees are renamed into place (which
    // Windows refuses while files below them are open) and before the
    // summary; a close that failed on the pool is that file's error.
    for (path, e) in sh.closer.finish() {
        sh.error(Error::dst(path, Op::Close, &e));
    }
    // A cancel that comes during the final flush does not withdraw a tree
    // whose walk was complete.
    let walked = !opts.cancel.is_cancelled();
    sh.walked.store(walked, Ordering::SeqCst);
    if sh.place.flushes() {
        sh.reporter.phase(Phase::Flushing);
    }
    let withdrawn = sh.place.publish(walked, &sh);
    sh.counters
        .withdrawn
        .fetch_add(withdrawn, Ordering::Relaxed);
    let hashes = std::mem::take(&mut *sh.source_hashes.lock().expect("hashes lock"));
    let dirs = std::mem::take(&mut *sh.shallow_dirs.lock().expect("dirs lock"));
    let deferred_links = match &sh.deferred_links {
        Some(d) => std::mem::take(&mut *d.lock().expect("deferred lock")),
        None => Vec::new(),
    };
    Ran {
        summary: sh.into_summary(),
        hashes: SourceHashes::new(hashes),
        dirs,
        deferred_links,
    }
}

impl<'a> Shared<'a> {
    fn new(
        opts: &'a CopyOptions,
        reporter: &'a dyn Reporter,
        staged: Vec<StagedTree>,
    ) -> Shared<'a> {
        Shared {
            opts,
            reporter,
            umask: sys::umask(),
            euid: sys::euid(),
            noatime: AtomicBool::new(true),
            caps: Caps::default(),
            links: Mutex::new(HashMap::new()),
            queue: Mutex::new(VecDeque::new()),
            wake: Condvar::new(),
            outstanding: AtomicUsize::new(0),
            started: AtomicUsize::new(1),
            most_started: AtomicUsize::new(1),
            idle: AtomicUsize::new(0),
            latency: latency::Latency::new(opts),
            dst_roots: Mutex::new(Vec::new()),
            counters: Counters::default(),
            errors: Mutex::new(Vec::new()),
            warnings: Mutex::new(Vec::new()),
            place: Placement::new(opts, staged),
            source_hashes: Mutex::new(Vec::new()),
            walked: AtomicBool::new(false),
            shallow_dirs: Mutex::new(Vec::new()),
            deferred_links: None,
            closer: sys::Closer::new(),
        }
    }

    /// Queues a task (a shared directory at the low-priority end) and wakes
    /// a waiting worker; returns how many tasks wait now.
    pub(crate) fn push(&self, task: Task) -> usize {
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

    pub(crate) fn error(&self, e: Error) {
        self.reporter.error(&e);
        self.errors.lock().expect("errors lock").push(e);
    }

    /// An existing destination entry left as it was (counted as skipped).
    pub(crate) fn kept(&self, dir: &Path, name: &Name) {
        self.counters.skipped.fetch_add(1, Ordering::Relaxed);
        self.reporter.kept(&join_name(dir, name));
    }

    pub(crate) fn warn(&self, e: Error) {
        self.reporter.warning(&e);
        self.warnings.lock().expect("warnings lock").push(e);
    }

    fn into_summary(self) -> Summary {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (round_trips, worker_steps) = self.latency.into_report();
        Summary {
            files: get(&c.files),
            bytes: get(&c.bytes),
            dirs: get(&c.dirs),
            dirs_merged: get(&c.dirs_merged),
            symlinks: get(&c.symlinks),
            specials: get(&c.specials),
            hardlinks: get(&c.hardlinks),
            skipped: get(&c.skipped),
            withdrawn: get(&c.withdrawn),
            dirs_not_made: get(&c.dirs_not_made),
            not_copied: get(&c.not_copied),
            deleted: 0,
            verified_files: 0,
            methods: std::array::from_fn(|i| get(&c.methods[i])),
            errors: self.errors.into_inner().expect("errors lock"),
            refused: 0, // set by the caller, which planned the request
            warnings: self.warnings.into_inner().expect("warnings lock"),
            elapsed: Default::default(),
            cancelled: !self.walked.load(Ordering::SeqCst),
            workers: self.most_started.load(Ordering::SeqCst) as u64,
            server_side_files: get(&c.server_side),
            round_trips,
            worker_steps,
        }
    }
}

impl place::Sink for Shared<'_> {
    fn error(&self, e: Error) {
        Shared::error(self, e)
    }

    fn warn(&self, e: Error) {
        Shared::warn(self, e)
    }

    fn kept(&self, dir: &Path, name: &Name) {
        Shared::kept(self, dir, name)
    }

    fn failures_under(&self, dst: &Path, src: &Path) -> usize {
        let errors = self.errors.lock().expect("errors lock");
        errors
            .iter()
            .filter(|e| e.path.starts_with(dst) || e.path.starts_with(src))
            .count()
    }
}
