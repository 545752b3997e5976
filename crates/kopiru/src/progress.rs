//! What a progress display needs besides the copy's own events: the totals
//! (files and bytes a copy of the sources will move, counted by a walk that
//! runs beside the copy), and a rate and an ETA from the counts so far. The
//! command line's bar and the Node binding's `onProgress` both use these.
//!
//! [`CopyProgress`] puts them together: a [`crate::Reporter`] to pass to
//! [`crate::copy`], which walks the totals beside the copy and gives a
//! [`Snapshot`] (counts, totals, fraction done, ETA) whenever asked.
//!
//! ```no_run
//! use kopiru::progress::CopyProgress;
//! use std::path::PathBuf;
//!
//! let sources = vec![PathBuf::from("node_modules")];
//! let options = kopiru::CopyOptions::new().exclude(".cache/")?;
//! let progress = CopyProgress::start(&sources, &options);
//! std::thread::scope(|s| {
//!     let copy = s.spawn(|| kopiru::copy(&sources, "copy".as_ref(), &options, &progress));
//!     while !copy.is_finished() {
//!         let now = progress.snapshot();
//!         if let Some(f) = now.fraction() {
//!             eprint!("\r{:5.1}%", f * 100.0);
//!         }
//!         std::thread::sleep(std::time::Duration::from_millis(100));
//!     }
//! });
//! # Ok::<(), kopiru::PatternError>(())
//! ```

use crate::sys::{self, FileKind};
use crate::{Cancel, CopyOptions, FileDone, Follow, Phase, Reporter};
use std::collections::{HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The files and bytes a copy will move, as counted so far. Shared between
/// the counting walk (which adds) and a display (which reads) through an
/// [`Arc`]; every method is one atomic load.
#[derive(Debug, Default)]
pub struct Totals {
    files: AtomicU64,
    bytes: AtomicU64,
    known: AtomicBool,
}

impl Totals {
    /// Nothing counted yet.
    pub fn new() -> Totals {
        Totals::default()
    }

    /// Regular files counted so far (all of them once [`Totals::known`]).
    pub fn files(&self) -> u64 {
        self.files.load(Ordering::Relaxed)
    }

    /// Bytes of file data counted so far: each file's size, or the
    /// allocated bytes of a file with holes (whose holes are not copied).
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Whether the walk has finished: the counts are the totals. Stays
    /// `false` when the walk was stopped, and for a copy of one share
    /// ([`CopyOptions::shard`]), whose part of the tree is not known ahead.
    pub fn known(&self) -> bool {
        self.known.load(Ordering::Relaxed)
    }

    /// Counts `sources` as [`count_totals`] does, on a thread of its own,
    /// which ends when `stop` or `options.cancel` is cancelled.
    pub fn spawn(sources: Vec<PathBuf>, options: &CopyOptions, stop: Cancel) -> Arc<Totals> {
        let totals = Arc::new(Totals::new());
        let (t, options) = (totals.clone(), options.clone());
        std::thread::Builder::new()
            .name("kopiru-totals".into())
            .spawn(move || count_totals(&sources, &options, &t, &stop))
            .expect("a thread for the totals");
        totals
    }

    fn add(&self, bytes: u64) {
        self.files.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }
}

/// Walks `sources` as [`crate::copy`] with `options` would, adding each
/// regular file to be copied to `totals`, and marks them known at the end.
/// Honours the filter (`--exclude`/`--include`: an excluded directory is
/// not entered), [`CopyOptions::follow`], [`CopyOptions::one_file_system`],
/// hard links kept as links (counted once, as the copy's summary counts
/// them) and [`CopyOptions::files_from`]. Entries that cannot be read are
/// left out quietly: this is an estimate for a display, and the copy
/// reports them. Returns early, the totals not known, once `stop` is
/// cancelled.
///
/// What it does not foresee: files the copy skips (`resume`, `update`,
/// `no_clobber`, `basis`) are counted, and files that change meanwhile are
/// counted as they were. A display should show at most 100%.
pub fn count_totals(sources: &[PathBuf], options: &CopyOptions, totals: &Totals, stop: &Cancel) {
    if options.shard.is_some() {
        return;
    }
    let mut walk = Walk {
        options,
        totals,
        stop,
        linked: HashSet::new(),
        entered: HashSet::new(),
    };
    let follow_always = options.follow == Follow::Always;
    let finished = match (&options.files_from, sources) {
        (Some(list), [root]) => list.iter().all(|rel| {
            let enter = options.recursive;
            walk.entry(&root.join(rel), rel, follow_always, enter, None)
        }),
        // Refused by the copy: nothing will be copied.
        (Some(_), _) => true,
        (None, _) => sources.iter().all(|src| {
            let follow = options.follow != Follow::Never;
            walk.entry(src, Path::new(""), follow, true, None)
        }),
    };
    if finished {
        totals.known.store(true, Ordering::Relaxed);
    }
}

struct Walk<'a> {
    options: &'a CopyOptions,
    totals: &'a Totals,
    stop: &'a Cancel,
    /// Files with several links already counted (dev, ino).
    linked: HashSet<(u64, u64)>,
    /// Directories entered (dev, ino), so a followed link loop ends.
    entered: HashSet<(u64, u64)>,
}

impl Walk<'_> {
    fn stopped(&self) -> bool {
        self.stop.is_cancelled() || self.options.cancel.is_cancelled()
    }

    /// Counts the entry at `path` (`rel` below its source directory) and
    /// what is below it. `false` once stopped.
    fn entry(
        &mut self,
        path: &Path,
        rel: &Path,
        follow: bool,
        enter: bool,
        root_dev: Option<u64>,
    ) -> bool {
        let Ok(st) = sys::stat_path(path, follow) else {
            return !self.stopped();
        };
        match st.kind() {
            FileKind::File => self.file(&st),
            FileKind::Dir if enter => {
                let other_fs =
                    self.options.one_file_system && root_dev.is_some_and(|d| d != st.dev);
                if !other_fs && self.entered.insert((st.dev, st.ino)) {
                    return self.dir(path, rel, root_dev.unwrap_or(st.dev));
                }
            }
            _ => {}
        }
        !self.stopped()
    }

    /// Counts a regular file; a hard link kept as a link is counted once.
    fn file(&mut self, st: &sys::Stat) {
        let links_kept = self.options.preserve.links && st.nlink > 1;
        if !links_kept || self.linked.insert((st.dev, st.ino)) {
            self.totals.add(st.data_bytes());
        }
    }

    /// The entries of the directory at `path`, breadth first, through the
    /// filter.
    fn dir(&mut self, path: &Path, rel: &Path, root_dev: u64) -> bool {
        let follow = self.options.follow == Follow::Always;
        let mut queue = VecDeque::from([(path.to_path_buf(), rel.to_path_buf())]);
        while let Some((dir, rel)) = queue.pop_front() {
            let Ok(listing) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in listing.flatten() {
                if self.stopped() {
                    return false;
                }
                let (child, child_rel) = (e.path(), rel.join(e.file_name()));
                let Ok(st) = sys::stat_path(&child, follow) else {
                    continue;
                };
                let is_dir = st.kind() == FileKind::Dir;
                let filter = &self.options.filter;
                if !filter.is_empty() && filter.excludes(&child_rel, || is_dir) {
                    continue;
                }
                match st.kind() {
                    FileKind::Dir => {
                        let other_fs = self.options.one_file_system && st.dev != root_dev;
                        if !other_fs && self.entered.insert((st.dev, st.ino)) {
                            queue.push_back((child, child_rel));
                        }
                    }
                    FileKind::File => self.file(&st),
                    _ => {}
                }
            }
        }
        !self.stopped()
    }
}

/// How far back the rate of a [`Window`] looks, in seconds, as the
/// command's bar has it.
pub const WINDOW_SECS: f64 = 5.0;
/// No rate (and no ETA) comes from less than this much history.
const MIN_WINDOW_SECS: f64 = 1.0;

/// Counter samples `(seconds, bytes, files)` over the last `span` seconds,
/// plus the one just before, so that the window spans `span` once there
/// is that much history: a moving rate, not the average since the start.
#[derive(Clone, Debug)]
pub struct Window {
    span: f64,
    samples: VecDeque<(f64, u64, u64)>,
}

/// Bytes and files per second.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rates {
    /// Bytes per second.
    pub bytes: f64,
    /// Files per second.
    pub files: f64,
}

impl Window {
    /// An empty window over the last `span` seconds.
    pub fn new(span: f64) -> Window {
        Window {
            span,
            samples: VecDeque::new(),
        }
    }

    /// Adds the counters as they are at `t` seconds (non-decreasing).
    pub fn push(&mut self, t: f64, bytes: u64, files: u64) {
        self.samples.push_back((t, bytes, files));
        while self.samples.len() > 2 && self.samples[1].0 <= t - self.span {
            self.samples.pop_front();
        }
    }

    /// The rates over the window, once it covers a second.
    pub fn rates(&self) -> Option<Rates> {
        let (t0, b0, f0) = *self.samples.front()?;
        let (t1, b1, f1) = *self.samples.back()?;
        let dt = t1 - t0;
        (dt >= MIN_WINDOW_SECS).then(|| Rates {
            bytes: b1.saturating_sub(b0) as f64 / dt,
            files: f1.saturating_sub(f0) as f64 / dt,
        })
    }
}

/// Files left this many times larger (on average) than those finished in
/// the window make the window's byte rate meaningless for them...
const UNLIKE: f64 = 16.0;
/// ...when those were small: per-file work, not bandwidth, set that rate.
/// Files left that are small too take about the file rate's time.
const SMALL: f64 = 256.0 * 1024.0;

/// Seconds left: the longer of bytes left at the byte rate and files left
/// at the file rate (a tree whose big files are done still has its small
/// files to go). A measure with something left but no recent progress
/// is left out (a tree of empty files moves no bytes; one big file finishes
/// no file for a while). When the bytes would decide but the byte rate
/// comes from small files, far smaller than those left (per-file work, not
/// bandwidth, set that rate): the file rate's time if the files left are
/// small too, else `None` (big files to come, at a speed not seen yet).
/// `None` too when nothing left can be timed.
pub fn eta(bytes_left: u64, files_left: u64, r: Rates) -> Option<f64> {
    let term = |left: u64, rate: f64| match (left, rate > 0.0) {
        (0, _) => Some(0.0),
        (_, true) => Some(left as f64 / rate),
        (_, false) => None,
    };
    match (term(bytes_left, r.bytes), term(files_left, r.files)) {
        (None, None) => None,
        (Some(b), None) => Some(b),
        (None, Some(f)) => (bytes_left == 0 || f > 0.0).then_some(f),
        (Some(b), Some(f)) if b <= f => Some(f),
        (Some(b), Some(f)) => {
            if files_left == 0 || r.files == 0.0 {
                return Some(b);
            }
            let (done_avg, left_avg) = (r.bytes / r.files, bytes_left as f64 / files_left as f64);
            match done_avg < SMALL && left_avg > UNLIKE * done_avg {
                false => Some(b),
                true => (left_avg <= SMALL).then_some(f),
            }
        }
    }
}

/// The observer of one copy for a progress display: pass it to
/// [`crate::copy`] as its reporter and read [`CopyProgress::snapshot`] from
/// another thread (a ticker, a UI). It counts files and bytes as the copy
/// reports them and walks the sources for the totals on a thread of its
/// own ([`Totals::spawn`]), stopped when it is dropped. To also receive the
/// copy's other events, call its [`Reporter`] methods from your own.
#[derive(Debug)]
pub struct CopyProgress {
    files: AtomicU64,
    bytes: AtomicU64,
    phase: AtomicU8,
    totals: Arc<Totals>,
    walk_stop: Cancel,
    started: Instant,
    window: Mutex<Window>,
}

/// How a copy stands, from [`CopyProgress::snapshot`].
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct Snapshot {
    /// Regular files copied so far.
    pub files: u64,
    /// Bytes of file data copied so far.
    pub bytes: u64,
    /// The files of the whole copy once the walk has counted them (never
    /// below `files`); `None` while it counts.
    pub total_files: Option<u64>,
    /// The bytes of the whole copy, likewise (never below `bytes`).
    pub total_bytes: Option<u64>,
    /// Seconds left ([`eta`] over the last [`WINDOW_SECS`]), once there are
    /// totals and a second of rates, while copying.
    pub eta_seconds: Option<f64>,
    /// What the copy is doing.
    pub phase: Phase,
    /// Seconds since [`CopyProgress::start`].
    pub elapsed: f64,
}

/// What one file costs besides its bytes in [`Snapshot::fraction`]: its
/// create, metadata and close take about as long as moving 256 KiB.
const FILE_AS_BYTES: f64 = 256.0 * 1024.0;

impl Snapshot {
    /// How much is done, 0 to 1, once the totals are known: bytes and
    /// files added up, each file weighing as much as 256 KiB of data, so a
    /// tree of small files moves by files and one big file by its bytes.
    pub fn fraction(&self) -> Option<f64> {
        let work = |b: u64, f: u64| b as f64 + f as f64 * FILE_AS_BYTES;
        let total = work(self.total_bytes?, self.total_files?);
        Some(match total > 0.0 {
            true => (work(self.bytes, self.files) / total).min(1.0),
            false => 1.0,
        })
    }
}

impl CopyProgress {
    /// Starts counting the totals of a copy of `sources` with `options`
    /// (the walk stops early when `options.cancel` is cancelled, or when
    /// this is dropped).
    pub fn start(sources: &[PathBuf], options: &CopyOptions) -> CopyProgress {
        let walk_stop = Cancel::new();
        let totals = Totals::spawn(sources.to_vec(), options, walk_stop.clone());
        CopyProgress {
            files: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            phase: AtomicU8::new(0),
            totals,
            walk_stop,
            started: Instant::now(),
            window: Mutex::new(Window::new(WINDOW_SECS)),
        }
    }

    /// The counts now, with the totals and the ETA when known. Each call
    /// adds a sample to the rate window: call it at a steady pace (a
    /// ticker's, every 100 ms or so).
    pub fn snapshot(&self) -> Snapshot {
        let files = self.files.load(Ordering::Relaxed);
        let bytes = self.bytes.load(Ordering::Relaxed);
        let elapsed = self.started.elapsed().as_secs_f64();
        let phase = match self.phase.load(Ordering::Relaxed) {
            1 => Phase::Flushing,
            2 => Phase::Verifying,
            3 => Phase::Waiting,
            _ => Phase::Copying,
        };
        let rates = {
            let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
            w.push(elapsed, bytes, files);
            w.rates()
        };
        let known = self.totals.known().then_some(&*self.totals);
        let total_files = known.map(|t| t.files().max(files));
        let total_bytes = known.map(|t| t.bytes().max(bytes));
        let eta_seconds = match (total_files, total_bytes, rates, phase) {
            (Some(tf), Some(tb), Some(r), Phase::Copying) => eta(tb - bytes, tf - files, r),
            _ => None,
        };
        Snapshot {
            files,
            bytes,
            total_files,
            total_bytes,
            eta_seconds,
            phase,
            elapsed,
        }
    }

    /// The totals as the walk has them.
    pub fn totals(&self) -> &Totals {
        &self.totals
    }
}

impl Drop for CopyProgress {
    fn drop(&mut self) {
        self.walk_stop.cancel();
    }
}

impl Reporter for CopyProgress {
    fn file_done(&self, _done: &FileDone) {
        self.files.fetch_add(1, Ordering::Relaxed);
    }
    fn bytes(&self, n: u64) {
        self.bytes.fetch_add(n, Ordering::Relaxed);
    }
    fn phase(&self, phase: Phase) {
        let n = match phase {
            Phase::Flushing => 1,
            Phase::Verifying => 2,
            Phase::Waiting => 3,
            _ => 0,
        };
        self.phase.store(n, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_rate_is_recent_not_cumulative() {
        let mut w = Window::new(5.0);
        assert_eq!(w.rates(), None);
        // 10 s at 100 B/s and 10 files/s, then 10 s at 10 B/s, 1 file/s.
        let (mut b, mut f) = (0, 0);
        for t in 0..=20 {
            w.push(t as f64, b, f);
            if t < 10 {
                b += 100;
                f += 10;
            } else {
                b += 10;
                f += 1;
            }
        }
        let r = w.rates().unwrap();
        assert!((r.bytes - 10.0).abs() < 1e-9, "{r:?}");
        assert!((r.files - 1.0).abs() < 1e-9, "{r:?}");
        // The cumulative average would say 55 B/s.
    }

    #[test]
    fn window_needs_a_second_of_history() {
        let mut w = Window::new(5.0);
        w.push(0.0, 0, 0);
        w.push(0.5, 100, 1);
        assert_eq!(w.rates(), None);
        w.push(1.0, 200, 2);
        assert_eq!(
            w.rates(),
            Some(Rates {
                bytes: 200.0,
                files: 2.0
            })
        );
    }

    #[test]
    fn window_spans_its_length() {
        let mut w = Window::new(5.0);
        for t in 0..100 {
            w.push(t as f64 * 0.1, t * 10, t);
        }
        let (t0, t1) = (w.samples.front().unwrap().0, w.samples.back().unwrap().0);
        assert!((t1 - t0 - 5.0).abs() < 0.11, "{t0} {t1}");
    }

    #[test]
    fn eta_waits_for_the_small_files() {
        // The big files are done: 1 MiB left at 10 MiB/s, but 4000 small
        // files left at 100 files/s.
        let r = Rates {
            bytes: 10.0 * 1048576.0,
            files: 100.0,
        };
        assert_eq!(eta(1 << 20, 4000, r), Some(40.0));
        // And the other way round: one big file left after 5 MB ones.
        let r = Rates {
            bytes: 50e6,
            files: 10.0,
        };
        assert_eq!(eta(500_000_000, 1, r), Some(10.0));
        assert_eq!(eta(0, 0, r), Some(0.0));
    }

    #[test]
    fn eta_without_recent_progress() {
        let stalled = Rates {
            bytes: 0.0,
            files: 0.0,
        };
        assert_eq!(eta(10, 1, stalled), None);
        // Empty files move no bytes: time them by files alone.
        let files_only = Rates {
            bytes: 0.0,
            files: 50.0,
        };
        assert_eq!(eta(0, 100, files_only), Some(2.0));
        assert_eq!(eta(5, 100, files_only), Some(2.0));
        // Bytes left but nothing moves them and no files are left.
        assert_eq!(eta(5, 0, files_only), None);
        // One big file in progress: no file finished lately, bytes move.
        let bytes_only = Rates {
            bytes: 1000.0,
            files: 0.0,
        };
        assert_eq!(eta(10_000, 1, bytes_only), Some(10.0));
    }

    #[test]
    fn eta_unknown_when_big_files_are_still_to_come() {
        // 100 files/s of 30 bytes each: 3 KB/s. Left: one file of 200 MB.
        // The byte rate would say 18 hours; it measured per-file work.
        let r = Rates {
            bytes: 3000.0,
            files: 100.0,
        };
        assert_eq!(eta(200_000_000, 1, r), None);
        // 1000 files of 200 KB: small too, the file rate's 10 s.
        assert_eq!(eta(200_000_000, 1000, r), Some(10.0));
        // Files like those done: the byte rate stands.
        assert_eq!(eta(60_000, 1000, r), Some(20.0));
    }
}

#[cfg(test)]
mod walk_tests {
    use super::*;
    use crate::{Filter, Rule, RuleKind};

    #[test]
    fn totals_follow_the_filter_and_count_links_once() {
        let root = std::env::temp_dir().join(format!("kopiru-totals-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let src = root.join("src");
        std::fs::create_dir_all(src.join("keep")).unwrap();
        std::fs::create_dir_all(src.join("cache/deep")).unwrap();
        std::fs::write(src.join("keep/a.txt"), [1u8; 100]).unwrap();
        std::fs::write(src.join("keep/b.o"), [2u8; 30]).unwrap();
        std::fs::write(src.join("cache/deep/c.txt"), [3u8; 7]).unwrap();
        std::fs::hard_link(src.join("keep/a.txt"), src.join("a-again.txt")).unwrap();
        let count = |opts: &CopyOptions| {
            let t = Totals::new();
            count_totals(std::slice::from_ref(&src), opts, &t, &Cancel::new());
            assert!(t.known());
            (t.files(), t.bytes())
        };
        let mut opts = CopyOptions::default();
        assert_eq!(count(&opts), (3, 137), "a.txt's second link counted once");
        opts.preserve.links = false;
        assert_eq!(count(&opts), (4, 237));
        let mut filter = Filter::new();
        filter.push(Rule::new(RuleKind::Exclude, "*.o").unwrap());
        filter.push(Rule::new(RuleKind::Exclude, "cache/").unwrap());
        opts.filter = filter;
        assert_eq!(count(&opts), (2, 200));
        // Stopped before it starts: nothing is known.
        let (t, stop) = (Totals::new(), Cancel::new());
        stop.cancel();
        count_totals(std::slice::from_ref(&src), &opts, &t, &stop);
        assert!(!t.known());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
