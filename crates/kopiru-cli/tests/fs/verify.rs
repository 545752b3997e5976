//! Verification: `copy --verify` reads every copied file back (hashing the
//! source while copying it, so a lost write is caught), and `kopiru verify`
//! finds each kind of difference, reading the destination from the device.

use crate::durability::{copy, exact, tree};
use crate::fixture::{self, Fs};
use crate::{code, json, show, strace_unavailable, trees, Add, R};
use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

/// `copy --verify` reads every copied file back and passes; `kopiru verify`
/// finds each kind of difference and exits 1.
pub fn verify_tree(fs: Fs) -> R {
    let w = fixture::workdir(fs, "verify")?;
    let (src, dst) = (w.join("src"), w.join("dst"));
    tree(&src, 9)?;
    let o = copy(&[OsStr::new("--verify"), src.as_os_str(), dst.as_os_str()]);
    let j = json(&o)?;
    // 120 files, one of them with a second name: a hard link is not a
    // second file to verify.
    let counted = j["verified_files"] == 120 && j["files"] == 120 && j["hard_links"] == 1;
    ensure!(code(&o) == 0 && counted, "{}", show(&o));
    let v = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_kopiru"))
            .arg("verify")
            .args(extra)
            .arg(&src)
            .arg(&dst)
            .output()
    };
    let o = v(&[])?;
    ensure!(code(&o) == 0 && o.stdout.is_empty(), "{}", show(&o));
    // One byte changed in place (same size), one file gone, one extra, a
    // symlink retargeted.
    let f = dst.join("d2/f07");
    let mut bytes = std::fs::read(&f)?;
    let mid = bytes.len() / 2;
    bytes[mid] ^= 1;
    std::fs::write(&f, &bytes)?;
    std::fs::remove_file(dst.join("d0/f03"))?;
    std::fs::write(dst.join("d1/extra"), b"x")?;
    std::fs::remove_file(dst.join("link"))?;
    std::os::unix::fs::symlink("d0/f01", dst.join("link"))?;
    let o = v(&[])?;
    let out = String::from_utf8_lossy(&o.stdout);
    ensure!(code(&o) == 1, "want exit 1: {}", show(&o));
    for (p, what) in [
        ("d2/f07", "content differs"),
        ("d0/f03", "missing in destination"),
        ("d1/extra", "only in destination"),
        ("link", "symlink target differs"),
    ] {
        let line = format!("{}: {what}", dst.join(p).display());
        ensure!(
            out.lines().any(|l| l == line),
            "no line '{line}' in:\n{out}"
        );
    }
    ensure!(out.lines().count() == 4, "{out}");

    // One file copied to a new name: the verify pass finds the source by
    // its own name (cloned files are read there).
    let one = w.join("one");
    let src_file = src.join("d2").join("f07");
    let o = copy(&[
        OsStr::new("--verify"),
        src_file.as_os_str(),
        one.as_os_str(),
    ]);
    let j = json(&o)?;
    ensure!(code(&o) == 0 && j["verified_files"] == 1, "{}", show(&o));
    Ok(())
}

/// `copy --verify` hashes each source file while copying it: the source is
/// opened for reading once (the verify pass reads only the destination, with
/// O_DIRECT), and a write that was lost (strace makes the first `pwrite64`
/// report success without writing) is caught as a content difference.
pub fn verify_hashes_while_copying() -> R {
    let w = fixture::workdir(Fs::Ext4, "verify-once")?;
    let (src, dst) = (w.join("src"), w.join("dst"));
    std::fs::create_dir(&src)?;
    trees::write_random(&src.join("big.bin"), 3_000_000, 1)?;
    trees::write_random(&src.join("small.bin"), 5_000, 2)?;
    std::fs::write(src.join("empty.bin"), b"")?;
    let holey = std::fs::File::create(src.join("holey.bin"))?;
    holey.set_len(8 << 20)?;
    std::os::unix::fs::FileExt::write_all_at(&holey, b"data after a hole", 5 << 20)?;
    drop(holey);
    let names = ["big.bin", "small.bin", "empty.bin", "holey.bin"];

    let trace = w.join("openat.trace");
    let o = Command::new("strace")
        .args(["-f", "-e", "trace=openat", "-o"])
        .arg(&trace)
        .arg(env!("CARGO_BIN_EXE_kopiru"))
        .args(["copy", "--json", "--verify"])
        .arg(&src)
        .arg(&dst)
        .output()?;
    let j = json(&o)?;
    ensure!(code(&o) == 0 && j["verified_files"] == 4, "{}", show(&o));
    exact(&src, &dst)?;
    let trace = std::fs::read_to_string(&trace)?;
    for name in names {
        let quoted = format!("\"{name}\", O_RDONLY");
        let opens = |direct: bool| {
            trace
                .lines()
                .filter(|l| l.contains(&quoted) && l.contains("O_DIRECT") == direct)
                .count()
        };
        ensure!(
            (opens(false), opens(true)) == (1, 1),
            "{name}: {} cached and {} O_DIRECT opens for reading, want 1 and 1:\n{trace}",
            opens(false),
            opens(true)
        );
    }

    // The lost write: unnoticed by a plain read/write copy, found by
    // --verify (which reads and writes the same way).
    let big = src.join("big.bin");
    let lost_write = |verify: bool, to: &Path| {
        let mut c = crate::kopiru_injected("pwrite64:retval=1048576:when=1");
        c.args(["copy", "--json"]);
        match verify {
            true => c.arg("--verify"),
            false => c.args(["--method", "stream"]),
        };
        c.arg(&big).arg(to).output()
    };
    let o = lost_write(false, &w.join("unverified"))?;
    ensure!(code(&o) == 0, "{}", show(&o));
    ensure!(
        std::fs::read(w.join("unverified"))? != std::fs::read(&big)?,
        "the injected write was not lost; the test proves nothing"
    );
    let verified = w.join("verified");
    let o = lost_write(true, &verified)?;
    ensure!(code(&o) != 0, "a lost write passed --verify: {}", show(&o));
    let j = json(&o)?;
    let errors = j["errors"].as_array().cloned().unwrap_or_default();
    ensure!(
        errors.len() == 1
            && errors[0]["path"] == verified.to_string_lossy().as_ref()
            && errors[0]["operation"] == "verify"
            && errors[0]["reason"]
                .as_str()
                .is_some_and(|m| m.contains("content differs")),
        "{}",
        show(&o)
    );
    Ok(())
}

/// `kopiru verify` reads the destination from the device: a block changed
/// on the device behind the page cache (which still holds the good data, as
/// `cmp` shows) is found.
pub fn verify_reads_device() -> R {
    let mnt = fixture::make_fs(Fs::Ext4, "verify-dev", 64, &[])?;
    let (src, dst) = (mnt.join("src"), mnt.join("dst"));
    trees::write_random(&src, 1 << 20, 42)?;
    let o = copy(&[src.as_os_str(), dst.as_os_str()]);
    ensure!(code(&o) == 0, "{}", show(&o));
    std::fs::read(&dst)?; // in the page cache now
                          // The first extent's first physical block, in 4 KiB blocks.
    let frag = fixture::sh(Command::new("filefrag").args(["-v", "-b4096"]).arg(&dst))?;
    let block: u64 = frag
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.first() == Some(&"0:")).then(|| f.get(3)?.trim_end_matches("..").parse().ok())?
        })
        .ok_or_else(|| format!("no extent in:\n{frag}"))?;
    let dev = fixture::sh(
        Command::new("findmnt")
            .args(["-n", "-o", "SOURCE"])
            .arg(&mnt),
    )?;
    fixture::sh(
        Command::new("dd")
            .args([
                "if=/dev/zero",
                "bs=4096",
                "count=1",
                "oflag=direct,sync",
                "conv=notrunc",
            ])
            .arg(format!("of={}", dev.trim()))
            .arg(format!("seek={block}")),
    )?;
    let cached = Command::new("cmp").arg(&src).arg(&dst).output()?;
    ensure!(
        cached.status.success(),
        "the page cache did not keep the old data; the test proves nothing"
    );
    let o = Command::new(env!("CARGO_BIN_EXE_kopiru"))
        .arg("verify")
        .arg(&src)
        .arg(&dst)
        .output()?;
    ensure!(code(&o) == 1, "want exit 1: {}", show(&o));
    ensure!(
        String::from_utf8_lossy(&o.stdout).contains("content differs"),
        "{}",
        show(&o)
    );
    Ok(())
}

/// Registers this module's trials.
pub fn trials(add: Add) {
    for fs in Fs::ALL {
        add(
            format!("verify_tree::{}", fs.name()),
            fs.unavailable(),
            Box::new(move || verify_tree(fs)),
        );
    }
    let ext4 = Fs::Ext4.unavailable();
    add(
        "verify_reads_device::ext4".into(),
        ext4.clone(),
        Box::new(verify_reads_device),
    );
    add(
        "verify_hashes_while_copying::ext4".into(),
        ext4.or_else(strace_unavailable),
        Box::new(verify_hashes_while_copying),
    );
}
