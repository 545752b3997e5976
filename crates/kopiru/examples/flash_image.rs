//! Flashes a disk image (a file, `-` for standard input, or an `http://`
//! or `https://` URL; raw, xz, gzip, zstd or bzip2, known by its bytes)
//! onto a device, or with `--file` a regular file, with a progress line
//! and a cancel on Ctrl-C or after a time limit. The device is read back
//! and compared unless `--no-verify`. A stopped or failed flash leaves the
//! device's first MiB as it was, so it does not boot half an image.
//!
//! ```text
//! cargo run -p kopiru --example flash_image -- IMAGE TARGET... \
//!     [--file] [--no-verify] [--timeout SECONDS]
//! ```

use kopiru::flash::{self, FlashEvents, FlashOptions, Image};
use kopiru::{Cancel, DeviceProgress};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The flash's cancel handle, for the Ctrl-C handler.
static CANCEL: OnceLock<Cancel> = OnceLock::new();

#[cfg(unix)]
extern "C" fn on_interrupt(_signal: libc::c_int) {
    // A load and a store of atomics: safe in a signal handler.
    if let Some(c) = CANCEL.get() {
        c.cancel();
    }
}

#[cfg(unix)]
fn cancel_on_ctrl_c() {
    let handler = on_interrupt as extern "C" fn(libc::c_int);
    // SAFETY: the handler only touches atomics (async-signal-safe), and
    // SIGINT's disposition is ours to set in this program.
    unsafe { libc::signal(libc::SIGINT, handler as libc::sighandler_t) };
}

#[cfg(not(unix))]
fn cancel_on_ctrl_c() {}

/// The observer: bytes written (acknowledged by every device), then read
/// back. Called from the flash's threads, read by the progress line.
#[derive(Default)]
struct Progress {
    written: AtomicU64,
    verify_total: AtomicU64,
    verified: AtomicU64,
}

impl DeviceProgress for Progress {
    fn done(&self, n: u64) {
        self.written.fetch_add(n, Ordering::Relaxed);
    }
    fn verifying(&self, total: u64) {
        self.verify_total.store(total, Ordering::Relaxed);
    }
    fn verified(&self, n: u64) {
        self.verified.fetch_add(n, Ordering::Relaxed);
    }
}

// The per-block hook keeps its default: write unless the device holds the
// same bytes already.
impl FlashEvents for Progress {}

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("flash_image: {e}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<ExitCode, Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut paths = Vec::new();
    let mut options = FlashOptions::new();
    let mut timeout = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--file" => options.allow_file = true,
            "--no-verify" => options.verify = false,
            "--timeout" => {
                let s = args.next().ok_or("--timeout needs a value")?;
                timeout = Some(Duration::from_secs_f64(s.parse()?));
            }
            _ => paths.push(PathBuf::from(a)),
        }
    }
    if paths.len() < 2 {
        return Err(
            "usage: flash_image IMAGE TARGET... [--file] [--no-verify] [--timeout S]".into(),
        );
    }
    let targets = paths.split_off(1);

    // Known by its bytes before any target is looked at; the targets are
    // checked (not mounted, not the system's disk, big enough) before
    // anything is written. Either refusal is an Err with its reason.
    let image = Image::open(&paths[0], None)?;
    let targets = flash::check_targets(&image, &targets, &options)?;

    let cancel = options.cancel.clone();
    let _ = CANCEL.set(cancel.clone());
    cancel_on_ctrl_c();
    let progress = Progress::default();
    let started = Instant::now();
    let past_limit = || timeout.is_some_and(|t| started.elapsed() >= t);
    if past_limit() {
        cancel.cancel();
    }
    let summary = std::thread::scope(|s| {
        let run = s.spawn(|| kopiru::flash(&image, &targets, &options, &progress));
        while !run.is_finished() {
            if past_limit() {
                cancel.cancel();
            }
            let written = progress.written.load(Ordering::Relaxed);
            let verify_total = progress.verify_total.load(Ordering::Relaxed);
            let line = match (verify_total, image.size) {
                (0, Some(size)) if size > 0 => {
                    format!("writing {:5.1}%", written as f64 * 100.0 / size as f64)
                }
                (0, _) => format!("writing {} MiB", written >> 20),
                (total, _) => format!(
                    "verifying {:5.1}%",
                    progress.verified.load(Ordering::Relaxed) as f64 * 100.0 / total as f64
                ),
            };
            eprint!("\r{line:<40}");
            std::thread::sleep(Duration::from_millis(100));
        }
        run.join().expect("the flash's thread")
    });
    eprintln!();

    if let Some(e) = &summary.source_error {
        eprintln!("flash_image: the image: {e}");
    }
    for d in &summary.devices {
        match (d.error_text(), d.verified) {
            (Some(why), _) => eprintln!("flash_image: {}: {why}", d.path.display()),
            (None, Some(false)) => eprintln!(
                "flash_image: {}: read back differently at offset {}",
                d.path.display(),
                d.mismatch_at.unwrap_or(0)
            ),
            _ => {}
        }
    }
    println!(
        "{} bytes of {} image to {} target(s) in {:.2} s{}",
        summary.image_bytes,
        summary.format,
        summary.devices.len(),
        summary.elapsed.as_secs_f64(),
        match (summary.cancelled, summary.ok()) {
            (true, _) => " (stopped: the first MiB was not written)",
            (false, true) if options.verify => ", verified",
            _ => "",
        }
    );
    // The command's exit codes (0, 1, 20, 23), decided by the engine.
    Ok(ExitCode::from(summary.outcome().code()))
}
