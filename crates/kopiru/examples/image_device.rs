//! Reads a block device (or with `--file` a regular file) into an image,
//! compressed as OUTPUT's name says (`.zst`, `.xz`, `.gz`; anything else
//! is raw), with a progress line and a cancel on Ctrl-C or after a time
//! limit. The image is read back, decoded and compared with the device's
//! hash unless `--no-verify`; nothing is left under OUTPUT unless it is
//! complete.
//!
//! ```text
//! cargo run -p kopiru --example image_device -- DEVICE OUTPUT \
//!     [--file] [--level N] [--no-verify] [--timeout SECONDS]
//! ```

use kopiru::image::{self, ImageOptions};
use kopiru::Format;
use kopiru::{Cancel, DeviceProgress};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The run's cancel handle, for the Ctrl-C handler.
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

/// The observer: bytes read and encoded, then read back.
#[derive(Default)]
struct Progress {
    read: AtomicU64,
    verify_total: AtomicU64,
    verified: AtomicU64,
}

impl DeviceProgress for Progress {
    fn done(&self, n: u64) {
        self.read.fetch_add(n, Ordering::Relaxed);
    }
    fn verifying(&self, total: u64) {
        self.verify_total.store(total, Ordering::Relaxed);
    }
    fn verified(&self, n: u64) {
        self.verified.fetch_add(n, Ordering::Relaxed);
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("image_device: {e}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<ExitCode, Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut paths = Vec::new();
    let mut options = ImageOptions::new();
    let mut timeout = None;
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--file" => options.allow_file = true,
            "--no-verify" => options.verify = false,
            "--level" => options.level = Some(value()?.parse()?),
            "--timeout" => timeout = Some(Duration::from_secs_f64(value()?.parse()?)),
            _ => paths.push(PathBuf::from(a)),
        }
    }
    let [device, output] = <[PathBuf; 2]>::try_from(paths).map_err(|_| {
        "usage: image_device DEVICE OUTPUT [--file] [--level N] [--no-verify] [--timeout S]"
    })?;
    options.format = Format::of_output(&output);

    // Refused (not a device, mounted read-write, OUTPUT on the device or
    // existing, ...) before anything is written.
    let source = image::check_source(&device, &output, &options)?;

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
        let run = s.spawn(|| kopiru::image(&source, &output, &options, &progress));
        while !run.is_finished() {
            if past_limit() {
                cancel.cancel();
            }
            let verify_total = progress.verify_total.load(Ordering::Relaxed);
            let line = match verify_total {
                0 => format!(
                    "reading {:5.1}%",
                    progress.read.load(Ordering::Relaxed) as f64 * 100.0
                        / source.size.max(1) as f64
                ),
                total => format!(
                    "verifying {:5.1}%",
                    progress.verified.load(Ordering::Relaxed) as f64 * 100.0 / total as f64
                ),
            };
            eprint!("\r{line:<40}");
            std::thread::sleep(Duration::from_millis(100));
        }
        run.join().expect("the image's thread")
    });
    eprintln!();

    if let Some(e) = &summary.error {
        eprintln!("image_device: {e}");
    }
    println!(
        "{} bytes read into {} bytes of {} in {:.2} s{}",
        summary.image_bytes,
        summary.output_bytes,
        summary.format.name(),
        summary.elapsed.as_secs_f64(),
        match (summary.cancelled, summary.verified) {
            (true, _) => " (stopped: nothing written)",
            (false, Some(true)) => ", verified",
            (false, Some(false)) => ", NOT as read: removed",
            (false, None) => "",
        }
    );
    Ok(ExitCode::from(summary.outcome().code()))
}
