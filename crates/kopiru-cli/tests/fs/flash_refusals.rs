//! What `kopiru flash` refuses before writing a byte: a mounted device or a
//! device with a mounted partition, a regular file without --file, a
//! missing device, one too small; and without `--yes`, the question it asks
//! on the controlling terminal, or its refusal when there is none.

use crate::flash::{device_bytes, flash, image, whole_device, Loop};
use crate::{code, fails_with, fixture, show, Add, R};
use libtest_mimic::Failed;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Refused before anything is written: a mounted device, a device with a
/// mounted partition, a regular file without --file, a missing device (not
/// created, not even with --file under /dev), a device too small.
pub fn refusals() -> R {
    let dir = fixture::run_root().join("flash-refusals");
    std::fs::create_dir_all(&dir)?;
    let (img, _) = image(&dir)?;
    let refused = |args: &[&OsStr], why: &str| -> R { fails_with(&flash(args), 2, why) };
    // Mounted.
    let lo = Loop::new("mounted", 64, 512, false)?;
    fixture::sh(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&lo.dev))?;
    let mnt = dir.join("mnt");
    std::fs::create_dir_all(&mnt)?;
    fixture::sh(Command::new("mount").arg(&lo.dev).arg(&mnt))?;
    let r = refused(&[img.as_os_str(), lo.dev.as_os_str()], "is mounted");
    // The image itself on that device.
    let on_dev = mnt.join("image.raw");
    let r2 = std::fs::copy(&img, &on_dev)
        .map_err(Failed::from)
        .and_then(|_| {
            refused(
                &[on_dev.as_os_str(), lo.dev.as_os_str()],
                "holds the image being written",
            )
        });
    let _ = fixture::sh(Command::new("umount").arg(&mnt));
    r?;
    r2?;
    // (The filesystem itself writes its device, so compare where the image
    // would have gone: its second MiB.)
    let (_, data) = image(&dir)?;
    let there = device_bytes(&lo.dev, 2 << 20)?;
    ensure!(
        there[1 << 20..] != data[1 << 20..2 << 20],
        "the mounted device was written"
    );
    // Not a block device.
    let plain = dir.join("plain");
    std::fs::write(&plain, b"keep me")?;
    refused(&[img.as_os_str(), plain.as_os_str()], "not a block device")?;
    ensure!(std::fs::read(&plain)? == b"keep me", "the file was written");
    // Missing, and never created under /dev.
    refused(
        &[img.as_os_str(), OsStr::new("/dev/kopiru-no-such")],
        "no such device",
    )?;
    refused(
        &[
            OsStr::new("--file"),
            img.as_os_str(),
            OsStr::new("/dev/kopiru-no-such"),
        ],
        "never creates files under /dev",
    )?;
    ensure!(
        !Path::new("/dev/kopiru-no-such").exists(),
        "a file was created in /dev"
    );
    // Too small for a raw image (its size is known before writing).
    let tiny = Loop::new("tiny", 4, 512, false)?;
    refused(&[img.as_os_str(), tiny.dev.as_os_str()], "too small")?;
    Ok(())
}

/// Whether this kernel shows partitions of a loop device (some builds have
/// no partition-table parsers): `None` if it does, else why not.
pub fn partitions_unavailable() -> Option<String> {
    if let Some(why) = fixture::loop_unavailable() {
        return Some(why);
    }
    if !fixture::have("sfdisk") {
        return Some("sfdisk not installed (scripts/test.sh installs fdisk)".into());
    }
    let probe = || -> Result<bool, Failed> {
        std::fs::create_dir_all(fixture::run_root())?;
        let lo = Loop::new("partprobe", 8, 512, false)?;
        partition(&lo)?;
        Ok(PathBuf::from(format!("{}p1", lo.dev.display())).exists())
    };
    match probe() {
        Ok(true) => None,
        Ok(false) => Some("this kernel shows no partitions on loop devices".into()),
        Err(e) => Some(format!("cannot make a partitioned loop device: {e:?}")),
    }
}

/// Writes a one-partition table and has the kernel read it.
fn partition(lo: &Loop) -> R {
    use std::io::Write;
    let mut sf = Command::new("sfdisk")
        .arg("-q")
        .arg(&lo.dev)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    sf.stdin.take().unwrap().write_all(b"label: gpt\n,4M\n")?;
    ensure!(sf.wait()?.success(), "sfdisk failed");
    let _ = Command::new("blockdev")
        .arg("--rereadpt")
        .arg(&lo.dev)
        .status();
    Ok(())
}

/// A device one of whose partitions is mounted is refused.
pub fn refuses_mounted_partition() -> R {
    let dir = fixture::run_root().join("flash-partition");
    std::fs::create_dir_all(&dir)?;
    let (img, _) = image(&dir)?;
    let lo = Loop::new("parts", 64, 512, false)?;
    partition(&lo)?;
    let part = PathBuf::from(format!("{}p1", lo.dev.display()));
    fixture::sh(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&part))?;
    let mnt = dir.join("mnt");
    std::fs::create_dir_all(&mnt)?;
    fixture::sh(Command::new("mount").arg(&part).arg(&mnt))?;
    let o = flash(&[img.as_os_str(), lo.dev.as_os_str()]);
    let _ = fixture::sh(Command::new("umount").arg(&mnt));
    fails_with(&o, 2, "is mounted")?;
    Ok(())
}

/// Without `--yes` kopiru asks on the controlling terminal, whatever its
/// standard input is (a piped image, `echo y |`). With no controlling
/// terminal at all (`setsid`: a new session; cron, CI) it refuses, exit 2,
/// naming `--yes`, and writes nothing, even with "y" waiting on stdin.
pub fn no_terminal_no_write() -> R {
    use std::io::Write;
    use std::process::Stdio;
    let dir = fixture::run_root().join("flash-notty");
    std::fs::create_dir_all(&dir)?;
    let (img, _) = image(&dir)?;
    let lo = Loop::new("notty", 16, 512, false)?;
    lo.fill("/dev/urandom", 16)?;
    let before = whole_device(&lo)?;
    let image_arg = img.as_os_str().to_owned();
    let raw = std::fs::read(&img)?;
    // The image as a path, and piped on standard input ("-").
    for (stdin_data, image_arg) in [
        (b"y\n".to_vec(), image_arg.as_os_str()),
        (raw, OsStr::new("-")),
    ] {
        let mut child = Command::new("setsid")
            .arg("-w")
            .arg(env!("CARGO_BIN_EXE_kopiru"))
            .args(["flash", "--no-progress"])
            .arg(image_arg)
            .arg(&lo.dev)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let mut stdin = child.stdin.take().expect("stdin");
        // kopiru may exit before reading it all.
        let feeder = std::thread::spawn(move || {
            let _ = stdin.write_all(&stdin_data);
        });
        let o = child.wait_with_output()?;
        let _ = feeder.join();
        fails_with(&o, 2, "--yes")?;
        ensure!(
            whole_device(&lo)? == before,
            "the device was written without --yes and without a terminal to ask on"
        );
    }
    Ok(())
}

/// Without `--yes` the question is asked on the controlling terminal (here
/// a pty made by `script`, which types the answer into it), also when the
/// image comes on standard input: "n" leaves the device alone (exit 1),
/// "y" writes it.
pub fn asks_on_the_terminal() -> R {
    let dir = fixture::run_root().join("flash-tty");
    std::fs::create_dir_all(&dir)?;
    let (img, data) = image(&dir)?;
    let lo = Loop::new("tty", 16, 512, false)?;
    lo.fill("/dev/urandom", 16)?;
    let before = whole_device(&lo)?;
    let run = |answer: &str| -> Result<Output, Failed> {
        use std::io::Write;
        use std::process::Stdio;
        // The image piped on standard input: the answer cannot come from
        // there.
        let cmd = format!(
            "cat '{}' | '{}' flash --no-progress - '{}'",
            img.display(),
            env!("CARGO_BIN_EXE_kopiru"),
            lo.dev.display()
        );
        // script runs the command on a new pty, in a new session whose
        // controlling terminal it is, and types its own stdin into it.
        let mut child = Command::new("script")
            .args(["-q", "-e", "-c", &cmd, "/dev/null"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(answer.as_bytes())?;
        // Keep stdin open until kopiru is done: script stops at its EOF.
        let o = std::thread::scope(|s| {
            let w = s.spawn(|| child.wait_with_output());
            let o = w.join().expect("wait");
            drop(stdin);
            o
        });
        Ok(o?)
    };
    let o = run("n\n")?;
    let shown = String::from_utf8_lossy(&o.stdout).to_string();
    ensure!(code(&o) == 1, "want exit 1 after 'n': {}", show(&o));
    ensure!(
        shown.contains("Continue? [y/N]") && shown.contains("nothing written"),
        "{}",
        show(&o)
    );
    ensure!(whole_device(&lo)? == before, "written after 'n'");
    let o = run("y\n")?;
    ensure!(code(&o) == 0, "want exit 0 after 'y': {}", show(&o));
    ensure!(
        device_bytes(&lo.dev, data.len())? == data,
        "not written after 'y'"
    );
    Ok(())
}

/// A device held open exclusively by another program (here the test,
/// with `O_EXCL`, as a mount or device-mapper holds one) is refused before
/// anything is written: exit 2, as every refusal, not 1 from a failed
/// open. One named twice (once through a symlink, as `/dev/disk/by-id/...`
/// names it) is refused up front, exit 2, before anything is written.
pub fn refuses_busy_and_twice_named() -> R {
    use std::os::unix::ffi::OsStrExt;
    let dir = fixture::run_root().join("flash-busy");
    std::fs::create_dir_all(&dir)?;
    let (img, _) = image(&dir)?;
    let lo = Loop::new("busy", 16, 512, false)?;
    lo.fill("/dev/urandom", 16)?;
    let before = whole_device(&lo)?;
    let untouched = |what: &str| -> R {
        ensure!(whole_device(&lo)? == before, "{what}: the device was written");
        Ok(())
    };
    {
        let c = std::ffi::CString::new(lo.dev.as_os_str().as_bytes())?;
        // SAFETY: open(2) of a NUL-terminated path; the descriptor is
        // closed below.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_EXCL) };
        ensure!(fd >= 0, "open O_EXCL: {}", std::io::Error::last_os_error());
        let o = flash(&[img.as_os_str(), lo.dev.as_os_str()]);
        // SAFETY: our own descriptor, closed once.
        unsafe { libc::close(fd) };
        fails_with(&o, 2, "in use")?;
        untouched("busy")?;
    }
    let link = dir.join("by-id-link");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&lo.dev, &link)?;
    for second in [link.as_os_str(), lo.dev.as_os_str()] {
        let o = flash(&[img.as_os_str(), lo.dev.as_os_str(), second]);
        fails_with(&o, 2, "named twice")?;
        fails_with(&o, 2, &lo.dev.display().to_string())?;
        untouched("named twice")?;
    }
    Ok(())
}

/// A loop device over the target, mounted: the target itself is in no
/// mount table line, but writing it changes a mounted filesystem under
/// the kernel's feet. Refused, exit 2, naming the chain ("/dev/loopM is
/// mounted on ... and is backed by /dev/loopN").
pub fn refuses_loop_over_target_mounted() -> R {
    let dir = fixture::run_root().join("flash-loop-over");
    std::fs::create_dir_all(&dir)?;
    let (img, data) = image(&dir)?;
    let lo = Loop::new("under-loop", 64, 512, false)?;
    let over = fixture::sh(Command::new("losetup").args(["-f", "--show"]).arg(&lo.dev))?;
    let over = PathBuf::from(over.trim());
    let mnt = dir.join("mnt");
    std::fs::create_dir_all(&mnt)?;
    let run = || -> Result<Output, Failed> {
        fixture::sh(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&over))?;
        fixture::sh(Command::new("mount").arg(&over).arg(&mnt))?;
        let o = flash(&[img.as_os_str(), lo.dev.as_os_str()]);
        let _ = fixture::sh(Command::new("umount").arg(&mnt));
        Ok(o)
    };
    let o = run();
    let _ = Command::new("losetup").arg("-d").arg(&over).status();
    let o = o?;
    let chain = format!(
        "{} is mounted on {} and is backed by {}",
        over.display(),
        mnt.display(),
        lo.dev.display()
    );
    fails_with(&o, 2, "in use")?;
    fails_with(&o, 2, &chain)?;
    let there = device_bytes(&lo.dev, 2 << 20)?;
    ensure!(
        there[1 << 20..] != data[1 << 20..2 << 20],
        "the device under the mounted loop device was written"
    );
    Ok(())
}

/// A device-mapper device built on the target (not mounted): the target
/// has a holder (sysfs `holders`), refused, exit 2, naming it.
pub fn refuses_held_device() -> R {
    let dir = fixture::run_root().join("flash-held");
    std::fs::create_dir_all(&dir)?;
    let (img, _) = image(&dir)?;
    let lo = Loop::new("held", 16, 512, false)?;
    let name = format!("kopiru-test-held-{}", std::process::id());
    let table = format!("0 {} linear {} 0", 16 * 2048, lo.dev.display());
    fixture::sh(Command::new("dmsetup").args(["create", &name, "--table", &table]))?;
    let o = flash(&[img.as_os_str(), lo.dev.as_os_str()]);
    let _ = Command::new("dmsetup").args(["remove", &name]).status();
    fails_with(&o, 2, "in use")?;
    fails_with(&o, 2, &format!("/dev/mapper/{name}"))?;
    Ok(())
}

/// Why device-mapper devices cannot be made here, if they cannot.
fn device_mapper_unavailable() -> Option<String> {
    if !fixture::have("dmsetup") {
        return Some("dmsetup not installed (scripts/test.sh installs it)".into());
    }
    // `dmsetup version` asks the kernel's driver too.
    match Command::new("dmsetup").arg("version").output() {
        Ok(o) if o.status.success() => None,
        _ => Some("this kernel has no device-mapper (dmsetup version fails)".into()),
    }
}

/// Registers this module's trials.
pub fn trials(add: Add) {
    let needs = crate::flash::unavailable();
    add(
        "flash_refuses_mounted_partition".into(),
        partitions_unavailable(),
        Box::new(refuses_mounted_partition),
    );
    add(
        "flash_no_terminal_no_write".into(),
        needs.clone().or_else(|| {
            (!fixture::have("setsid")).then(|| "setsid not installed (util-linux)".into())
        }),
        Box::new(no_terminal_no_write),
    );
    add(
        "flash_asks_on_the_terminal".into(),
        needs.clone().or_else(|| {
            (!fixture::have("script")).then(|| "script not installed (util-linux)".into())
        }),
        Box::new(asks_on_the_terminal),
    );
    add(
        "flash_refuses_busy_and_twice_named".into(),
        needs.clone(),
        Box::new(refuses_busy_and_twice_named),
    );
    add(
        "flash_refuses_loop_over_target_mounted".into(),
        needs.clone().or_else(|| fixture::Fs::Ext4.unavailable()),
        Box::new(refuses_loop_over_target_mounted),
    );
    add(
        "flash_refuses_held_device".into(),
        needs.clone().or_else(device_mapper_unavailable),
        Box::new(refuses_held_device),
    );
    add(
        "flash_refusals".into(),
        needs.or_else(|| fixture::Fs::Ext4.unavailable()),
        Box::new(refusals),
    );
}
