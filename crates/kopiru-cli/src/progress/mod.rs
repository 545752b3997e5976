//! The progress display on stderr: bytes, files, rate and ETA, and the
//! phase (copying, flushing to disk, verifying). Workers only bump
//! counters; a ticker thread draws. Totals (for the ETA) are counted by the
//! engine's walk (`kopiru::progress`), which runs only while a bar is shown.
//!
//! The rate is a moving window (the last [`WINDOW_SECS`] seconds), not the
//! average since the start, and the ETA is the longer of "bytes left at the
//! byte rate" and "files left at the file rate": a tree whose big files are
//! done still has its small files to go.

use crate::size::human;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use kopiru::progress::Totals;
use kopiru::{CopyOptions, Phase};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[cfg(unix)]
mod device;
#[cfg(unix)]
pub use device::*;

pub use kopiru::progress::{eta, Rates, Window, WINDOW_SECS};

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
    /// The walk's, for a copy; stopped by `finish`.
    totals_stop: kopiru::Cancel,
    ticker: Option<JoinHandle<()>>,
}

impl Progress {
    /// Starts a display; `force` draws it even when stderr is not a
    /// terminal. For a copy, the sources are walked for the totals as the
    /// copy with `options` walks them (the engine's walk: filters, links
    /// followed or not).
    pub fn start(work: Work, sources: &[PathBuf], options: &CopyOptions, force: bool) -> Progress {
        let bar = bar(force, None, "{spinner} {msg}");
        let counts = Arc::new(Counts::default());
        // Its own stop: the walk ends with the display, not only on a cancel.
        let totals_stop = kopiru::Cancel::new();
        let totals = (work == Work::Copy)
            .then(|| Totals::spawn(sources.to_vec(), options, totals_stop.clone()));
        let ticker = {
            let (bar, counts) = (bar.clone(), counts.clone());
            std::thread::spawn(move || tick(&bar, &counts, totals.as_deref(), work))
        };
        Progress {
            bar,
            counts,
            totals_stop,
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
        self.totals_stop.cancel();
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
fn message(
    c: &Counts,
    totals: Option<&Totals>,
    work: Work,
    rates: Option<Rates>,
    elapsed: f64,
) -> (String, Option<f64>) {
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
    let Some(totals) = totals.filter(|t| t.known()) else {
        return (
            format!(
                "{} copied, {files} files, {rate_text} (counting the total…)",
                human(bytes)
            ),
            None,
        );
    };
    let (tb, tf) = (totals.bytes().max(bytes), totals.files().max(files));
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

fn tick(bar: &ProgressBar, c: &Counts, totals: Option<&Totals>, work: Work) {
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
            COPYING => message(c, totals, work, window.rates(), now),
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

#[cfg(test)]
mod tests {
    use super::*;

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
