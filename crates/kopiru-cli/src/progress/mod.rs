//! The progress display on stderr: bytes, files, rate and ETA, and the
//! phase (copying, flushing to disk, verifying). Workers only bump
//! counters; a ticker thread draws. Totals (for the ETA) are counted by a
//! background walk that runs only while a bar is shown.
//!
//! The rate is a moving window (the last [`WINDOW_SECS`] seconds), not the
//! average since the start, and the ETA is the longer of "bytes left at the
//! byte rate" and "files left at the file rate": a tree whose big files are
//! done still has its small files to go.

use crate::bench::human;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use kopiru::Phase;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[cfg(unix)]
mod device;
#[cfg(unix)]
pub use device::*;

/// How far back the rate looks.
pub const WINDOW_SECS: f64 = 5.0;
/// No rate (and no ETA) is shown from less than this much history.
const MIN_WINDOW_SECS: f64 = 1.0;

/// Counter samples `(seconds, bytes, files)` over the last `span` seconds,
/// plus the one just before, so that the window spans `span` once there
/// is that much history.
pub struct Window {
    span: f64,
    samples: VecDeque<(f64, u64, u64)>,
}

/// Bytes and files per second.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rates {
    pub bytes: f64,
    pub files: f64,
}

impl Window {
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

    /// The rates over the window, once it covers [`MIN_WINDOW_SECS`].
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
/// at the file rate. A measure with something left but no recent progress
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

/// How far along the bar is, 0 to 1: time spent over time spent plus the
/// ETA when there is one; else the work counted ([`fraction`]). The caller
/// keeps the largest value shown, so the bar never goes back.
pub fn bar_fraction(elapsed: f64, eta: Option<f64>, counted: f64) -> f64 {
    match eta {
        Some(e) if elapsed + e > 0.0 => elapsed / (elapsed + e),
        _ => counted,
    }
}

/// What one file costs besides its bytes, counted as this many bytes: its
/// create, metadata and close take about as long as moving 256 KiB (from
/// ~40 KiB on an NVMe drive to ~450 KiB on a disk at 3 ms a file).
const FILE_AS_BYTES: f64 = 256.0 * 1024.0;

/// How much of the work is done by count, 0 to 1: bytes and files added
/// up, each file weighing [`FILE_AS_BYTES`]. A large file in flight moves
/// the bar with its bytes (no file of it is finished yet), and many small
/// files still to come keep it from the end.
pub fn fraction(bytes: u64, total_bytes: u64, files: u64, total_files: u64) -> f64 {
    let work = |b: u64, f: u64| b as f64 + f as f64 * FILE_AS_BYTES;
    match work(total_bytes, total_files) {
        t if t > 0.0 => (work(bytes, files) / t).min(1.0),
        _ => 1.0,
    }
}

/// A duration as a person reads it: `45s`, `3m 20s`, `2h 05m`.
pub fn duration(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// A rate of bytes per second: `12.5 MiB/s`.
pub fn rate(bytes_per_sec: f64) -> String {
    format!("{}/s", human(bytes_per_sec.max(0.0) as u64))
}

#[derive(Default)]
struct Counts {
    bytes: AtomicU64,
    files: AtomicU64,
    total_bytes: AtomicU64,
    total_files: AtomicU64,
    totals_known: AtomicBool,
    phase: AtomicU8,
    done: AtomicBool,
}

const COPYING: u8 = 0;
const FLUSHING: u8 = 1;
const VERIFYING: u8 = 2;
const WAITING: u8 = 3;

/// What is being shown.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// A copy: totals from a walk of the sources, phases from the engine.
    Copy,
    /// Hashing for dedupe: bytes only, and no total (the engine gives none).
    Hash,
    /// A copy of listed entries (`--files-from`) or of one share
    /// (`--shard`): bytes and files, no total.
    Listed,
}

pub struct Progress {
    pub bar: ProgressBar,
    counts: Arc<Counts>,
    ticker: Option<JoinHandle<()>>,
}

impl Progress {
    /// Starts a display; `force` draws it even when stderr is not a
    /// terminal. For a copy, the sources are walked for the totals.
    pub fn start(work: Work, sources: &[PathBuf], force: bool) -> Progress {
        let bar = bar(force, None, "{spinner} {msg}");
        let counts = Arc::new(Counts::default());
        if work == Work::Copy {
            spawn_counter(sources.to_vec(), counts.clone());
        }
        let ticker = {
            let (bar, counts) = (bar.clone(), counts.clone());
            std::thread::spawn(move || tick(&bar, &counts, work))
        };
        Progress {
            bar,
            counts,
            ticker: Some(ticker),
        }
    }

    pub fn bytes(&self, n: u64) {
        self.counts.bytes.fetch_add(n, Ordering::Relaxed);
    }

    pub fn file(&self) {
        self.counts.files.fetch_add(1, Ordering::Relaxed);
    }

    pub fn phase(&self, p: Phase) {
        let v = match p {
            Phase::Flushing => FLUSHING,
            Phase::Verifying => VERIFYING,
            Phase::Waiting => WAITING,
            _ => COPYING,
        };
        self.counts.phase.store(v, Ordering::Relaxed);
    }

    pub fn finish(&mut self) {
        self.counts.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
        self.bar.finish_and_clear();
    }
}

/// A bar on stderr drawn with `template`, of `len` when known; `force`
/// draws it even when stderr is not a terminal.
pub fn bar(force: bool, len: Option<u64>, template: &str) -> ProgressBar {
    let target = if force {
        ProgressDrawTarget::term_like_with_hz(Box::new(console::Term::stderr()), 10)
    } else {
        ProgressDrawTarget::stderr_with_hz(10)
    };
    let bar = ProgressBar::with_draw_target(len, target);
    bar.set_style(style(template));
    bar
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).expect("valid template")
}

/// The line shown while copying or hashing, and for a copy with known
/// totals, how far along the bar is. `elapsed`: seconds since the start.
fn message(c: &Counts, work: Work, rates: Option<Rates>, elapsed: f64) -> (String, Option<f64>) {
    let bytes = c.bytes.load(Ordering::Relaxed);
    let files = c.files.load(Ordering::Relaxed);
    let rate_text = rates.map_or_else(|| "…".to_string(), |r| rate(r.bytes));
    if work == Work::Hash {
        return (
            format!(
                "hashing: {} hashed, {rate_text} (no total: files are grouped as they are found)",
                human(bytes)
            ),
            None,
        );
    }
    if work == Work::Listed {
        return (
            format!(
                "{} copied, {files} files, {rate_text} (no total: a list or a share)",
                human(bytes)
            ),
            None,
        );
    }
    if !c.totals_known.load(Ordering::Relaxed) {
        return (
            format!(
                "{} copied, {files} files, {rate_text} (counting the total…)",
                human(bytes)
            ),
            None,
        );
    }
    let (tb, tf) = (
        c.total_bytes.load(Ordering::Relaxed).max(bytes),
        c.total_files.load(Ordering::Relaxed).max(files),
    );
    let left = rates.and_then(|r| eta(tb - bytes, tf - files, r));
    let eta_text = match left {
        Some(s) => duration(s),
        None => "?".into(),
    };
    (
        format!(
            "{}/{} {files}/{tf} files {rate_text} ETA {eta_text}",
            human(bytes),
            human(tb)
        ),
        Some(bar_fraction(elapsed, left, fraction(bytes, tb, files, tf))),
    )
}

fn tick(bar: &ProgressBar, c: &Counts, work: Work) {
    const STEPS: u64 = 1000;
    let start = Instant::now();
    let mut window = Window::new(WINDOW_SECS);
    let mut shown = (u8::MAX, false);
    let mut phase_start = start;
    let mut furthest = 0.0f64;
    while !c.done.load(Ordering::Relaxed) {
        let phase = c.phase.load(Ordering::Relaxed);
        let now = start.elapsed().as_secs_f64();
        window.push(
            now,
            c.bytes.load(Ordering::Relaxed),
            c.files.load(Ordering::Relaxed),
        );
        let (msg, frac) = match phase {
            COPYING => message(c, work, window.rates(), now),
            _ => (String::new(), None),
        };
        let frac = frac.map(|f| {
            furthest = furthest.max(f);
            furthest
        });
        let with_bar = frac.is_some();
        if shown != (phase, with_bar) {
            if shown.0 != phase {
                phase_start = Instant::now();
            }
            shown = (phase, with_bar);
            bar.set_style(style(if with_bar {
                "{bar:30} {msg}"
            } else {
                "{spinner} {msg}"
            }));
            if with_bar {
                bar.set_length(STEPS);
            }
        }
        let since = duration(phase_start.elapsed().as_secs_f64());
        let copied = || {
            format!(
                "{} files, {}",
                c.files.load(Ordering::Relaxed),
                human(c.bytes.load(Ordering::Relaxed))
            )
        };
        match phase {
            FLUSHING => bar.set_message(format!(
                "flushing to disk… {since} (copied {}; exit 0 will mean it is all on the device)",
                copied()
            )),
            WAITING => bar.set_message(format!(
                "waiting for the other ranks… {since} (this one copied {})",
                copied()
            )),
            VERIFYING => bar.set_message(format!(
                "verifying: reading the copy back from the device… {since} (copied {})",
                copied()
            )),
            _ => {
                if let Some(f) = frac {
                    bar.set_position((f * STEPS as f64) as u64);
                }
                bar.set_message(msg);
            }
        }
        bar.tick();
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Sums sizes (data bytes: the allocated size of sparse files) and counts
/// files of the sources, giving up quietly on errors: this is only an
/// estimate for the ETA.
fn spawn_counter(sources: Vec<PathBuf>, c: Arc<Counts>) {
    std::thread::spawn(move || {
        let mut stack = sources;
        while let Some(p) = stack.pop() {
            if c.done.load(Ordering::Relaxed) {
                return;
            }
            let Ok(md) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            if md.is_dir() {
                if let Ok(rd) = std::fs::read_dir(&p) {
                    stack.extend(rd.flatten().map(|e| e.path()));
                }
            } else if md.is_file() {
                // A sparse file's holes are not copied as bytes.
                #[cfg(unix)]
                let allocated = std::os::unix::fs::MetadataExt::blocks(&md).saturating_mul(512);
                #[cfg(not(unix))]
                let allocated = md.len();
                let data = if allocated > 0 && allocated < md.len() {
                    allocated
                } else {
                    md.len()
                };
                c.total_bytes.fetch_add(data, Ordering::Relaxed);
                c.total_files.fetch_add(1, Ordering::Relaxed);
            }
        }
        c.totals_known.store(true, Ordering::Relaxed);
    });
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

    #[test]
    fn fraction_weighs_bytes_and_files() {
        // One 2 GiB file, half copied: half way, though no file is done.
        let f = fraction(1 << 30, 2 << 30, 0, 1);
        assert!((0.49..0.5).contains(&f), "{f}");
        // 10,000 files of 1 KiB, the 9 MiB of the first 9,000 done: 90%.
        let f = fraction(9_000 << 10, 10_000 << 10, 9_000, 10_000);
        assert!((f - 0.9).abs() < 1e-9, "{f}");
        // 1 GiB of big files done, 40,000 empty files left: far from done.
        let f = fraction(1 << 30, 1 << 30, 10, 40_010);
        assert!(f < 0.1, "{f}");
        assert_eq!(fraction(0, 0, 0, 0), 1.0);
        assert_eq!(fraction(200, 100, 1, 1), 1.0);
    }

    #[test]
    fn bar_follows_time() {
        // 30 s spent, 10 s to go: three quarters, whatever the counts say.
        assert_eq!(bar_fraction(30.0, Some(10.0), 0.01), 0.75);
        assert_eq!(bar_fraction(30.0, None, 0.4), 0.4);
        assert_eq!(bar_fraction(0.0, Some(0.0), 0.2), 0.2);
    }

    #[cfg(unix)]
    #[test]
    fn download_text_says_bytes_resumes_and_its_eta() {
        let mib = 1 << 20;
        // Its length known: the ETA is the download's, at its rate.
        assert_eq!(
            download_text(
                10 * mib,
                Some(40 * mib),
                0,
                Some(3.0 * mib as f64),
                Some(Some(99.0)),
                None
            ),
            "downloaded 10.0 MiB of 40.0 MiB at 3.0 MiB/s, ETA 10s"
        );
        assert_eq!(
            download_text(10 * mib, Some(40 * mib), 2, None, None, None),
            "downloaded 10.0 MiB of 40.0 MiB, 2 resumes, ETA ?"
        );
        assert_eq!(
            download_text(40 * mib, Some(40 * mib), 1, Some(0.0), None, None),
            "downloaded 40.0 MiB of 40.0 MiB at 0 B/s, 1 resume, ETA 0s"
        );
        // No length: the bar's own ETA, if it has one; `?` before the
        // first byte is written (not indicatif's 0s).
        assert_eq!(
            download_text(mib, None, 0, Some(mib as f64), Some(Some(5.0)), None),
            "downloaded 1.0 MiB at 1.0 MiB/s, ETA 5s"
        );
        assert_eq!(
            download_text(mib, None, 0, None, Some(None), None),
            "downloaded 1.0 MiB, ETA ?"
        );
        assert_eq!(
            download_text(mib, None, 0, None, None, None),
            "downloaded 1.0 MiB"
        );
    }

    /// While the connection is lost: which try of how many, 0 B/s (not
    /// the rate before the drop), and no ETA.
    #[cfg(unix)]
    #[test]
    fn download_text_while_reconnecting() {
        let mib = 1 << 20;
        assert_eq!(
            download_text(
                12 * mib,
                Some(40 * mib),
                2,
                Some(3.0 * mib as f64),
                None,
                Some((3, 8))
            ),
            "downloaded 12.0 MiB of 40.0 MiB at 0 B/s, reconnecting (3 of 8), 2 resumes, ETA ?"
        );
        assert_eq!(
            download_text(mib, None, 0, None, Some(Some(5.0)), Some((1, 8))),
            "downloaded 1.0 MiB at 0 B/s, reconnecting (1 of 8), ETA ?"
        );
    }

    /// The written bytes' rate and ETA: 0 B/s and `?` while reconnecting,
    /// `?` before the first byte (indicatif's ETA is 0 then).
    #[cfg(unix)]
    #[test]
    fn written_rate_and_eta() {
        assert_eq!(written_rate(1048576.0, false), "1.0 MiB/s");
        assert_eq!(written_rate(1048576.0, true), "0 B/s");
        assert_eq!(eta_text(0, 0.0, false), "?");
        assert_eq!(eta_text(4096, 65.0, false), "1m 05s");
        assert_eq!(eta_text(4096, 5.0, true), "?");
    }

    #[test]
    fn durations() {
        assert_eq!(duration(0.2), "0s");
        assert_eq!(duration(45.4), "45s");
        assert_eq!(duration(200.0), "3m 20s");
        assert_eq!(duration(7500.0), "2h 05m");
        assert_eq!(rate(1.5 * 1048576.0), "1.5 MiB/s");
    }
}
