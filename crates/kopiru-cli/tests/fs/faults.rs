//! Bad input and failures: the refusals (into itself, onto itself, by a
//! bind mount), usage errors, and faults injected or provoked (EIO, ENOSPC,
//! no inodes left, a read-only destination).

use super::*;

/// Every refusal: clear message, right exit code, nothing changed.
pub fn refusals(fs: Fs) -> R {
    let w = fixture::workdir(fs, "refusals")?;
    let src = w.join("src");
    trees::rich(&src)?;
    std::fs::write(w.join("file"), b"precious")?;
    std::fs::create_dir(w.join("adir"))?;
    std::fs::write(w.join("adir/keep"), b"keep")?;
    std::fs::create_dir_all(w.join("adir2/file"))?;
    let before = manifest(&w)?;
    let p = |s: &str| w.join(s).into_os_string();
    let cases: Vec<(Vec<std::ffi::OsString>, i32, &str)> = vec![
        (vec![p("src"), p("src")], 1, "into itself"),
        (vec![p("src"), p("src/a/b/inner")], 1, "into itself"),
        (
            vec![p("src"), w.join("src/a/../inner2").into_os_string()],
            1,
            "into itself",
        ),
        (vec![p("file"), p("file")], 1, "same file"),
        (
            vec![p("src/a/small"), p("src/a/b/small-link")],
            1,
            "same file",
        ),
        (vec![p("missing"), p("x")], 1, "No such file or directory"),
        (
            vec![p("src"), p("file")],
            1,
            "cannot overwrite non-directory with directory",
        ),
        (vec![p("file"), p("src"), p("file")], 2, "not a directory"),
    ];
    for (args, want, msg) in cases {
        let o = kopiru(std::iter::once("copy".into()).chain(args.clone()));
        ensure!(code(&o) == want, "{args:?}: want exit {want}: {}", show(&o));
        ensure!(
            String::from_utf8_lossy(&o.stderr).contains(msg),
            "{args:?}: want {msg:?}: {}",
            show(&o)
        );
    }
    // A file over a directory: adir2/file is a directory.
    let o = kopiru([
        OsStr::new("copy"),
        w.join("file").as_os_str(),
        w.join("adir2").as_os_str(),
    ]);
    fails_with(&o, 1, "cannot overwrite directory with non-directory")?;
    let after = manifest(&w)?;
    let d = compare(&before, &after, manifest::ALL);
    ensure!(d.is_empty(), "a refused copy changed something: {d:#?}");
    Ok(())
}

/// A destination reached through a bind mount of the source's own
/// subdirectory is refused when the walk meets it, not copied into itself.
pub fn into_itself_via_bind_mount(fs: Fs) -> R {
    let w = fixture::workdir(fs, "bind")?;
    let src = w.join("src");
    std::fs::create_dir_all(src.join("sub"))?;
    std::fs::write(src.join("file"), b"data")?;
    let b = w.join("b");
    std::fs::create_dir(&b)?;
    fixture::sh(
        Command::new("mount")
            .arg("--bind")
            .arg(src.join("sub"))
            .arg(&b),
    )?;
    let o = kopiru([OsStr::new("copy"), src.as_os_str(), b.join("x").as_os_str()]);
    let _ = Command::new("umount").arg(&b).status();
    ensure!(code(&o) == 23, "want exit 23: {}", show(&o));
    ensure!(
        String::from_utf8_lossy(&o.stderr).contains("into itself"),
        "{}",
        show(&o)
    );
    // The refusal is a failure in the new tree: it is kept staged (in
    // src/sub, which b is), the rest copied in it, not put in place.
    ensure!(!src.join("sub/x").exists(), "an incomplete copy was put in place");
    let staged = std::fs::read_dir(src.join("sub"))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().contains(".kopiru-tmp.tree."))
        .ok_or("no staged tree kept")?;
    ensure!(
        std::fs::read(staged.join("file"))? == b"data",
        "the rest was not copied"
    );
    ensure!(!staged.join("sub").join("x").exists(), "copied into itself");
    Ok(())
}

/// Usage errors exit 2.
pub fn usage() -> R {
    let o = kopiru(["copy"]);
    ensure!(code(&o) == 2, "{}", show(&o));
    let o = kopiru(["copy", "only-one"]);
    ensure!(code(&o) == 2, "{}", show(&o));
    let o = kopiru(["copy", "--method", "teleport", "a", "b"]);
    ensure!(code(&o) == 2, "{}", show(&o));
    // A clone has no part to keep (docs/copy.md says so, under --partial):
    // refused before anything is looked at.
    for clone in [&["--method", "clone"][..], &["--reflink=always"]] {
        let mut args = vec!["copy", "--partial"];
        args.extend_from_slice(clone);
        args.extend(["/nonexistent-a", "/nonexistent-b"]);
        fails_with(&kopiru(&args), 2, "--partial cannot be used with")?;
    }
    let o = kopiru(["copy", "--help"]);
    let help = String::from_utf8_lossy(&o.stdout);
    for opt in [
        "--archive",
        "--method",
        "--sparse",
        "--jobs",
        "--progress",
        "--no-progress",
        "--explain",
        "--json",
        "--dereference",
        "--preserve",
        "Exit codes",
    ] {
        ensure!(help.contains(opt), "--help does not mention {opt}");
    }
    Ok(())
}

/// Out of inodes half-way through a large directory (ext4 made with 256):
/// each file that cannot be created is reported with its path, exit 23;
/// every file that was created is whole, with its mode and times, and
/// nothing temporary is left. Default workers, sharing the directory (on
/// ext4 each worker creates and copies whole files; the pipeline, which
/// creates files ahead of their copies, runs on Btrfs only since stop 25,
/// and Btrfs has no inode limit to run out of: its create failures are
/// not tested).
pub fn out_of_inodes() -> R {
    let mnt = fixture::make_fs(Fs::Ext4, "inodes", 32, &["-N", "256"])?;
    let w = fixture::workdir(Fs::Ext4, "inodes-src")?;
    let src = w.join("src");
    trees::large_dir(&src, 600)?;
    // Into an existing directory, where each file is placed once whole (a
    // new tree with failures would be kept staged: cprules.rs).
    let dst = mnt.join("dst");
    std::fs::create_dir(&dst)?;
    let o = kopiru([
        OsStr::new("copy"),
        OsStr::new("--json"),
        src.join(".").as_os_str(),
        dst.as_os_str(),
    ]);
    let j = partial_with(&o, "No space left on device")?;
    let errors = j["errors"].as_array().cloned().unwrap_or_default();
    let copied = j["files"].as_u64().unwrap_or(0) + j["hard_links"].as_u64().unwrap_or(0);
    ensure!(
        copied > 100 && errors.len() > 100,
        "{copied} files and links copied, {} errors",
        errors.len()
    );
    let (a, b) = (manifest(&src)?, manifest(&dst)?);
    for e in &errors {
        let path = e["path"].as_str().unwrap_or("");
        ensure!(path.starts_with(&*dst.to_string_lossy()), "{e}");
        ensure!(!Path::new(path).exists(), "{path} exists after failing");
        ensure!(
            String::from_utf8_lossy(&o.stderr).contains(&format!("{path}: ")),
            "{path} not on stderr"
        );
    }
    let made: Vec<_> = b.iter().filter(|(p, _)| !p.is_empty()).collect();
    let files = made.iter().filter(|(_, e)| e.kind == 'f').count() as u64;
    ensure!(files == copied, "{files} files in the copy, {copied} said");
    durability::no_temporaries(&mnt)?;
    for (p, e) in made {
        let d = compare(
            &[(p.clone(), a[p].clone())].into(),
            &[(p.clone(), e.clone())].into(),
            manifest::DEFAULT,
        );
        ensure!(d.is_empty() || e.kind == 'd', "{d:?}");
    }
    Ok(())
}

/// An I/O error on one file (injected with strace): that file is reported
/// with its path and reason and absent, the others copied, exit 23.
pub fn injected_eio(fs: Fs) -> R {
    let w = fixture::workdir(fs, "eio")?;
    let src = w.join("src");
    std::fs::create_dir(&src)?;
    for i in 0..5 {
        trees::write_random(&src.join(format!("f{i}")), 50_000, i)?;
    }
    // Into an existing directory (a new tree with a failure is kept
    // staged: cprules.rs).
    let dst = w.join("dst");
    std::fs::create_dir(&dst)?;
    // The data call of the third file fails (FICLONE on clone-capable
    // filesystems, copy_file_range elsewhere).
    let call = if fs.can_clone() {
        "ioctl"
    } else {
        "copy_file_range"
    };
    let o = kopiru_injected(&format!("{call}:error=EIO:when=3"))
        .args(["copy", "-j", "1", "--json"])
        .arg(src.join("."))
        .arg(&dst)
        .output()?;
    ensure!(code(&o) == 23, "want exit 23: {}", show(&o));
    let j = json(&o)?;
    let errors = j["errors"].as_array().cloned().unwrap_or_default();
    ensure!(
        errors.len() == 1 && errors[0]["reason"] == "Input/output error",
        "{j}"
    );
    let failed = Path::new(errors[0]["path"].as_str().unwrap())
        .file_name()
        .unwrap()
        .to_owned();
    ensure!(
        String::from_utf8_lossy(&o.stderr).contains(&format!(
            "{}: ",
            Path::new(errors[0]["path"].as_str().unwrap()).display()
        )),
        "stderr lacks the path: {}",
        show(&o)
    );
    ensure!(
        !dst.join(&failed).exists(),
        "the failed file was left under its final name"
    );
    ensure!(j["files"] == 4, "{j}");
    // The rest is exact; the root differs by the missing file's mtime effect.
    let failed = failed.as_bytes();
    let d = compare_except(
        &manifest(&src)?,
        &manifest(&dst)?,
        manifest::DEFAULT,
        &[b"", failed],
    );
    ensure!(d.is_empty(), "{d:#?}");
    Ok(())
}

/// A filesystem that fills up: the files that fit are whole, the others are
/// reported and absent.
pub fn enospc(fs: Fs) -> R {
    let small = match fs {
        Fs::Ext4 => 32,
        _ => 350,
    };
    let mnt = fixture::make_fs(fs, &format!("full-{}", fs.name()), small, &[])?;
    let w = fixture::workdir(Fs::Ext4, &format!("enospc-{}", fs.name()))?;
    let src = w.join("src");
    std::fs::create_dir(&src)?;
    let n = small / 4 + 4;
    for i in 0..n {
        trees::write_random(&src.join(format!("f{i:03}")), 4 << 20, i)?;
    }
    // Into an existing directory (a new tree with failures is kept
    // staged: cprules.rs).
    let dst = mnt.join("dst");
    std::fs::create_dir(&dst)?;
    let o = kopiru([
        OsStr::new("copy"),
        OsStr::new("-j"),
        OsStr::new("1"),
        OsStr::new("--json"),
        src.join(".").as_os_str(),
        dst.as_os_str(),
    ]);
    let j = partial_with(&o, "No space left on device")?;
    let a = manifest(&src)?;
    let b = manifest(&dst)?;
    for (p, e) in b.iter().filter(|(_, e)| e.kind == 'f') {
        ensure!(
            a[p].hash == e.hash,
            "{} is incomplete under its final name",
            String::from_utf8_lossy(p)
        );
    }
    ensure!(
        b.keys()
            .all(|p| !String::from_utf8_lossy(p).contains(".kopiru-tmp")),
        "temporary files left"
    );
    ensure!(
        j["files"].as_u64() == Some(b.values().filter(|e| e.kind == 'f').count() as u64),
        "{j}"
    );
    Ok(())
}

/// A read-only destination: nothing can be done, exit 1, a clear error.
pub fn readonly_dest() -> R {
    let mnt = fixture::make_fs(Fs::Ext4, "ro", 16, &[])?;
    fixture::sh(Command::new("mount").args(["-o", "remount,ro"]).arg(&mnt))?;
    let w = fixture::workdir(Fs::Ext4, "ro-src")?;
    trees::rich(&w.join("src"))?;
    let o = kopiru(
        [w.join("src").as_os_str(), mnt.join("dst").as_os_str()]
            .iter()
            .fold(vec![OsStr::new("copy")], |mut v, a| {
                v.push(a);
                v
            }),
    );
    ensure!(code(&o) == 1, "want exit 1: {}", show(&o));
    ensure!(
        String::from_utf8_lossy(&o.stderr).contains("Read-only file system"),
        "{}",
        show(&o)
    );
    Ok(())
}

/// Registers this module's trials.
pub fn trials(add: Add) {
    let ext4 = Fs::Ext4.unavailable();
    add(
        "out_of_inodes".into(),
        ext4.clone(),
        Box::new(out_of_inodes),
    );
    for fs in Fs::ALL {
        let (n, why) = (fs.name(), fs.unavailable());
        add(
            format!("enospc::{n}"),
            why.clone(),
            Box::new(move || enospc(fs)),
        );
        add(
            format!("injected_eio::{n}"),
            why.or_else(strace_unavailable),
            Box::new(move || injected_eio(fs)),
        );
    }
    add(
        "refusals::ext4".into(),
        ext4.clone(),
        Box::new(|| refusals(Fs::Ext4)),
    );
    add(
        "into_itself_via_bind_mount::ext4".into(),
        ext4.clone(),
        Box::new(|| into_itself_via_bind_mount(Fs::Ext4)),
    );
    add("readonly_dest::ext4".into(), ext4, Box::new(readonly_dest));
    add("usage".into(), None, Box::new(usage));
}
