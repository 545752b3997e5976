//! The options cp and rsync users reach for (issue 14): --exclude and
//! --include, --dry-run, -u, -x, --itemize-changes, -c, --delete.

use super::*;
use std::fs;
use std::path::PathBuf;
use std::process::Command;

/// `kopiru copy` with `args`, then `paths` (sources and destination).
pub fn copy(args: &[&str], paths: &[&Path]) -> Output {
    let mut all: Vec<&OsStr> = vec![OsStr::new("copy")];
    all.extend(args.iter().map(OsStr::new));
    all.extend(paths.iter().map(|p| p.as_os_str()));
    kopiru(all)
}

/// Makes `root` with every path in `files` (a trailing / makes a
/// directory; a file's content is its own path).
fn make(root: &Path, files: &[&str]) -> R {
    fs::create_dir_all(root)?;
    for f in files {
        let p = root.join(f.trim_end_matches('/'));
        match f.ends_with('/') {
            true => fs::create_dir_all(&p)?,
            false => {
                fs::create_dir_all(p.parent().unwrap())?;
                fs::write(&p, f.as_bytes())?;
            }
        }
    }
    Ok(())
}

/// `dst` holds exactly the entries `keep` of `src` (and its root), each
/// as in the source (content, mode, times): nothing missing, nothing more.
fn holds_exactly(src: &Path, dst: &Path, keep: &[&str]) -> R {
    let mut want = manifest(src)?;
    want.retain(|p, _| p.is_empty() || keep.contains(&String::from_utf8_lossy(p).as_ref()));
    ensure!(
        want.len() == keep.len() + 1,
        "test bug: {keep:?} not all in the source"
    );
    let diffs = compare(&want, &manifest(dst)?, manifest::DEFAULT);
    ensure!(diffs.is_empty(), "{diffs:#?}");
    Ok(())
}

/// The source tree of the filter test, and the exclude file it reads.
fn filter_source(w: &Path) -> Result<(PathBuf, PathBuf), Failed> {
    let src = w.join("src");
    make(
        &src,
        &[
            "a.rs",
            "b.o",
            "keep.o",
            "README",
            "build/x.rs",
            "src/build/y.rs",
            "src/m.rs",
            "src/n.o",
            "doc/t.tmp",
            "doc/sub/u.tmp",
            "x/doc/v.tmp",
            "cache",
            "deep/cache/w.rs",
            "skip/a.keep",
            "empty/",
        ],
    )?;
    let from = w.join("excludes");
    fs::write(
        &from,
        "# comment\n\n; another\ndoc/*.tmp\ncache/\n+ empty/\n- e*\n",
    )?;
    Ok((src, from))
}

/// `--exclude`, `--include` and `--exclude-from` with rsync's rules, in
/// command-line order; `--verify` does not count what was left out.
pub fn exclude_include(fs: Fs) -> R {
    let w = fixture::workdir(fs, "exclude_include")?;
    let (src, from) = filter_source(&w)?;
    let dst = w.join("dst");
    let from = from.to_str().unwrap();
    let args = [
        "--include",
        "keep.o",
        "--exclude",
        "*.o",
        "--exclude",
        "/build",
        "--exclude-from",
        from,
        "--exclude",
        "skip/",
        "--include",
        "*.keep",
        "--verify",
    ];
    let o = copy(&args, &[&src, &dst]);
    ensure!(code(&o) == 0 && o.stderr.is_empty(), "{}", show(&o));
    holds_exactly(
        &src,
        &dst,
        &[
            "a.rs",
            "keep.o",
            "README",
            "src",
            "src/build",
            "src/build/y.rs",
            "src/m.rs",
            "doc",
            "doc/sub",
            "doc/sub/u.tmp",
            "x",
            "x/doc",
            "cache",
            "deep",
            "empty",
        ],
    )?;
    // A pattern that is not a glob is a usage error, before any copy.
    let o = copy(&["--exclude", "[ab"], &[&src, &w.join("dst2")]);
    fails_with(&o, 2, "bad pattern '[ab'")?;
    ensure!(!w.join("dst2").exists(), "copied despite a bad pattern");
    Ok(())
}

/// The lines of `o`'s stdout, sorted.
fn lines(o: &Output) -> Vec<String> {
    let mut v: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

/// `--dry-run` lists what would be created or replaced, one line each, and
/// writes nothing; kept entries (-n) and excluded ones are not listed.
pub fn dry_run(fs: Fs) -> R {
    let w = fixture::workdir(fs, "dry_run")?;
    let src = w.join("src");
    make(&src, &["a/f", "a/b/g", "same", "new", "skip.o", "e/"])?;
    std::os::unix::fs::symlink("f", src.join("a/l"))?;
    fs::hard_link(src.join("a/f"), src.join("a/h"))?;
    let dst = w.join("dst");
    make(&dst, &["a/f", "other"])?;
    fs::write(dst.join("a/f"), "old")?;
    let o = copy(
        &["--no-progress", "-T", "-a", "--sync", "none"],
        &[&src.join("same"), &dst.join("same")],
    );
    ensure!(code(&o) == 0, "{}", show(&o));
    let before = manifest(&dst)?;
    let d = dst.display();
    let o = copy(&["--dry-run", "-T", "--exclude", "*.o"], &[&src, &dst]);
    ensure!(code(&o) == 0 && o.stderr.is_empty(), "{}", show(&o));
    let mut want: Vec<String> = [
        "a/b/",
        "a/b/g",
        "a/f",
        "a/h => DST/a/f",
        "a/l -> f",
        "e/",
        "new",
        "same",
    ]
    .iter()
    .map(|l| format!("{d}/{}", l.replace("DST", &d.to_string())))
    .collect();
    want.sort();
    ensure!(lines(&o) == want, "want {want:#?}, {}", show(&o));
    let diffs = compare(&before, &manifest(&dst)?, manifest::ALL);
    ensure!(
        diffs.is_empty(),
        "dry run changed the destination: {diffs:#?}"
    );
    // With -n, what exists is kept, so it is not listed.
    let o = copy(
        &["--dry-run", "-n", "-T", "--exclude", "*.o"],
        &[&src, &dst],
    );
    want.retain(|l| *l != format!("{d}/a/f") && *l != format!("{d}/same"));
    ensure!(
        code(&o) == 0 && lines(&o) == want,
        "want {want:#?}, {}",
        show(&o)
    );
    // The copy itself then makes what was listed, and only that.
    let o = copy(&["-T", "--exclude", "*.o"], &[&src, &dst]);
    ensure!(code(&o) == 0, "{}", show(&o));
    let mut copied = manifest(&dst)?;
    copied.remove(b"other".as_slice());
    let mut want = manifest(&src)?;
    want.remove(b"skip.o".as_slice());
    let diffs = compare(&want, &copied, manifest::DEFAULT);
    ensure!(diffs.is_empty(), "{diffs:#?}");
    Ok(())
}

/// Sets the modification time of `p` to `secs` after the epoch.
fn set_mtime(p: &Path, secs: u64) -> R {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
    fs::File::open(p)?.set_modified(t)?;
    Ok(())
}

/// The names in `dir` and their contents, sorted.
fn contents(dir: &Path) -> Result<Vec<(String, String)>, Failed> {
    let mut v = Vec::new();
    for e in fs::read_dir(dir)? {
        let e = e?;
        let text = fs::read_to_string(e.path())?;
        v.push((e.file_name().to_string_lossy().into_owned(), text));
    }
    v.sort();
    Ok(v)
}

/// `-u`: a destination file is replaced only when the source is newer;
/// missing ones are copied; --dry-run -u lists just those.
pub fn update(fs: Fs) -> R {
    let w = fixture::workdir(fs, "update")?;
    let (src, dst) = (w.join("src"), w.join("dst"));
    make(&src, &["older", "newer", "same_time", "missing"])?;
    make(&dst, &["older", "newer", "same_time"])?;
    for (name, s, d) in [
        ("older", 2000, 1000),
        ("newer", 1000, 2000),
        ("same_time", 1500, 1500),
    ] {
        fs::write(
            dst.join(name),
            format!("mine {name}, longer than the source"),
        )?;
        set_mtime(&src.join(name), s)?;
        set_mtime(&dst.join(name), d)?;
    }
    let o = copy(&["--dry-run", "-u", "-T"], &[&src, &dst]);
    let d = dst.display();
    let want = vec![format!("{d}/missing"), format!("{d}/older")];
    ensure!(code(&o) == 0 && lines(&o) == want, "{}", show(&o));
    let o = copy(&["-u", "-T"], &[&src, &dst]);
    ensure!(code(&o) == 0 && o.stderr.is_empty(), "{}", show(&o));
    let mine = |n: &str| format!("mine {n}, longer than the source");
    let want: Vec<(String, String)> = [
        ("missing", "missing".to_string()),
        ("newer", mine("newer")),
        ("older", "older".to_string()),
        ("same_time", mine("same_time")),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_string(), b))
    .collect();
    ensure!(contents(&dst)? == want, "{:#?}", contents(&dst)?);
    ensure!(
        fs::metadata(dst.join("older"))?.modified()?
            == fs::metadata(src.join("older"))?.modified()?,
        "replaced file without the source's time"
    );
    Ok(())
}

/// Unmounts a mount point when dropped.
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// `-x`: a directory on another filesystem (a tmpfs mounted in the source)
/// is made, empty, with the mounted root's metadata; the rest is copied,
/// and `--verify` does not count the mount's contents as missing.
pub fn one_file_system(fs: Fs) -> R {
    let w = fixture::workdir(fs, "one_file_system")?;
    let (src, dst) = (w.join("src"), w.join("dst"));
    make(&src, &["a/f", "mnt/", "z/g"])?;
    fixture::sh(
        Command::new("mount")
            .args(["-t", "tmpfs", "-o", "mode=750,size=1m", "none"])
            .arg(src.join("mnt")),
    )?;
    let _mounted = Mounted(src.join("mnt"));
    make(&src, &["mnt/inside/deep", "mnt/top"])?;
    set_mtime(&src.join("mnt"), 1234)?;
    let o = copy(&["--dry-run", "-x"], &[&src, &dst]);
    let d = dst.display();
    let want: Vec<String> = ["/", "/a/", "/a/f", "/mnt/", "/z/", "/z/g"]
        .iter()
        .map(|l| format!("{d}{l}").replacen("//", "/", 1))
        .collect();
    ensure!(
        code(&o) == 0 && lines(&o) == want,
        "want {want:#?}, {}",
        show(&o)
    );
    let o = copy(&["-x", "--verify"], &[&src, &dst]);
    ensure!(code(&o) == 0 && o.stderr.is_empty(), "{}", show(&o));
    let mut want = manifest(&src)?;
    want.retain(|p, _| !p.starts_with(b"mnt/"));
    let diffs = compare(&want, &manifest(&dst)?, manifest::DEFAULT);
    ensure!(diffs.is_empty(), "{diffs:#?}");
    // Without -x the mount's contents are copied.
    let o = copy(&["-T"], &[&src, &w.join("all")]);
    ensure!(code(&o) == 0, "{}", show(&o));
    same_tree(&src, &w.join("all"), manifest::DEFAULT)
}

/// `--itemize-changes`: one rsync-style line per entry created or
/// replaced, the same with --dry-run (which changes nothing), and the copy
/// exact.
pub fn itemize(fs: Fs) -> R {
    let w = fixture::workdir(fs, "itemize")?;
    let (src, dst) = (w.join("src"), w.join("dst"));
    make(&src, &["new", "changed", "sub/f", "links/a"])?;
    std::os::unix::fs::symlink("new", src.join("l"))?;
    fs::hard_link(src.join("links/a"), src.join("links/b"))?;
    let fifo = std::ffi::CString::new(src.join("p").as_os_str().as_bytes())?;
    // SAFETY: the path is a NUL-terminated C string that outlives the call.
    ensure!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) } == 0, "mkfifo");
    make(&dst, &["changed", "sub/"])?;
    fs::write(dst.join("changed"), "a different size")?;
    set_mtime(&src.join("changed"), 1000)?;
    let d = dst.display();
    let before = manifest(&dst)?;
    let o = copy(&["--itemize-changes", "--dry-run", "-T"], &[&src, &dst]);
    ensure!(code(&o) == 0 && o.stderr.is_empty(), "{}", show(&o));
    let diffs = compare(&before, &manifest(&dst)?, manifest::ALL);
    ensure!(diffs.is_empty(), "the dry run wrote: {diffs:#?}");
    let planned = lines(&o);
    let o = copy(&["--itemize-changes", "-T"], &[&src, &dst]);
    ensure!(code(&o) == 0 && o.stderr.is_empty(), "{}", show(&o));
    let done = lines(&o);
    let want = |first: &str, second: &str| {
        let mut v = vec![
            format!(">f+++++++++ {d}/new"),
            format!(">f.st...... {d}/changed"),
            format!(">f+++++++++ {d}/sub/f"),
            format!("cd+++++++++ {d}/links/"),
            format!(">f+++++++++ {d}/links/{first}"),
            format!("hf+++++++++ {d}/links/{second} => {d}/links/{first}"),
            format!("cL+++++++++ {d}/l -> new"),
            format!("cD+++++++++ {d}/p"),
        ];
        v.sort();
        v
    };
    // The dry run walks in name order; which name of the hard-linked pair
    // the copy meets first is the walk's choice.
    ensure!(planned == want("a", "b"), "dry run: {planned:#?}");
    ensure!(
        done == want("a", "b") || done == want("b", "a"),
        "want {:#?}, {}",
        want("a", "b"),
        show(&o)
    );
    same_tree(&src, &dst, manifest::DEFAULT)
}

/// `-c`: an existing destination file is kept only when its content is
/// the source's, whatever its time says; with --resume too, where a file
/// of the same size and time but other content is replaced.
pub fn checksum(fs: Fs) -> R {
    use std::os::unix::fs::MetadataExt;
    let w = fixture::workdir(fs, "checksum")?;
    let (src, dst) = (w.join("src"), w.join("dst"));
    make(&src, &["same", "same_size", "other_size", "new"])?;
    make(&dst, &["same", "same_size", "other_size"])?;
    fs::write(dst.join("same_size"), "SAME_SIZE")?;
    fs::write(dst.join("other_size"), "longer than the source")?;
    for (name, t) in [("same", 1000), ("same_size", 2000), ("other_size", 2000)] {
        set_mtime(&src.join(name), 2000)?;
        set_mtime(&dst.join(name), t)?;
    }
    let kept = fs::metadata(dst.join("same"))?;
    let d = dst.display();
    for args in [&["-c", "-T"][..], &["-c", "--resume", "-T"][..]] {
        let mut dry = vec!["--dry-run", "--itemize-changes"];
        dry.extend(args);
        let o = copy(&dry, &[&src, &dst]);
        let mut want = vec![
            format!(">f+++++++++ {d}/new"),
            format!(">f.s....... {d}/other_size"),
            format!(">f......... {d}/same_size"),
        ];
        want.sort();
        ensure!(code(&o) == 0 && lines(&o) == want, "{args:?}: {}", show(&o));
    }
    let o = copy(&["-c", "-T"], &[&src, &dst]);
    ensure!(code(&o) == 0 && o.stderr.is_empty(), "{}", show(&o));
    let want: Vec<(String, String)> = ["new", "other_size", "same", "same_size"]
        .iter()
        .map(|n| (n.to_string(), n.to_string()))
        .collect();
    ensure!(contents(&dst)? == want, "{:#?}", contents(&dst)?);
    let now = fs::metadata(dst.join("same"))?;
    ensure!(
        now.ino() == kept.ino() && now.mtime() == kept.mtime(),
        "the identical file was rewritten"
    );
    // --resume alone keeps a file of the same size and time; -c does not.
    fs::write(dst.join("same_size"), "SAME_SIZE")?;
    set_mtime(&dst.join("same_size"), 2000)?;
    let o = copy(&["--resume", "-T"], &[&src, &dst]);
    ensure!(code(&o) == 0, "{}", show(&o));
    ensure!(
        fs::read(dst.join("same_size"))? == b"SAME_SIZE",
        "--resume alone replaced it"
    );
    let o = copy(&["--resume", "-c", "-T"], &[&src, &dst]);
    ensure!(code(&o) == 0, "{}", show(&o));
    ensure!(contents(&dst)? == want, "{:#?}", contents(&dst)?);
    Ok(())
}

/// The trees of the --delete tests: the source, and a destination with
/// extra entries (one protected by --exclude '*.o').
fn delete_trees(w: &Path) -> Result<(PathBuf, PathBuf), Failed> {
    let (src, dst) = (w.join("src"), w.join("dst"));
    make(&src, &["a/f", "b/"])?;
    make(&dst, &["a/f", "a/old/g", "a/old/h/", "x", "keep.o", "b/y"])?;
    set_mtime(&src.join("a/f"), 2000)?;
    set_mtime(&dst.join("a/f"), 1000)?;
    Ok((src, dst))
}

/// `--delete`: refused (exit 2, nothing written) unless DEST is the copy
/// itself; listed by --dry-run, which deletes nothing; then what the source
/// lacks is deleted, each deletion itemized, excluded entries kept.
pub fn delete(fs: Fs) -> R {
    let w = fixture::workdir(fs, "delete")?;
    let (src, dst) = delete_trees(&w)?;
    let before = manifest(&dst)?;
    let unchanged = |what: &str| -> R {
        let diffs = compare(&before, &manifest(&dst)?, manifest::ALL);
        ensure!(
            diffs.is_empty(),
            "{what} changed the destination: {diffs:#?}"
        );
        Ok(())
    };
    let o = copy(&["--delete"], &[&src, &dst]);
    fails_with(
        &o,
        2,
        "--delete removes from DEST what the source does not have",
    )?;
    unchanged("a refused --delete")?;
    let d = dst.display();
    let o = copy(
        &["--delete", "--dry-run", "--exclude", "*.o", "-T"],
        &[&src, &dst],
    );
    let mut want: Vec<String> = ["a/old/g", "a/old/h/", "a/old/", "b/y", "x"]
        .iter()
        .map(|p| format!("deleting {d}/{p}"))
        .collect();
    want.push(format!("{d}/a/f"));
    want.sort();
    ensure!(
        code(&o) == 0 && lines(&o) == want,
        "want {want:#?}, {}",
        show(&o)
    );
    unchanged("--dry-run --delete")?;
    let srcdot = src.join(".");
    let o = copy(
        &["--delete", "--itemize-changes", "--exclude", "*.o"],
        &[&srcdot, &dst],
    );
    let mut want: Vec<String> = ["a/old/g", "a/old/h/", "a/old/", "b/y", "x"]
        .iter()
        .map(|p| format!("*deleting {d}/{p}"))
        .collect();
    want.push(format!(">f..t...... {d}/a/f"));
    want.sort();
    ensure!(
        code(&o) == 0 && lines(&o) == want,
        "want {want:#?}, {}",
        show(&o)
    );
    let diffs = compare(&manifest(&src)?, &manifest(&dst)?, manifest::DEFAULT);
    ensure!(diffs == ["extra in copy: keep.o"], "{diffs:#?}");
    Ok(())
}

/// `--delete` with `--sync end`: a syncfs of the destination comes after
/// the last deletion (strace), so the deletions are on disk at exit.
pub fn delete_durable(fs: Fs) -> R {
    let w = fixture::workdir(fs, "delete_durable")?;
    let (src, dst) = delete_trees(&w)?;
    let log = w.join("strace.log");
    let o = Command::new("strace")
        .args(["-f", "-qq", "-e", "trace=unlinkat,syncfs", "-o"])
        .arg(&log)
        .arg(env!("CARGO_BIN_EXE_kopiru"))
        .args(["copy", "--delete", "-T"])
        .args([&src, &dst])
        .output()?;
    ensure!(code(&o) == 0, "{}", show(&o));
    let text = fs::read_to_string(&log)?;
    let calls: Vec<&str> = text.lines().filter(|l| !l.contains("resumed>")).collect();
    let last_unlink = calls.iter().rposition(|l| l.contains("unlinkat("));
    let last_sync = calls
        .iter()
        .rposition(|l| l.contains("syncfs(") && l.contains("= 0"));
    ensure!(
        matches!((last_unlink, last_sync), (Some(u), Some(s)) if s > u),
        "no syncfs after the last deletion:\n{text}"
    );
    same_tree(&src, &dst, manifest::DEFAULT)
}

/// Each name in `dir` with its content, or "-> target" for a symlink.
fn listing(dir: &Path) -> Result<Vec<(String, String)>, Failed> {
    let mut v = Vec::new();
    for e in fs::read_dir(dir)? {
        let e = e?;
        let text = match e.file_type()?.is_symlink() {
            true => format!("-> {}", fs::read_link(e.path())?.display()),
            false => fs::read_to_string(e.path())?,
        };
        v.push((e.file_name().to_string_lossy().into_owned(), text));
    }
    v.sort();
    Ok(v)
}

/// `-b`/`--backup`: each replaced entry is kept as NAME~ or NAME.~N~
/// (cp's "existing" by default); -b with -n is a usage error.
pub fn backup(fs: Fs) -> R {
    let w = fixture::workdir(fs, "backup")?;
    let (src, dst) = (w.join("src"), w.join("dst"));
    make(&src, &["a", "b", "c", "d"])?;
    std::os::unix::fs::symlink("a", src.join("l"))?;
    make(&dst, &["a", "b", "b~", "c", "c.~1~", "c.~3~"])?;
    std::os::unix::fs::symlink("elsewhere", dst.join("l"))?;
    for n in ["a", "b", "c"] {
        fs::write(dst.join(n), format!("old {n}"))?;
    }
    let o = copy(&["-b", "-T"], &[&src, &dst]);
    ensure!(code(&o) == 0 && o.stderr.is_empty(), "{}", show(&o));
    let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    let mut want = pairs(&[
        ("a", "a"),
        ("a~", "old a"),
        ("b", "b"),
        ("b~", "old b"),
        ("c", "c"),
        ("c.~1~", "c.~1~"),
        ("c.~3~", "c.~3~"),
        ("c.~4~", "old c"),
        ("d", "d"),
        ("l", "-> a"),
        ("l~", "-> elsewhere"),
    ]);
    ensure!(listing(&dst)? == want, "{:#?}", listing(&dst)?);
    let o = copy(
        &["--backup=numbered", "-T", "--exclude", "d"],
        &[&src, &dst],
    );
    ensure!(code(&o) == 0 && o.stderr.is_empty(), "{}", show(&o));
    want.extend(pairs(&[
        ("a.~1~", "a"),
        ("b.~1~", "b"),
        ("c.~5~", "c"),
        ("l.~1~", "-> a"),
    ]));
    want.sort();
    ensure!(listing(&dst)? == want, "{:#?}", listing(&dst)?);
    let o = copy(&["-b", "-n", "-T"], &[&src, &dst]);
    fails_with(&o, 2, "cannot be used with")?;
    ensure!(listing(&dst)? == want, "-b -n changed the destination");
    Ok(())
}

/// A dry run exits as the copy would for the errors it can see, and lists
/// what the copy then makes: a source directory that cannot be read is
/// neither listed nor made (exit 23 beside a readable file; exit 1 when it
/// is the only source: nothing could be copied). Run as a user who is not
/// root (root reads everything).
pub fn dry_run_unreadable(fs: Fs) -> R {
    use std::os::unix::fs::PermissionsExt;
    let w = fixture::workdir(fs, "dry_run_unreadable")?;
    fs::set_permissions(&w, fs::Permissions::from_mode(0o777))?;
    let src = w.join("src");
    make(&src, &["a", "sub/b"])?;
    fs::set_permissions(src.join("sub"), fs::Permissions::from_mode(0o000))?;
    // Everything made by the copy under `dst`, as the dry run lists it: a
    // new tree with a failure in it is kept under its staged name beside
    // `dst` (not put in place), and looked at there, named as under `dst`.
    let made = |dst: &Path| -> Result<Vec<String>, Failed> {
        // Its staged name: the FNV-1a hash of its name.
        let name = dst.file_name().unwrap_or_default().as_encoded_bytes();
        let fnv = name.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        let staged = dst.with_file_name(format!(".kopiru-tmp.tree.{fnv:016x}"));
        let staged = staged.exists().then_some(staged);
        let root = match (dst.exists(), staged) {
            (false, Some(s)) => s,
            _ => dst.to_path_buf(),
        };
        let named = |p: &Path| dst.join(p.strip_prefix(&root).unwrap_or(p));
        let mut v = Vec::new();
        if root.exists() {
            v.push(format!("{}/", dst.display()));
        }
        let mut stack = vec![root.clone()];
        while let Some(d) = stack.pop() {
            for e in fs::read_dir(&d).into_iter().flatten() {
                let p = e?.path();
                if p.is_dir() {
                    v.push(format!("{}/", named(&p).display()));
                    stack.push(p);
                } else {
                    v.push(named(&p).display().to_string());
                }
            }
        }
        v.sort();
        Ok(v)
    };
    for (from, dst, want) in [(src.clone(), w.join("dst"), 23), (src.join("sub"), w.join("dst1"), 1)] {
        let dry = crate::kopiru_as_nobody([
            OsStr::new("copy"),
            OsStr::new("--dry-run"),
            from.as_os_str(),
            dst.as_os_str(),
        ]);
        let real = crate::kopiru_as_nobody([OsStr::new("copy"), from.as_os_str(), dst.as_os_str()]);
        ensure!(code(&real) == want, "the copy: want exit {want}: {}", show(&real));
        ensure!(
            code(&dry) == code(&real),
            "{}: the dry run exits {}, the copy {}: {}",
            from.display(),
            code(&dry),
            code(&real),
            show(&dry)
        );
        ensure!(
            lines(&dry) == made(&dst)?,
            "{}: the dry run listed {:?}, the copy made {:?}",
            from.display(),
            lines(&dry),
            made(&dst)?
        );
    }
    Ok(())
}

/// Requests refused whole speak the command line's flags (the engine's
/// `PlanError` names settings neutrally; the CLI spells them), exit 2,
/// and write nothing.
pub fn plan_refusals(fs: Fs) -> R {
    let w = fixture::workdir(fs, "plan-refusals")?;
    let src = w.join("src");
    make(&src, &["a/f", "b"])?;
    let list = w.join("list");
    std::fs::write(&list, "a/f\n")?;
    let dst = w.join("dst");
    let list_s = list.to_str().ok_or("path")?;
    let nope = w.join("nope");
    let inside = src.join("a");
    let cases: [(Vec<&str>, Vec<&Path>, String); 5] = [
        (
            vec!["-S", ".bak", "-n"],
            vec![&src, &dst],
            "-S makes backups, and -n (--no-clobber) replaces nothing to back up: use one \
             of them"
                .into(),
        ),
        (
            vec!["--files-from", list_s, "--dry-run"],
            vec![&src, &dst],
            "--files-from does not work with --dry-run yet".into(),
        ),
        (
            vec!["--files-from", list_s, "--verify"],
            vec![&src, &dst],
            "--files-from does not work with --verify yet".into(),
        ),
        (
            vec!["-r", "--delete", "-T"],
            vec![&src, &inside],
            format!(
                "--delete: the destination '{}' is inside the source '{}'; nothing was copied",
                inside.display(),
                src.display()
            ),
        ),
        (
            vec!["-T", "--link-dest", nope.to_str().ok_or("path")?],
            vec![&src, &dst],
            format!("--link-dest {}: ", nope.display()),
        ),
    ];
    for (args, paths, want) in &cases {
        let o = copy(args, paths);
        fails_with(&o, 2, &format!("kopiru: {want}"))?;
        ensure!(!dst.exists(), "{args:?} made DEST: {}", show(&o));
    }
    Ok(())
}

/// Registers this module's trials.
pub fn trials(add: Add) {
    for fs in Fs::ALL {
        let (n, why) = (fs.name(), fs.unavailable());
        add(
            format!("options_exclude_include::{n}"),
            why.clone(),
            Box::new(move || exclude_include(fs)),
        );
        add(
            format!("options_dry_run::{n}"),
            why.clone(),
            Box::new(move || dry_run(fs)),
        );
        if fs == Fs::Ext4 {
            add(
                format!("options_plan_refusals::{n}"),
                why.clone(),
                Box::new(move || plan_refusals(fs)),
            );
        }
        if fs == Fs::Ext4 {
            add(
                format!("options_dry_run_unreadable::{n}"),
                why.clone().or_else(crate::setpriv_unavailable),
                Box::new(move || dry_run_unreadable(fs)),
            );
        }
        add(
            format!("options_update::{n}"),
            why.clone(),
            Box::new(move || update(fs)),
        );
        add(
            format!("options_one_file_system::{n}"),
            why.clone(),
            Box::new(move || one_file_system(fs)),
        );
        add(
            format!("options_itemize::{n}"),
            why.clone(),
            Box::new(move || itemize(fs)),
        );
        add(
            format!("options_checksum::{n}"),
            why.clone(),
            Box::new(move || checksum(fs)),
        );
        add(
            format!("options_backup::{n}"),
            why.clone(),
            Box::new(move || backup(fs)),
        );
        add(
            format!("options_delete::{n}"),
            why.clone(),
            Box::new(move || delete(fs)),
        );
        let strace = (!fixture::have("strace")).then(|| "strace not installed".to_string());
        add(
            format!("options_delete_durable::{n}"),
            why.clone().or(strace),
            Box::new(move || delete_durable(fs)),
        );
    }
}
