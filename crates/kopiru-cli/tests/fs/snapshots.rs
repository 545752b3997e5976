//! The last of cp's and rsync's options (issue 14): snapshots that share
//! what did not change (--link-dest, --clone-dest), an interrupted large
//! file continued from the part that matches (--partial), and cp's -i and
//! -f.

use super::*;
use crate::durability::no_temporaries;
use crate::options::copy;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::PathBuf;
use std::process::Stdio;

fn ino(p: &Path) -> Result<(u64, u64), Failed> {
    let m = fs::symlink_metadata(p).map_err(|e| format!("{}: {e}", p.display()))?;
    Ok((m.dev(), m.ino()))
}

/// Sets a file's modification (and access) time to `sec`.
fn set_mtime(p: &Path, sec: i64) -> R {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(sec as u64);
    let f = fs::File::options().write(true).open(p)?;
    f.set_times(fs::FileTimes::new().set_accessed(t).set_modified(t))?;
    Ok(())
}

/// The source of the snapshot tests: `a` and `sub/d` stay as they are,
/// `b` gets only a new time, `sub/c` new content of the same size and a
/// new time, `sub/e` is new.
fn snapshot_source(src: &Path) -> R {
    fs::create_dir_all(src.join("sub"))?;
    trees::write_random(&src.join("a"), 1 << 20, 1)?;
    trees::write_random(&src.join("b"), 70_000, 2)?;
    trees::write_random(&src.join("sub/c"), 300_000, 3)?;
    trees::write_random(&src.join("sub/d"), 5_000, 4)?;
    fs::set_permissions(src.join("sub/d"), fs::Permissions::from_mode(0o640))?;
    for (i, f) in ["a", "b", "sub/c", "sub/d"].iter().enumerate() {
        set_mtime(&src.join(f), 1_500_000_000 + i as i64 * 1000)?;
    }
    Ok(())
}

fn change_source(src: &Path) -> R {
    set_mtime(&src.join("b"), 1_600_000_000)?;
    trees::write_random(&src.join("sub/c"), 300_000, 33)?;
    set_mtime(&src.join("sub/c"), 1_600_000_100)?;
    trees::write_random(&src.join("sub/e"), 10_000, 5)?;
    Ok(())
}

/// The --explain lines (method, then the rest) for each destination file.
fn explained(o: &Output) -> Vec<String> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// `--link-dest ../snap1`: unchanged files become hard links to the first
/// snapshot's, changed and new ones are copied; the second snapshot is an
/// exact copy of the source, the first is left as it was; a relative DIR
/// is taken from DEST, as rsync's; a DIR that does not exist is a usage
/// error before anything is written.
pub fn link_dest(fs: Fs) -> R {
    // Linked files have two links now, which the manifest would take for
    // a hard-link group inside the tree.
    let fields = manifest::Fields {
        links: false,
        ..manifest::DEFAULT
    };
    let w = fixture::workdir(fs, "link_dest")?;
    let (src, snaps) = (w.join("src"), w.join("snaps"));
    snapshot_source(&src)?;
    fs::create_dir(&snaps)?;
    let snap1 = snaps.join("snap1");
    let o = copy(&[], &[&src, &snap1]);
    ensure!(code(&o) == 0, "{}", show(&o));
    let before = manifest(&snap1)?;
    change_source(&src)?;

    let snap2 = snaps.join("snap2");
    let o = copy(&["--link-dest", "../snap1", "--json"], &[&src, &snap2]);
    ensure!(code(&o) == 0 && o.stderr.is_empty(), "{}", show(&o));
    same_tree(&src, &snap2, fields)?;
    for f in ["a", "sub/d"] {
        ensure!(
            ino(&snap2.join(f))? == ino(&snap1.join(f))?,
            "{f} unchanged but not linked to snap1's: {}",
            show(&o)
        );
    }
    for f in ["b", "sub/c"] {
        ensure!(
            ino(&snap2.join(f))? != ino(&snap1.join(f))?,
            "{f} changed but linked to snap1's"
        );
    }
    let j = json(&o)?;
    ensure!(j["methods"]["link"] == 2 && j["files"] == 5, "JSON: {j}");
    // The first snapshot is as it was (its files only gained a link).
    let after = manifest(&snap1)?;
    ensure!(
        compare(&before, &after, fields).is_empty(),
        "snap1 changed: {:#?}",
        compare(&before, &after, fields)
    );

    // A hard link shares its mode: a basis file whose mode differs from the
    // source's is not linked (the copy must have the source's).
    fs::set_permissions(snap2.join("a"), fs::Permissions::from_mode(0o600))?;
    let snap3 = snaps.join("snap3");
    let o = copy(&["--link-dest", "../snap2"], &[&src, &snap3]);
    ensure!(code(&o) == 0, "{}", show(&o));
    ensure!(
        ino(&snap3.join("a"))? != ino(&snap2.join("a"))?,
        "linked despite its mode"
    );
    ensure!(
        ino(&snap3.join("b"))? == ino(&snap2.join("b"))?,
        "b not linked"
    );
    same_tree(&src, &snap3, fields)?;

    // No such DIR: exit 2, nothing made.
    let snap4 = snaps.join("snap4");
    let o = copy(&["--link-dest", "../nowhere"], &[&src, &snap4]);
    fails_with(&o, 2, "--link-dest ../nowhere")?;
    ensure!(
        !snap4.exists(),
        "made {} despite the error",
        snap4.display()
    );
    no_temporaries(&w)
}

/// The physical offset of a file's first extent (`filefrag -v`).
fn first_extent(p: &Path) -> Result<String, Failed> {
    let out = fixture::sh(Command::new("filefrag").args(["-v", "-b4096"]).arg(p))?;
    // "   0:        0..     255:      34816..     35071:    256: ..."
    let row = out
        .lines()
        .find(|l| l.trim_start().starts_with("0:"))
        .ok_or_else(|| format!("no extent in\n{out}"))?;
    let phys = row.split(':').nth(2).unwrap_or("").trim();
    Ok(phys.split("..").next().unwrap_or("").trim().to_string())
}

/// `--clone-dest ../snap1`: unchanged files are clones of the first
/// snapshot's (the same physical blocks, and those are not the source's:
/// snap1 was written by read/write), with the source's own metadata (snap1's
/// file was given another mode); changed files are copied. Where cloning is
/// impossible (ext4) everything is copied, exactly, without errors.
pub fn clone_dest(fs: Fs) -> R {
    let w = fixture::workdir(fs, "clone_dest")?;
    let (src, snaps) = (w.join("src"), w.join("snaps"));
    snapshot_source(&src)?;
    fs::create_dir(&snaps)?;
    let snap1 = snaps.join("snap1");
    let o = copy(&["--method", "stream"], &[&src, &snap1]);
    ensure!(code(&o) == 0, "{}", show(&o));
    fs::set_permissions(snap1.join("a"), fs::Permissions::from_mode(0o600))?;
    change_source(&src)?;
    Command::new("sync").status()?;

    let snap2 = snaps.join("snap2");
    let o = copy(&["--clone-dest", "../snap1", "--explain"], &[&src, &snap2]);
    ensure!(code(&o) == 0 && o.stderr.is_empty(), "{}", show(&o));
    same_tree(&src, &snap2, manifest::DEFAULT)?;
    let from_basis: Vec<String> = explained(&o)
        .into_iter()
        .filter(|l| l.contains("--clone-dest"))
        .collect();
    if !fs.can_clone() {
        ensure!(
            from_basis.is_empty(),
            "cloned on {}: {}",
            fs.name(),
            show(&o)
        );
        return no_temporaries(&w);
    }
    ensure!(from_basis.len() == 2, "{}", show(&o));
    Command::new("sync").status()?;
    for f in ["a", "sub/d"] {
        let (copy, basis, source) = (snap2.join(f), snap1.join(f), src.join(f));
        ensure!(shares_extents(&copy)?, "{f}: no shared extents");
        let (c, b, s) = (
            first_extent(&copy)?,
            first_extent(&basis)?,
            first_extent(&source)?,
        );
        ensure!(
            c == b && c != s,
            "{f}: extent at {c}, snap1's at {b}, the source's at {s}"
        );
        ensure!(ino(&copy)? != ino(&basis)?, "{f}: a hard link, not a clone");
    }
    let mode = fs::metadata(snap2.join("a"))?.permissions().mode() & 0o7777;
    ensure!(
        mode == 0o644,
        "a has snap1's mode {mode:o}, not the source's"
    );
    no_temporaries(&w)
}

/// The `.kopiru-tmp.part.*` files in `dir`, with their sizes.
fn partials_in(dir: &Path) -> Result<Vec<(PathBuf, u64)>, Failed> {
    let mut v = Vec::new();
    for e in fs::read_dir(dir)? {
        let e = e?;
        if e.file_name()
            .to_string_lossy()
            .starts_with(".kopiru-tmp.part.")
        {
            v.push((e.path(), e.metadata()?.len()));
        }
    }
    Ok(v)
}

/// A copy of `src` into `into` by read/write whose 21st write fails with
/// EIO, under `--partial`: the file fails (exit 1), its final name never
/// appears, and 20 MiB of it are kept as its partial copy. Returns that.
fn interrupted(src: &Path, into: &Path) -> Result<PathBuf, Failed> {
    let o = kopiru_injected("pwrite64:error=EIO:when=21")
        .args(["copy", "--partial", "--method", "stream"])
        .arg(src)
        .arg(into)
        .output()?;
    fails_with(&o, 1, "write")?;
    let name = src.file_name().unwrap();
    ensure!(
        !into.join(name).exists(),
        "a final name appeared: {}",
        show(&o)
    );
    let parts = partials_in(into)?;
    ensure!(
        parts.len() == 1 && parts[0].1 == 20 << 20,
        "want one partial copy of 20 MiB: {parts:?}"
    );
    Ok(parts[0].0.clone())
}

/// `--partial`: an interrupted large file keeps the part written, hidden;
/// the next run with `--partial` checks it against the source and
/// continues after the part that matches (all of it; or, after a byte of
/// it was changed, up to the MiB that holds that byte); a run without
/// `--partial` or `--resume` removes it and copies the file whole.
pub fn partial(fs: Fs) -> R {
    let w = fixture::workdir(fs, "partial")?;
    let src = w.join("big.bin");
    trees::write_random(&src, 64 << 20, 9)?;
    let into = w.join("into");
    fs::create_dir(&into)?;
    let dst = into.join("big.bin");
    let continued = |o: &Output, after: u64| -> R {
        ensure!(code(o) == 0, "{}", show(o));
        let want = format!("continued a partial copy after its first {after} bytes");
        ensure!(
            String::from_utf8_lossy(&o.stdout).contains(&want),
            "want {want:?}: {}",
            show(o)
        );
        Ok(())
    };

    interrupted(&src, &into)?;
    let o = copy(&["--partial", "--explain"], &[&src, &into]);
    continued(&o, 20 << 20)?;
    ensure!(fs::read(&dst)? == fs::read(&src)?, "continued copy differs");
    ensure!(partials_in(&into)?.is_empty(), "partial left");
    fs::remove_file(&dst)?;

    // A partial whose 6th MiB no longer matches: continued after 5 MiB.
    let part = interrupted(&src, &into)?;
    {
        use std::os::unix::fs::FileExt;
        let f = fs::File::options().read(true).write(true).open(&part)?;
        let mut b = [0u8; 1];
        f.read_exact_at(&mut b, (5 << 20) + 77)?;
        f.write_all_at(&[!b[0]], (5 << 20) + 77)?;
    }
    let o = copy(&["--resume", "--explain"], &[&src, &into]);
    continued(&o, 5 << 20)?;
    ensure!(fs::read(&dst)? == fs::read(&src)?, "continued copy differs");
    fs::remove_file(&dst)?;

    // A plain run removes the leftover and copies the file whole.
    interrupted(&src, &into)?;
    let o = copy(&["--explain"], &[&src, &into]);
    ensure!(code(&o) == 0, "{}", show(&o));
    ensure!(
        !String::from_utf8_lossy(&o.stdout).contains("continued"),
        "{}",
        show(&o)
    );
    ensure!(
        partials_in(&into)?.is_empty(),
        "partial kept by a plain run"
    );
    ensure!(fs::read(&dst)? == fs::read(&src)?, "copy differs");
    no_temporaries(&w)
}

/// Runs `kopiru copy ARGS` with `answers` on its standard input.
fn with_answers(args: &[&OsStr], answers: &str) -> Result<Output, Failed> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kopiru"))
        .arg("copy")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    use std::io::Write;
    // A run that asks nothing (-n) may exit before the answers are written:
    // its closed stdin is not a failure of the test.
    match child
        .stdin
        .take()
        .expect("stdin")
        .write_all(answers.as_bytes())
    {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => return Err(e.into()),
        _ => {}
    }
    Ok(child.wait_with_output()?)
}

/// cp's `-i`: one question per existing destination file, in the walk's
/// order, on stderr; "y" replaces, anything else keeps; new names are not
/// asked about; the end of the input means no. The later of -i and -n wins.
pub fn interactive(fs: Fs) -> R {
    let w = fixture::workdir(fs, "interactive")?;
    let (src, dst) = (w.join("src"), w.join("dst"));
    fs::create_dir_all(&src)?;
    fs::create_dir_all(&dst)?;
    for (name, new, old) in [
        ("a", "new a", Some("old a")),
        ("b", "new b", Some("old b")),
        ("c", "new c", None),
    ] {
        fs::write(src.join(name), new)?;
        if let Some(old) = old {
            fs::write(dst.join(name), old)?;
        }
    }
    let contents = |w: &Path| -> Result<Vec<String>, Failed> {
        ["a", "b", "c"]
            .iter()
            .map(|n| fs::read_to_string(w.join(n)).map_err(|e| e.to_string().into()))
            .collect()
    };
    let all = src.join(".");
    let o = with_answers(
        &["-i".as_ref(), all.as_os_str(), dst.as_os_str()],
        "yes\nn\n",
    )?;
    ensure!(code(&o) == 0, "{}", show(&o));
    let asked = format!(
        "kopiru: overwrite '{}'? kopiru: overwrite '{}'? ",
        dst.join("a").display(),
        dst.join("b").display()
    );
    ensure!(String::from_utf8_lossy(&o.stderr) == asked, "{}", show(&o));
    ensure!(
        contents(&dst)? == ["new a", "old b", "new c"],
        "{:?}",
        contents(&dst)?
    );

    // The end of the input: no.
    let o = with_answers(&["-i".as_ref(), all.as_os_str(), dst.as_os_str()], "")?;
    ensure!(code(&o) == 0, "{}", show(&o));
    ensure!(
        contents(&dst)? == ["new a", "old b", "new c"],
        "{:?}",
        contents(&dst)?
    );
    // -i then -n: no question, nothing replaced; -n then -i: asked.
    let o = with_answers(
        &[
            "-i".as_ref(),
            "-n".as_ref(),
            all.as_os_str(),
            dst.as_os_str(),
        ],
        "y\ny\ny\n",
    )?;
    ensure!(code(&o) == 0 && o.stderr.is_empty(), "{}", show(&o));
    ensure!(
        contents(&dst)? == ["new a", "old b", "new c"],
        "{:?}",
        contents(&dst)?
    );
    let o = with_answers(
        &[
            "-n".as_ref(),
            "-i".as_ref(),
            all.as_os_str(),
            dst.as_os_str(),
        ],
        "y\ny\ny\n",
    )?;
    ensure!(code(&o) == 0, "{}", show(&o));
    ensure!(
        contents(&dst)? == ["new a", "new b", "new c"],
        "{:?}",
        contents(&dst)?
    );
    no_temporaries(&w)
}

/// cp's `-f`: a destination file its user cannot write (mode 0444) is
/// replaced, by an unprivileged user, with -f and without it (kopiru
/// always renames a new file over it, as cp -f unlinks it).
pub fn force(fs: Fs) -> R {
    let w = fixture::workdir(fs, "force")?;
    let dir = w.join("nobody");
    fs::create_dir_all(&dir)?;
    std::os::unix::fs::chown(&dir, Some(65534), Some(65534))?;
    let (src, dst) = (dir.join("src"), dir.join("dst"));
    for flag in [Some("-f"), None] {
        fs::write(&src, format!("new {flag:?}"))?;
        fs::write(&dst, "old")?;
        for p in [&src, &dst] {
            std::os::unix::fs::chown(p, Some(65534), Some(65534))?;
        }
        fs::set_permissions(&dst, fs::Permissions::from_mode(0o444))?;
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_kopiru"))
            .arg("copy");
        c.args(flag);
        let o = c.arg(&src).arg(&dst).output()?;
        ensure!(
            code(&o) == 0 && o.stderr.is_empty(),
            "{flag:?}: {}",
            show(&o)
        );
        ensure!(fs::read(&dst)? == fs::read(&src)?, "{flag:?}: not replaced");
    }
    no_temporaries(&w)
}

pub fn trials(add: Add) {
    let strace = || (!fixture::have("strace")).then(|| "strace not installed".to_string());
    let setpriv =
        || (!fixture::have("setpriv")).then(|| "setpriv not installed (util-linux)".to_string());
    for fs in Fs::ALL {
        let (n, why) = (fs.name(), fs.unavailable());
        add(
            format!("options_link_dest::{n}"),
            why.clone(),
            Box::new(move || link_dest(fs)),
        );
        add(
            format!("options_clone_dest::{n}"),
            why.clone(),
            Box::new(move || clone_dest(fs)),
        );
        add(
            format!("options_partial::{n}"),
            why.clone().or_else(strace),
            Box::new(move || partial(fs)),
        );
        add(
            format!("options_interactive::{n}"),
            why.clone(),
            Box::new(move || interactive(fs)),
        );
        add(
            format!("options_force::{n}"),
            why.clone().or_else(setpriv),
            Box::new(move || force(fs)),
        );
    }
}
