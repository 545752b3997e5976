//! The same command, run again, converges: it never nests a second copy
//! inside the first, and it removes what an interrupted run left (a staged
//! tree, temporaries in a merged directory, a large file's partial copy).

use crate::durability::{no_temporaries, tree};
use crate::fixture::{self, Fs};
use crate::manifest::DEFAULT;
use crate::{code, fails_with, json, kopiru_injected, same_tree, show, R};
use libtest_mimic::Failed;
use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output};

/// `kopiru copy ARGS...` with its own record of copies under `w`.
fn copy_in(w: &Path, args: &[&OsStr]) -> Result<Output, Failed> {
    Ok(Command::new(env!("CARGO_BIN_EXE_kopiru"))
        .env("XDG_STATE_HOME", w.join("state"))
        .arg("copy")
        .arg("--json")
        .args(args)
        .output()?)
}

/// [`copy_in`] killed by strace's fault injection `kill`.
fn killed_in(w: &Path, kill: &str, args: &[&OsStr]) -> R {
    let o = kopiru_injected(kill)
        .env("XDG_STATE_HOME", w.join("state"))
        .arg("copy")
        .args(args)
        .output()?;
    ensure!(
        o.status.code().is_none(),
        "not killed by {kill}: {}",
        show(&o)
    );
    Ok(())
}

/// Names directly in `dir` (sorted).
fn names(dir: &Path) -> Result<Vec<String>, Failed> {
    let mut v: Vec<String> = std::fs::read_dir(dir)?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    Ok(v)
}

/// `copy SRC DST` twice (plain, then with --resume, then plain after the
/// source changed): DST stays the one copy, never DST/src.
pub fn rerun_never_nests(fs: Fs) -> R {
    let w = fixture::workdir(fs, "rerun-nests")?;
    let (src, dst) = (w.join("src"), w.join("dst"));
    tree(&src, 21)?;
    let args = [src.as_os_str(), dst.as_os_str()];
    for (round, extra) in [&[][..], &[OsStr::new("--resume")][..], &[][..]]
        .iter()
        .enumerate()
    {
        if round == 2 {
            std::fs::write(src.join("added later"), b"new")?;
        }
        let all: Vec<&OsStr> = extra.iter().copied().chain(args).collect();
        let o = copy_in(&w, &all)?;
        ensure!(code(&o) == 0, "round {round}: {}", show(&o));
        ensure!(
            !dst.join("src").exists(),
            "round {round} nested a copy: {:?}",
            names(&dst)?
        );
        same_tree(&src, &dst, DEFAULT)
            .map_err(|e| format!("round {round}: {}", e.message().unwrap_or_default()))?;
    }
    // A directory that was there before the first run still gets DST/src,
    // as cp does, and so does every run after it.
    let into = w.join("into");
    std::fs::create_dir(&into)?;
    for round in 0..2 {
        let o = copy_in(&w, &[src.as_os_str(), into.as_os_str()])?;
        ensure!(code(&o) == 0, "{}", show(&o));
        ensure!(
            names(&into)? == ["src"],
            "round {round}: {:?}",
            names(&into)?
        );
        same_tree(&src, &into.join("src"), DEFAULT)?;
    }
    Ok(())
}

/// An interrupted run, then the same command without --resume: exit 0, an
/// exact copy, nothing of the first run left anywhere.
pub fn rerun_cleans_leftovers(fs: Fs) -> R {
    let w = fixture::workdir(fs, "rerun-leftovers")?;
    let src = w.join("src");
    tree(&src, 22)?;

    // A new tree: its staged copy is left, then replaced by a whole one.
    let dst = w.join("dst");
    killed_in(
        &w,
        "openat:signal=SIGKILL:when=60",
        &[src.as_os_str(), dst.as_os_str()],
    )?;
    ensure!(!dst.exists(), "a killed run published its tree");
    let o = copy_in(&w, &[src.as_os_str(), dst.as_os_str()])?;
    ensure!(code(&o) == 0, "{}", show(&o));
    same_tree(&src, &dst, DEFAULT)?;
    no_temporaries(&w)?;

    // A merge into an existing tree, killed at its 30th deferred rename:
    // its temporaries are removed by the plain rerun.
    let merge = w.join("merge");
    tree(&merge, 23)?;
    let into = [
        src.join(".").into_os_string(),
        merge.clone().into_os_string(),
    ];
    let into: Vec<&OsStr> = into.iter().map(|s| s.as_os_str()).collect();
    killed_in(&w, "renameat:signal=SIGKILL:when=30", &into)?;
    ensure!(
        crate::durability::temporaries(&merge)?.len() > 1,
        "the kill left no temporaries to clean"
    );
    let o = copy_in(&w, &into)?;
    ensure!(code(&o) == 0, "{}", show(&o));
    no_temporaries(&w)?;
    let j = json(&o)?;
    ensure!(j["errors"].as_array().is_some_and(|a| a.is_empty()), "{j}");

    // One large file copied into an existing directory, killed part-way:
    // its partial temporary goes.
    let big = w.join("big.bin");
    std::fs::write(&big, crate::trees::bytes(48 << 20, 5))?;
    let into = w.join("files");
    std::fs::create_dir(&into)?;
    let args = [
        OsStr::new("--method"),
        OsStr::new("stream"),
        big.as_os_str(),
        into.as_os_str(),
    ];
    killed_in(&w, "pwrite64:signal=SIGKILL:when=10", &args)?;
    ensure!(
        crate::durability::temporaries(&into)?.len() == 1,
        "no partial temporary: {:?}",
        names(&into)?
    );
    let o = copy_in(&w, &args)?;
    ensure!(code(&o) == 0, "{}", show(&o));
    ensure!(names(&into)? == ["big.bin"], "{:?}", names(&into)?);
    ensure!(
        std::fs::read(into.join("big.bin"))? == std::fs::read(&big)?,
        "content"
    );
    no_temporaries(&w)?;
    Ok(())
}

/// Two runs of one command at once: the first is held just before it
/// publishes its staged tree (strace delays its `renameat2` by 4 s); the
/// second finds that tree locked, refuses with exit 1 and touches nothing;
/// the first then finishes an exact copy.
pub fn two_at_once(fs: Fs) -> R {
    let w = fixture::workdir(fs, "two-at-once")?;
    let (src, dst) = (w.join("src"), w.join("dst"));
    tree(&src, 24)?;
    let first = kopiru_injected("renameat2:delay_enter=4000000")
        .env("XDG_STATE_HOME", w.join("state"))
        .arg("copy")
        .args([&src, &dst])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    // The staged tree, complete: the first run holds its lock now.
    let staged = || -> Option<std::path::PathBuf> {
        let e = std::fs::read_dir(&w).ok()?.flatten().find(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".kopiru-tmp.tree.")
        })?;
        Some(e.path())
    };
    let started = std::time::Instant::now();
    let stage = loop {
        if let Some(s) = staged().filter(|s| same_tree(&src, s, DEFAULT).is_ok()) {
            break s;
        }
        ensure!(
            started.elapsed().as_secs() < 30,
            "the first run never finished its staged tree"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let second = copy_in(&w, &[src.as_os_str(), dst.as_os_str()])?;
    let held = started.elapsed();
    ensure!(
        held.as_secs() < 4,
        "the second run ended after the first was released ({held:?})"
    );
    fails_with(
        &second,
        1,
        "another kopiru is copying to this destination now",
    )?;
    ensure!(!dst.exists(), "the second run made DEST");
    ensure!(stage.exists(), "the second run removed the first's tree");
    let first = first.wait_with_output()?;
    ensure!(code(&first) == 0, "first run: {}", show(&first));
    same_tree(&src, &dst, DEFAULT)?;
    no_temporaries(&w)?;
    // And the same command once more merges into the copy.
    let o = copy_in(&w, &[src.as_os_str(), dst.as_os_str()])?;
    ensure!(code(&o) == 0, "{}", show(&o));
    ensure!(!dst.join("src").exists(), "nested");
    Ok(())
}
