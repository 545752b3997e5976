//! Edge cases of the command line: a source that is its own destination by
//! another name (symlink, hard link, `..`, bind mount, `SRC/.`), `probe` on
//! a missing path, `--verify`'s counts, `--method clone` where no clone is
//! possible, and read-only destinations.

use crate::fixture::{self, Fs};
use crate::manifest::{self, manifest};
use crate::{code, kopiru_in, show, Add, R};
use std::path::Path;
use std::process::Command;

/// The tree every same-file case starts from, in `w`: a file `T` with its
/// symlink `LINK` and hard link `HARD`, a directory `src` with its symlink
/// `DLINK`, and an empty directory `b` for bind mounts.
fn same_file_tree(w: &Path) -> R {
    let _ = Command::new("umount").arg(w.join("b")).output();
    let _ = std::fs::remove_dir_all(w);
    std::fs::create_dir_all(w.join("src/sub"))?;
    std::fs::create_dir_all(w.join("d"))?;
    std::fs::create_dir_all(w.join("b"))?;
    std::fs::write(w.join("T"), b"precious")?;
    std::fs::write(w.join("src/f"), b"data")?;
    std::fs::write(w.join("src/sub/g"), b"more data")?;
    std::fs::write(w.join("d/file"), b"other")?;
    std::os::unix::fs::symlink("T", w.join("LINK"))?;
    std::os::unix::fs::symlink("src", w.join("DLINK"))?;
    std::fs::hard_link(w.join("T"), w.join("HARD"))?;
    Ok(())
}

/// A source that is the destination by any path is refused before anything
/// is written: exit 1, "same file" or "into itself", and every byte, name,
/// mode and time under the work directory as before.
pub fn same_file(fs: Fs) -> R {
    let w = fixture::workdir(fs, "edges-same-file")?;
    // (bind-mount src on b first, arguments)
    let cases: &[(bool, &[&str])] = &[
        // A symlink to the destination file: cp says "are the same file";
        // kopiru used to replace T by a symlink to itself and exit 0.
        (false, &["LINK", "T"]),
        (false, &["-H", "LINK", "T"]),
        (false, &["-L", "LINK", "T"]),
        // The destination is a symlink to the source (cp refuses too).
        (false, &["T", "LINK"]),
        // A hard link of the destination, and a `..` path to it.
        (false, &["HARD", "T"]),
        (false, &["d/../T", "T"]),
        (false, &["-T", "d/../T", "HARD"]),
        // A directory onto itself: SRC/. and -T, by its name or a symlink.
        (false, &["src/.", "src"]),
        (false, &["-T", "src", "src"]),
        (false, &["src/.", "DLINK"]),
        (false, &["-T", "src", "DLINK"]),
        (false, &["-T", "DLINK", "src"]),
        (false, &["-L", "-T", "DLINK", "src"]),
        (false, &["-H", "DLINK/.", "src"]),
        (false, &["DLINK/.", "src"]),
        (false, &["-T", "src/sub/..", "src"]),
        // Into itself through a symlinked parent.
        (false, &["src", "DLINK/sub"]),
        (false, &["-L", "DLINK", "DLINK/sub"]),
        (false, &["src/f", "DLINK/f"]),
        // Through a bind mount of the source directory on b.
        (true, &["src", "b/x"]),
        (true, &["src", "b"]),
        (true, &["src", "b/sub"]),
        (true, &["src/.", "b"]),
        (true, &["-T", "src", "b"]),
        (true, &["b", "src/sub"]),
        (true, &["b/.", "src"]),
        (true, &["src/f", "b/f"]),
    ];
    let mut failures = Vec::new();
    for (bind, args) in cases {
        same_file_tree(&w)?;
        if *bind {
            fixture::sh(
                Command::new("mount")
                    .arg("--bind")
                    .arg(w.join("src"))
                    .arg(w.join("b")),
            )?;
        }
        let before = manifest(&w)?;
        let mut all = vec!["copy"];
        all.extend_from_slice(args);
        let o = kopiru_in(&w, &all);
        let after = manifest(&w);
        if *bind {
            let _ = Command::new("umount").arg(w.join("b")).output();
        }
        let err = String::from_utf8_lossy(&o.stderr);
        if code(&o) != 1 || !(err.contains("same file") || err.contains("into itself")) {
            failures.push(format!("{args:?}: want exit 1, same file: {}", show(&o)));
        }
        let d = manifest::compare(&before, &after?, manifest::ALL);
        if !d.is_empty() {
            failures.push(format!("{args:?}: changed: {d:#?}"));
        }
        if err.lines().count() != 1 {
            failures.push(format!("{args:?}: want one line on stderr: {}", show(&o)));
        }
    }
    let _ = Command::new("umount").arg(w.join("b")).output();
    ensure!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // What is not the same file is still copied: a symlink beside its
    // target, a hard link's group into a new directory.
    same_file_tree(&w)?;
    let o = kopiru_in(&w, &["copy", "-P", "LINK", "LINK2"]);
    ensure!(code(&o) == 0, "{}", show(&o));
    ensure!(
        std::fs::read_link(w.join("LINK2"))? == Path::new("T"),
        "LINK2 is not a symlink to T"
    );
    // Without -P (nor -r), a symlink named as a source is followed, as cp
    // follows it: LINK3 is a copy of T.
    let o = kopiru_in(&w, &["copy", "LINK", "LINK3"]);
    ensure!(code(&o) == 0, "{}", show(&o));
    ensure!(std::fs::read(w.join("LINK3"))? == b"precious", "LINK3 is not T's copy");
    let o = kopiru_in(&w, &["copy", "-T", "src", "DLINK2"]);
    ensure!(code(&o) == 0, "{}", show(&o));
    ensure!(std::fs::read(w.join("DLINK2/f"))? == b"data", "not copied");
    Ok(())
}

/// `kopiru probe` on a path that does not exist fails with the path
/// (it used to report the filesystem of the directory above and exit 0),
/// and an error on a scratch file (in /proc, where nothing can be created)
/// names that file; an existing path still works.
pub fn probe_errors(fs: Fs) -> R {
    let w = fixture::workdir(fs, "edges-probe")?;
    let o = kopiru_in(&w, &["probe", "MISSING"]);
    ensure!(code(&o) == 1, "want exit 1: {}", show(&o));
    ensure!(
        o.stderr == b"kopiru: MISSING: stat: No such file or directory\n",
        "{}",
        show(&o)
    );
    ensure!(o.stdout.is_empty(), "{}", show(&o));
    let o = kopiru_in(&w, &["probe", ".", "missing/deeper"]);
    ensure!(
        code(&o) == 1 && o.stderr == b"kopiru: missing/deeper: stat: No such file or directory\n",
        "{}",
        show(&o)
    );
    let o = kopiru_in(&w, &["probe", "/proc/self"]);
    let err = String::from_utf8_lossy(&o.stderr);
    ensure!(
        code(&o) == 1 && err.starts_with("kopiru: /proc/self/") && err.contains(": create: "),
        "{}",
        show(&o)
    );
    let o = kopiru_in(&w, &["probe", "."]);
    ensure!(code(&o) == 0, "{}", show(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    ensure!(out.starts_with(&format!(".: {}\n", fs.name())), "{out}");
    ensure!(
        std::fs::read_dir(&w)?.next().is_none(),
        "scratch files left"
    );
    Ok(())
}

/// `copy --verify` counts the files the copy counts: a second name of a
/// hard-linked file is a hard link (`hard_links`), not a file, and it is
/// not read a second time; the root directory, directories and symlinks
/// are not files either. `kopiru verify` counts the same way, and still
/// compares every name of a group whose link the destination did not keep.
pub fn verify_counts(fs: Fs) -> R {
    let w = fixture::workdir(fs, "edges-verify-counts")?;
    let (src, dst) = (w.join("src"), w.join("dst"));
    std::fs::create_dir_all(src.join("dir"))?;
    std::fs::write(src.join("file"), b"file data")?;
    std::fs::write(src.join("dir/inner"), b"inner data")?;
    std::fs::write(src.join("empty"), b"")?;
    std::os::unix::fs::symlink("file", src.join("link"))?;
    std::fs::hard_link(src.join("file"), src.join("hard"))?;
    std::fs::hard_link(src.join("file"), src.join("dir/hard2"))?;
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let o = kopiru_in(&w, &["copy", "--verify", "--json", &s(&src), &s(&dst)]);
    ensure!(code(&o) == 0, "{}", show(&o));
    let j = crate::json(&o)?;
    ensure!(
        j["files"] == 3 && j["hard_links"] == 2 && j["verified_files"] == j["files"],
        "verified_files is not files (3, with 2 hard links): {j}"
    );
    let o = kopiru_in(&w, &["verify", "--json", &s(&src), &s(&dst)]);
    let j = crate::json(&o)?;
    ensure!(code(&o) == 0 && j["files"] == 3, "{}", show(&o));
    // A copy that did not keep the link: each name is its own file there,
    // compared and counted.
    std::fs::remove_file(dst.join("hard"))?;
    std::fs::write(dst.join("hard"), b"file data")?;
    let o = kopiru_in(&w, &["verify", "--json", &s(&src), &s(&dst)]);
    let j = crate::json(&o)?;
    ensure!(code(&o) == 0 && j["files"] == 4, "{}", show(&o));
    std::fs::write(dst.join("hard"), b"file DATA")?;
    let o = kopiru_in(&w, &["verify", &s(&src), &s(&dst)]);
    ensure!(
        code(&o) == 1
            && String::from_utf8_lossy(&o.stdout)
                == format!("{}: content differs\n", dst.join("hard").display()),
        "{}",
        show(&o)
    );
    Ok(())
}

/// A tree of 50 files (1 to 10 KB) in five directories, and an empty file
/// at the top (which `--method clone` clones too).
fn fifty(root: &Path) -> R {
    std::fs::create_dir_all(root)?;
    std::fs::write(root.join("0-empty"), b"")?;
    for d in 0..5 {
        let dir = root.join(format!("d{d}"));
        std::fs::create_dir_all(&dir)?;
        for i in 0..10 {
            crate::trees::write_random(
                &dir.join(format!("f{i}")),
                1000 * (i + 1),
                (d * 10 + i) as u64,
            )?;
        }
    }
    Ok(())
}

/// Every `.kopiru-*` name under `root`.
fn leftovers(root: &Path) -> Result<String, libtest_mimic::Failed> {
    Ok(fixture::sh(
        Command::new("find").arg(root).args(["-name", ".kopiru-*"]),
    )?)
}

/// `--method clone` where no clone is possible (ext4; ext4 to XFS; XFS to
/// ext4) is refused once, before anything is created: exit 1, one line on
/// stderr, no destination, no scratch or temporary left. It used to print
/// one error per file and then rename an empty skeleton tree into place.
/// On XFS, with reflink, it still clones the tree.
pub fn clone_impossible() -> R {
    let e = fixture::workdir(Fs::Ext4, "edges-clone")?;
    let x = fixture::workdir(Fs::Xfs, "edges-clone")?;
    fifty(&e.join("src"))?;
    fifty(&x.join("src"))?;
    let cases = [
        (e.join("src"), e.join("dst")),
        (e.join("src"), x.join("dst")),
        (x.join("src"), e.join("dst")),
        (e.join("src/d3/f4"), e.join("one")),
        (x.join("src/d3/f4"), e.join("one")),
    ];
    for (src, dst) in &cases {
        let o = kopiru_in(
            &e,
            &[
                "copy",
                "--method",
                "clone",
                src.to_str().unwrap(),
                dst.to_str().unwrap(),
            ],
        );
        let err = String::from_utf8_lossy(&o.stderr);
        ensure!(
            code(&o) == 1,
            "{src:?} -> {dst:?}: want exit 1: {}",
            show(&o)
        );
        ensure!(
            err.lines().count() == 1 && err.contains("clone"),
            "{src:?} -> {dst:?}: want one error line: {}",
            show(&o)
        );
        ensure!(
            !dst.exists(),
            "{src:?} -> {dst:?}: {dst:?} was created: {}",
            show(&o)
        );
        for root in [&e, &x] {
            let left = leftovers(root)?;
            ensure!(left.is_empty(), "left behind: {left}");
        }
    }
    // Into an existing directory on ext4, with the files' parents existing
    // too: still nothing created. (The trial's scratch file, made and
    // removed in into/src, changes that directory's mtime.)
    std::fs::create_dir_all(e.join("into/src/d0"))?;
    let before = manifest(&e.join("into"))?;
    let o = kopiru_in(&e, &["copy", "--method", "clone", "src", "into"]);
    ensure!(code(&o) == 1, "want exit 1: {}", show(&o));
    let fields = manifest::Fields {
        mtime: false,
        ..manifest::ALL
    };
    let d = manifest::compare(&before, &manifest(&e.join("into"))?, fields);
    ensure!(d.is_empty(), "the existing directory changed: {d:#?}");
    // XFS to XFS clones.
    let o = kopiru_in(&x, &["copy", "--json", "--method", "clone", "src", "dst"]);
    ensure!(code(&o) == 0, "{}", show(&o));
    let j = crate::json(&o)?;
    ensure!(j["methods"]["clone"] == 51, "{j}");
    let d = manifest::compare(
        &manifest(&x.join("src"))?,
        &manifest(&x.join("dst"))?,
        manifest::DEFAULT,
    );
    ensure!(d.is_empty(), "{d:#?}");
    let left = leftovers(&x)?;
    ensure!(left.is_empty(), "left behind: {left}");
    Ok(())
}

/// A read-only destination (a filesystem remounted read-only, and a
/// read-only bind mount) fails with the destination's own name and the
/// operation that failed, and exit 1 when nothing was copied.
/// (It failed before `stage()` looked for a leftover staged tree before
/// removing one, and before a directory merged into stopped counting as
/// something copied.)
pub fn readonly_dest() -> R {
    let mnt = fixture::make_fs(Fs::Ext4, "edges-ro", 16, &[])?;
    std::fs::create_dir_all(mnt.join("existing/src"))?;
    fixture::sh(Command::new("mount").args(["-o", "remount,ro"]).arg(&mnt))?;
    let w = fixture::workdir(Fs::Ext4, "edges-ro")?;
    let src = w.join("src");
    std::fs::create_dir_all(src.join("dir"))?;
    std::fs::write(src.join("file"), b"data")?;
    std::fs::write(src.join("dir/inner"), b"inner")?;
    // A read-only bind mount of a writable directory.
    let rw = w.join("rw");
    let ro = w.join("ro");
    std::fs::create_dir_all(&rw)?;
    std::fs::create_dir_all(&ro)?;
    fixture::sh(Command::new("mount").arg("--bind").arg(&rw).arg(&ro))?;
    let r = (|| -> R {
        fixture::sh(
            Command::new("mount")
                .args(["-o", "remount,bind,ro"])
                .arg(&ro),
        )?;
        let s = |p: &Path| p.to_str().unwrap().to_string();
        let erofs = "Read-only file system";
        // What a directory that could not be made leaves uncopied.
        let uncopied = "kopiru: 3 entries not copied under 1 directory that could not be made";
        let mut failures = Vec::new();
        // (source, destination, the error lines wanted: one, and for a
        // directory the count of what it would have held)
        let cases = [
            (
                s(&src),
                s(&mnt.join("new")),
                format!("kopiru: {}: mkdir: {erofs}\n{uncopied}", mnt.join("new").display()),
            ),
            (
                s(&src),
                s(&ro.join("new")),
                format!("kopiru: {}: mkdir: {erofs}\n{uncopied}", ro.join("new").display()),
            ),
            (
                s(&src.join("file")),
                format!("{}/", ro.display()),
                format!("kopiru: {}: create: {erofs}", ro.join("file").display()),
            ),
            (
                s(&src.join("file")),
                s(&mnt.join("existing")),
                format!(
                    "kopiru: {}: create: {erofs}",
                    mnt.join("existing/file").display()
                ),
            ),
        ];
        for (from, to, want) in &cases {
            let o = kopiru_in(&w, &["copy", from, to]);
            let err = String::from_utf8_lossy(&o.stderr);
            if code(&o) != 1 || err.trim_end() != want {
                failures.push(format!(
                    "{from} -> {to}: want exit 1 and {want:?}: {}",
                    show(&o)
                ));
            }
        }
        // Merged into an existing directory: nothing copied, exit 1, and
        // no temporary name in any message.
        let o = kopiru_in(&w, &["copy", &s(&src), &s(&mnt.join("existing"))]);
        let err = String::from_utf8_lossy(&o.stderr);
        if code(&o) != 1 || err.contains(".kopiru-tmp") || !err.contains(erofs) {
            failures.push(format!("merge: want exit 1: {}", show(&o)));
        }
        ensure!(
            failures.is_empty(),
            "{} failures:\n{}",
            failures.len(),
            failures.join("\n")
        );
        Ok(())
    })();
    let _ = Command::new("umount").arg(&ro).output();
    r
}

/// Registers this module's trials.
pub fn trials(add: Add) {
    let ext4 = Fs::Ext4.unavailable();
    add(
        "edges_same_file::ext4".into(),
        ext4.clone(),
        Box::new(|| same_file(Fs::Ext4)),
    );
    add(
        "edges_probe_errors::ext4".into(),
        ext4.clone(),
        Box::new(|| probe_errors(Fs::Ext4)),
    );
    add(
        "edges_verify_counts::ext4".into(),
        ext4.clone(),
        Box::new(|| verify_counts(Fs::Ext4)),
    );
    add(
        "edges_clone_impossible::ext4_xfs".into(),
        ext4.clone().or_else(|| Fs::Xfs.unavailable()),
        Box::new(clone_impossible),
    );
    add(
        "edges_readonly_dest::ext4".into(),
        ext4,
        Box::new(readonly_dest),
    );
}
