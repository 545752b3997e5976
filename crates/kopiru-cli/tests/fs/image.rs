//! `kopiru image` on loop devices (512- and 4096-byte sectors): round trips
//! through every format and back with `kopiru flash` (and `bmaptool copy`
//! for the block map), `--partitions-only` on GPTs, the refusals, a read
//! error, an interrupted run.

use crate::fixture;
use crate::flash::{bmaptool_unavailable, device_bytes, Loop};
use crate::{code, fails_with, json, show, strace_unavailable, trees, Add, R};
use libtest_mimic::Failed;
use std::ffi::OsStr;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn image(args: &[&OsStr]) -> Output {
    crate::kopiru(
        [OsStr::new("image"), OsStr::new("--json")]
            .iter()
            .chain(args),
    )
}

fn flash(args: &[&OsStr]) -> Output {
    crate::kopiru(
        [
            OsStr::new("flash"),
            OsStr::new("--json"),
            OsStr::new("--yes"),
        ]
        .iter()
        .chain(args),
    )
}

/// A fresh, empty directory for one test.
fn dir(name: &str) -> Result<PathBuf, Failed> {
    let d = fixture::run_root().join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d)?;
    Ok(d)
}

/// The SHA-256 of a file, by `sha256sum`.
fn sha256(p: &Path) -> Result<String, Failed> {
    let out = fixture::sh(Command::new("sha256sum").arg(p))?;
    Ok(out
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string())
}

/// Names in `d` (to check that nothing, temporary or final, is left).
fn names(d: &Path) -> Result<Vec<String>, Failed> {
    let mut v: Vec<String> = std::fs::read_dir(d)?
        .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<Result<_, _>>()?;
    v.sort();
    Ok(v)
}

/// Writes a device's content: random bytes at its start (a partition
/// table's place), compressible text, zeros between, and random bytes in
/// its last 100 KiB (so that a short read would show). Returns its bytes.
fn fill_source(lo: &Loop, mib: usize) -> Result<Vec<u8>, Failed> {
    let size = mib << 20;
    let mut data = vec![0u8; size];
    data[..1 << 20].copy_from_slice(&trees::bytes(1 << 20, 70));
    let line = b"kopiru image: a line of text on a device, read back into an image\n";
    for (i, b) in data[3 << 20..9 << 20].iter_mut().enumerate() {
        *b = line[i % line.len()];
    }
    data[12 << 20..(12 << 20) + 5000].copy_from_slice(&trees::bytes(5000, 71));
    data[size - (100 << 10)..].copy_from_slice(&trees::bytes(100 << 10, 72));
    let f = std::fs::OpenOptions::new().write(true).open(&lo.dev)?;
    f.write_all_at(&data, 0)?;
    f.sync_all()?;
    Ok(data)
}

/// Device → raw + block map, .zst, .xz, .gz → `kopiru flash` onto a second
/// device of the same sector size: byte for byte, with the SHA-256 of the
/// device in both JSON summaries. The raw image is sparse where the device
/// holds zeros; its block map also works with `bmaptool copy`.
pub fn round_trip(sector: u32) -> R {
    const MIB: usize = 24;
    let d = dir(&format!("image-trip-{sector}"))?;
    let src = Loop::new(&format!("image-src-{sector}"), MIB as u64, sector, true)?;
    let data = fill_source(&src, MIB)?;
    let want_sum = sha256(&src.backing)?;
    let dst = Loop::new(&format!("image-dst-{sector}"), MIB as u64, sector, true)?;
    for name in ["disk.img", "disk.img.zst", "disk.img.xz", "disk.img.gz"] {
        let out = d.join(name);
        let map = d.join(format!("{name}.bmap"));
        let o = image(&[
            src.dev.as_os_str(),
            out.as_os_str(),
            OsStr::new("--bmap"),
            map.as_os_str(),
        ]);
        let what = format!("{name} from {sector}-byte sectors");
        ensure!(code(&o) == 0, "{what}: {}", show(&o));
        let j = json(&o)?;
        ensure!(
            j["verified"] == true
                && j["sha256"] == want_sum.as_str()
                && j["image_bytes"] == data.len() as u64
                && j["direct"] == true,
            "{what}: {j}"
        );
        ensure!(
            names(&d)?.iter().all(|n| !n.contains("kopiru-image")),
            "{what}: a temporary file is left: {:?}",
            names(&d)?
        );
        // Back onto a device that holds something else everywhere.
        dst.fill("/dev/urandom", MIB as u32)?;
        let o = flash(&[out.as_os_str(), dst.dev.as_os_str()]);
        ensure!(code(&o) == 0, "{what}: flash: {}", show(&o));
        let jf = json(&o)?;
        ensure!(jf["sha256"] == want_sum.as_str(), "{what}: flash: {jf}");
        ensure!(
            device_bytes(&dst.dev, data.len())? == data,
            "{what}: the device flashed from the image differs"
        );
        // The map alone, onto a zeroed device.
        dst.fill("/dev/zero", MIB as u32)?;
        let o = flash(&[
            OsStr::new("--bmap"),
            map.as_os_str(),
            out.as_os_str(),
            dst.dev.as_os_str(),
        ]);
        ensure!(code(&o) == 0, "{what}: flash --bmap: {}", show(&o));
        ensure!(
            device_bytes(&dst.dev, data.len())? == data,
            "{what}: the device flashed with the map differs"
        );
    }
    // The raw image: holes where the device has zeros (about 13 MiB of
    // its 24 are zeros).
    let raw = d.join("disk.img");
    let allocated = std::fs::metadata(&raw)?.blocks() * 512;
    ensure!(
        allocated <= (12 << 20),
        "raw image not sparse: {allocated} bytes allocated"
    );
    ensure!(std::fs::read(&raw)? == data, "the raw image differs");
    // bmaptool takes the map (and checks every range's SHA-256).
    dst.fill("/dev/zero", MIB as u32)?;
    let map = d.join("disk.img.bmap");
    fixture::sh(
        Command::new("bmaptool")
            .args(["copy", "--bmap"])
            .arg(&map)
            .arg(&raw)
            .arg(&dst.dev),
    )?;
    ensure!(
        device_bytes(&dst.dev, data.len())? == data,
        "bmaptool copy with kopiru's map: the device differs"
    );
    Ok(())
}

/// Writes a GPT with two partitions (sizes in MiB) through sfdisk.
fn gpt(dev: &Path, parts: &str) -> R {
    use std::io::Write;
    let mut sf = Command::new("sfdisk")
        .arg("-q")
        .arg(dev)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    sf.stdin
        .take()
        .expect("stdin")
        .write_all(format!("label: gpt\n{parts}").as_bytes())?;
    let o = sf.wait_with_output()?;
    ensure!(
        o.status.success(),
        "sfdisk: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    Ok(())
}

/// The end of the last partition in bytes, as sfdisk reports it.
fn last_end(dev: &Path) -> Result<u64, Failed> {
    let j: serde_json::Value =
        serde_json::from_str(&fixture::sh(Command::new("sfdisk").arg("--json").arg(dev))?)?;
    let t = &j["partitiontable"];
    let sector = t["sectorsize"].as_u64().unwrap_or(512);
    let end = t["partitions"]
        .as_array()
        .map(|ps| {
            ps.iter()
                .map(|p| p["start"].as_u64().unwrap_or(0) + p["size"].as_u64().unwrap_or(0))
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0);
    Ok(end * sector)
}

/// `--partitions-only` on a GPT with two partitions (512- and 4096-byte
/// sectors): the image ends where the second partition does, and holds
/// the device's bytes up to there. A table whose partition runs past the
/// device's end, and a device without a table, are refused.
pub fn partitions_only() -> R {
    let d = dir("image-parts")?;
    for sector in [512u32, 4096] {
        let lo = Loop::new(&format!("image-parts-{sector}"), 64, sector, true)?;
        let data = trees::bytes(40 << 20, 80);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&lo.dev)?
            .write_all_at(&data, 0)?;
        gpt(&lo.dev, ",8M\n,16M\n")?;
        let end = last_end(&lo.dev)?;
        ensure!(
            end > (24 << 20) && end < (40 << 20),
            "sfdisk put the end at {end}"
        );
        let out = d.join(format!("parts-{sector}.img.zst"));
        let o = image(&[
            OsStr::new("--partitions-only"),
            lo.dev.as_os_str(),
            out.as_os_str(),
        ]);
        ensure!(code(&o) == 0, "{sector}: {}", show(&o));
        let j = json(&o)?;
        ensure!(
            j["image_bytes"] == end
                && j["device_bytes"] == 64u64 << 20
                && j["partitions_only"]["table"] == "GPT"
                && j["partitions_only"]["last_partition"] == 2
                && j["verified"] == true,
            "{sector}: want {end} bytes: {j}"
        );
        let back = fixture::sh(
            Command::new("sh")
                .arg("-c")
                .arg(format!("zstd -dc '{}' | sha256sum", out.display())),
        )?;
        let want = fixture::sh(Command::new("sh").arg("-c").arg(format!(
            "head -c {end} '{}' | sha256sum",
            lo.backing.display()
        )))?;
        ensure!(
            back == want && !back.is_empty(),
            "{sector}: the image is not the device's first {end} bytes"
        );
    }
    // A table made for 64 MiB on a device cut to 32 MiB: the second
    // partition (8 MiB to 48 MiB) ends past its end.
    let big = fixture::run_root().join("image-cut.img");
    std::fs::File::create(&big)?.set_len(64 << 20)?;
    gpt(&big, ",8M\n,40M\n")?;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&big)?
        .set_len(32 << 20)?;
    let lo = fixture::sh(Command::new("losetup").args(["-f", "--show"]).arg(&big))?;
    let dev = PathBuf::from(lo.trim());
    let out = d.join("cut.img");
    let o = image(&[
        OsStr::new("--partitions-only"),
        dev.as_os_str(),
        out.as_os_str(),
    ]);
    let _ = Command::new("losetup").arg("-d").arg(&dev).status();
    fails_with(&o, 2, "GPT partition 2 ends at byte")?;
    fails_with(&o, 2, "past the end of the device (33554432 bytes)")?;
    ensure!(!out.exists(), "an image was written");
    // No table at all.
    let bare = Loop::new("image-bare", 8, 512, true)?;
    let o = image(&[
        OsStr::new("--partitions-only"),
        bare.dev.as_os_str(),
        out.as_os_str(),
    ]);
    fails_with(&o, 2, "no partition table")?;
    ensure!(
        names(&d)?.iter().all(|n| n.starts_with("parts-")),
        "{:?}",
        names(&d)?
    );
    Ok(())
}

/// Refused before anything is written (exit 2): a device mounted
/// read-write, OUTPUT on the device, an existing OUTPUT (unless --force,
/// which replaces it), a regular file without --file, OUTPUT that is not a
/// regular file (or is standard output), the map on OUTPUT, a level out of
/// range. A read-only mount is fine.
pub fn refusals() -> R {
    let d = dir("image-refusals")?;
    let out = d.join("out.img");
    let lo = Loop::new("image-mounted", 64, 512, false)?;
    fixture::sh(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&lo.dev))?;
    let mnt = d.join("mnt");
    std::fs::create_dir_all(&mnt)?;
    fixture::sh(Command::new("mount").arg(&lo.dev).arg(&mnt))?;
    let rw = image(&[lo.dev.as_os_str(), out.as_os_str()]);
    let inside = mnt.join("self.img");
    let on_dev = image(&[
        OsStr::new("--force"),
        lo.dev.as_os_str(),
        inside.as_os_str(),
    ]);
    let _ = fixture::sh(Command::new("umount").arg(&mnt));
    fails_with(&rw, 2, "is mounted read-write")?;
    fails_with(&on_dev, 2, "is on the device being read")?;
    ensure!(!out.exists(), "written from a read-write mount");
    // Read-only: fine.
    fixture::sh(
        Command::new("mount")
            .args(["-o", "ro"])
            .arg(&lo.dev)
            .arg(&mnt),
    )?;
    let ro = image(&[lo.dev.as_os_str(), out.as_os_str()]);
    let _ = fixture::sh(Command::new("umount").arg(&mnt));
    ensure!(code(&ro) == 0, "a read-only mount: {}", show(&ro));
    ensure!(json(&ro)?["verified"] == true, "{}", show(&ro));
    // OUTPUT exists: refused, left alone; replaced with --force.
    std::fs::write(&out, b"keep me")?;
    fails_with(&image(&[lo.dev.as_os_str(), out.as_os_str()]), 2, "exists")?;
    ensure!(std::fs::read(&out)? == b"keep me", "OUTPUT was overwritten");
    let o = image(&[OsStr::new("--force"), lo.dev.as_os_str(), out.as_os_str()]);
    ensure!(code(&o) == 0, "--force: {}", show(&o));
    ensure!(
        std::fs::metadata(&out)?.len() == 64 << 20,
        "--force did not replace OUTPUT"
    );
    // A regular file needs --file; with it, the file is read.
    let plain = d.join("plain.bin");
    std::fs::write(&plain, trees::bytes(3 << 20, 90))?;
    let copy = d.join("plain-copy.bin.gz");
    fails_with(
        &image(&[plain.as_os_str(), copy.as_os_str()]),
        2,
        "give --file",
    )?;
    let o = image(&[OsStr::new("--file"), plain.as_os_str(), copy.as_os_str()]);
    ensure!(code(&o) == 0, "--file: {}", show(&o));
    let back = fixture::sh(Command::new("sh").arg("-c").arg(format!(
        "gzip -dc '{}' | cmp - '{}' && echo same",
        copy.display(),
        plain.display()
    )))?;
    ensure!(back.trim() == "same", "--file: {back}");
    bad_outputs(&d, &lo)?;
    Ok(())
}

/// [`refusals`]: an OUTPUT that is not a regular file (here the device
/// itself), even with --force; the map on OUTPUT; standard output; levels.
fn bad_outputs(d: &Path, lo: &Loop) -> R {
    fails_with(
        &image(&[
            OsStr::new("--force"),
            lo.dev.as_os_str(),
            lo.dev.as_os_str(),
        ]),
        2,
        "not a regular file",
    )?;
    let fresh = d.join("fresh.img");
    fails_with(
        &image(&[
            lo.dev.as_os_str(),
            fresh.as_os_str(),
            OsStr::new("--bmap"),
            fresh.as_os_str(),
        ]),
        2,
        "would overwrite the image",
    )?;
    fails_with(
        &image(&[lo.dev.as_os_str(), OsStr::new("-")]),
        2,
        "OUTPUT is standard output",
    )?;
    let zst = d.join("fresh.img.zst");
    fails_with(
        &image(&[
            OsStr::new("--level=20"),
            lo.dev.as_os_str(),
            zst.as_os_str(),
        ]),
        2,
        "zstd takes 1 to 19",
    )?;
    ensure!(
        !fresh.exists() && !zst.exists(),
        "written after a refusal: {:?}",
        names(d)?
    );
    Ok(())
}

/// A read that fails (EIO injected into the device's third pread) is
/// reported with its offset; exit 1; nothing is left, under OUTPUT's name
/// or a temporary one.
pub fn read_error() -> R {
    let d = dir("image-eio")?;
    let lo = Loop::new("image-eio", 32, 512, true)?;
    lo.fill("/dev/urandom", 32)?;
    let out = d.join("eio.img.zst");
    let o = crate::kopiru_injected_on("pread64:error=EIO:when=3", &[&lo.dev])
        .args(["image", "--json", "--no-progress"])
        .arg(&lo.dev)
        .arg(&out)
        .output()?;
    ensure!(code(&o) == 1, "want exit 1: {}", show(&o));
    let j = json(&o)?;
    let at = j["error_at"].as_u64().unwrap_or(0);
    ensure!(
        at > 0
            && at % (64 << 10) == 0
            && j["errors"][0]["errno"] == libc::EIO
            && j["sha256"].is_null(),
        "{j}"
    );
    let err = String::from_utf8_lossy(&o.stderr);
    ensure!(
        err.contains(&format!(
            "{}: read at offset {at}: Input/output error",
            lo.dev.display()
        )),
        "{}",
        show(&o)
    );
    ensure!(names(&d)?.is_empty(), "left behind: {:?}", names(&d)?);
    Ok(())
}

/// SIGINT while the image is being written: exit 20, and nothing left
/// under OUTPUT's name (nor the temporary one, which existed while it ran).
pub fn interrupted() -> R {
    let d = dir("image-sigint")?;
    let lo = Loop::new("image-sigint", 96, 4096, true)?;
    lo.fill("/dev/urandom", 96)?;
    let out = d.join("slow.img.xz");
    // xz -6 on one thread over random bytes: many seconds.
    let child = Command::new(env!("CARGO_BIN_EXE_kopiru"))
        .args([
            "image",
            "--json",
            "--no-progress",
            "--level",
            "6",
            "-j",
            "1",
        ])
        .arg(&lo.dev)
        .arg(&out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    let started = std::time::Instant::now();
    let mut saw_temp = false;
    while started.elapsed().as_secs() < 120 {
        if names(&d)?.iter().any(|n| n.contains(".kopiru-image.")) {
            saw_temp = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let o = child.wait_with_output()?;
    ensure!(
        saw_temp,
        "no temporary file seen while running: {}",
        show(&o)
    );
    fails_with(&o, 20, "received SIGINT: stopped; no image written")?;
    ensure!(json(&o)?["cancelled"] == true, "{}", show(&o));
    ensure!(names(&d)?.is_empty(), "left behind: {:?}", names(&d)?);
    Ok(())
}

/// Verification reads the written image back from the disk: a block of
/// the temporary file changed while kopiru is held in its flush (strace
/// delays the return of the first fsync, the output's, and the test waits
/// until it is held) is caught; exit 1,
/// and nothing is put under OUTPUT's name.
pub fn verify_catches_corruption() -> R {
    use std::process::Stdio;
    let d = dir("image-verify")?;
    let lo = Loop::new("image-verify", 16, 512, true)?;
    lo.fill("/dev/urandom", 16)?;
    let out = d.join("v.img");
    let (inject, trace) = ("fsync:delay_exit=6000000:when=1", fixture::run_root().join("image-verify.trace"));
    let mut child = crate::kopiru_held(inject, &trace)
        .args(["image", "--json", "--no-progress"])
        .arg(&lo.dev)
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    crate::wait_held(&trace, inject, &mut child)?;
    // The temporary file, with all its bytes once kopiru flushes it.
    let full = std::fs::read_dir(&d)?.flatten().find(|e| {
        e.file_name().to_string_lossy().contains(".kopiru-image.")
            && e.metadata().is_ok_and(|m| m.len() == 16 << 20)
    });
    let Some(temp) = full.map(|e| e.path()) else {
        let o = child.wait_with_output()?;
        return Err(format!("no complete temporary file while held: {}", show(&o)).into());
    };
    let f = std::fs::OpenOptions::new().write(true).open(&temp)?;
    f.write_all_at(&[0xAA; 4096], 5 << 20)?;
    f.sync_all()?;
    crate::still_held(&mut child, inject)?;
    let o = child.wait_with_output()?;
    fails_with(&o, 1, "the image read back differs from what was read")?;
    ensure!(json(&o)?["verified"] == false, "{}", show(&o));
    ensure!(names(&d)?.is_empty(), "left behind: {:?}", names(&d)?);
    Ok(())
}

/// Registers this module's trials.
/// OUTPUT naming standard output (`/dev/stdout`, a link to
/// `/proc/self/fd/1`), whether that is a file or a pipe: refused once,
/// with one line, exit 2, also with --force (which once renamed the image
/// over the link, in /dev for /dev/stdout). A symlink OUTPUT is refused:
/// --force would replace the link, not the file it names.
pub fn stdout_refused_once() -> R {
    use std::process::Stdio;
    let d = dir("image-stdout")?;
    let src = d.join("src.bin");
    std::fs::write(&src, trees::bytes(1 << 20, 91))?;
    // A link of the test's own for --force, so that a kopiru that renames
    // over it cannot replace the system's /dev/stdout.
    let own_stdout = d.join("stdout");
    let _ = std::fs::remove_file(&own_stdout);
    std::os::unix::fs::symlink("/proc/self/fd/1", &own_stdout)?;
    let once = |o: &Output, what: &str| -> R {
        fails_with(o, 2, "standard output").map_err(|e| format!("{what}: {e:?}"))?;
        let lines = String::from_utf8_lossy(&o.stderr).lines().count();
        ensure!(lines == 1, "{what}: want one line: {}", show(o));
        Ok(())
    };
    let run = |args: &[&OsStr], to_file: bool| -> Result<Output, Failed> {
        let mut c = Command::new(env!("CARGO_BIN_EXE_kopiru"));
        c.arg("image").arg("--file").args(args);
        let sink = d.join("stdout.txt");
        if to_file {
            c.stdout(std::fs::File::create(&sink)?);
        } else {
            c.stdout(Stdio::piped());
        }
        let o = c.stderr(Stdio::piped()).output()?;
        if to_file {
            ensure!(
                std::fs::metadata(&sink)?.len() == 0,
                "{args:?}: written to the file that was standard output"
            );
        }
        Ok(o)
    };
    for to_file in [true, false] {
        let what = if to_file { "to a file" } else { "to a pipe" };
        once(&run(&[src.as_os_str(), OsStr::new("/dev/stdout")], to_file)?, what)?;
        let force = [OsStr::new("--force"), src.as_os_str(), own_stdout.as_os_str()];
        once(&run(&force, to_file)?, &format!("--force, {what}"))?;
        ensure!(
            std::fs::symlink_metadata(&own_stdout)?.file_type().is_symlink(),
            "--force, {what}: the link to standard output was replaced"
        );
    }
    let target = d.join("target.img");
    std::fs::write(&target, b"keep me")?;
    let link = d.join("link.img");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&target, &link)?;
    let o = image(&[
        OsStr::new("--file"),
        OsStr::new("--force"),
        src.as_os_str(),
        link.as_os_str(),
    ]);
    fails_with(&o, 2, "is a symlink")?;
    ensure!(
        std::fs::symlink_metadata(&link)?.file_type().is_symlink()
            && std::fs::read(&target)? == b"keep me",
        "the link or its file was replaced"
    );
    Ok(())
}

/// Registers this module's trials.
pub fn trials(add: Add) {
    add(
        "image::stdout_refused_once".into(),
        None,
        Box::new(stdout_refused_once),
    );
    let needs = fixture::loop_unavailable().or_else(|| {
        ["xz", "zstd", "gzip", "sfdisk", "sha256sum"]
            .iter()
            .find(|t| !fixture::have(t))
            .map(|t| format!("{t} not installed (scripts/test.sh installs it)"))
    });
    for sector in [512u32, 4096] {
        add(
            format!("image::round_trip_{sector}"),
            needs.clone().or_else(bmaptool_unavailable),
            Box::new(move || round_trip(sector)),
        );
    }
    add(
        "image::partitions_only".into(),
        needs.clone(),
        Box::new(partitions_only),
    );
    add(
        "image::refusals".into(),
        needs.clone().or_else(|| fixture::Fs::Ext4.unavailable()),
        Box::new(refusals),
    );
    add(
        "image::read_error".into(),
        needs.clone().or_else(strace_unavailable),
        Box::new(read_error),
    );
    add(
        "image::verify_catches_corruption".into(),
        needs.clone().or_else(strace_unavailable),
        Box::new(verify_catches_corruption),
    );
    add("image::interrupted".into(), needs, Box::new(interrupted));
}
