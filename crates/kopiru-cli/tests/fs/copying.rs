//! What a copy makes, on each filesystem and across them: the metadata
//! kept, clones and their refusal, sparse files, pseudo-files, long paths
//! and odd names, the JSON summary, large directories, merges, symlinks.

use super::*;

/// Everything `-a` keeps, on one filesystem; the source is left untouched
/// (atimes included).
pub fn archive(fs: Fs) -> R {
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
        cp_mode: false,
        ..manifest::ALL
    };
    same_tree(&src, &sg.join("src"), owners)?;
    Ok(())
}

/// Without -a: times and hard links kept, the mode as cp makes it (the
/// source's less the umask: set-uid and set-gid dropped); owner and xattrs
/// not.
pub fn defaults(fs: Fs) -> R {
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
pub fn cross(from: Fs, to: Fs) -> R {
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
pub fn clone_shares(fs: Fs) -> R {
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
pub fn clone_refused(fs: Fs) -> R {
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
pub fn sparse(fs: Fs) -> R {
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
pub fn proc_and_sys() -> R {
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
pub fn long_paths(fs: Fs) -> R {
    let w = fixture::workdir(fs, "long-paths")?;
    let src = w.join("src");
    let depth = trees::deep(&src, 30)?;
    ensure!(depth > 4096, "tree only {depth} bytes deep");
    let dst = w.join("dst");
    let o = kopiru([OsStr::new("copy"), src.as_os_str(), dst.as_os_str()]);
    ensure!(code(&o) == 0, "{}", show(&o));
    same_tree(&src, &dst, manifest::DEFAULT)
}

/// The JSON summary counts what the tree holds.
pub fn json_summary(fs: Fs) -> R {
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

/// A directory of 600 files, shared by two workers (on Btrfs as a
/// pipeline: one creates the files, the other opens sources ahead and
/// finishes files behind; on ext4 and XFS each copies whole files, see
/// `Ahead::pays_on`): with `-a`, every kept field arrives, hard links
/// included. A source that cannot be opened (with one worker and with
/// two), or a new file that cannot be created (one worker; strace `-P` on
/// its name: the first call is the source's open, the second the create),
/// fails that file only: named with its path, absent, exit 23; the new tree
/// is then not put in place but kept staged, and --resume finishes it,
/// nothing temporary left.
pub fn large_directory(fs: Fs) -> R {
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
        let _ = std::fs::remove_dir_all(&dst);
        let o = kopiru_injected_on(&format!("openat:error={fault}"), &[Path::new("f0123")])
            .args(["copy", "-a", "--json", "-j", jobs])
            .arg(&src)
            .arg(&dst)
            .output()?;
        ensure!(code(&o) == 23, "{}", show(&o));
        let j = crate::json(&o)?;
        let failed = side.join("f0123");
        let errors = j["errors"].as_array().cloned().unwrap_or_default();
        ensure!(
            errors.len() == 2
                && errors[0]["path"] == failed.to_string_lossy().as_ref()
                && errors[0]["operation"] == op
                && errors[0]["reason"] == reason
                && errors[1]["path"] == dst.to_string_lossy().as_ref()
                && errors[1]["reason"]
                    .as_str()
                    .is_some_and(|r| r.starts_with("not put in place")),
            "{}",
            show(&o)
        );
        ensure!(
            String::from_utf8_lossy(&o.stderr)
                .contains(&format!("{}: {op}: {reason}", failed.display())),
            "{}",
            show(&o)
        );
        // A new tree with a failure in it is not put in place: it stays
        // staged, all but the failed file in it, for --resume to finish.
        ensure!(!dst.exists(), "an incomplete copy was put in place: {}", show(&o));
        let staged = std::fs::read_dir(&w)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().contains(".kopiru-tmp.tree."))
            .ok_or("no staged tree kept")?;
        ensure!(!staged.join("f0123").exists(), "f0123 was left: {}", show(&o));
        let d = compare_except(
            &manifest(&src)?,
            &manifest(&staged)?,
            manifest::ALL,
            &[b"", b"f0123"],
        );
        ensure!(d.is_empty(), "{fault} -j {jobs}: {d:#?}");
        let o = kopiru([
            OsStr::new("copy"),
            OsStr::new("-a"),
            OsStr::new("--resume"),
            src.as_os_str(),
            dst.as_os_str(),
        ]);
        ensure!(code(&o) == 0, "--resume: {}", show(&o));
        same_tree(&src, &dst, manifest::ALL)?;
        durability::no_temporaries(&w)?;
    }
    Ok(())
}

/// Copying into an existing tree replaces files whole and keeps others.
pub fn merge_replace(fs: Fs) -> R {
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
    // a/b was there (made here 0755): a merge leaves its mode alone; and
    // a/small (a/b/small-link its hard link) replaced a file made here
    // 0644, whose mode it takes (cp's).
    let theirs = [&b"a/b/extra"[..], b"a/b", b"a/small", b"a/b/small-link"];
    let d = compare_except(&a, &manifest(&dst.join("src"))?, manifest::DEFAULT, &theirs);
    ensure!(d.is_empty(), "{d:#?}");
    let small = std::fs::metadata(dst.join("src/a/small"))?;
    let same = std::fs::read(src.join("a/small"))? == std::fs::read(dst.join("src/a/small"))?;
    ensure!(same && std::os::unix::fs::MetadataExt::nlink(&small) == 2, "a/small not replaced by the copy");
    // Its other name a/b/small-link was new: the one inode has the mode
    // of whichever name was copied first.
    let mode = std::os::unix::fs::PermissionsExt::mode(&small.permissions()) & 0o7777;
    ensure!(mode == 0o644 || mode == 0o444, "a/small's mode is {mode:o}");
    let kept = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(dst.join("src/a/b"))?.permissions()) & 0o7777;
    ensure!(kept == 0o755, "a merge changed a directory's mode to {kept:o}");
    // Again: everything replaced by itself, no temporary files left.
    let o = kopiru([OsStr::new("copy"), src.as_os_str(), dst.as_os_str()]);
    ensure!(code(&o) == 0, "{}", show(&o));
    let d = compare_except(
        &a,
        &manifest(&dst.join("src"))?,
        manifest::DEFAULT,
        &theirs,
    );
    ensure!(d.is_empty(), "second run: {d:#?}");
    Ok(())
}

/// `-L` follows links, and a loop is an error, not a hang.
pub fn follow_links(fs: Fs) -> R {
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
    // The loop failed, so the new tree is kept staged, not put in place.
    ensure!(!dst.exists(), "an incomplete copy was put in place");
    let staged = std::fs::read_dir(&w)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().contains(".kopiru-tmp.tree."))
        .ok_or("no staged tree kept")?;
    ensure!(
        std::fs::symlink_metadata(staged.join("link-to-file"))?.is_file(),
        "-L copied a symlink"
    );
    ensure!(
        std::fs::read(staged.join("link-to-file"))? == b"data",
        "wrong content"
    );
    // A source "link/" names the directory the link points to (as for cp
    // and rsync); "link" alone is the link under cp's -R rules (-r).
    let dlink = w.join("dlink");
    std::os::unix::fs::symlink(src.join("d"), &dlink)?;
    let (through, itself) = (w.join("through"), w.join("itself"));
    let mut slashed = dlink.clone().into_os_string();
    slashed.push("/");
    for (from, to) in [
        (slashed.as_os_str(), &through),
        (dlink.as_os_str(), &itself),
    ] {
        let o = kopiru([OsStr::new("copy"), OsStr::new("-r"), from, to.as_os_str()]);
        ensure!(code(&o) == 0, "{}", show(&o));
    }
    ensure!(
        std::fs::symlink_metadata(&through)?.is_dir()
            && std::fs::read(through.join("f"))? == b"data",
        "\"dlink/\" did not copy the directory it points to"
    );
    ensure!(
        std::fs::symlink_metadata(&itself)?.is_symlink(),
        "\"dlink\" was not copied as a link"
    );
    Ok(())
}

/// Names that are not UTF-8, through explain and JSON.
pub fn non_utf8(fs: Fs) -> R {
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

/// Registers this module's trials.
/// `copy -a` by a user who is not root, of files another user owns: the
/// owners cannot be kept (chown: EPERM). One summary line says so for all
/// the entries, not a line each; `-v` lists them one by one, and `--json`
/// has every one.
pub fn owners_not_kept_said_once(fs: Fs) -> R {
    use std::os::unix::fs::PermissionsExt;
    let w = fixture::workdir(fs, "owners_not_kept")?;
    std::fs::set_permissions(&w, std::fs::Permissions::from_mode(0o777))?;
    let src = w.join("src");
    std::fs::create_dir(&src)?;
    for i in 0..20 {
        std::fs::write(src.join(format!("f{i}")), b"x")?;
        std::os::unix::fs::chown(src.join(format!("f{i}")), Some(1234), Some(1234))?;
    }
    std::os::unix::fs::chown(&src, Some(1234), Some(1234))?;
    let run = |dst: &str, extra: &[&str]| {
        let mut args = vec![OsStr::new("copy"), OsStr::new("-a")];
        args.extend(extra.iter().map(OsStr::new));
        args.push(src.as_os_str());
        let dst = w.join(dst);
        let mut args: Vec<std::ffi::OsString> = args.iter().map(|a| a.to_os_string()).collect();
        args.push(dst.into_os_string());
        crate::kopiru_as_nobody(args)
    };
    let o = run("dst", &[]);
    ensure!(code(&o) == 0, "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains("warning")).collect();
    ensure!(
        warnings
            == ["kopiru: warning: owner and group not kept for 21 entries: chown: Operation not \
                 permitted (run as root to keep them; -v lists them)"],
        "want one summary line: {}",
        show(&o)
    );
    let o = run("dst-v", &["-v"]);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    let each = err.lines().filter(|l| l.ends_with(": chown: Operation not permitted")).count();
    ensure!(each == 21, "-v: want a line per entry: {}", show(&o));
    let o = run("dst-json", &["--json"]);
    let j = json(&o)?;
    let listed = j["warnings"].as_array().map_or(0, |a| a.len());
    ensure!(listed == 21, "--json: want 21 warnings: {j}");
    Ok(())
}

/// Registers this module's trials.
pub fn trials(add: Add) {
    add(
        "owners_not_kept_said_once::ext4".into(),
        Fs::Ext4.unavailable().or_else(crate::setpriv_unavailable),
        Box::new(|| owners_not_kept_said_once(Fs::Ext4)),
    );
    for fs in Fs::ALL {
        let (n, why) = (fs.name(), fs.unavailable());
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
            format!("large_directory::{n}"),
            why.clone().or_else(strace_unavailable),
            Box::new(move || large_directory(fs)),
        );
        if fs.can_clone() {
            add(
                format!("clone_shares::{n}"),
                why,
                Box::new(move || clone_shares(fs)),
            );
        } else {
            add(
                format!("clone_refused::{n}"),
                why,
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
    add("proc_and_sys".into(), None, Box::new(proc_and_sys));
}
