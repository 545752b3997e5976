// End-to-end tests of `kopiru` on real filesystems (ext4, XFS with reflink,
// Btrfs) made on loop devices. Tests whose needs (root, loop devices, mkfs
// tools, strace) are missing are reported as ignored, with the reason printed
// loudly, never passed silently.
//
// Every module registers its own tests in its own `pub fn trials(add: Add)`;
// `main()` only calls each module's `trials`. Adding a test costs one
// function and one `add` line in the same file. This file keeps the helpers
// the modules share and the runner.
//
// Included by entry.rs on Linux only (hence `//`, not `//!`).

/// `return Err(...)` with a message unless `cond` holds (before the
/// modules, so that every one of them can use it).
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+).into());
        }
    };
}

mod benches;
mod cli;
mod copying;
mod cprules;
mod dedupe;
mod durability;
mod edges;
mod examples;
mod faults;
mod fixture;
mod flash;
mod flash_input;
mod flash_refusals;
mod flash_url;
mod help;
mod image;
mod manifest;
mod options;
mod reruns;
mod scale;
mod shares;
mod signals;
mod snapshots;
mod trees;
mod verify;

use fixture::Fs;
use libtest_mimic::{Arguments, Failed, Trial};
use manifest::{compare, compare_except, manifest, Fields};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{Command, Output};

type R = Result<(), Failed>;

/// What each module's `trials` registers its tests with: a test's name, why
/// it cannot run here (if it cannot: it is then ignored and listed loudly),
/// and the test itself.
type Add<'a> = &'a mut dyn FnMut(String, Option<String>, Box<dyn FnOnce() -> R + Send>);

/// Why tests that run kopiru under strace cannot run here, if they cannot.
fn strace_unavailable() -> Option<String> {
    (!fixture::have("strace")).then(|| "strace not installed (apt-get install strace)".to_string())
}

fn kopiru<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    Command::new(env!("CARGO_BIN_EXE_kopiru"))
        .args(args)
        .output()
        .expect("run kopiru")
}

/// kopiru run in `dir`, arguments as a user types them.
fn kopiru_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kopiru"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run kopiru")
}

/// kopiru run as user and group 65534 (nobody, no other groups), with
/// `args`: what a user who is not root meets (unreadable sources, chown
/// refused). Needs `setpriv` ([`setpriv_unavailable`]).
fn kopiru_as_nobody<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .env_remove("XDG_STATE_HOME")
        .env("HOME", "/nonexistent")
        .arg(env!("CARGO_BIN_EXE_kopiru"))
        .args(args)
        .output()
        .expect("run kopiru under setpriv")
}

/// Why kopiru cannot be run as another user here, if it cannot.
fn setpriv_unavailable() -> Option<String> {
    (!fixture::have("setpriv")).then(|| "setpriv not installed (util-linux)".to_string())
}

/// kopiru run under strace with one fault injected (`inject`: strace's
/// `-e inject=` value, e.g. `fsync:error=EIO:when=2`); the caller adds
/// kopiru's arguments.
fn kopiru_injected(inject: &str) -> Command {
    kopiru_injected_on(inject, &[])
}

/// [`kopiru_injected`], the fault injected only into calls that touch one
/// of `paths` (strace's `-P`), when given.
fn kopiru_injected_on(inject: &str, paths: &[&Path]) -> Command {
    let mut c = Command::new("strace");
    c.args(["-f", "-o", "/dev/null", "-e"])
        .arg(format!("inject={inject}"));
    for p in paths {
        c.arg("-P").arg(p);
    }
    c.arg(env!("CARGO_BIN_EXE_kopiru"));
    c
}

/// kopiru run under strace held in one system call: `inject` delays it
/// (`NAME:delay_enter=US...` or `NAME:delay_exit=US...`), and strace
/// writes the calls of that name to `trace`, so that [`wait_held`] can
/// tell when kopiru is held (a test waits for that event, not for a time).
/// The caller adds kopiru's arguments.
fn kopiru_held(inject: &str, trace: &Path) -> Command {
    let name = inject.split(':').next().unwrap_or(inject);
    let mut c = Command::new("strace");
    c.args(["-f", "-qq", "-e", "signal=none", "-e"])
        .arg(format!("trace={name}"))
        .arg("-e")
        .arg(format!("inject={inject}"))
        .arg("-o")
        .arg(trace)
        .arg(env!("CARGO_BIN_EXE_kopiru"));
    c
}

/// Waits until the `trace` of [`kopiru_held`] (run with `inject`) shows
/// kopiru held. strace marks a delayed return "(DELAYED)" as its delay
/// begins; a delayed entry leaves its call's line unfinished (no " = ")
/// through the delay, and with `when=N` it is the Nth call. Fails if
/// `child` ends first, or after 120 s (a deadline for a broken run, not a
/// clock the test keeps).
fn wait_held(trace: &Path, inject: &str, child: &mut std::process::Child) -> R {
    let nth: usize = inject
        .split(':')
        .find_map(|p| p.strip_prefix("when="))
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    let held = |text: &str| match inject.contains("delay_exit") {
        true => text.contains("(DELAYED)"),
        false => {
            let calls = text.lines().count();
            let last_open = !text.ends_with('\n')
                && text.lines().last().is_some_and(|l| !l.contains(" = "));
            calls >= nth && last_open
        }
    };
    let start = std::time::Instant::now();
    loop {
        let text = std::fs::read_to_string(trace).unwrap_or_default();
        if held(&text) {
            return Ok(());
        }
        if let Some(st) = child.try_wait()? {
            return Err(format!("kopiru ended ({st}) before it was held: {text}").into());
        }
        ensure!(
            start.elapsed() < std::time::Duration::from_secs(120),
            "kopiru was not held in 120 s: {text}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Fails unless `child` (held by [`kopiru_held`]) still runs: what the test
/// did meanwhile happened while kopiru was held, as it means to check.
fn still_held(child: &mut std::process::Child, delay: &str) -> R {
    ensure!(
        child.try_wait()?.is_none(),
        "kopiru was released ({delay}) before the test's steps were done: the machine is too slow for this delay"
    );
    Ok(())
}

fn show(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `o` exited with `want` and said `needle` on stderr.
fn fails_with(o: &Output, want: i32, needle: &str) -> R {
    ensure!(code(o) == want, "want exit {want}: {}", show(o));
    ensure!(
        String::from_utf8_lossy(&o.stderr).contains(needle),
        "want {needle:?} on stderr: {}",
        show(o)
    );
    Ok(())
}

/// `o` is a partial copy (exit 23) whose every error has `reason`; its
/// JSON summary.
fn partial_with(o: &Output, reason: &str) -> Result<serde_json::Value, Failed> {
    ensure!(code(o) == 23, "want exit 23: {}", show(o));
    let j = json(o)?;
    let errors = j["errors"].as_array().cloned().unwrap_or_default();
    ensure!(
        !errors.is_empty() && errors.iter().all(|e| e["reason"] == reason),
        "{j}"
    );
    Ok(j)
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

fn same_tree(src: &Path, dst: &Path, fields: Fields) -> R {
    let a = manifest(src)?;
    let b = manifest(dst)?;
    let diffs = compare(&a, &b, fields);
    ensure!(
        diffs.is_empty(),
        "{} differences, first: {:#?}",
        diffs.len(),
        &diffs[..diffs.len().min(8)]
    );
    Ok(())
}

/// Whether any extent of `file` is shared with another file (FIEMAP's SHARED
/// flag, as `filefrag -v` shows it).
fn shares_extents(file: &Path) -> Result<bool, Failed> {
    let out = fixture::sh(Command::new("filefrag").arg("-v").arg(file))?;
    Ok(out.lines().any(|l| l.contains("shared")))
}

fn json(o: &Output) -> Result<serde_json::Value, Failed> {
    serde_json::from_slice(&o.stdout).map_err(|e| format!("bad JSON ({e}): {}", show(o)).into())
}

// ---------------------------------------------------------------- the runner

fn main() {
    let args = Arguments::from_args();
    let mut trials = Vec::new();
    let mut skipped = Vec::new();
    let mut add = |name: String, why: Option<String>, f: Box<dyn FnOnce() -> R + Send>| {
        if let Some(why) = &why {
            skipped.push(format!("{name}: {why}"));
        }
        trials.push(Trial::test(name, f).with_ignored_flag(why.is_some()));
    };
    options::trials(&mut add);
    snapshots::trials(&mut add);
    scale::trials(&mut add);
    copying::trials(&mut add);
    cprules::trials(&mut add);
    faults::trials(&mut add);
    cli::trials(&mut add);
    durability::trials(&mut add);
    verify::trials(&mut add);
    dedupe::trials(&mut add);
    edges::trials(&mut add);
    examples::trials(&mut add);
    flash::trials(&mut add);
    flash_input::trials(&mut add);
    flash_refusals::trials(&mut add);
    flash_url::trials(&mut add);
    image::trials(&mut add);
    reruns::trials(&mut add);
    signals::trials(&mut add);
    help::trials(&mut add);
    benches::trials(&mut add);
    shares::trials(&mut add);

    if !skipped.is_empty() {
        eprintln!(
            "\n!!!!!!!! SKIPPED: {} filesystem tests cannot run on this machine !!!!!!!!",
            skipped.len()
        );
        for s in &skipped {
            eprintln!("!!!!!!!! SKIPPED {s}");
        }
        eprintln!();
    }
    let conclusion = libtest_mimic::run(&args, trials);
    fixture::teardown();
    conclusion.exit();
}
