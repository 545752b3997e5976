//! SIGINT in the middle of real copies: a 2 GiB file and a 50,000-file
//! tree. Each must stop with exit 20, leave no partial file under a final
//! name and no temporary outside the staged tree, and `--resume` must then
//! finish the copy exactly.

use crate::durability::no_temporaries;
use crate::fixture::{self, Fs};
use crate::{code, json, same_tree, show, Add, R};
use libtest_mimic::Failed;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn kopiru_cmd() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kopiru"))
}

/// Starts `kopiru copy --json ARGS...` with its output piped.
fn start(args: &[&std::ffi::OsStr]) -> Result<Child, Failed> {
    Ok(kopiru_cmd()
        .args(["copy", "--json"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?)
}

/// Waits (up to 120 s: a deadline for a broken run, not a clock the test
/// keeps) until `ready` holds.
fn wait_for(what: &str, ready: impl Fn() -> bool) -> R {
    let start = Instant::now();
    while !ready() {
        ensure!(
            start.elapsed() < Duration::from_secs(120),
            "no {what} in 120 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

fn sigint(child: &Child) {
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGINT);
    }
}

/// The copy stopped on SIGINT: exit 20, the one-line message, and the JSON
/// summary saying so.
fn stopped(o: &Output) -> R {
    ensure!(code(o) == 20, "want exit 20: {}", show(o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    ensure!(
        stderr.contains("kopiru: received SIGINT: stopped") && stderr.contains("--resume"),
        "{}",
        show(o)
    );
    let j = json(o)?;
    ensure!(j["cancelled"] == true && j["exit_code"] == 20, "JSON: {j}");
    Ok(())
}

/// Names under `dir` that start with kopiru's temporary prefix.
fn temporaries_in(dir: &Path) -> Result<Vec<PathBuf>, Failed> {
    Ok(std::fs::read_dir(dir)?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".kopiru-tmp."))
        .map(|e| e.path())
        .collect())
}

/// A file of `mib` MiB of varied bytes, written 1 MiB at a time.
fn big_file(path: &Path, mib: u32) -> R {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    let chunk = crate::trees::bytes(1 << 20, 42);
    for i in 0..mib {
        f.write_all(&i.to_le_bytes())?;
        f.write_all(&chunk[4..])?;
    }
    f.into_inner().map_err(|e| e.to_string())?.sync_all()?;
    Ok(())
}

/// Starts `kopiru copy --json ARGS` into the directory `into`, sends it
/// SIGINT once a temporary there holds 64 MiB, and checks it stopped.
fn stopped_mid_file(args: &[&std::ffi::OsStr], into: &Path) -> R {
    let child = start(args)?;
    wait_for("partial temporary", || {
        temporaries_in(into).is_ok_and(|t| {
            t.iter()
                .any(|p| std::fs::metadata(p).is_ok_and(|m| m.len() > 64 << 20))
        })
    })?;
    sigint(&child);
    stopped(&child.wait_with_output()?)
}

/// Whether two files hold the same bytes (`cmp`).
fn same_file(a: &Path, b: &Path) -> R {
    let o = Command::new("cmp").arg(a).arg(b).output()?;
    ensure!(
        o.status.success(),
        "{} and {} differ: {}",
        a.display(),
        b.display(),
        show(&o)
    );
    Ok(())
}

/// SIGINT while a 2 GiB file is copied into an existing directory (by
/// read/write, so it takes a while): the temporary is removed, the final
/// name never appears; `--resume` copies it whole.
pub fn sigint_large_file() -> R {
    let mnt = fixture::make_fs(Fs::Ext4, "sigint-big", 5 << 10, &[])?;
    let src = mnt.join("big.bin");
    big_file(&src, 2048)?;
    let into = mnt.join("into");
    std::fs::create_dir(&into)?;
    let dst = into.join("big.bin");
    let args = [
        "--method".as_ref(),
        "stream".as_ref(),
        src.as_os_str(),
        into.as_os_str(),
    ];
    stopped_mid_file(&args, &into)?;
    ensure!(!dst.exists(), "a final name appeared: {}", dst.display());
    no_temporaries(&mnt)?;
    let o = kopiru_cmd()
        .args(["copy", "--json", "--resume"])
        .args(args)
        .output()?;
    ensure!(code(&o) == 0 && json(&o)?["files"] == 1, "{}", show(&o));
    same_file(&src, &dst)?;
    no_temporaries(&mnt)?;
    Ok(())
}

/// `--partial`: SIGINT while a 1 GiB file is copied by read/write keeps
/// the part written under a hidden name (never the final one); `--resume`
/// continues after it, reading it back against the source, and the result
/// is the source's bytes.
pub fn sigint_partial() -> R {
    let mnt = fixture::make_fs(Fs::Ext4, "sigint-partial", 3 << 10, &[])?;
    let src = mnt.join("big.bin");
    big_file(&src, 1024)?;
    let into = mnt.join("into");
    std::fs::create_dir(&into)?;
    let dst = into.join("big.bin");
    let args = [
        "--method".as_ref(),
        "stream".as_ref(),
        src.as_os_str(),
        into.as_os_str(),
    ];
    let mut first = vec!["--partial".as_ref()];
    first.extend(args);
    stopped_mid_file(&first, &into)?;
    ensure!(!dst.exists(), "a final name appeared: {}", dst.display());
    let kept = temporaries_in(&into)?;
    let kept_len = match kept.as_slice() {
        [p] if p.to_string_lossy().contains(".kopiru-tmp.part.") => std::fs::metadata(p)?.len(),
        _ => return Err(format!("want one partial copy, found {kept:?}").into()),
    };
    ensure!(
        ((64 << 20)..(1 << 30)).contains(&kept_len),
        "partial of {kept_len} bytes"
    );
    let o = kopiru_cmd()
        .args(["copy", "--resume", "--explain"])
        .args(args)
        .output()?;
    ensure!(code(&o) == 0, "{}", show(&o));
    let want = format!("continued a partial copy after its first {kept_len} bytes");
    ensure!(
        String::from_utf8_lossy(&o.stdout).contains(&want),
        "want {want:?}: {}",
        show(&o)
    );
    same_file(&src, &dst)?;
    no_temporaries(&mnt)?;
    Ok(())
}

/// SIGINT while a tree of 50,000 files is copied to a new name: the copy
/// is left under its staged name only (no final name, no temporary file in
/// or beside it); `--resume` finishes it exactly, copying only what was
/// missing.
pub fn sigint_many_files(fs: Fs) -> R {
    let w = fixture::workdir(fs, "sigint-many")?;
    let src = w.join("src");
    for d in 0..50 {
        let dir = src.join(format!("d{d:02}"));
        std::fs::create_dir_all(&dir)?;
        for i in 0..1000u64 {
            let len = (i as usize * 37) % 3000;
            std::fs::write(dir.join(format!("f{i}")), crate::trees::bytes(len, i + d))?;
        }
    }
    let dst = w.join("dst");
    let args = [src.as_os_str(), dst.as_os_str()];
    let child = start(&args)?;
    wait_for("staged tree", || {
        temporaries_in(&w).is_ok_and(|t| {
            t.iter()
                .any(|p| std::fs::read_dir(p).is_ok_and(|mut r| r.nth(10).is_some()))
        })
    })?;
    sigint(&child);
    let o = child.wait_with_output()?;
    stopped(&o)?;
    let copied = json(&o)?["files"].as_u64().unwrap_or(0);
    ensure!(copied < 50_000, "the copy finished before the signal");
    ensure!(!dst.exists(), "the final name appeared: {}", dst.display());
    let staged = temporaries_in(&w)?;
    ensure!(
        staged.len() == 1 && staged[0].is_dir(),
        "want only the staged tree beside the copy: {staged:?}"
    );
    // Inside it only whole files under their final names: no temporaries.
    let inside = fixture::sh(Command::new("find").arg(&staged[0]).args([
        "-mindepth",
        "1",
        "-name",
        ".kopiru-tmp.*",
    ]))?;
    ensure!(
        inside.is_empty(),
        "temporaries in the staged tree: {inside}"
    );
    let o = kopiru_cmd()
        .args(["copy", "--json", "--resume"])
        .args(args)
        .output()?;
    ensure!(code(&o) == 0, "--resume: {}", show(&o));
    let resumed = json(&o)?["files"].as_u64().unwrap_or(0);
    ensure!(
        resumed + copied == 50_000,
        "resume copied {resumed} after {copied} of 50,000"
    );
    same_tree(&src, &dst, crate::manifest::DEFAULT)?;
    no_temporaries(&w)?;
    // 100,000 inodes: give them back to the filesystem other tests share.
    std::fs::remove_dir_all(&w)?;
    Ok(())
}

/// Registers this module's trials.
pub fn trials(add: Add) {
    let ext4 = Fs::Ext4.unavailable();
    add(
        "sigint_large_file::ext4".into(),
        ext4.clone(),
        Box::new(sigint_large_file),
    );
    add(
        "sigint_partial::ext4".into(),
        ext4.clone(),
        Box::new(sigint_partial),
    );
    add(
        "sigint_many_files::ext4".into(),
        ext4,
        Box::new(|| sigint_many_files(Fs::Ext4)),
    );
}
