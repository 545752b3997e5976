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

mod cli;
mod dedupe;
mod durability;
mod edges;
mod fixture;
mod flash;
mod help;
mod image;
mod manifest;
mod options;
mod reruns;
mod scale;
mod signals;
mod snapshots;
mod trees;

use fixture::Fs;
use libtest_mimic::{Arguments, Failed, Trial};
use manifest::{compare, compare_except, manifest, Fields};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{Command, Output};

type R = Result<(), Failed>;

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

// ---------------------------------------------------------------- the tests

/// Everything `-a` keeps, on one filesystem; the source is left untouched
/// (atimes included).
fn archive(fs: Fs) -> R {
    let w = fixture::workdir(fs, "archive")?;
    let src = w.join("src");
    trees::rich(&src)?;
    let before = manifest(&src)?;
    let o = kopiru([
        OsStr::new("copy"),
        OsStr::new("-a"),
        src.as_os_str(),
        w.join("dst").as_os_str(),
    ]);
    ensure!(
        code(&o) == 0 && o.stdout.is_empty() && o.stderr.is_empty(),
        "copy -a: {}",
        show(&o)
    );
    same_tree(&src, &w.join("dst"), manifest::ALL)?;
    let after = manifest(&src)?;
    let d = compare(&before, &after, manifest::ALL);
    ensure!(d.is_empty(), "source changed: {d:#?}");

    // Into a setgid directory of another group, where new entries get that
    // group: kopiru learns the owner new entries get from the first one and
    // skips chowns to it, so this checks that owners are still the source's.
    // (Subdirectories made there inherit the setgid bit, as with cp -a, so
    // modes are not compared.)
    let sg = w.join("setgid");
    std::fs::create_dir(&sg)?;
    std::os::unix::fs::chown(&sg, Some(0), Some(4242))?;
    std::fs::set_permissions(&sg, std::os::unix::fs::PermissionsExt::from_mode(0o2775))?;
    let o = kopiru([
        OsStr::new("copy"),
        OsStr::new("-a"),
        src.as_os_str(),
        sg.as_os_str(),
    ]);
    ensure!(
        code(&o) == 0,
        "copy -a into a setgid directory: {}",
        show(&o)
    );
    let probe = sg.join("probe");
    std::fs::write(&probe, b"")?;
    let probe_gid = std::os::unix::fs::MetadataExt::gid(&std::fs::metadata(&probe)?);
    ensure!(
        probe_gid == 4242,
        "new files here get group {probe_gid}, not 4242"
    );
    let owners = manifest::Fields {
        mode: false,
        ..manifest::ALL
    };
    same_tree(&src, &sg.join("src"), owners)?;
    Ok(())
}

/// Without -a: mode, times and hard links kept; owner and xattrs not.
fn defaults(fs: Fs) -> R {
    let w = fixture::workdir(fs, "defaults")?;
    let src = w.join("src");
    trees::rich(&src)?;
    let dst = w.join("dst");
    let o = kopiru([OsStr::new("copy"), src.as_os_str(), dst.as_os_str()]);
    ensure!(code(&o) == 0, "{}", show(&o));
    same_tree(&src, &dst, manifest::DEFAULT)?;
    let m = manifest(&dst)?;
    ensure!(
        m.values().all(|e| e.uid == 0),
        "owner was copied without -a"
    );
    ensure!(
        m.values()
            .all(|e| e.xattrs.iter().all(|(n, _)| !n.starts_with(b"user."))),
        "xattrs copied without -a"
    );
    Ok(())
}

/// Across two filesystems: cannot clone (EXDEV), still exact.
fn cross(from: Fs, to: Fs) -> R {
    let test = format!("cross-{}-{}", from.name(), to.name());
    let a = fixture::workdir(from, &test)?;
    let b = fixture::workdir(to, &test)?;
    let src = a.join("src");
    trees::rich(&src)?;
    let dst = b.join("dst");
    let o = kopiru([
        OsStr::new("cp"),
        OsStr::new("-a"),
        OsStr::new("--explain"),
        src.as_os_str(),
        dst.as_os_str(),
    ]);
    ensure!(code(&o) == 0, "{}", show(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    ensure!(
        !out.lines().any(|l| l.starts_with("clone")),
        "cloned across filesystems?\n{out}"
    );
    ensure!(
        out.contains("EXDEV") || !from.can_clone() && !to.can_clone() || out.contains("EOPNOTSUPP"),
        "no reason given:\n{out}"
    );
    same_tree(&src, &dst, manifest::ALL)
}

/// On a filesystem that clones, the copy shares extents; `--method stream`
/// does not, and neither hides it.
fn clone_shares(fs: Fs) -> R {
    let w = fixture::workdir(fs, "clone")?;
    let src = w.join("big");
    trees::write_random(&src, 3 << 20, 1)?;
    std::process::Command::new("sync").status()?;
    let o = kopiru([
        OsStr::new("copy"),
        OsStr::new("--explain"),
        src.as_os_str(),
        w.join("cloned").as_os_str(),
    ]);
    ensure!(code(&o) == 0, "{}", show(&o));
    ensure!(
        String::from_utf8_lossy(&o.stdout).starts_with("clone"),
        "not reported as clone: {}",
        show(&o)
    );
    ensure!(
        shares_extents(&w.join("cloned"))?,
        "clone does not share extents"
    );
    let o = kopiru([
        OsStr::new("copy"),
        OsStr::new("--explain"),
        OsStr::new("--method"),
        OsStr::new("stream"),
        src.as_os_str(),
        w.join("streamed").as_os_str(),
    ]);
    ensure!(code(&o) == 0, "{}", show(&o));
    ensure!(
        String::from_utf8_lossy(&o.stdout).starts_with("stream"),
        "not reported as stream: {}",
        show(&o)
    );
    std::process::Command::new("sync").status()?;
    ensure!(
        !shares_extents(&w.join("streamed"))?,
        "--method stream shares extents"
    );
    same_tree(&src, &w.join("streamed"), manifest::DEFAULT)?;
    same_tree(&src, &w.join("cloned"), manifest::DEFAULT)
}

/// `--method clone` where cloning is impossible fails clearly and leaves
/// nothing behind.
fn clone_refused(fs: Fs) -> R {
    let w = fixture::workdir(fs, "clone-refused")?;
    let src = w.join("f");
    trees::write_random(&src, 100_000, 2)?;
    let dst = w.join("g");
    let o = kopiru([
        OsStr::new("copy"),
        OsStr::new("--method"),
        OsStr::new("clone"),
        src.as_os_str(),
        dst.as_os_str(),
    ]);
    ensure!(code(&o) == 1, "want exit 1: {}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    ensure!(
        err.contains("clone") && err.contains(&*dst.to_string_lossy()),
        "unclear error: {err}"
    );
    ensure!(!dst.exists(), "a file was left behind");
    Ok(())
}

/// A 1 GiB file with 3 MiB of data stays sparse, with every method.
fn sparse(fs: Fs) -> R {
    let w = fixture::workdir(fs, "sparse")?;
    let src = w.join("sparse");
    trees::sparse_file(&src, 1 << 30, &[0, 300 << 20, (1 << 30) - (1 << 20)])?;
    for method in ["auto", "offload", "stream"] {
        let dst = w.join(format!("copy-{method}"));
        let o = kopiru([
            OsStr::new("copy"),
            OsStr::new("--method"),
            OsStr::new(method),
            src.as_os_str(),
            dst.as_os_str(),
        ]);
        ensure!(code(&o) == 0, "{method}: {}", show(&o));
        let m = manifest(&dst)?;
        let e = &m[&Vec::new()];
        ensure!(e.size == 1 << 30, "{method}: size {}", e.size);
        ensure!(
            e.blocks * 512 < 16 << 20,
            "{method}: not sparse: {} bytes allocated",
            e.blocks * 512
        );
        same_tree(&src, &dst, manifest::DEFAULT)?;
    }
    // --sparse=never fills the holes.
    let small = w.join("small-sparse");
    trees::sparse_file(&small, 8 << 20, &[4 << 20])?;
    let dst = w.join("filled");
    let o = kopiru([
        OsStr::new("copy"),
        OsStr::new("--sparse"),
        OsStr::new("never"),
        small.as_os_str(),
        dst.as_os_str(),
    ]);
    ensure!(code(&o) == 0, "{}", show(&o));
    std::process::Command::new("sync").status()?;
    let e = &manifest(&dst)?[&Vec::new()];
    ensure!(
        e.blocks * 512 >= 8 << 20,
        "--sparse never left holes: {} bytes allocated",
        e.blocks * 512
    );
    same_tree(&small, &dst, manifest::DEFAULT)
}

/// Pseudo-files (size 0 or a made-up size) copy with their content.
fn proc_and_sys() -> R {
    let dir = fixture::run_root().join("proc");
    std::fs::create_dir_all(&dir)?;
    let candidates = [
        "/proc/version",
        "/proc/filesystems",
        "/proc/self/limits",
        "/sys/devices/system/cpu/online",
        "/sys/kernel/mm/transparent_hugepage/enabled",
        "/sys/power/state",
    ];
    let mut tried = 0;
    let readable = |p: &&Path| std::fs::read(p).is_ok_and(|d| !d.is_empty());
    for src in candidates.iter().map(Path::new).filter(readable) {
        let dst = dir.join(src.to_string_lossy().replace('/', "_"));
        let o = kopiru([OsStr::new("copy"), src.as_os_str(), dst.as_os_str()]);
        ensure!(code(&o) == 0, "{}: {}", src.display(), show(&o));
        let want = std::fs::read(src)?;
        let got = std::fs::read(&dst)?;
        // /proc/self/limits is the reader's own: compare with kopiru's own line count.
        if src.ends_with("limits") {
            ensure!(
                !got.is_empty()
                    && got.split(|&b| b == b'\n').count() == want.split(|&b| b == b'\n').count(),
                "{}: {:?}",
                src.display(),
                String::from_utf8_lossy(&got)
            );
        } else {
            ensure!(
                !got.is_empty() && got == want,
                "{}: copied {:?}, want {:?}",
                src.display(),
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want)
            );
        }
        tried += 1;
    }
    ensure!(tried >= 3, "only {tried} pseudo-files found to test");
    Ok(())
}

/// Paths longer than PATH_MAX.
fn long_paths(fs: Fs) -> R {
    let w = fixture::workdir(fs, "long-paths")?;
    let src = w.join("src");
    let depth = trees::deep(&src, 30)?;
    ensure!(depth > 4096, "tree only {depth} bytes deep");
    let dst = w.join("dst");
    let o = kopiru([OsStr::new("copy"), src.as_os_str(), dst.as_os_str()]);
    ensure!(code(&o) == 0, "{}", show(&o));
    same_tree(&src, &dst, manifest::DEFAULT)
}

/// Every refusal: clear message, right exit code, nothing changed.
fn refusals(fs: Fs) -> R {
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
fn into_itself_via_bind_mount(fs: Fs) -> R {
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
    ensure!(
        std::fs::read(src.join("sub/x/file"))? == b"data",
        "the rest was not copied"
    );
    ensure!(!src.join("sub/x/sub/x").exists(), "copied into itself");
    Ok(())
}

/// Usage errors exit 2.
fn usage() -> R {
    let o = kopiru(["copy"]);
    ensure!(code(&o) == 2, "{}", show(&o));
    let o = kopiru(["copy", "only-one"]);
    ensure!(code(&o) == 2, "{}", show(&o));
    let o = kopiru(["copy", "--method", "teleport", "a", "b"]);
    ensure!(code(&o) == 2, "{}", show(&o));
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

/// The JSON summary counts what the tree holds.
fn json_summary(fs: Fs) -> R {
    let w = fixture::workdir(fs, "json")?;
    let src = w.join("src");
    trees::rich(&src)?;
    let m = manifest(&src)?;
    let count = |k: char| m.values().filter(|e| e.kind == k).count() as u64;
    let extra_links = m
        .iter()
        .filter(|(p, e)| e.link_group.as_ref().is_some_and(|g| g != *p))
        .count() as u64;
    let o = kopiru([
        OsStr::new("copy"),
        OsStr::new("--json"),
        src.as_os_str(),
        w.join("dst").as_os_str(),
    ]);
    ensure!(code(&o) == 0, "{}", show(&o));
    let j = json(&o)?;
    ensure!(j["files"] == count('f') - extra_links, "files: {j}");
    ensure!(j["hard_links"] == extra_links, "hard_links: {j}");
    ensure!(j["directories"] == count('d'), "directories: {j}");
    ensure!(j["symlinks"] == count('l'), "symlinks: {j}");
    ensure!(
        j["special_files"] == count('p') + count('c'),
        "special_files: {j}"
    );
    let data: u64 = m
        .iter()
        .filter(|(p, e)| e.kind == 'f' && e.link_group.as_ref().is_none_or(|g| g == *p))
        .map(|(_, e)| e.size)
        .sum();
    ensure!(j["bytes"] == data, "bytes: {j} want {data}");
    let methods: u64 = ["clone", "offload", "stream", "sparse"]
        .iter()
        .map(|k| j["methods"][k].as_u64().unwrap_or(0))
        .sum();
    ensure!(
        methods == j["files"].as_u64().unwrap(),
        "methods do not add up: {j}"
    );
    ensure!(
        j["errors"].as_array().is_some_and(|a| a.is_empty()) && j["exit_code"] == 0,
        "{j}"
    );
    ensure!(
        j["elapsed_seconds"].as_f64().is_some_and(|s| s > 0.0),
        "{j}"
    );
    Ok(())
}

/// A directory of 600 files, copied as a pipeline when two workers share it
/// (one creates the files, the other opens sources ahead and finishes files
/// behind): with `-a`, every kept field arrives, hard links included. A
/// source that cannot be opened (with one worker and with two), or a new
/// file that cannot be created (one worker; strace `-P` on its name: the
/// first call is the source's open, the second the create), fails that
/// file only: named with its path, absent, nothing temporary left, exit 23.
/// The pipeline's own create failures are in `out_of_inodes`.
fn large_directory(fs: Fs) -> R {
    let w = fixture::workdir(fs, "large-dir")?;
    let src = w.join("src");
    trees::large_dir(&src, 600)?;
    let dst = w.join("dst");
    let o = kopiru([
        OsStr::new("copy"),
        OsStr::new("-a"),
        src.as_os_str(),
        dst.as_os_str(),
    ]);
    ensure!(o.status.success(), "{}", show(&o));
    same_tree(&src, &dst, manifest::ALL)?;
    let cases = [
        ("EACCES:when=1", "open", &src, "Permission denied", "1"),
        (
            "ENOSPC:when=2",
            "create",
            &dst,
            "No space left on device",
            "1",
        ),
        ("EACCES:when=1", "open", &src, "Permission denied", "2"),
    ];
    for (fault, op, side, reason, jobs) in cases {
        std::fs::remove_dir_all(&dst)?;
        let o = kopiru_injected_on(&format!("openat:error={fault}"), &[Path::new("f0123")])
            .args(["copy", "-a", "--json", "-j", jobs])
            .arg(&src)
            .arg(&dst)
            .output()?;
        let j = partial_with(&o, reason)?;
        let failed = side.join("f0123");
        ensure!(
            j["errors"].as_array().map(Vec::len) == Some(1)
                && j["errors"][0]["path"] == failed.to_string_lossy().as_ref()
                && j["errors"][0]["operation"] == op,
            "{}",
            show(&o)
        );
        ensure!(
            String::from_utf8_lossy(&o.stderr)
                .contains(&format!("{}: {op}: {reason}", failed.display())),
            "{}",
            show(&o)
        );
        ensure!(!dst.join("f0123").exists(), "f0123 was left: {}", show(&o));
        let d = compare_except(
            &manifest(&src)?,
            &manifest(&dst)?,
            manifest::ALL,
            &[b"", b"f0123"],
        );
        ensure!(d.is_empty(), "{fault} -j {jobs}: {d:#?}");
        durability::no_temporaries(&w)?;
    }
    Ok(())
}

/// Out of inodes half-way through a large directory (ext4 made with 256):
/// each file that cannot be created is reported with its path, exit 23;
/// every file that was created is whole, with its mode and times, and
/// nothing temporary is left. Default workers, so the files are created
/// ahead of their copies.
fn out_of_inodes() -> R {
    let mnt = fixture::make_fs(Fs::Ext4, "inodes", 32, &["-N", "256"])?;
    let w = fixture::workdir(Fs::Ext4, "inodes-src")?;
    let src = w.join("src");
    trees::large_dir(&src, 600)?;
    let dst = mnt.join("dst");
    let o = kopiru([
        OsStr::new("copy"),
        OsStr::new("--json"),
        src.as_os_str(),
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
fn injected_eio(fs: Fs) -> R {
    let w = fixture::workdir(fs, "eio")?;
    let src = w.join("src");
    std::fs::create_dir(&src)?;
    for i in 0..5 {
        trees::write_random(&src.join(format!("f{i}")), 50_000, i)?;
    }
    let dst = w.join("dst");
    // The data call of the third file fails (FICLONE on clone-capable
    // filesystems, copy_file_range elsewhere).
    let call = if fs.can_clone() {
        "ioctl"
    } else {
        "copy_file_range"
    };
    let o = kopiru_injected(&format!("{call}:error=EIO:when=3"))
        .args(["copy", "-j", "1", "--json"])
        .arg(&src)
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
fn enospc(fs: Fs) -> R {
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
    let dst = mnt.join("dst");
    let o = kopiru([
        OsStr::new("copy"),
        OsStr::new("-j"),
        OsStr::new("1"),
        OsStr::new("--json"),
        src.as_os_str(),
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
fn readonly_dest() -> R {
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

/// Copying into an existing tree replaces files whole and keeps others.
fn merge_replace(fs: Fs) -> R {
    let w = fixture::workdir(fs, "merge")?;
    let src = w.join("src");
    trees::rich(&src)?;
    let dst = w.join("dst");
    std::fs::create_dir_all(dst.join("src/a/b"))?;
    std::fs::write(dst.join("src/a/small"), b"old content")?;
    std::fs::write(dst.join("src/a/b/extra"), b"mine")?;
    std::os::unix::fs::symlink("elsewhere", dst.join("src/a/rel"))?;
    let o = kopiru([OsStr::new("copy"), src.as_os_str(), dst.as_os_str()]);
    ensure!(code(&o) == 0, "{}", show(&o));
    ensure!(
        std::fs::read(dst.join("src/a/b/extra"))? == b"mine",
        "unrelated file lost"
    );
    let a = manifest(&src)?;
    let d = compare_except(
        &a,
        &manifest(&dst.join("src"))?,
        manifest::DEFAULT,
        &[b"a/b/extra"],
    );
    ensure!(d.is_empty(), "{d:#?}");
    // Again: everything replaced by itself, no temporary files left.
    let o = kopiru([OsStr::new("copy"), src.as_os_str(), dst.as_os_str()]);
    ensure!(code(&o) == 0, "{}", show(&o));
    let d = compare_except(
        &a,
        &manifest(&dst.join("src"))?,
        manifest::DEFAULT,
        &[b"a/b/extra"],
    );
    ensure!(d.is_empty(), "second run: {d:#?}");
    Ok(())
}

/// `-L` follows links, and a loop is an error, not a hang.
fn follow_links(fs: Fs) -> R {
    let w = fixture::workdir(fs, "follow")?;
    let src = w.join("src");
    std::fs::create_dir_all(src.join("d"))?;
    std::fs::write(src.join("d/f"), b"data")?;
    std::os::unix::fs::symlink("d/f", src.join("link-to-file"))?;
    std::os::unix::fs::symlink("..", src.join("d/loop"))?;
    let dst = w.join("dst");
    let o = kopiru([
        OsStr::new("copy"),
        OsStr::new("-L"),
        src.as_os_str(),
        dst.as_os_str(),
    ]);
    ensure!(code(&o) == 23, "want exit 23: {}", show(&o));
    ensure!(
        String::from_utf8_lossy(&o.stderr).contains("loop"),
        "{}",
        show(&o)
    );
    ensure!(
        std::fs::symlink_metadata(dst.join("link-to-file"))?.is_file(),
        "-L copied a symlink"
    );
    ensure!(
        std::fs::read(dst.join("link-to-file"))? == b"data",
        "wrong content"
    );
    Ok(())
}

/// Names that are not UTF-8, through explain and JSON.
fn non_utf8(fs: Fs) -> R {
    let w = fixture::workdir(fs, "non-utf8")?;
    let src = w.join(OsStr::from_bytes(b"src-\xff\xfe"));
    std::fs::create_dir(&src)?;
    std::fs::write(src.join(OsStr::from_bytes(b"caf\xe9")), b"x")?;
    let dst = w.join(OsStr::from_bytes(b"dst-\xe9"));
    let o = kopiru([
        OsStr::new("copy"),
        OsStr::new("--explain"),
        src.as_os_str(),
        dst.as_os_str(),
    ]);
    ensure!(code(&o) == 0, "{}", show(&o));
    same_tree(&src, &dst, manifest::DEFAULT)
}

/// `bench sweep` times every count, prints the table, draws the chart and
/// removes its corpora.
fn bench_sweep() -> R {
    let dir = fixture::run_root().join("sweep");
    std::fs::create_dir_all(&dir)?;
    let svg = dir.join("chart.svg");
    let o = kopiru([
        OsStr::new("bench"),
        OsStr::new("sweep"),
        OsStr::new("--dir"),
        dir.as_os_str(),
        OsStr::new("--total"),
        OsStr::new("256K"),
        OsStr::new("--counts"),
        OsStr::new("1,16,64"),
        OsStr::new("--runs"),
        OsStr::new("1"),
        OsStr::new("--plot"),
        svg.as_os_str(),
    ]);
    ensure!(code(&o) == 0, "{}", show(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let rows: Vec<&str> = out.lines().skip(1).collect();
    ensure!(
        out.lines().next().is_some_and(|h| h.contains("kopiru")) && rows.len() == 3,
        "table: {out}"
    );
    for (row, count) in rows.iter().zip(["1", "16", "64"]) {
        let cells: Vec<&str> = row.split_whitespace().collect();
        ensure!(cells[0] == count, "row {row:?}");
        let secs: f64 = cells[3]
            .trim_end_matches('s')
            .parse()
            .map_err(|_| format!("no time in {row:?}"))?;
        ensure!(secs > 0.0 && secs < 60.0, "row {row:?}");
    }
    let chart = std::fs::read_to_string(&svg)?;
    ensure!(
        chart.starts_with("<svg")
            && chart.matches("<polyline").count() >= 1
            && chart.contains("<title>kopiru</title>"),
        "chart: {chart}"
    );
    let left: Vec<_> = std::fs::read_dir(&dir)?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("kopiru-sweep"))
        .collect();
    ensure!(left.is_empty(), "corpora left behind");
    Ok(())
}

/// `kopiru bench fsync`: both tables, every cell a time, the fsync column
/// slower than the buffered one, and nothing left behind.
fn bench_fsync() -> R {
    let dir = fixture::workdir(Fs::Ext4, "bench-fsync")?;
    let o = kopiru([
        OsStr::new("bench"),
        OsStr::new("fsync"),
        OsStr::new("--dir"),
        dir.as_os_str(),
        OsStr::new("--writes"),
        OsStr::new("200"),
        OsStr::new("--files"),
        OsStr::new("300"),
        OsStr::new("--runs"),
        OsStr::new("1"),
    ]);
    ensure!(code(&o) == 0, "{}", show(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = out.lines().collect();
    let num = |s: &str| {
        s.parse::<f64>()
            .map_err(|_| format!("not a time: {s:?} in\n{out}"))
    };
    for label in ["1 B", "100 kB"] {
        let row = lines
            .iter()
            .find(|l| l.starts_with(label))
            .ok_or_else(|| format!("no {label} row in\n{out}"))?;
        let cells: Vec<f64> = row[label.len()..]
            .split_whitespace()
            .map(num)
            .collect::<Result<_, _>>()?;
        ensure!(cells.len() == 3, "{row}");
        ensure!(
            cells[2].total_cmp(&cells[0]).is_gt(),
            "fsync each not slower than buffered: {row}"
        );
    }
    for mode in [
        "--sync none (not",
        "--sync none, then",
        "--sync end",
        "--sync file",
    ] {
        let row = lines
            .iter()
            .find(|l| l.starts_with(mode))
            .ok_or_else(|| format!("no {mode} row in\n{out}"))?;
        let t = num(row.split_whitespace().last().unwrap_or(""))?;
        ensure!(t > 0.0 && t < 60.0, "{row}");
    }
    ensure!(
        std::fs::read_dir(&dir)?.next().is_none(),
        "files left behind in {}",
        dir.display()
    );
    Ok(())
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
    let strace = || {
        (!fixture::have("strace"))
            .then(|| "strace not installed (apt-get install strace)".to_string())
    };
    options::trials(&mut add);
    snapshots::trials(&mut add);
    scale::trials(&mut add);
    add(
        "out_of_inodes".into(),
        Fs::Ext4.unavailable(),
        Box::new(out_of_inodes),
    );
    for fs in Fs::ALL {
        let n = fs.name();
        let why = fs.unavailable();
        add(
            format!("archive::{n}"),
            why.clone(),
            Box::new(move || archive(fs)),
        );
        add(
            format!("defaults::{n}"),
            why.clone(),
            Box::new(move || defaults(fs)),
        );
        add(
            format!("sparse::{n}"),
            why.clone(),
            Box::new(move || sparse(fs)),
        );
        add(
            format!("json_summary::{n}"),
            why.clone(),
            Box::new(move || json_summary(fs)),
        );
        add(
            format!("merge_replace::{n}"),
            why.clone(),
            Box::new(move || merge_replace(fs)),
        );
        add(
            format!("long_paths::{n}"),
            why.clone(),
            Box::new(move || long_paths(fs)),
        );
        add(
            format!("follow_links::{n}"),
            why.clone(),
            Box::new(move || follow_links(fs)),
        );
        add(
            format!("non_utf8::{n}"),
            why.clone(),
            Box::new(move || non_utf8(fs)),
        );
        add(
            format!("enospc::{n}"),
            why.clone(),
            Box::new(move || enospc(fs)),
        );
        add(
            format!("large_directory::{n}"),
            why.clone().or_else(strace),
            Box::new(move || large_directory(fs)),
        );
        add(
            format!("cp_spellings::{n}"),
            why.clone(),
            Box::new(move || cli::cp_spellings(fs)),
        );
        add(
            format!("injected_eio::{n}"),
            why.clone().or_else(strace),
            Box::new(move || injected_eio(fs)),
        );
        let needs_strace = why.clone().or_else(strace);
        add(
            format!("flush_fails::{n}"),
            needs_strace.clone(),
            Box::new(move || durability::flush_fails(fs)),
        );
        add(
            format!("fsync_fails::{n}"),
            needs_strace.clone(),
            Box::new(move || durability::fsync_fails(fs)),
        );
        add(
            format!("close_fails::{n}"),
            needs_strace.clone(),
            Box::new(move || durability::close_fails(fs)),
        );
        add(
            format!("rename_fails::{n}"),
            needs_strace.clone(),
            Box::new(move || durability::rename_fails(fs)),
        );
        add(
            format!("resume::{n}"),
            needs_strace.clone(),
            Box::new(move || durability::resume(fs)),
        );
        add(
            format!("power_cut::{n}"),
            needs_strace.or_else(|| Fs::Xfs.unavailable()),
            Box::new(move || durability::power_cut(fs)),
        );
        add(
            format!("verify_tree::{n}"),
            why.clone(),
            Box::new(move || durability::verify_tree(fs)),
        );
        if fs.can_clone() {
            add(
                format!("dedupe_shares::{n}"),
                why.clone(),
                Box::new(move || dedupe::shares(fs)),
            );
            add(
                format!("dedupe_changed_meanwhile::{n}"),
                why.clone().or_else(strace),
                Box::new(move || dedupe::changed_meanwhile(fs)),
            );
            add(
                format!("clone_shares::{n}"),
                why.clone(),
                Box::new(move || clone_shares(fs)),
            );
        } else {
            add(
                format!("clone_refused::{n}"),
                why.clone(),
                Box::new(move || clone_refused(fs)),
            );
        }
    }
    for (a, b) in [
        (Fs::Ext4, Fs::Xfs),
        (Fs::Xfs, Fs::Ext4),
        (Fs::Btrfs, Fs::Xfs),
        (Fs::Xfs, Fs::Btrfs),
    ] {
        let why = a.unavailable().or_else(|| b.unavailable());
        add(
            format!("cross::{}_to_{}", a.name(), b.name()),
            why,
            Box::new(move || cross(a, b)),
        );
    }
    let ext4 = Fs::Ext4.unavailable();
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
    add(
        "edges_same_file::ext4".into(),
        ext4.clone(),
        Box::new(|| edges::same_file(Fs::Ext4)),
    );
    add(
        "edges_probe_errors::ext4".into(),
        ext4.clone(),
        Box::new(|| edges::probe_errors(Fs::Ext4)),
    );
    add(
        "edges_verify_counts::ext4".into(),
        ext4.clone(),
        Box::new(|| edges::verify_counts(Fs::Ext4)),
    );
    add(
        "edges_clone_impossible::ext4_xfs".into(),
        ext4.clone().or_else(|| Fs::Xfs.unavailable()),
        Box::new(edges::clone_impossible),
    );
    add(
        "edges_readonly_dest::ext4".into(),
        ext4.clone(),
        Box::new(edges::readonly_dest),
    );
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
        flash::partitions_unavailable(),
        Box::new(flash::refuses_mounted_partition),
    );
    add(
        "flash_no_terminal_no_write".into(),
        flash_needs.clone().or_else(|| {
            (!fixture::have("setsid")).then(|| "setsid not installed (util-linux)".into())
        }),
        Box::new(flash::no_terminal_no_write),
    );
    add(
        "flash_asks_on_the_terminal".into(),
        flash_needs.clone().or_else(|| {
            (!fixture::have("script")).then(|| "script not installed (util-linux)".into())
        }),
        Box::new(flash::asks_on_the_terminal),
    );
    add(
        "flash_refusals".into(),
        flash_needs.or_else(|| Fs::Ext4.unavailable()),
        Box::new(flash::refusals),
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
    add(
        "dedupe_refused::ext4".into(),
        ext4.clone(),
        Box::new(dedupe::refused),
    );
    add(
        "verify_reads_device::ext4".into(),
        ext4.clone(),
        Box::new(durability::verify_reads_device),
    );
    add(
        "verify_hashes_while_copying::ext4".into(),
        ext4.clone().or_else(strace),
        Box::new(durability::verify_hashes_while_copying),
    );
    add(
        "inode_starved::ext4".into(),
        ext4.clone(),
        Box::new(durability::inode_starved),
    );
    add(
        "readonly_source::ext4".into(),
        ext4.clone(),
        Box::new(durability::readonly_source),
    );
    add(
        "signal_cancels_copy::ext4".into(),
        ext4.clone(),
        Box::new(|| cli::signal_cancels_copy(Fs::Ext4)),
    );
    add(
        "second_signal_exits::ext4".into(),
        ext4.clone(),
        Box::new(|| cli::second_signal_exits(Fs::Ext4)),
    );
    add("readonly_dest::ext4".into(), ext4, Box::new(readonly_dest));
    for fs in [Fs::Ext4, Fs::Xfs] {
        let why = fs.unavailable().or_else(strace);
        add(
            format!("rerun_never_nests::{}", fs.name()),
            why.clone(),
            Box::new(move || reruns::rerun_never_nests(fs)),
        );
        add(
            format!("rerun_cleans_leftovers::{}", fs.name()),
            why,
            Box::new(move || reruns::rerun_cleans_leftovers(fs)),
        );
    }
    add(
        "sigint_large_file::ext4".into(),
        Fs::Ext4.unavailable(),
        Box::new(signals::sigint_large_file),
    );
    add(
        "sigint_partial::ext4".into(),
        Fs::Ext4.unavailable(),
        Box::new(signals::sigint_partial),
    );
    add(
        "sigint_many_files::ext4".into(),
        Fs::Ext4.unavailable(),
        Box::new(|| signals::sigint_many_files(Fs::Ext4)),
    );
    add("closed_stdout".into(), None, Box::new(cli::closed_stdout));
    add("completions".into(), None, Box::new(cli::completions));
    add("summary_line".into(), None, Box::new(cli::summary_line));
    add(
        "dedupe_has_no_short_n".into(),
        None,
        Box::new(cli::dedupe_has_no_short_n),
    );
    add(
        "man_page".into(),
        cli::groff_unavailable(),
        Box::new(cli::man_page),
    );
    for (name, args) in help::PAGES {
        add(
            format!("help::{name}"),
            None,
            Box::new(|| help::check(name, args)),
        );
    }
    add("proc_and_sys".into(), None, Box::new(proc_and_sys));
    add("usage".into(), None, Box::new(usage));
    add("bench_sweep".into(), None, Box::new(bench_sweep));
    add(
        "bench_fsync::ext4".into(),
        Fs::Ext4.unavailable(),
        Box::new(bench_fsync),
    );

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
