//! The same command, run again, converges: it never nests a second copy
//! inside the first, and it removes what an interrupted run left (a staged
//! tree, temporaries in a merged directory, a large file's partial copy).

use crate::durability::{no_temporaries, tree};
use crate::fixture::{self, Fs};
use crate::manifest::DEFAULT;
use crate::{code, fails_with, json, kopiru_injected, same_tree, show, strace_unavailable, Add, R};
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
        // A run after the first finds the copy it made, complete: it
        // copies nothing over it (what changed in it since stays), and
        // says so.
        if round > 0 {
            ensure!(
                String::from_utf8_lossy(&o.stderr).contains("is the copy of"),
                "round {round}: {}",
                show(&o)
            );
        }
        match round {
            2 => ensure!(!dst.join("added later").exists(), "round 2 copied again"),
            _ => same_tree(&src, &dst, DEFAULT)
                .map_err(|e| format!("round {round}: {}", e.message().unwrap_or_default()))?,
        }
    }
    // -T updates it from the source.
    let o = copy_in(&w, &[OsStr::new("-T"), src.as_os_str(), dst.as_os_str()])?;
    ensure!(code(&o) == 0, "-T: {}", show(&o));
    same_tree(&src, &dst, DEFAULT)?;
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
/// publishes its staged tree (strace delays its `renameat2` by 8 s, and
/// the test waits until it is held); the second finds that tree locked,
/// refuses with exit 1 and touches nothing while the first still runs;
/// the first then finishes an exact copy.
pub fn two_at_once(fs: Fs) -> R {
    let w = fixture::workdir(fs, "two-at-once")?;
    let (src, dst) = (w.join("src"), w.join("dst"));
    tree(&src, 24)?;
    let (inject, trace) = ("renameat2:delay_enter=8000000", fixture::run_root().join(format!("two-at-once-{}.trace", fs.name())));
    let mut first = crate::kopiru_held(inject, &trace)
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
    crate::wait_held(&trace, inject, &mut first)?;
    let stage = staged()
        .filter(|s| same_tree(&src, s, DEFAULT).is_ok())
        .ok_or("the first run is held without its whole staged tree")?;
    let second = copy_in(&w, &[src.as_os_str(), dst.as_os_str()])?;
    crate::still_held(&mut first, inject)?;
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
    // And the same command once more finds the copy complete.
    let o = copy_in(&w, &[src.as_os_str(), dst.as_os_str()])?;
    ensure!(code(&o) == 0, "{}", show(&o));
    ensure!(!dst.join("src").exists(), "nested");
    Ok(())
}

/// The inode number of `p`.
fn ino(p: &Path) -> Result<u64, Failed> {
    use std::os::unix::fs::MetadataExt;
    Ok(std::fs::metadata(p)?.ino())
}

/// Makes a new, empty directory `dir` that has the inode number `want`
/// where the filesystem can be made to hand it out again: each `mkdir`
/// that gets another number is moved aside and tried again (Btrfs hands out
/// increasing numbers until it is mounted again, so `remount` is called
/// first there). Whether the number was reused.
fn mkdir_reusing(dir: &Path, want: u64, aside: &Path) -> Result<bool, Failed> {
    for n in 0..2000 {
        std::fs::create_dir(dir)?;
        if ino(dir)? == want {
            return Ok(true);
        }
        // Made only now: it must not take the number first.
        std::fs::create_dir_all(aside)?;
        std::fs::rename(dir, aside.join(n.to_string()))?;
    }
    std::fs::create_dir(dir)?;
    Ok(false)
}

/// `o` succeeded and said nothing on stderr, and its JSON has no warnings.
fn quiet_success(o: &Output, what: &str) -> R {
    ensure!(code(o) == 0, "{what}: {}", show(o));
    ensure!(o.stderr.is_empty(), "{what}: said something: {}", show(o));
    let j = json(o)?;
    ensure!(
        j["warnings"].as_array().is_none_or(|w| w.is_empty()),
        "{what}: warned: {j}"
    );
    Ok(())
}

/// The record of copies trusts only the very directory kopiru made: a new
/// directory the user made at the same path, even with the same inode
/// number (provoked: ext4 and XFS hand a freed number out again once it
/// is written back and its chunk kept, Btrfs once remounted), or another directory renamed onto that path, gets DEST/SRC
/// as cp gives, and the user's files are untouched. A user whose home
/// cannot be written gets a correct copy and no warning. On a filesystem of
/// its own (Btrfs is remounted).
pub fn rerun_after_inode_reuse(fs: Fs) -> R {
    let tag = format!("reuse-{}", fs.name());
    let mnt = fixture::make_fs(fs, &tag, 320, &[])?;
    let w = mnt.join("w");
    std::fs::create_dir(&w)?;
    let src = w.join("src");
    std::fs::create_dir(&src)?;
    std::fs::write(src.join("notes.txt"), "from-src\n")?;
    // The record lives off this filesystem, so that the newest inode on
    // it is the copy's (Btrfs hands out the number after the highest).
    let state = fixture::run_root().join(&tag);
    std::fs::create_dir_all(&state)?;
    let copy = |dst: &Path| copy_in(&state, &[src.as_os_str(), dst.as_os_str()]);
    let mine = |dir: &Path| -> R {
        ensure!(
            std::fs::read_to_string(dir.join("notes.txt"))? == "MINE\n",
            "the user's {}/notes.txt was overwritten",
            dir.display()
        );
        ensure!(
            std::fs::read_to_string(dir.join("src/notes.txt"))? == "from-src\n",
            "the copy did not land in {}/src as cp puts it: {:?}",
            dir.display(),
            names(dir)?
        );
        Ok(())
    };

    // The reproduction: the copy deleted, a directory of the
    // user's made in its place, with the copy's inode number if possible.
    let out = w.join("out");
    quiet_success(&copy(&out)?, "first copy")?;
    let old = ino(&out)?;
    // XFS frees a chunk of inodes once all of them are free, and seldom
    // makes one at the same place again: a second name for the copy's
    // file keeps its chunk, and so the copy's freed number, in use. (Not
    // on Btrfs, where the highest number in use must be below the copy's.)
    if fs != Fs::Btrfs {
        std::fs::hard_link(out.join("notes.txt"), w.join("kept"))?;
    }
    std::fs::remove_dir_all(&out)?;
    // ext4 skips an inode freed in an earlier second while its table block
    // is dirty (recently_deleted()): written back, it is handed out again.
    crate::fixture::sh(Command::new("sync").arg("-f").arg(&w))?;
    if fs == Fs::Btrfs {
        fixture::remount(fs, &mnt)?;
    }
    let reused = mkdir_reusing(&out, old, &w.join("aside"))?;
    if !reused {
        eprintln!(
            "!!!!!!!! {}: the copy's inode number {old} was not handed out again; \
             checked with a new directory of another number",
            fs.name()
        );
    }
    std::fs::write(out.join("notes.txt"), "MINE\n")?;
    quiet_success(&copy(&out)?, "copy into the user's directory")?;
    mine(&out)?;

    // Another directory renamed onto the recorded path.
    let out2 = w.join("out2");
    quiet_success(&copy(&out2)?, "first copy to out2")?;
    let other = w.join("other");
    std::fs::create_dir(&other)?;
    std::fs::write(other.join("notes.txt"), "MINE\n")?;
    std::fs::remove_dir_all(&out2)?;
    std::fs::rename(&other, &out2)?;
    quiet_success(&copy(&out2)?, "copy into the renamed directory")?;
    mine(&out2)?;

    // The copy kopiru made is still recognised: the same command again
    // copies nothing (neither nesting nor overwriting), with a word.
    let out3 = w.join("out3");
    quiet_success(&copy(&out3)?, "out3 round 0")?;
    let o = copy(&out3)?;
    ensure!(
        code(&o) == 0 && String::from_utf8_lossy(&o.stderr).contains("is the copy of"),
        "out3 round 1: {}",
        show(&o)
    );
    ensure!(names(&out3)? == ["notes.txt"], "{:?}", names(&out3)?);

    rerun_without_home(&w, &src)?;
    fixture::unmount(&mnt)?;
    Ok(())
}

/// As a user with no writable home: no record, no warning, cp's rule.
fn rerun_without_home(w: &Path, src: &Path) -> R {
    let nobody = w.join("nobody");
    std::fs::create_dir(&nobody)?;
    std::os::unix::fs::chown(&nobody, Some(65534), Some(65534))?;
    let as_nobody = |dst: &Path| -> Result<Output, Failed> {
        Ok(Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .env_remove("XDG_STATE_HOME")
            .env("HOME", "/nonexistent")
            .arg(env!("CARGO_BIN_EXE_kopiru"))
            .args(["copy", "--json"])
            .arg(src)
            .arg(dst)
            .output()?)
    };
    let out4 = nobody.join("out4");
    quiet_success(&as_nobody(&out4)?, "nobody's first copy")?;
    // Not the source's owner, kopiru cannot read it with O_NOATIME: the
    // read itself moves the source's access times.
    let no_atime = crate::manifest::Fields {
        atime: false,
        ..DEFAULT
    };
    same_tree(src, &out4, no_atime)?;
    quiet_success(&as_nobody(&out4)?, "nobody's second copy")?;
    ensure!(
        names(&out4)? == ["notes.txt", "src"],
        "without a record the rerun follows cp's rule: {:?}",
        names(&out4)?
    );
    Ok(())
}

/// Registers this module's trials.
pub fn trials(add: Add) {
    for fs in [Fs::Ext4, Fs::Xfs] {
        let why = fs.unavailable().or_else(strace_unavailable);
        add(
            format!("rerun_never_nests::{}", fs.name()),
            why.clone(),
            Box::new(move || rerun_never_nests(fs)),
        );
        add(
            format!("rerun_cleans_leftovers::{}", fs.name()),
            why.clone(),
            Box::new(move || rerun_cleans_leftovers(fs)),
        );
        add(
            format!("two_at_once::{}", fs.name()),
            why,
            Box::new(move || two_at_once(fs)),
        );
    }
    let setpriv = || (!fixture::have("setpriv")).then(|| "setpriv not installed".to_string());
    for fs in Fs::ALL {
        add(
            format!("rerun_after_inode_reuse::{}", fs.name()),
            fs.unavailable().or_else(setpriv),
            Box::new(move || rerun_after_inode_reuse(fs)),
        );
    }
}
