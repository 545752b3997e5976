//! Copies a tree with a progress line (a percentage from the totals, and
//! an ETA), `--exclude`/`--include` filters, and a cancel on Ctrl-C or
//! after a time limit. A stopped copy leaves nothing half-written under a
//! final name; run it again with `--resume` to finish.
//!
//! ```text
//! cargo run -p kopiru --example copy_tree -- SOURCE DEST \
//!     [--exclude PATTERN]... [--include PATTERN]... [--timeout SECONDS] [--resume]
//! ```

use kopiru::progress::CopyProgress;
use kopiru::{Cancel, CopyOptions};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The copy's cancel handle, for the Ctrl-C handler.
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
fn cancel_on_ctrl_c() {
    eprintln!(
        "copy_tree: Ctrl-C stops the program, not the copy, here (Unix only); --timeout works"
    );
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("copy_tree: {e}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<ExitCode, Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut paths = Vec::new();
    let cancel = Cancel::new();
    let mut options = CopyOptions::new().cancel(cancel.clone());
    let mut timeout = None;
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--exclude" => options = options.exclude(&value()?)?,
            "--include" => options = options.include(&value()?)?,
            "--timeout" => timeout = Some(Duration::from_secs_f64(value()?.parse()?)),
            "--resume" => options = options.resume(true),
            _ => paths.push(PathBuf::from(a)),
        }
    }
    let Some(dest) = paths.pop().filter(|_| !paths.is_empty()) else {
        return Err(
            "usage: copy_tree SOURCE... DEST [--exclude P] [--include P] [--timeout S] [--resume]"
                .into(),
        );
    };
    let sources = paths;

    let _ = CANCEL.set(cancel.clone());
    cancel_on_ctrl_c();
    let progress = CopyProgress::start(&sources, &options);
    let started = Instant::now();
    let result = std::thread::scope(|s| {
        let copy = s.spawn(|| kopiru::copy(&sources, &dest, &options, &progress));
        while !copy.is_finished() {
            if timeout.is_some_and(|t| started.elapsed() >= t) {
                cancel.cancel();
            }
            let now = progress.snapshot();
            let line = match (now.fraction(), now.total_files) {
                (Some(f), Some(total)) => format!(
                    "{:5.1}%  {}/{total} files  ETA {}",
                    f * 100.0,
                    now.files,
                    now.eta_seconds.map_or("?".into(), |s| format!("{s:.0} s")),
                ),
                _ => format!("{} files (counting the total...)", now.files),
            };
            eprint!("\r{line:<60}");
            std::thread::sleep(Duration::from_millis(100));
        }
        copy.join().expect("the copy's thread")
    });
    eprintln!();
    let summary = result?;
    for e in &summary.errors {
        eprintln!("copy_tree: {e}");
    }
    println!(
        "{} files, {} bytes in {:.2} s{}",
        summary.files,
        summary.bytes,
        summary.elapsed.as_secs_f64(),
        match summary.cancelled {
            true => " (stopped: run again with --resume to finish)",
            false => "",
        }
    );
    Ok(match (summary.cancelled, summary.errors.is_empty()) {
        (true, _) => ExitCode::from(20),
        (false, true) => ExitCode::SUCCESS,
        (false, false) => ExitCode::from(23),
    })
}
