//! `kopiru flash` trusts an image's bytes, never its name: what is not what
//! it claims to be, or too big for the device, is refused before a byte is
//! written; a damaged image that fails part-way leaves the device's first
//! MiB as it was and says how far it got.

use crate::flash::{flash, image, whole_device, Loop};
use crate::{code, fails_with, fixture, show, Add, R};
use libtest_mimic::Failed;
use std::ffi::OsStr;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// `kopiru flash --yes ARGS... -` with `data` on standard input.
fn flash_stdin(args: &[&str], data: &[u8], dev: &Path) -> Result<Output, Failed> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kopiru"))
        .args(["flash", "--yes", "--no-progress"])
        .args(args)
        .arg("-")
        .arg(dev)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut stdin = child.stdin.take().expect("stdin");
    let data = data.to_vec();
    // kopiru may stop reading early (a refusal after the first bytes).
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&data);
    });
    let o = child.wait_with_output()?;
    let _ = feeder.join();
    Ok(o)
}

/// Compresses `src` with `cmd` (a shell command reading stdin, writing
/// stdout) into `out`.
fn compress(cmd: &str, src: &Path, out: &Path) -> R {
    fixture::sh(Command::new("sh").arg("-c").arg(format!(
        "{cmd} < '{}' > '{}'",
        src.display(),
        out.display()
    )))?;
    Ok(())
}

/// A web page saved under an image's name, text, random bytes, one
/// format's bytes under another's name, and compressed images bigger than
/// the device (xz and zstd record the size; gzip's trailer gives at least
/// it): each refused with exit 2 and the reason, the device untouched. The
/// same bytes given `--format raw` are written as they are.
pub fn trusts_bytes() -> R {
    let dir = fixture::run_root().join("flash-bytes");
    std::fs::create_dir_all(&dir)?;
    let lo = Loop::new("bytes", 16, 512, false)?;
    lo.fill("/dev/urandom", 16)?;
    let before = whole_device(&lo)?;
    let untouched = |what: &str| -> R {
        ensure!(
            whole_device(&lo)? == before,
            "{what}: the device was written"
        );
        Ok(())
    };
    let html = b"<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head>\n\
                 <body><h1>Not Found</h1></body></html>\n"
        .repeat(40);
    let text = b"Image moved. Please download it from the mirror list.\n".repeat(100);
    let random = crate::trees::bytes(3 << 20, 29);
    let mut cases: Vec<(String, Vec<u8>, &str)> = Vec::new();
    for ext in ["img.xz", "img.gz", "img.zst", "img.bz2", "img", "iso"] {
        cases.push((format!("page.{ext}"), html.clone(), "HTML"));
    }
    cases.push(("notes.img.xz".into(), text.clone(), "text"));
    for ext in ["img.xz", "img.gz", "img.zst", "img.bz2"] {
        cases.push((format!("random.{ext}"), random.clone(), "its bytes are not"));
    }
    cases.push((
        "random.download".into(),
        random.clone(),
        "not a known image format",
    ));
    for (name, bytes, why) in &cases {
        let p = dir.join(name);
        std::fs::write(&p, bytes)?;
        fails_with(&flash(&[p.as_os_str(), lo.dev.as_os_str()]), 2, why)
            .map_err(|e| format!("{name}: {e:?}"))?;
        untouched(name)?;
    }
    // xz bytes under a gzip name; gzip bytes given --format zstd.
    let (raw, _) = image(&dir)?;
    let xz_as_gz = dir.join("image.img.gz");
    compress("xz -c", &raw, &xz_as_gz)?;
    let o = flash(&[xz_as_gz.as_os_str(), lo.dev.as_os_str()]);
    fails_with(&o, 2, "its name says gzip, but its bytes are not gzip")?;
    fails_with(&o, 2, "xz")?;
    let gz = dir.join("image.img");
    compress("gzip -c", &raw, &gz)?;
    let o = flash(&[
        OsStr::new("--format"),
        OsStr::new("zstd"),
        gz.as_os_str(),
        lo.dev.as_os_str(),
    ]);
    fails_with(&o, 2, "--format zstd was given")?;
    untouched("a format under another's name")?;
    // On standard input there is no name: text and random bytes refused.
    fails_with(&flash_stdin(&[], &html, &lo.dev)?, 2, "HTML")?;
    fails_with(&flash_stdin(&[], &random, &lo.dev)?, 2, "--format raw")?;
    untouched("standard input")?;
    bigger_than_device(&dir, &lo, &before)?;
    // What --format raw is for: bytes with no signature, written as they are.
    let o = flash_stdin(&["--format", "raw"], &random, &lo.dev)?;
    ensure!(code(&o) == 0, "--format raw: {}", show(&o));
    let now = whole_device(&lo)?;
    ensure!(
        now[..random.len()] == random[..],
        "--format raw: not written"
    );
    Ok(())
}

/// [`trusts_bytes`]: an image bigger than the device (24 MiB of
/// compressible data, 16 MiB device) is refused before writing, known
/// from the xz index (also of multi-threaded xz, in blocks), the zstd
/// frame header and the gzip trailer.
fn bigger_than_device(dir: &Path, lo: &Loop, before: &[u8]) -> R {
    let untouched = |what: &str| -> R {
        ensure!(
            whole_device(lo)? == before,
            "{what}: the device was written"
        );
        Ok(())
    };
    let big = dir.join("big.raw");
    {
        let mut data = crate::trees::bytes(24 << 20, 31);
        for (i, b) in data.iter_mut().enumerate() {
            if i % 64 != 0 {
                *b = b'k';
            }
        }
        data[510..512].copy_from_slice(&[0x55, 0xAA]);
        std::fs::write(&big, data)?;
    }
    for (cmd, name, why) in [
        ("xz -c -0", "big.img.xz", "the image is 25165824 bytes"),
        (
            "xz -c -0 -T2 --block-size=4MiB",
            "big-mt.img.xz",
            "the image is 25165824 bytes",
        ),
        ("zstd -q -c", "big.img.zst", "the image is 25165824 bytes"),
        ("gzip -c", "big.img.gz", "at least 25165824 bytes"),
    ] {
        let p = dir.join(name);
        if name.ends_with(".zst") {
            // A file argument, so that zstd records the size in the frame.
            fixture::sh(
                Command::new("zstd")
                    .args(["-q", "-f", "-o"])
                    .arg(&p)
                    .arg(&big),
            )?;
        } else {
            compress(cmd, &big, &p)?;
        }
        let o = flash(&[p.as_os_str(), lo.dev.as_os_str()]);
        fails_with(&o, 2, "too small").map_err(|e| format!("{name}: {e:?}"))?;
        fails_with(&o, 2, why).map_err(|e| format!("{name}: {e:?}"))?;
        untouched(name)?;
    }
    Ok(())
}

/// A truncated xz (the download stopped): exit 1, the error says the xz
/// data ends early after how many bytes, a line says how much of the device
/// was written, and its first MiB holds what it held before.
pub fn damaged_image() -> R {
    let dir = fixture::run_root().join("flash-damaged");
    std::fs::create_dir_all(&dir)?;
    let lo = Loop::new("damaged", 16, 512, false)?;
    lo.fill("/dev/urandom", 16)?;
    let before = whole_device(&lo)?;
    // 8 MiB that compress well, then 4 MiB that do not: three quarters of
    // the xz file decode to more than 8 MiB.
    let mut data = vec![b'k'; 8 << 20];
    data[510..512].copy_from_slice(&[0x55, 0xAA]);
    data.extend(crate::trees::bytes(4 << 20, 37));
    let raw = dir.join("whole.img");
    std::fs::write(&raw, &data)?;
    let whole = dir.join("whole.img.xz");
    compress("xz -c -1", &raw, &whole)?;
    let xz = std::fs::read(&whole)?;
    let cut = dir.join("cut.img.xz");
    std::fs::write(&cut, &xz[..xz.len() * 3 / 4])?;
    let o = flash(&[cut.as_os_str(), lo.dev.as_os_str()]);
    fails_with(&o, 1, "the xz data ends early or is damaged, after")?;
    fails_with(&o, 1, "partly written")?;
    fails_with(&o, 1, "its first MiB was not written")?;
    let now = whole_device(&lo)?;
    ensure!(
        now[..1 << 20] == before[..1 << 20],
        "the first MiB was written from a damaged image"
    );
    ensure!(
        now[1 << 20..8 << 20] == data[1 << 20..8 << 20],
        "what the image had before the damage was not written"
    );
    // The whole image then writes, first MiB and all.
    let o = flash(&[whole.as_os_str(), lo.dev.as_os_str()]);
    ensure!(code(&o) == 0, "{}", show(&o));
    ensure!(
        whole_device(&lo)?[..data.len()] == data[..],
        "the device differs"
    );
    Ok(())
}

/// A device named by a symlink (as `/dev/disk/by-id/...` names are) is
/// resolved once and written through: exit 0, the image on the device, the
/// symlink still a symlink.
pub fn through_symlink() -> R {
    let dir = fixture::run_root().join("flash-symlink");
    std::fs::create_dir_all(&dir)?;
    let (img, data) = image(&dir)?;
    let lo = Loop::new("symlink", 16, 512, false)?;
    let link = dir.join("usb-Kopiru_Test_Disk-0:0");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&lo.dev, &link)?;
    let o = flash(&[img.as_os_str(), link.as_os_str()]);
    ensure!(code(&o) == 0, "{}", show(&o));
    ensure!(
        crate::flash::device_bytes(&lo.dev, data.len())?[..data.len()] == data[..],
        "the device differs"
    );
    ensure!(
        std::fs::symlink_metadata(&link)?.file_type().is_symlink(),
        "the symlink was replaced"
    );
    Ok(())
}

/// Registers this module's trials.
pub fn trials(add: Add) {
    let needs = crate::flash::unavailable();
    add(
        "flash_trusts_bytes".into(),
        needs.clone(),
        Box::new(trusts_bytes),
    );
    add(
        "flash_damaged_image".into(),
        needs.clone(),
        Box::new(damaged_image),
    );
    add(
        "flash_through_symlink".into(),
        needs,
        Box::new(through_symlink),
    );
}
