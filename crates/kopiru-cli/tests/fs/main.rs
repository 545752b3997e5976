//! End-to-end tests of `kopiru` on real filesystems (ext4, XFS with reflink,
//! Btrfs) made on loop devices. Tests whose needs (root, loop devices, mkfs
//! tools, strace) are missing are reported as ignored, with the reason printed
//! loudly, never passed silently.

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
mod dedupe;
mod durability;
mod edges;
mod faults;
mod fixture;
mod flash;
mod flash_input;
mod flash_refusals;
mod help;
mod image;
mod manifest;
mod options;
mod reruns;
mod scale;
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

// ---------------------------------------------------------------- the list

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
    let strace = strace_unavailable;
    options::trials(&mut add);
    snapshots::trials(&mut add);
    scale::trials(&mut add);
    copying::trials(&mut add);
    faults::trials(&mut add);
    cli::trials(&mut add);
    durability::trials(&mut add);
    verify::trials(&mut add);
    dedupe::trials(&mut add);
    edges::trials(&mut add);
    let flash_needs = fixture::loop_unavailable().or_else(|| {
        ["xz", "zstd", "bzip2", "gzip", "sfdisk"]
            .iter()
            .find(|t| !fixture::have(t))
            .map(|t| format!("{t} not installed (scripts/test.sh installs it)"))
    });
    add(
        "flash_formats".into(),
        flash_needs.clone(),
        Box::new(flash::formats),
    );
    add(
        "flash_xz_single_block_memory".into(),
        flash_needs.clone(),
        Box::new(flash::xz_single_block_memory),
    );
    add(
        "flash_verify_reads_device".into(),
        flash_needs.clone().or_else(strace),
        Box::new(flash::verify_reads_device),
    );
    add(
        "flash_several_devices".into(),
        flash_needs.clone(),
        Box::new(flash::several_devices),
    );
    add(
        "flash_bmap".into(),
        flash_needs.clone().or_else(|| {
            (!fixture::have("bmaptool"))
                .then(|| "bmaptool not installed (scripts/test.sh installs bmap-tools)".into())
        }),
        Box::new(flash::bmap),
    );
    add(
        "flash_zeros_and_identical".into(),
        flash_needs.clone(),
        Box::new(flash::zeros_and_identical),
    );
    add(
        "flash_io_error".into(),
        flash_needs.clone().or_else(strace),
        Box::new(flash::io_error),
    );
    add(
        "flash_refuses_mounted_partition".into(),
        flash_refusals::partitions_unavailable(),
        Box::new(flash_refusals::refuses_mounted_partition),
    );
    add(
        "flash_no_terminal_no_write".into(),
        flash_needs.clone().or_else(|| {
            (!fixture::have("setsid")).then(|| "setsid not installed (util-linux)".into())
        }),
        Box::new(flash_refusals::no_terminal_no_write),
    );
    add(
        "flash_asks_on_the_terminal".into(),
        flash_needs.clone().or_else(|| {
            (!fixture::have("script")).then(|| "script not installed (util-linux)".into())
        }),
        Box::new(flash_refusals::asks_on_the_terminal),
    );
    add(
        "flash_trusts_bytes".into(),
        flash_needs.clone(),
        Box::new(flash_input::trusts_bytes),
    );
    add(
        "flash_damaged_image".into(),
        flash_needs.clone(),
        Box::new(flash_input::damaged_image),
    );
    add(
        "flash_through_symlink".into(),
        flash_needs.clone(),
        Box::new(flash_input::through_symlink),
    );
    add(
        "flash_refusals".into(),
        flash_needs.or_else(|| Fs::Ext4.unavailable()),
        Box::new(flash_refusals::refusals),
    );
    let image_needs = fixture::loop_unavailable().or_else(|| {
        ["xz", "zstd", "gzip", "sfdisk", "sha256sum"]
            .iter()
            .find(|t| !fixture::have(t))
            .map(|t| format!("{t} not installed (scripts/test.sh installs it)"))
    });
    for sector in [512u32, 4096] {
        add(
            format!("image::round_trip_{sector}"),
            image_needs.clone().or_else(|| {
                (!fixture::have("bmaptool"))
                    .then(|| "bmaptool not installed (scripts/test.sh installs bmap-tools)".into())
            }),
            Box::new(move || image::round_trip(sector)),
        );
    }
    add(
        "image::partitions_only".into(),
        image_needs.clone(),
        Box::new(image::partitions_only),
    );
    add(
        "image::refusals".into(),
        image_needs.clone().or_else(|| Fs::Ext4.unavailable()),
        Box::new(image::refusals),
    );
    add(
        "image::read_error".into(),
        image_needs.clone().or_else(strace),
        Box::new(image::read_error),
    );
    add(
        "image::verify_catches_corruption".into(),
        image_needs.clone().or_else(strace),
        Box::new(image::verify_catches_corruption),
    );
    add(
        "image::interrupted".into(),
        image_needs,
        Box::new(image::interrupted),
    );
    reruns::trials(&mut add);
    signals::trials(&mut add);
    help::trials(&mut add);
    benches::trials(&mut add);

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
