//! The progress bar: bytes, files, rate and ETA on stderr. Workers only bump
//! counters; a ticker thread draws. Totals (for the ETA) are counted by a
//! background walk that runs only while a bar is shown.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

#[derive(Default)]
struct Counts {
    bytes: AtomicU64,
    files: AtomicU64,
    total_bytes: AtomicU64,
    total_files: AtomicU64,
    totals_known: AtomicBool,
    done: AtomicBool,
}

pub struct Progress {
    pub bar: ProgressBar,
    counts: Arc<Counts>,
    ticker: Option<JoinHandle<()>>,
}

impl Progress {
    /// Starts a bar; `force` draws it even when stderr is not a terminal.
    pub fn start(sources: &[PathBuf], force: bool) -> Progress {
        let bar = bar(
            force,
            None,
            "{spinner} {bytes} copied, {binary_bytes_per_sec} {msg}",
        );
        let counts = Arc::new(Counts::default());
        spawn_counter(sources.to_vec(), counts.clone());
        let ticker = {
            let (bar, counts) = (bar.clone(), counts.clone());
            std::thread::spawn(move || tick(&bar, &counts))
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

    pub fn finish(&mut self) {
        self.counts.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
        self.bar.finish_and_clear();
    }
}

/// A bar on stderr drawn with `template`, of `len` bytes when known;
/// `force` draws it even when stderr is not a terminal.
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

fn tick(bar: &ProgressBar, c: &Counts) {
    let mut with_total = false;
    while !c.done.load(Ordering::Relaxed) {
        if !with_total && c.totals_known.load(Ordering::Relaxed) {
            with_total = true;
            bar.set_length(c.total_bytes.load(Ordering::Relaxed).max(1));
            bar.set_style(style(
                "{bar:30} {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta} {msg}",
            ));
        }
        bar.set_position(c.bytes.load(Ordering::Relaxed));
        let files = c.files.load(Ordering::Relaxed);
        if with_total {
            bar.set_message(format!(
                "{files}/{} files",
                c.total_files.load(Ordering::Relaxed)
            ));
        } else {
            bar.set_message(format!("{files} files"));
        }
        bar.tick();
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Sums sizes and counts files of the sources, giving up quietly on errors:
/// this is only an estimate for the ETA.
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
                c.total_bytes.fetch_add(md.len(), Ordering::Relaxed);
                c.total_files.fetch_add(1, Ordering::Relaxed);
            }
        }
        c.totals_known.store(true, Ordering::Relaxed);
    });
}
