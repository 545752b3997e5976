//! `kopiru dedupe` on XFS (reflink) and Btrfs, and its refusal on ext4.

use crate::fixture::{self, Fs};
use crate::manifest::{self, manifest};
use crate::{code, fails_with, json, shares_extents, show, strace_unavailable, trees, Add, R};
use libtest_mimic::Failed;
use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output};

const MIB: usize = 1 << 20;

fn dedupe(args: &[&OsStr]) -> Output {
    crate::kopiru(
        [OsStr::new("dedupe"), OsStr::new("--json")]
            .iter()
            .chain(args),
    )
}

/// Free bytes of the filesystem holding `p`, after a sync (Btrfs shows
/// freed space once its transaction commits).
fn free_bytes(p: &Path) -> Result<u64, Failed> {
    fixture::sh(Command::new("sync").arg("-f").arg(p))?;
    let out = fixture::sh(Command::new("stat").args(["-f", "-c", "%f %S"]).arg(p))?;
    let v: Vec<u64> = out
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    Ok(v[0] * v[1])
}

/// Three identical 3 MiB files written separately, a fourth differing only
/// in its last byte, a hard link, a symlink, empty files and small files.
fn tree(root: &Path) -> Result<(), Failed> {
    std::fs::create_dir_all(root.join("b"))?;
    for p in ["a1", "b/c1", "b/c2"] {
        trees::write_random(&root.join(p), 3 * MIB, 7)?;
    }
    let mut last = trees::bytes(3 * MIB, 7);
    *last.last_mut().unwrap() ^= 0xff;
    std::fs::write(root.join("b/last"), &last)?;
    std::fs::hard_link(root.join("a1"), root.join("b/hard"))?;
    std::os::unix::fs::symlink("../a1", root.join("b/sym"))?;
    std::fs::write(root.join("empty1"), b"")?;
    std::fs::write(root.join("empty2"), b"")?;
    std::fs::write(root.join("small1"), b"tiny")?;
    std::fs::write(root.join("small2"), b"tiny")?;
    fixture::sh(Command::new("chmod").arg("600").arg(root.join("b/c2")))?;
    fixture::sh(
        Command::new("touch")
            .args(["-d", "2020-01-02 03:04:05.123456789"])
            .arg(root.join("b/c1")),
    )?;
    Ok(())
}

/// The space is really freed, the files really share extents, nothing
/// else changes (content, mode, times, links); `--dry-run` changes nothing;
/// a second run has nothing to do.
pub fn shares(fs: Fs) -> R {
    // A filesystem of its own: other tests writing on a shared one would
    // move its free space while this one measures it.
    let mnt = fixture::make_fs(fs, &format!("dedupe-{}", fs.name()), 400, &[])?;
    let w = mnt.join("t");
    tree(&w)?;
    let before = manifest(&w)?;

    let o = dedupe(&[OsStr::new("--dry-run"), w.as_os_str()]);
    let j = json(&o)?;
    ensure!(code(&o) == 0, "{}", show(&o));
    ensure!(
        j["files_shared"] == 2 && j["groups"] == 1 && j["bytes_shared"] == 6 * MIB,
        "{j}"
    );
    ensure!(!shares_extents(&w.join("b/c1"))?, "--dry-run shared blocks");

    let free0 = free_bytes(&w)?;
    let o = dedupe(&[w.as_os_str()]);
    let j = json(&o)?;
    ensure!(code(&o) == 0, "{}", show(&o));
    ensure!(
        j["files_shared"] == 2 && j["groups"] == 1 && j["changed"] == 0,
        "{j}"
    );
    let freed = free_bytes(&w)? as i64 - free0 as i64;
    ensure!(
        freed >= (6 * MIB - MIB / 4) as i64,
        "statfs shows {freed} bytes freed, want about {}",
        6 * MIB
    );
    let reported = j["space_freed"].as_i64().unwrap_or(0);
    ensure!(
        reported >= (6 * MIB - MIB / 4) as i64,
        "reported {reported} bytes freed"
    );
    for p in ["a1", "b/c1", "b/c2"] {
        ensure!(shares_extents(&w.join(p))?, "{p} shares no extent");
    }
    ensure!(!shares_extents(&w.join("b/last"))?, "b/last was merged");
    let d = manifest::compare(&before, &manifest(&w)?, manifest::ALL);
    ensure!(d.is_empty(), "something changed: {d:#?}");

    let o = dedupe(&[w.as_os_str()]);
    let j = json(&o)?;
    ensure!(
        code(&o) == 0 && j["files_shared"] == 0 && j["groups"] == 0,
        "second run: {j}"
    );
    ensure!(
        j["bytes_hashed"].as_u64().unwrap_or(u64::MAX) < MIB as u64,
        "second run read whole files: {j}"
    );
    Ok(())
}

/// A file changed after it was hashed (while kopiru is held at the first
/// `syncfs`, which comes between hashing and sharing) is not shared and
/// keeps its new content.
pub fn changed_meanwhile(fs: Fs) -> R {
    let w = fixture::workdir(fs, "dedupe-changed")?;
    trees::write_random(&w.join("x"), 2 * MIB, 3)?;
    trees::write_random(&w.join("y"), 2 * MIB, 3)?;
    let trace = fixture::run_root().join(format!("dedupe-changed-{}.trace", fs.name()));
    let inject = "syncfs:delay_enter=6000000:when=1";
    let mut child = crate::kopiru_held(inject, &trace)
        .args(["dedupe", "--json", "--no-progress"])
        .arg(&w)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    crate::wait_held(&trace, inject, &mut child)?;
    let mut y = trees::bytes(2 * MIB, 3);
    y[MIB] ^= 1;
    std::fs::write(w.join("y"), &y)?;
    crate::still_held(&mut child, inject)?;
    let o = child.wait_with_output()?;
    let j = json(&o)?;
    ensure!(
        j["changed"] == 1 && j["files_shared"] == 0 && j["groups"] == 1,
        "{}",
        show(&o)
    );
    ensure!(std::fs::read(w.join("y"))? == y, "y was damaged");
    ensure!(
        std::fs::read(w.join("x"))? == trees::bytes(2 * MIB, 3),
        "x was damaged"
    );
    ensure!(!shares_extents(&w.join("y"))?, "y shares blocks");
    Ok(())
}

/// ext4 cannot share blocks: nothing is touched, exit 1, and kopiru says
/// so once, naming the PATH given and the filesystem (not some file in
/// it), and counts the files it found there (the four of at least a block:
/// three copies and the one that differs; a hard link once).
pub fn refused() -> R {
    let w = fixture::workdir(Fs::Ext4, "dedupe-ext4")?;
    tree(&w)?;
    let before = manifest(&w)?;
    let mnt = fixture::shared(Fs::Ext4)?;
    let o = dedupe(&[w.as_os_str()]);
    let said = format!(
        "kopiru: {}: ext4 (mounted on {}) cannot share blocks between files: its 4 files \
         were left alone\n",
        w.display(),
        mnt.display()
    );
    fails_with(&o, 1, "ext4")?;
    ensure!(o.stderr == said.as_bytes(), "want {said:?}: {}", show(&o));
    let j = json(&o)?;
    let u = &j["unsupported"];
    ensure!(
        j["files_scanned"] == 4
            && u.as_array().is_some_and(|a| a.len() == 1)
            && u[0]["path"] == w.display().to_string()
            && u[0]["fs_type"] == "ext4"
            && u[0]["files"] == 4,
        "{j}"
    );
    let text = crate::kopiru([OsStr::new("dedupe"), w.as_os_str()]);
    ensure!(
        String::from_utf8_lossy(&text.stdout).starts_with(
            "4 files scanned (4 on filesystems that cannot share blocks: left alone), 0 B hashed"
        ),
        "{}",
        show(&text)
    );
    let d = manifest::compare(&before, &manifest(&w)?, manifest::ALL);
    ensure!(d.is_empty(), "something changed: {d:#?}");
    Ok(())
}

/// Registers this module's trials.
pub fn trials(add: Add) {
    for fs in Fs::ALL.into_iter().filter(|fs| fs.can_clone()) {
        let (n, why) = (fs.name(), fs.unavailable());
        add(
            format!("dedupe_shares::{n}"),
            why.clone(),
            Box::new(move || shares(fs)),
        );
        add(
            format!("dedupe_changed_meanwhile::{n}"),
            why.or_else(strace_unavailable),
            Box::new(move || changed_meanwhile(fs)),
        );
    }
    add(
        "dedupe_refused::ext4".into(),
        Fs::Ext4.unavailable(),
        Box::new(refused),
    );
}
