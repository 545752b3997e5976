//! cp's and rsync's rules where kopiru once lost data (issue 37), each
//! checked on a real filesystem: a file replacing another keeps that one's
//! mode, owner and ACL; a symlinked DEST is written through and a FIFO or
//! device DEST written into; FIFOs, devices, /dev/stdin and symlinks named
//! as sources are read; set-uid bits and the umask; `--delete` with
//! excluded entries and with a source inside the destination; a new tree
//! that failed stays staged; a rerun onto a finished copy copies nothing;
//! cp's link, parents and preserve options.

use crate::fixture::{self, Fs};
use crate::{code, json, kopiru_in, show, Add, R};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output};

/// A shell command run in `dir` (for pipes and process substitution).
fn bash_in(dir: &Path, script: &str) -> Output {
    Command::new("bash")
        .current_dir(dir)
        .env("K", env!("CARGO_BIN_EXE_kopiru"))
        .args(["-c", script])
        .output()
        .expect("run bash")
}

fn mode(p: &Path) -> Result<u32, String> {
    std::fs::symlink_metadata(p)
        .map(|m| m.permissions().mode() & 0o7777)
        .map_err(|e| format!("{}: {e}", p.display()))
}

fn read(p: &Path) -> Result<String, String> {
    std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))
}

fn ok(o: &Output) -> R {
    ensure!(code(o) == 0, "want exit 0: {}", show(o));
    Ok(())
}

/// A file that replaces another takes that one's mode, owner, ACL and
/// xattrs (cp writes into it and keeps them); -p takes the source's;
/// --inplace writes into it (its other hard links see the new data);
/// --remove-destination makes a new one from the source alone.
fn replace_keeps_destination(fs: Fs) -> R {
    let w = fixture::workdir(fs, "cprules-replace")?;
    let setup = || -> R {
        std::fs::write(w.join("new.env"), "new\n")?;
        std::fs::set_permissions(w.join("new.env"), PermissionsExt::from_mode(0o644))?;
        let _ = std::fs::remove_file(w.join(".env"));
        let _ = std::fs::remove_file(w.join(".env.bak"));
        std::fs::write(w.join(".env"), "secret\n")?;
        std::fs::set_permissions(w.join(".env"), PermissionsExt::from_mode(0o600))?;
        std::os::unix::fs::chown(w.join(".env"), Some(65534), Some(65534))?;
        fixture::sh(Command::new("setfacl").args(["-m", "u:daemon:r"]).arg(w.join(".env")))?;
        fixture::sh(Command::new("setfattr").args(["-n", "user.note", "-v", "kept"]).arg(w.join(".env")))?;
        std::fs::hard_link(w.join(".env"), w.join(".env.bak"))?;
        Ok(())
    };
    setup()?;
    ok(&kopiru_in(&w, &["cp", "new.env", ".env"]))?;
    let m = std::fs::metadata(w.join(".env"))?;
    ensure!(read(&w.join(".env"))? == "new\n", "content not replaced");
    // The ACL's mask shows in the group bits: 0640 with an ACL entry.
    ensure!(m.permissions().mode() & 0o707 == 0o600, "mode {:o}", m.permissions().mode());
    ensure!((m.uid(), m.gid()) == (65534, 65534), "owner {}:{}", m.uid(), m.gid());
    let acl = fixture::sh(Command::new("getfacl").arg("-c").arg(w.join(".env")))?;
    ensure!(acl.contains("user:daemon:r--"), "ACL lost: {acl}");
    let attr = fixture::sh(Command::new("getfattr").args(["-n", "user.note"]).arg(w.join(".env")))?;
    ensure!(attr.contains("kept"), "xattr lost: {attr}");
    // The one difference from cp, listed: its other hard link keeps the old data.
    ensure!(read(&w.join(".env.bak"))? == "secret\n", "hard link changed");

    setup()?;
    ok(&kopiru_in(&w, &["cp", "-p", "new.env", ".env"]))?;
    let m = std::fs::metadata(w.join(".env"))?;
    ensure!(m.permissions().mode() & 0o7777 == 0o644 && m.uid() == 0, "-p: {m:?}");

    setup()?;
    ok(&kopiru_in(&w, &["cp", "--inplace", "new.env", ".env"]))?;
    ensure!(read(&w.join(".env.bak"))? == "new\n", "--inplace: hard link not written");
    ensure!(mode(&w.join(".env"))? & 0o707 == 0o600, "--inplace changed the mode");

    setup()?;
    ok(&kopiru_in(&w, &["cp", "--remove-destination", "new.env", ".env"]))?;
    let m = std::fs::metadata(w.join(".env"))?;
    ensure!(m.permissions().mode() & 0o7777 == 0o644 && m.uid() == 0, "--remove-destination: {m:?}");
    Ok(())
}

/// A symlinked DEST is written through (the link stays, its file gets the
/// data and keeps its mode); one pointing nowhere is refused, as cp
/// refuses it; --remove-destination replaces the link.
fn symlinked_destination(fs: Fs) -> R {
    let w = fixture::workdir(fs, "cprules-through")?;
    std::fs::create_dir(w.join("real"))?;
    std::fs::write(w.join("real/conf"), "old\n")?;
    std::fs::set_permissions(w.join("real/conf"), PermissionsExt::from_mode(0o640))?;
    std::os::unix::fs::symlink("real/conf", w.join("conf"))?;
    std::fs::write(w.join("new"), "new\n")?;
    ok(&kopiru_in(&w, &["cp", "new", "conf"]))?;
    ensure!(std::fs::symlink_metadata(w.join("conf"))?.file_type().is_symlink(), "link replaced");
    ensure!(read(&w.join("real/conf"))? == "new\n", "not written through");
    ensure!(mode(&w.join("real/conf"))? == 0o640, "mode changed");
    std::os::unix::fs::symlink("nowhere", w.join("dangling"))?;
    let o = kopiru_in(&w, &["cp", "new", "dangling"]);
    ensure!(code(&o) == 1 && String::from_utf8_lossy(&o.stderr).contains("dangling"), "{}", show(&o));
    ensure!(!w.join("nowhere").exists(), "wrote through a dangling link");
    ok(&kopiru_in(&w, &["cp", "--remove-destination", "new", "conf"]))?;
    ensure!(std::fs::symlink_metadata(w.join("conf"))?.is_file(), "link not replaced");
    ensure!(read(&w.join("real/conf"))? == "new\n", "target changed");
    Ok(())
}

/// An existing FIFO or device named as DEST is written into and stays
/// what it is (`kopiru cp f /dev/null` as root must not replace
/// /dev/null); a mounted block device is refused; an unmounted one gets
/// the data.
fn written_into_special(fs: Fs) -> R {
    let w = fixture::workdir(fs, "cprules-into")?;
    std::fs::write(w.join("f"), "payload\n")?;
    fixture::sh(Command::new("mknod").arg(w.join("null")).args(["c", "1", "3"]))?;
    ok(&kopiru_in(&w, &["cp", "f", "null"]))?;
    ensure!(fixture::sh(Command::new("stat").args(["-c", "%F"]).arg(w.join("null")))?.starts_with("character"), "null replaced");
    // A FIFO with a reader: the reader gets the data.
    let o = bash_in(&w, "mkfifo p; cat p > got & sleep 0.2; \"$K\" cp f p; rc=$?; wait; echo rc=$rc; test -p p && cat got");
    ensure!(String::from_utf8_lossy(&o.stdout).contains("rc=0\npayload"), "{}", show(&o));
    // A block device: an unmounted loop device gets the data; mounted, refused.
    let img = w.join("dev.img");
    std::fs::File::create(&img)?.set_len(4 << 20)?;
    let dev = fixture::sh(Command::new("losetup").args(["-f", "--show"]).arg(&img))?;
    let dev = dev.trim().to_string();
    let result = (|| -> R {
        ok(&kopiru_in(&w, &["cp", "f", &dev]))?;
        let head = std::fs::read(&img)?;
        ensure!(head.starts_with(b"payload\n"), "device not written");
        fixture::sh(Command::new("mkfs.ext4").args(["-q", "-F", &dev]))?;
        let mnt = w.join("mnt");
        std::fs::create_dir(&mnt)?;
        fixture::sh(Command::new("mount").arg(&dev).arg(&mnt))?;
        let o = kopiru_in(&w, &["cp", "f", &dev]);
        let _ = Command::new("umount").arg(&mnt).status();
        ensure!(code(&o) == 1 && String::from_utf8_lossy(&o.stderr).contains("in use"), "{}", show(&o));
        Ok(())
    })();
    let _ = Command::new("losetup").args(["-d", &dev]).status();
    result
}

/// A non-directory source named on the command line is read as cp reads
/// it: /dev/stdin, a process substitution, a FIFO and a block device for
/// their data, a symlink followed; with -r (and -P) a symlink stays a link
/// and a FIFO a FIFO, as cp -R copies them.
fn named_sources_read(fs: Fs) -> R {
    let w = fixture::workdir(fs, "cprules-named")?;
    let o = bash_in(&w, "echo hi | \"$K\" cp /dev/stdin o1 && \"$K\" cp <(echo sub) o2 && mkfifo fifo && (echo piped > fifo &) && \"$K\" cp fifo o3");
    ok(&o)?;
    ensure!(read(&w.join("o1"))? == "hi\n" && read(&w.join("o2"))? == "sub\n" && read(&w.join("o3"))? == "piped\n", "not read");
    for f in ["o1", "o2", "o3"] {
        ensure!(std::fs::symlink_metadata(w.join(f))?.is_file(), "{f} not a regular file");
    }
    std::fs::write(w.join("target"), "t\n")?;
    std::os::unix::fs::symlink(w.join("target"), w.join("link"))?;
    ok(&kopiru_in(&w, &["cp", "link", "o4"]))?;
    ensure!(std::fs::symlink_metadata(w.join("o4"))?.is_file(), "link not followed");
    for flag in ["-r", "-P", "-a"] {
        let out = format!("o5{flag}");
        ok(&kopiru_in(&w, &["cp", flag, "link", &out]))?;
        ensure!(std::fs::symlink_metadata(w.join(&out))?.file_type().is_symlink(), "{flag}: link followed");
    }
    ok(&kopiru_in(&w, &["cp", "-r", "fifo", "o6"]))?;
    ensure!(fixture::sh(Command::new("stat").args(["-c", "%F"]).arg(w.join("o6")))?.contains("fifo"), "-r: FIFO read");
    // A disk named as a source: its data, not a node aliasing it.
    let img = w.join("disk.img");
    std::fs::write(&img, vec![7u8; 1 << 20])?;
    let dev = fixture::sh(Command::new("losetup").args(["-f", "--show"]).arg(&img))?;
    let dev = dev.trim().to_string();
    let o = kopiru_in(&w, &["cp", &dev, "backup.img"]);
    let _ = Command::new("losetup").args(["-d", &dev]).status();
    ok(&o)?;
    ensure!(std::fs::read(w.join("backup.img"))? == std::fs::read(&img)?, "disk not read whole");
    Ok(())
}

/// Set-uid survives only with its owner; new files honour the umask unless
/// the mode is kept; a merge leaves an existing directory's mode alone.
fn modes_as_cp(fs: Fs) -> R {
    let w = fixture::workdir(fs, "cprules-modes")?;
    std::fs::write(w.join("tool"), "#!/bin/sh\n")?;
    std::os::unix::fs::chown(w.join("tool"), Some(65534), Some(65534))?;
    std::fs::set_permissions(w.join("tool"), PermissionsExt::from_mode(0o6755))?;
    ok(&kopiru_in(&w, &["cp", "tool", "plain"]))?;
    ensure!(mode(&w.join("plain"))? == 0o755, "plain copy kept set-uid: {:o}", mode(&w.join("plain"))?);
    ok(&kopiru_in(&w, &["cp", "--preserve=mode", "tool", "modekept"]))?;
    ensure!(mode(&w.join("modekept"))? & 0o6000 == 0, "set-uid root handed out: {:o}", mode(&w.join("modekept"))?);
    ok(&kopiru_in(&w, &["cp", "-a", "tool", "all"]))?;
    ensure!(mode(&w.join("all"))? == 0o6755, "-a as root lost set-uid");
    let o = bash_in(&w, "umask 077; \"$K\" cp tool private");
    ok(&o)?;
    ensure!(mode(&w.join("private"))? == 0o700, "umask ignored: {:o}", mode(&w.join("private"))?);
    std::fs::create_dir_all(w.join("src/d"))?;
    std::fs::write(w.join("src/d/x"), "x")?;
    std::fs::create_dir_all(w.join("dst/d"))?;
    std::fs::set_permissions(w.join("dst/d"), PermissionsExt::from_mode(0o700))?;
    ok(&kopiru_in(&w, &["cp", "-T", "src", "dst"]))?;
    ensure!(mode(&w.join("dst/d"))? == 0o700, "merge changed a directory's mode");
    Ok(())
}

/// --delete keeps what --exclude protects at any depth, with a warning
/// for the directory kept; --delete-excluded removes it.
fn delete_keeps_excluded(fs: Fs) -> R {
    let w = fixture::workdir(fs, "cprules-delete")?;
    std::fs::create_dir_all(w.join("src"))?;
    std::fs::create_dir_all(w.join("dst/old/deeper"))?;
    std::fs::write(w.join("src/a"), "a")?;
    std::fs::write(w.join("dst/old/keep.iso"), "x")?;
    std::fs::write(w.join("dst/old/deeper/also.iso"), "y")?;
    std::fs::write(w.join("dst/old/gone.txt"), "z")?;
    let o = kopiru_in(&w, &["cp", "--delete", "--exclude", "*.iso", "-T", "src", "dst"]);
    ok(&o)?;
    ensure!(w.join("dst/old/keep.iso").exists() && w.join("dst/old/deeper/also.iso").exists(), "excluded file deleted: {}", show(&o));
    ensure!(!w.join("dst/old/gone.txt").exists(), "unprotected file kept");
    ensure!(String::from_utf8_lossy(&o.stderr).contains("dst/old: remove: cannot delete non-empty directory"), "{}", show(&o));
    ok(&kopiru_in(&w, &["cp", "--delete", "--delete-excluded", "--exclude", "*.iso", "-T", "src", "dst"]))?;
    ensure!(!w.join("dst/old").exists(), "--delete-excluded kept them");
    // An excluded directory the source has too is the destination's own:
    // nothing in it is deleted (rsync's), unless --delete-excluded.
    std::fs::create_dir_all(w.join("src/cache"))?;
    std::fs::create_dir_all(w.join("dst/cache"))?;
    std::fs::write(w.join("dst/cache/keep"), "k")?;
    for pattern in ["cache/", "cache", "/cache", "*che"] {
        let o = kopiru_in(&w, &["cp", "-a", "--delete", "--exclude", pattern, "-T", "src", "dst"]);
        ok(&o)?;
        ensure!(w.join("dst/cache/keep").exists(), "--exclude {pattern}: the excluded directory emptied");
    }
    ok(&kopiru_in(&w, &["cp", "-a", "--delete", "--delete-excluded", "--exclude", "cache/", "-T", "src", "dst"]))?;
    ensure!(!w.join("dst/cache").exists(), "--delete-excluded kept the excluded directory");
    Ok(())
}

/// --delete where SOURCE is inside DEST (or DEST inside SOURCE), by any
/// spelling, is refused before anything is written: exit 2.
fn delete_nested_refused(fs: Fs) -> R {
    let w = fixture::workdir(fs, "cprules-delete-nested")?;
    std::fs::create_dir_all(w.join("dir/sub"))?;
    std::fs::write(w.join("dir/sub/big.iso"), "iso")?;
    std::fs::write(w.join("dir/other"), "o")?;
    std::os::unix::fs::symlink("dir", w.join("alias"))?;
    let cases: &[&[&str]] = &[
        &["cp", "--delete", "--exclude", "*.iso", "-T", "dir/sub", "dir"],
        &["cp", "--delete", "-T", "dir/sub", "alias"],
        &["cp", "--delete", "-T", "dir/sub/..", "dir"],
        &["cp", "--delete", "dir/sub/.", "dir"],
        &["cp", "--delete", "-T", "dir", "dir/sub/new"],
        &["cp", "--delete", "-T", "alias", "dir/sub/new"],
    ];
    for args in cases {
        let o = kopiru_in(&w, args);
        ensure!(code(&o) == 2 && String::from_utf8_lossy(&o.stderr).contains("--delete"), "{args:?}: {}", show(&o));
        ensure!(read(&w.join("dir/sub/big.iso"))? == "iso" && read(&w.join("dir/other"))? == "o", "{args:?} changed the source");
        ensure!(!w.join("dir/sub/new").exists(), "{args:?} wrote");
    }
    Ok(())
}

/// A new tree that could not be copied whole (a full filesystem) stays
/// under its staged name, DEST absent, the message naming where; the same
/// command with --resume, once there is room, finishes it. Entries under
/// directories that could not be made are counted.
fn failed_tree_stays_staged(fs: Fs) -> R {
    let w = fixture::workdir(fs, "cprules-staged")?;
    for d in 0..100 {
        let dir = w.join(format!("src/d{d:03}"));
        std::fs::create_dir_all(&dir)?;
        for f in 0..2 {
            std::fs::write(dir.join(format!("f{f}")), vec![b'x'; 3000])?;
        }
    }
    // Fewer inodes than directories (made before the files in them):
    // some directories cannot be made.
    let small = fixture::make_fs(Fs::Ext4, "cprules-small", 8, &["-N", "64"])?;
    let dst = small.join("copy");
    let o = kopiru_in(&w, &["cp", "--json", "src", dst.to_str().unwrap()]);
    let r = (|| -> R {
        ensure!(code(&o) == 23, "want 23: {}", show(&o));
        ensure!(!dst.exists(), "an incomplete copy was put in place");
        let err = String::from_utf8_lossy(&o.stderr);
        ensure!(err.contains("not put in place") && err.contains(".kopiru-tmp.tree."), "{err}");
        let j = json(&o)?;
        let (made, not) = (j["directories_not_made"].as_u64(), j["entries_not_copied"].as_u64());
        ensure!(made > Some(0) && not == made.map(|n| n * 2), "counts: {j}");
        ensure!(err.contains("entries not copied under"), "{err}");
        // Room again (the staged tree is kept): the filesystem grown, then
        // the same command with --resume finishes the copy.
        fixture::grow_ext4(&small, 64)?;
        let o = kopiru_in(&w, &["cp", "--resume", "src", dst.to_str().unwrap()]);
        ensure!(code(&o) == 0, "--resume: {}", show(&o));
        crate::same_tree(&w.join("src"), &dst, crate::manifest::DEFAULT)
    })();
    if let Err(e) = r {
        let _ = fixture::unmount(&small);
        return Err(e);
    }
    let _ = fixture::unmount(&small);
    Ok(())
}

/// Running `cp -r a b` again after it made b copies nothing: an edit in b
/// survives, and no b/a appears; -T updates it.
fn rerun_copies_nothing(fs: Fs) -> R {
    let w = fixture::workdir(fs, "cprules-rerun")?;
    std::fs::create_dir_all(w.join("a"))?;
    std::fs::write(w.join("a/x"), "source\n")?;
    let home = w.join("home");
    std::fs::create_dir(&home)?;
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_kopiru"))
            .current_dir(&w)
            .env("HOME", &home)
            .env_remove("XDG_STATE_HOME")
            .args(args)
            .output()
            .expect("run kopiru")
    };
    ok(&run(&["cp", "-r", "a", "b"]))?;
    std::fs::write(w.join("b/x"), "edited\n")?;
    let o = run(&["cp", "-r", "a", "b"]);
    ok(&o)?;
    ensure!(read(&w.join("b/x"))? == "edited\n", "the edit was overwritten");
    ensure!(!w.join("b/a").exists(), "nested");
    ensure!(String::from_utf8_lossy(&o.stderr).contains("is the copy of"), "{}", show(&o));
    ok(&run(&["cp", "-T", "a", "b"]))?;
    ensure!(read(&w.join("b/x"))? == "source\n", "-T did not update");
    Ok(())
}

/// cp's link, parents, attributes and preserve options, and abbreviated
/// long options; rsync's -z refused with what to do.
fn cp_options(fs: Fs) -> R {
    let w = fixture::workdir(fs, "cprules-options")?;
    std::fs::create_dir_all(w.join("a/b"))?;
    std::fs::write(w.join("a/b/c"), "data\n")?;
    std::fs::set_permissions(w.join("a/b/c"), PermissionsExt::from_mode(0o604))?;
    ok(&kopiru_in(&w, &["cp", "-rl", "a", "hard"]))?;
    let (s, d) = (std::fs::metadata(w.join("a/b/c"))?, std::fs::metadata(w.join("hard/b/c"))?);
    ensure!(s.ino() == d.ino() && s.permissions().mode() & 0o777 == 0o604, "-l");
    let abs = w.join("a/b/c");
    ok(&kopiru_in(&w, &["cp", "-s", abs.to_str().unwrap(), "soft"]))?;
    ensure!(std::fs::read_link(w.join("soft"))? == abs, "-s");
    // -l and -s keep an existing file unless -f, as cp does.
    for flag in ["-l", "-s"] {
        std::fs::write(w.join("kept"), "mine\n")?;
        let o = kopiru_in(&w, &["cp", flag, abs.to_str().unwrap(), "kept"]);
        ensure!(code(&o) == 1 && String::from_utf8_lossy(&o.stderr).contains("File exists"), "{flag}: {}", show(&o));
        ensure!(read(&w.join("kept"))? == "mine\n", "{flag} replaced an existing file without -f");
        ok(&kopiru_in(&w, &["cp", flag, "--backup", abs.to_str().unwrap(), "kept"]))?;
        ensure!(read(&w.join("kept~"))? == "mine\n", "{flag} --backup: no backup");
        std::fs::remove_file(w.join("kept~"))?;
        std::fs::remove_file(w.join("kept"))?;
        std::fs::write(w.join("kept"), "mine\n")?;
        ok(&kopiru_in(&w, &["cp", flag, "-f", abs.to_str().unwrap(), "kept"]))?;
        ensure!(read(&w.join("kept"))? == "data\n", "{flag} -f");
        std::fs::remove_file(w.join("kept"))?;
    }
    // -n keeps a directory where the source has a file, silently, and
    // -u one not older than the source; -u refuses an older one (cp's).
    std::fs::create_dir_all(w.join("dirs/x"))?;
    std::fs::write(w.join("x"), "x\n")?;
    let o = kopiru_in(&w, &["cp", "-n", "-t", "dirs", "x"]);
    ensure!(code(&o) == 0 && o.stderr.is_empty() && w.join("dirs/x").is_dir(), "-n: {}", show(&o));
    fixture::sh(Command::new("touch").args(["-d", "@1000"]).arg(w.join("dirs/x")))?;
    let o = kopiru_in(&w, &["cp", "-u", "-t", "dirs", "x"]);
    ensure!(code(&o) == 1 && w.join("dirs/x").is_dir(), "-u onto an older directory: {}", show(&o));
    // -n never opens a source it keeps: an unreadable one is no error.
    std::fs::write(w.join("dirs/locked"), "old\n")?;
    std::fs::write(w.join("locked"), "new\n")?;
    std::fs::set_permissions(w.join("locked"), PermissionsExt::from_mode(0o000))?;
    let o = bash_in(&w, "chown nobody: locked dirs/locked && HOME=/nonexistent setpriv --reuid=65534 --regid=65534 --clear-groups -- \"$K\" cp -n locked dirs/locked");
    ensure!(code(&o) == 0 && read(&w.join("dirs/locked"))? == "old\n", "-n opened the source: {}", show(&o));
    // -rl follows symlinks inside the tree, linking their targets (cp's).
    std::fs::create_dir_all(w.join("lt/dir"))?;
    std::fs::write(w.join("lt/f"), "f\n")?;
    std::os::unix::fs::symlink("f", w.join("lt/l"))?;
    std::os::unix::fs::symlink("dir", w.join("lt/ld"))?;
    ok(&kopiru_in(&w, &["cp", "-rl", "lt", "ltl"]))?;
    ensure!(std::fs::symlink_metadata(w.join("ltl/l"))?.ino() == std::fs::metadata(w.join("lt/f"))?.ino(), "-rl: symlink not followed");
    ensure!(std::fs::symlink_metadata(w.join("ltl/ld"))?.is_dir(), "-rl: symlink to a directory not followed");
    // A socket has no data: named without -r it fails, as in cp, and an
    // existing file in its place stays.
    std::os::unix::net::UnixListener::bind(w.join("sock"))?;
    std::fs::write(w.join("notsock"), "mine\n")?;
    let o = kopiru_in(&w, &["cp", "sock", "notsock"]);
    ensure!(code(&o) == 1 && read(&w.join("notsock"))? == "mine\n", "socket: {}", show(&o));
    std::fs::create_dir(w.join("p"))?;
    ok(&kopiru_in(&w, &["cp", "--parents", "a/b/c", "p"]))?;
    ensure!(read(&w.join("p/a/b/c"))? == "data\n", "--parents");
    ok(&kopiru_in(&w, &["cp", "--attributes-only", "--preserve=mode", "a/b/c", "attrs"]))?;
    ensure!(std::fs::metadata(w.join("attrs"))?.len() == 0 && mode(&w.join("attrs"))? == 0o604, "--attributes-only");
    // cp's: the default bits (0666) less the umask, not the source's.
    ok(&kopiru_in(&w, &["cp", "-a", "--no-preserve=mode", "a/b/c", "nomode"]))?;
    ensure!(mode(&w.join("nomode"))? == 0o666 & !0o022, "--no-preserve=mode");
    ok(&kopiru_in(&w, &["cp", "--preserve", "a/b/c", "pres"]))?;
    ensure!(mode(&w.join("pres"))? == 0o604, "--preserve without a list");
    std::fs::write(w.join("old"), "old")?;
    ok(&kopiru_in(&w, &["cp", "-b", "-S", ".bak", "a/b/c", "old"]))?;
    ensure!(read(&w.join("old.bak"))? == "old", "-S");
    // -S alone makes backups too (cp's).
    std::fs::write(w.join("old2"), "old2")?;
    ok(&kopiru_in(&w, &["cp", "-S", ".bak", "a/b/c", "old2"]))?;
    ensure!(read(&w.join("old2.bak"))? == "old2", "-S alone made no backup");
    // Abbreviated long options, as GNU's.
    ok(&kopiru_in(&w, &["cp", "--no-target", "--recur", "a", "abbrev"]))?;
    ensure!(w.join("abbrev/b/c").exists(), "abbreviations");
    let o = kopiru_in(&w, &["cp", "-avz", "a", "z"]);
    ensure!(code(&o) == 2 && String::from_utf8_lossy(&o.stderr).contains("nothing to compress"), "{}", show(&o));
    let o = kopiru_in(&w, &["cp", "-avP", "a", "rs"]);
    ensure!(String::from_utf8_lossy(&o.stderr).contains("--partial --progress"), "{}", show(&o));
    Ok(())
}

pub fn trials(add: Add) {
    let fs = Fs::Ext4;
    let tools = || {
        ["setfacl", "getfacl", "setfattr", "getfattr", "losetup", "mkfifo", "mknod", "setpriv"]
            .into_iter()
            .find(|t| !fixture::have(t))
            .map(|t| format!("{t} not installed"))
    };
    let why = fs.unavailable().or_else(tools);
    type Test = fn(Fs) -> R;
    let tests: [(&str, Test); 10] = [
        ("replace_keeps_destination", replace_keeps_destination),
        ("symlinked_destination", symlinked_destination),
        ("written_into_special", written_into_special),
        ("named_sources_read", named_sources_read),
        ("modes_as_cp", modes_as_cp),
        ("delete_keeps_excluded", delete_keeps_excluded),
        ("delete_nested_refused", delete_nested_refused),
        ("failed_tree_stays_staged", failed_tree_stays_staged),
        ("rerun_copies_nothing", rerun_copies_nothing),
        ("cp_options", cp_options),
    ];
    for (name, f) in tests {
        add(
            format!("cprules::{name}::{}", fs.name()),
            why.clone(),
            Box::new(move || f(fs)),
        );
    }
}
