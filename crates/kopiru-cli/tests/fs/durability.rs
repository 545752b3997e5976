//! Crash, fault and resume tests: kopiru killed or failed at chosen system
//! calls (strace), power cuts simulated by reflink snapshots of a
//! filesystem's backing image, `--resume` after `kill -9`, an ext4 out of
//! inodes, and a read-only source left untouched.

use crate::fixture::{self, Fs};
use crate::manifest::{self, manifest, Manifest};
use crate::{code, json, partial_with, show, strace_unavailable, trees, Add, R};
use libtest_mimic::Failed;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A tree of 120 files (1 byte to 300 KB) in three directories, with a
/// symlink and a hard link; `seed` varies the contents.
pub fn tree(root: &Path, seed: u64) -> Result<(), Failed> {
    for d in 0..3u64 {
        let dir = root.join(format!("d{d}"));
        std::fs::create_dir_all(&dir)?;
        for i in 0..40u64 {
            let len = 1 + ((i * 7919 + d * 104_729) % 300_000) as usize;
            trees::write_random(
                &dir.join(format!("f{i:02}")),
                len,
                seed * 1000 + d * 100 + i,
            )?;
        }
    }
    std::os::unix::fs::symlink("d0/f00", root.join("link"))?;
    std::fs::hard_link(root.join("d1/f01"), root.join("hard"))?;
    Ok(())
}

/// Runs kopiru under strace with one `-e inject=...` rule, one worker (strace
/// counts calls per thread).
fn kopiru_injected(inject: &str, args: &[&OsStr]) -> Result<Output, Failed> {
    Ok(crate::kopiru_injected(inject)
        .args(["copy", "-j", "1", "--json"])
        .args(args)
        .output()?)
}

pub fn copy(args: &[&OsStr]) -> Output {
    crate::kopiru(
        [OsStr::new("copy"), OsStr::new("--json")]
            .iter()
            .chain(args),
    )
}

/// Every path under `root` that carries kopiru's temporary prefix.
pub fn temporaries(root: &Path) -> Result<Vec<String>, Failed> {
    let out = fixture::sh(
        Command::new("find")
            .arg(root)
            .args(["-name", ".kopiru-tmp.*"]),
    )?;
    Ok(out.lines().map(String::from).collect())
}

/// Whether a manifest path is one of kopiru's temporaries (left by a crash,
/// removed by `--resume`; not a final name).
fn is_temporary(p: &[u8]) -> bool {
    String::from_utf8_lossy(p)
        .rsplit('/')
        .next()
        .is_some_and(|n| n.starts_with(".kopiru-tmp."))
}

/// No kopiru temporary is left anywhere under `root`.
pub fn no_temporaries(root: &Path) -> R {
    let left = temporaries(root)?;
    ensure!(left.is_empty(), "left: {left:?}");
    Ok(())
}

/// Each regular file in `dst` under a final name is whole: equal to the
/// same path in one of `versions` (old or new content).
fn all_whole(dst: &Manifest, versions: &[&Manifest]) -> R {
    for (p, e) in dst
        .iter()
        .filter(|(p, e)| e.kind == 'f' && !is_temporary(p))
    {
        let name = String::from_utf8_lossy(p);
        ensure!(
            versions.iter().any(|v| v
                .get(p)
                .is_some_and(|s| s.hash == e.hash && s.size == e.size)),
            "{name} holds partial or foreign content ({} bytes)",
            e.size
        );
    }
    Ok(())
}

/// `dst` is an exact copy of `src` (manifest's default fields).
pub fn exact(src: &Path, dst: &Path) -> R {
    let d = manifest::compare(&manifest(src)?, &manifest(dst)?, manifest::DEFAULT);
    ensure!(
        d.is_empty(),
        "{} differences: {:#?}",
        d.len(),
        &d[..d.len().min(6)]
    );
    Ok(())
}

/// A failed flush (`syncfs` → EIO) under `--sync end`: a new tree never
/// appears and its staged copy is removed; in an existing tree every file
/// keeps its old content. Nothing is retried; the exit code says so: 1 when
/// nothing was copied, as here.
pub fn flush_fails(fs: Fs) -> R {
    let w = fixture::workdir(fs, "flush-fails")?;
    let (src, dst) = (w.join("src"), w.join("dst"));
    tree(&src, 1)?;
    let o = kopiru_injected("syncfs:error=EIO", &[src.as_os_str(), dst.as_os_str()])?;
    ensure!(
        code(&o) == 1,
        "a failed flush of the only tree must fail the run with 1: {}",
        show(&o)
    );
    ensure!(!dst.exists(), "the tree appeared although its flush failed");
    // Every entry made was withdrawn.
    let j = json(&o)?;
    let made: u64 = ["files", "directories", "symlinks", "hard_links"]
        .iter()
        .filter_map(|k| j[*k].as_u64())
        .sum();
    ensure!(made == 126 && j["withdrawn"] == made, "{j}");
    no_temporaries(&w)?;
    let err = String::from_utf8_lossy(&o.stderr);
    ensure!(
        err.contains(&format!("{}: sync: Input/output error", dst.display())),
        "{}",
        show(&o)
    );

    // Into an existing tree: the old files stay, whole.
    let old = w.join("old");
    tree(&old, 2)?;
    fixture::sh(Command::new("cp").arg("-a").arg(&old).arg(&dst))?;
    let old_m = manifest(&dst)?;
    let o = kopiru_injected(
        "syncfs:error=EIO",
        &[src.join(".").as_os_str(), dst.as_os_str()],
    )?;
    ensure!(code(&o) != 0, "{}", show(&o));
    let got = manifest(&dst)?;
    all_whole(&got, &[&old_m])?;
    ensure!(
        got.len() == old_m.len(),
        "{} entries, had {}",
        got.len(),
        old_m.len()
    );
    no_temporaries(&w)?;
    let j = json(&o)?;
    ensure!(
        j["errors"]
            .as_array()
            .is_some_and(|e| e.len() >= 120 && e.iter().all(|e| e["operation"] == "sync")),
        "{j}"
    );
    Ok(())
}

/// Six files of different sizes in a new directory `src`.
fn six_files(src: &Path) -> R {
    std::fs::create_dir(src)?;
    for i in 0..6 {
        trees::write_random(&src.join(format!("f{i}")), 20_000 + i as usize, i)?;
    }
    Ok(())
}

/// `o` failed exactly one file, `failed`, at `op` with EIO: reported with
/// its path (in the JSON and on stderr), exit 23, and absent; the new tree
/// `dst` is not put in place but kept staged, every other file of `src`
/// whole in it; the same command with `--resume` then finishes it, and
/// nothing temporary is left in `w`.
fn only_failed(o: &Output, w: &Path, src: &Path, dst: &Path, failed: &Path, op: &str) -> R {
    ensure!(code(o) == 23, "want exit 23: {}", show(o));
    let j = json(o)?;
    let errors = j["errors"].as_array().cloned().unwrap_or_default();
    ensure!(
        errors.len() == 2
            && errors[0]["path"] == failed.to_string_lossy().as_ref()
            && errors[0]["operation"] == op
            && errors[1]["path"] == dst.to_string_lossy().as_ref()
            && errors[1]["reason"]
                .as_str()
                .is_some_and(|r| r.starts_with("not put in place")),
        "{}",
        show(o)
    );
    ensure!(!dst.exists(), "an incomplete tree was put in place");
    let staged = temporaries(w)?
        .into_iter()
        .find(|t| t.contains(".kopiru-tmp.tree."))
        .ok_or("no staged tree kept")?;
    let (dst, kept) = (dst, Path::new(&staged));
    ensure!(
        String::from_utf8_lossy(&o.stderr)
            .contains(&format!("{}: {op}: Input/output error", failed.display())),
        "{}",
        show(o)
    );
    let failed_kept = kept.join(failed.file_name().unwrap_or_default());
    ensure!(
        !failed_kept.exists(),
        "{} was left after its {op} failed",
        failed_kept.display()
    );
    let others = std::fs::read_dir(src)?.count() - 1;
    ensure!(j["files"] == others, "{j}");
    let skip = failed.file_name().unwrap_or_default().as_bytes();
    let d = manifest::compare_except(
        &manifest(src)?,
        &manifest(kept)?,
        manifest::DEFAULT,
        &[b"", skip],
    );
    ensure!(d.is_empty(), "{d:#?}");
    let again = copy(&[OsStr::new("--resume"), src.as_os_str(), dst.as_os_str()]);
    ensure!(code(&again) == 0, "--resume: {}", show(&again));
    crate::same_tree(src, dst, manifest::DEFAULT)?;
    no_temporaries(w)
}

/// `--sync file`: the fourth fsync (the second file's) fails with EIO; that
/// file is reported with its path and is absent, the others are copied.
pub fn fsync_fails(fs: Fs) -> R {
    let w = fixture::workdir(fs, "fsync-fails")?;
    let (src, dst) = (w.join("src"), w.join("dst"));
    six_files(&src)?;
    let o = kopiru_injected(
        "fsync:error=EIO:when=4",
        &[
            OsStr::new("--sync"),
            OsStr::new("file"),
            src.as_os_str(),
            dst.as_os_str(),
        ],
    )?;
    // Which file's fsync that was depends on the order: the error says.
    let j = json(&o)?;
    let failed = PathBuf::from(j["errors"][0]["path"].as_str().unwrap_or(""));
    only_failed(&o, &w, &src, &dst, &failed, "sync")
}

/// A `close` of a written file that fails (EIO, which NFS and some FUSE
/// filesystems return for write-back errors) fails that file: it is
/// reported with its path and absent, the others are copied, exit 23. The
/// close is singled out with `strace -P`: the file's path in the tree kopiru
/// stages beside the destination (named `.kopiru-tmp.tree.` and the FNV-1a
/// hash of the destination's name, so a resumed run finds it).
pub fn close_fails(fs: Fs) -> R {
    let w = fixture::workdir(fs, "close-fails")?;
    let (src, dst) = (w.join("src"), w.join("dst"));
    six_files(&src)?;
    let fnv = b"dst".iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let staged = w.join(format!(".kopiru-tmp.tree.{fnv:016x}"));
    let o = crate::kopiru_injected_on("close:error=EIO", &[&staged.join("f2")])
        .args(["copy", "--json"])
        .arg(&src)
        .arg(&dst)
        .output()?;
    only_failed(&o, &w, &src, &dst, &dst.join("f2"), "close")
}

/// A rename that fails (the second, EIO) while copying into an existing
/// directory: that file keeps its old content, its temporary is removed.
pub fn rename_fails(fs: Fs) -> R {
    let w = fixture::workdir(fs, "rename-fails")?;
    let (src, dst) = (w.join("src"), w.join("dst"));
    tree(&src, 1)?;
    tree(&dst, 2)?;
    let old = manifest(&dst)?;
    let o = kopiru_injected(
        "renameat:error=EIO:when=2",
        &[
            OsStr::new("--sync"),
            OsStr::new("none"),
            src.join(".").as_os_str(),
            dst.as_os_str(),
        ],
    )?;
    ensure!(code(&o) == 23, "want exit 23: {}", show(&o));
    let j = json(&o)?;
    let errors = j["errors"].as_array().cloned().unwrap_or_default();
    ensure!(errors.len() == 1, "{j}");
    // The second rename was a file's or the symlink's (the order depends
    // on inode numbers): that one entry is old, every other is new.
    let new = manifest(&src)?;
    let got = manifest(&dst)?;
    all_whole(&got, &[&new, &old])?;
    let not_new = got
        .iter()
        .filter(|(p, e)| {
            new.get(*p)
                .is_none_or(|n| n.hash != e.hash || n.target != e.target)
        })
        .count();
    // (A symlink replaced by an equal one cannot be told apart: at most 1.)
    ensure!(not_new <= 1, "{not_new} entries not replaced, want 1");
    no_temporaries(&w)?;
    Ok(())
}

/// An ext4 with 64 inodes: the files that got one are whole, the rest are
/// reported (ENOSPC), no temporary is left.
pub fn inode_starved() -> R {
    let mnt = fixture::make_fs(Fs::Ext4, "inodes", 16, &["-N", "64"])?;
    let w = fixture::workdir(Fs::Ext4, "inode-src")?;
    let src = w.join("src");
    tree(&src, 3)?;
    // Into an existing directory (a new tree with failures is kept
    // staged: cprules.rs).
    let dst = mnt.join("dst");
    std::fs::create_dir(&dst)?;
    let o = copy(&[src.join(".").as_os_str(), dst.as_os_str()]);
    partial_with(&o, "No space left on device")?;
    let got = manifest(&dst)?;
    all_whole(&got, &[&manifest(&src)?])?;
    ensure!(
        got.values().filter(|e| e.kind == 'f').count() > 10,
        "too few files copied"
    );
    no_temporaries(&mnt)?;
    Ok(())
}

/// Copying from a read-only bind mount of the source works and leaves the
/// source exactly as it was (contents, modes, times including atimes).
pub fn readonly_source() -> R {
    let w = fixture::workdir(Fs::Ext4, "ro-source")?;
    let (src, ro, dst) = (w.join("src"), w.join("ro"), w.join("dst"));
    tree(&src, 4)?;
    let before = manifest(&src)?;
    std::fs::create_dir(&ro)?;
    fixture::sh(Command::new("mount").arg("--bind").arg(&src).arg(&ro))?;
    let remount = fixture::sh(
        Command::new("mount")
            .args(["-o", "remount,bind,ro"])
            .arg(&ro),
    );
    let o = copy(&[OsStr::new("-a"), ro.as_os_str(), dst.as_os_str()]);
    let _ = fixture::sh(Command::new("umount").arg(&ro));
    remount?;
    ensure!(code(&o) == 0, "{}", show(&o));
    exact(&src, &dst)?;
    let d = manifest::compare(&before, &manifest(&src)?, manifest::ALL);
    ensure!(d.is_empty(), "the source changed: {d:#?}");
    Ok(())
}

/// An inner filesystem whose image lives on the shared XFS (reflink), so a
/// point-in-time copy of the device is one `cp --reflink=always`.
struct Inner {
    fs: Fs,
    image: PathBuf,
    mnt: PathBuf,
    dir: PathBuf,
}

impl Inner {
    fn new(fs: Fs, tag: &str) -> Result<Inner, Failed> {
        let outer = fixture::shared(Fs::Xfs)?;
        let dir = outer.join(format!("inner-{tag}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let image = dir.join("disk.img");
        let mnt = dir.join("mnt");
        fixture::make_fs_at(fs, image.clone(), &mnt, 320, &[])?;
        Ok(Inner {
            fs,
            image,
            mnt,
            dir,
        })
    }

    /// What the disk holds at this instant, as after a power cut: the image
    /// is reflinked (the kernel first writes back what the loop device
    /// wrote, nothing of the inner filesystem's page cache), the original is
    /// unmounted, and the copy is mounted (journal replayed) and returned.
    fn power_cut(&self) -> Result<PathBuf, Failed> {
        let snap = self.dir.join("snap.img");
        let _ = std::fs::remove_file(&snap);
        fixture::sh(
            Command::new("cp")
                .arg("--reflink=always")
                .arg(&self.image)
                .arg(&snap),
        )?;
        fixture::unmount(&self.mnt)?;
        let mnt = self.dir.join("snap");
        Ok(fixture::mount_image(self.fs, snap, &mnt)?)
    }
}

/// Power cut after a `--sync end` copy exited 0: everything is on the disk.
/// Then power cuts after `kill -9` in the middle of a new tree and of a
/// copy over an existing tree: every name holds whole content.
pub fn power_cut(fs: Fs) -> R {
    let srcw = fixture::workdir(Fs::Ext4, &format!("pc-src-{}", fs.name()))?;
    let (src, old) = (srcw.join("src"), srcw.join("old"));
    tree(&src, 5)?;
    tree(&old, 6)?;
    let (new_m, old_m) = (manifest(&src)?, manifest(&old)?);

    // 1. Exit 0 means on disk.
    let inner = Inner::new(fs, &format!("done-{}", fs.name()))?;
    let dst = inner.mnt.join("dst");
    let o = copy(&[src.as_os_str(), dst.as_os_str()]);
    ensure!(code(&o) == 0, "{}", show(&o));
    let snap = inner.power_cut()?;
    exact(&src, &snap.join("dst"))?;

    // 2. Killed while building a new tree (at its 60th file open): the
    // tree is not visible, and nothing partial is.
    let inner = Inner::new(fs, &format!("mid-{}", fs.name()))?;
    let dst = inner.mnt.join("dst");
    let _ = kopiru_injected(
        "openat:signal=SIGKILL:when=60",
        &[src.as_os_str(), dst.as_os_str()],
    )?;
    let snap = inner.power_cut()?;
    ensure!(!snap.join("dst").exists(), "a half-built tree is visible");

    // 3. Killed while replacing an existing tree's files, at the 50th
    // rename (after the flush): every file is the old or the new one.
    let inner = Inner::new(fs, &format!("over-{}", fs.name()))?;
    fixture::sh(
        Command::new("cp")
            .arg("-a")
            .arg(&old)
            .arg(inner.mnt.join("dst")),
    )?;
    fixture::sh(&mut Command::new("sync"))?;
    let into = inner.mnt.join("dst");
    let _ = kopiru_injected(
        "renameat:signal=SIGKILL:when=50",
        &[src.join(".").as_os_str(), into.as_os_str()],
    );
    // Long enough for ext4's 5 s journal commit to write the renames made
    // before the kill: had they come before the flush, their files would
    // be empty on disk.
    std::thread::sleep(std::time::Duration::from_secs(6));
    let snap = inner.power_cut()?;
    let got = manifest(&snap.join("dst"))?;
    all_whole(&got, &[&new_m, &old_m])?;
    let finals = got.keys().filter(|p| !is_temporary(p)).count();
    ensure!(
        finals == new_m.len(),
        "{} entries, want {}",
        finals,
        new_m.len()
    );
    Ok(())
}

/// `kill -9` at several points, then the same command with `--resume`:
/// the copy converges to an exact one, leftovers are removed, and one more
/// `--resume` copies nothing.
pub fn resume(fs: Fs) -> R {
    let w = fixture::workdir(fs, "resume")?;
    let src = w.join("src");
    tree(&src, 7)?;
    for (i, kill) in [
        "openat:signal=SIGKILL:when=30",
        "openat:signal=SIGKILL:when=95",
        "renameat2:signal=SIGKILL:when=1",
        "syncfs:signal=SIGKILL:when=1",
    ]
    .iter()
    .enumerate()
    {
        let dst = w.join(format!("dst{i}"));
        // -T: DEST is the copy itself, so the same command names the same
        // copy after the first run made it.
        let t = OsStr::new("-T");
        let o = kopiru_injected(kill, &[t, src.as_os_str(), dst.as_os_str()])?;
        ensure!(
            o.status.code().is_none(),
            "not killed by {kill}: {}",
            show(&o)
        );
        let o = copy(&[OsStr::new("--resume"), t, src.as_os_str(), dst.as_os_str()]);
        ensure!(code(&o) == 0, "resume after {kill}: {}", show(&o));
        exact(&src, &dst).map_err(|e| format!("after {kill}: {}", e.message().unwrap_or("")))?;
        no_temporaries(&w).map_err(|e| format!("after {kill}: {}", e.message().unwrap_or("")))?;
        let o = copy(&[OsStr::new("--resume"), t, src.as_os_str(), dst.as_os_str()]);
        let j = json(&o)?;
        ensure!(
            code(&o) == 0 && j["files"] == 0 && j["bytes"] == 0,
            "second resume copied: {j}"
        );
    }
    // Into an existing directory, killed at its 40th deferred rename: the
    // leftover temporaries go, the rest is finished.
    let dst = w.join("merge");
    tree(&dst, 8)?;
    let kill = "renameat:signal=SIGKILL:when=40";
    let o = kopiru_injected(kill, &[src.join(".").as_os_str(), dst.as_os_str()])?;
    ensure!(o.status.code().is_none(), "not killed: {}", show(&o));
    ensure!(
        !temporaries(&dst)?.is_empty(),
        "the kill left no temporaries to clean"
    );
    let o = copy(&[
        OsStr::new("--resume"),
        src.join(".").as_os_str(),
        dst.as_os_str(),
    ]);
    ensure!(code(&o) == 0, "{}", show(&o));
    exact(&src, &dst)?;
    no_temporaries(&w)?;
    Ok(())
}

/// Registers this module's trials.
pub fn trials(add: Add) {
    for fs in Fs::ALL {
        let n = fs.name();
        let needs_strace = fs.unavailable().or_else(strace_unavailable);
        add(
            format!("flush_fails::{n}"),
            needs_strace.clone(),
            Box::new(move || flush_fails(fs)),
        );
        add(
            format!("fsync_fails::{n}"),
            needs_strace.clone(),
            Box::new(move || fsync_fails(fs)),
        );
        add(
            format!("close_fails::{n}"),
            needs_strace.clone(),
            Box::new(move || close_fails(fs)),
        );
        add(
            format!("rename_fails::{n}"),
            needs_strace.clone(),
            Box::new(move || rename_fails(fs)),
        );
        add(
            format!("resume::{n}"),
            needs_strace.clone(),
            Box::new(move || resume(fs)),
        );
        add(
            format!("power_cut::{n}"),
            needs_strace.or_else(|| Fs::Xfs.unavailable()),
            Box::new(move || power_cut(fs)),
        );
    }
    let ext4 = Fs::Ext4.unavailable();
    add(
        "inode_starved::ext4".into(),
        ext4.clone(),
        Box::new(inode_starved),
    );
    add(
        "readonly_source::ext4".into(),
        ext4,
        Box::new(readonly_source),
    );
}
