//! `kopiru flash` onto loop devices (512- and 4096-byte sectors, direct I/O
//! on and off): every format byte for byte, verification that reads the
//! device and not the cache, several devices at once, block maps, zeroed
//! and identical blocks, a write error, an xz image's memory. Its refusals
//! and its question are in flash_refusals.rs, what it makes of an image's
//! bytes in flash_input.rs.

use crate::fixture;
use crate::{code, fails_with, json, show, strace_unavailable, trees, Add, R};
use libtest_mimic::Failed;
use std::ffi::OsStr;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A loop device over a sparse backing file, detached on drop.
pub(crate) struct Loop {
    pub(crate) dev: PathBuf,
    pub(crate) backing: PathBuf,
}

impl Loop {
    pub(crate) fn new(tag: &str, mib: u64, sector: u32, direct: bool) -> Result<Loop, Failed> {
        let backing = fixture::run_root().join(format!("flash-{tag}.img"));
        let f = std::fs::File::create(&backing)?;
        f.set_len(mib << 20)?;
        drop(f);
        let out = fixture::sh(
            Command::new("losetup")
                .args(["-f", "--show", "-P"])
                .arg(format!("--sector-size={sector}"))
                .arg(format!("--direct-io={}", if direct { "on" } else { "off" }))
                .arg(&backing),
        )?;
        Ok(Loop {
            dev: PathBuf::from(out.trim()),
            backing,
        })
    }
}

impl Loop {
    /// Fills the first `mib` MiB of the device from `source` (/dev/urandom,
    /// /dev/zero), around the page cache.
    pub(crate) fn fill(&self, source: &str, mib: u32) -> R {
        fixture::sh(
            Command::new("dd")
                .arg(format!("if={source}"))
                .args(["bs=1M", "oflag=direct", "status=none"])
                .arg(format!("count={mib}"))
                .arg(format!("of={}", self.dev.display())),
        )?;
        Ok(())
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.dev).status();
        let _ = std::fs::remove_file(&self.backing);
    }
}

pub(crate) fn flash(args: &[&OsStr]) -> Output {
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

/// The first `image.len()` bytes of `dev`, read with O_DIRECT through dd
/// (not the page cache).
pub(crate) fn device_bytes(dev: &Path, len: usize) -> Result<Vec<u8>, Failed> {
    let out = Command::new("dd")
        .arg(format!("if={}", dev.display()))
        .args(["bs=1M", "iflag=direct", "status=none"])
        .arg(format!("count={}", len.div_ceil(1 << 20)))
        .output()?;
    ensure!(
        out.status.success(),
        "dd: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut v = out.stdout;
    v.truncate(len);
    Ok(v)
}

/// An image of 5 MiB + 1234 bytes (a tail shorter than any sector).
pub(crate) fn image(dir: &Path) -> Result<(PathBuf, Vec<u8>), Failed> {
    let mut data = trees::bytes((5 << 20) + 1234, 11);
    // An MBR's signature, as a disk image starts: piped on standard input,
    // with no name to go by, it is recognised by its bytes.
    data[510..512].copy_from_slice(&[0x55, 0xAA]);
    let p = dir.join("image.raw");
    std::fs::write(&p, &data)?;
    Ok((p, data))
}

/// Raw, xz, gzip, zstd and bzip2 images, byte for byte, on 512- and
/// 4096-byte-sector loop devices with direct I/O on and off.
pub fn formats() -> R {
    let dir = fixture::run_root().join("flash-formats");
    std::fs::create_dir_all(&dir)?;
    let (raw, data) = image(&dir)?;
    let mut images = vec![raw.clone()];
    for (tool, ext) in [
        ("xz", "xz"),
        ("gzip", "gz"),
        ("zstd", "zst"),
        ("bzip2", "bz2"),
    ] {
        fixture::sh(Command::new(tool).args(["-k", "-f", "-q"]).arg(&raw))?;
        images.push(dir.join(format!("image.raw.{ext}")));
    }
    for (sector, direct) in [(512, false), (512, true), (4096, false), (4096, true)] {
        let lo = Loop::new(&format!("fmt-{sector}-{direct}"), 16, sector, direct)?;
        for img in &images {
            // Start from garbage, so a skipped range would show.
            lo.fill("/dev/urandom", 8)?;
            let o = flash(&[img.as_os_str(), lo.dev.as_os_str()]);
            let what = format!(
                "{} on {sector}-byte sectors, direct-io {direct}",
                img.display()
            );
            ensure!(code(&o) == 0, "{what}: {}", show(&o));
            let j = json(&o)?;
            ensure!(
                j["devices"][0]["verified"] == true && j["image_bytes"] == data.len() as u64,
                "{what}: {j}"
            );
            ensure!(
                device_bytes(&lo.dev, data.len())? == data,
                "{what}: the device differs"
            );
        }
    }
    Ok(())
}

/// Verification reads the device, not the page cache. kopiru is held after
/// its last flush (strace delays the second fsync's return, and the test
/// waits until it is held); meanwhile the device's
/// page cache is filled with the written data and the backing file is
/// changed behind it: a buffered `cmp` still sees the image, kopiru sees the
/// change, at the right offset.
pub fn verify_reads_device() -> R {
    let dir = fixture::run_root().join("flash-verify");
    std::fs::create_dir_all(&dir)?;
    let data = trees::bytes(6 << 20, 12); // whole MiBs: no tail, two fsyncs
    let img = dir.join("image.raw");
    std::fs::write(&img, &data)?;
    let lo = Loop::new("verify", 16, 512, false)?;
    let (inject, trace) = ("fsync:delay_exit=10000000:when=2", dir.join("fsync.trace"));
    let mut child = crate::kopiru_held(inject, &trace)
        .args(["flash", "--json", "--yes", "--no-progress"])
        .arg(&img)
        .arg(&lo.dev)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    crate::wait_held(&trace, inject, &mut child)?;
    std::fs::read(&lo.dev)?; // the device's page cache now holds the image
    let back = std::fs::OpenOptions::new().write(true).open(&lo.backing)?;
    back.write_all_at(&[0xAA; 4096], 3 << 20)?;
    back.sync_all()?;
    let cached = Command::new("cmp")
        .arg("-n")
        .arg(data.len().to_string())
        .arg(&img)
        .arg(&lo.dev)
        .output()?;
    crate::still_held(&mut child, inject)?;
    let o = child.wait_with_output()?;
    ensure!(
        cached.status.success(),
        "the page cache did not keep the written data; the test proves nothing"
    );
    let j = json(&o)?;
    ensure!(code(&o) == 1, "want exit 1: {}", show(&o));
    ensure!(
        j["devices"][0]["verified"] == false && j["devices"][0]["mismatch_at"] == 3u64 << 20,
        "{j}"
    );
    fails_with(&o, 1, "differs from the image at offset 3145728")?;
    Ok(())
}

/// Several devices from one read; one of them too small for a compressed
/// image (its size is unknown until the end) fails, the others finish.
pub fn several_devices() -> R {
    let dir = fixture::run_root().join("flash-multi");
    std::fs::create_dir_all(&dir)?;
    let data = trees::bytes(12 << 20, 13);
    let raw = dir.join("image.raw");
    std::fs::write(&raw, &data)?;
    // Compressed from a pipe, zstd records no size in its frame: that a
    // device is too small is found only while writing it.
    let zst = dir.join("image.raw.zst");
    fixture::sh(Command::new("sh").arg("-c").arg(format!(
        "zstd -q -c < '{}' > '{}'",
        raw.display(),
        zst.display()
    )))?;
    let a = Loop::new("multi-a", 16, 512, false)?;
    let b = Loop::new("multi-b", 16, 4096, true)?;
    let small = Loop::new("multi-small", 8, 512, false)?;
    let o = flash(&[
        zst.as_os_str(),
        a.dev.as_os_str(),
        small.dev.as_os_str(),
        b.dev.as_os_str(),
    ]);
    ensure!(code(&o) == 23, "want exit 23: {}", show(&o));
    let j = json(&o)?;
    let devs = j["devices"].as_array().cloned().unwrap_or_default();
    ensure!(devs.len() == 3, "{j}");
    for d in &devs {
        let small_one = d["path"] == small.dev.to_string_lossy().as_ref();
        if small_one {
            ensure!(
                d["error"]["message"]
                    .as_str()
                    .is_some_and(|e| e.contains("too small")),
                "{j}"
            );
        } else {
            ensure!(d["verified"] == true, "{j}");
        }
    }
    for lo in [&a, &b] {
        ensure!(
            device_bytes(&lo.dev, data.len())? == data,
            "{} differs",
            lo.dev.display()
        );
    }
    // A regular file target with --file: created, exact, ending with the
    // image.
    let out = dir.join("copy.img");
    let o = flash(&[OsStr::new("--file"), raw.as_os_str(), out.as_os_str()]);
    ensure!(code(&o) == 0, "{}", show(&o));
    ensure!(std::fs::read(&out)? == data, "the file differs");
    Ok(())
}

/// A sparse image with a block map.
pub(crate) struct Sparse {
    pub img: PathBuf,
    pub map: PathBuf,
    /// Where its data is: (offset, length).
    pub ranges: [(u64, usize); 3],
}

/// A 16 MiB sparse image `sparse.img` in `dir` with three ranges of data,
/// and its block map `sparse.bmap` (made by bmaptool).
pub(crate) fn sparse_with_map(dir: &Path) -> Result<Sparse, Failed> {
    let img = dir.join("sparse.img");
    let f = std::fs::File::create(&img)?;
    f.set_len(16 << 20)?;
    let ranges: [(u64, usize); 3] = [(0, 8192), (300 * 4096, 5 * 4096), (9_000_000, 1000)];
    for (i, &(off, len)) in ranges.iter().enumerate() {
        f.write_all_at(&trees::bytes(len, 20 + i as u64), off)?;
    }
    drop(f);
    let map = dir.join("sparse.bmap");
    fixture::sh(
        Command::new("bmaptool")
            .arg("create")
            .arg(&img)
            .arg("-o")
            .arg(&map),
    )?;
    Ok(Sparse { img, map, ranges })
}

/// The 512-byte sectors of `after` that are neither the image's `data`
/// where the map's `ranges` are (in whole 4 KiB blocks, as bmaptool maps)
/// nor what the device held `before` elsewhere.
pub(crate) fn not_as_mapped(
    ranges: &[(u64, usize)],
    data: &[u8],
    before: &[u8],
    after: &[u8],
) -> usize {
    let mapped = |o: usize| {
        ranges.iter().any(|&(a, l)| {
            let a = a as usize / 4096 * 4096;
            let b = (a + l).div_ceil(4096) * 4096;
            (a..b).contains(&o)
        })
    };
    (0..data.len())
        .step_by(512)
        .filter(|&o| {
            let want = if mapped(o) { &data[o..o + 512] } else { &before[o..o + 512] };
            after[o..o + 512] != *want
        })
        .count()
}

/// With a block map (made by bmaptool) exactly the mapped ranges are
/// written, on a 4096-byte-sector device: the rest keeps what was there. A
/// range whose bytes do not match the map's checksum fails the flash before
/// the first MiB is written; an edited map is refused.
pub fn bmap() -> R {
    let dir = fixture::run_root().join("flash-bmap");
    std::fs::create_dir_all(&dir)?;
    let Sparse { img, map, ranges } = sparse_with_map(&dir)?;
    let data = std::fs::read(&img)?;
    let lo = Loop::new("bmap", 32, 4096, true)?;
    lo.fill("/dev/urandom", 32)?;
    let before = device_bytes(&lo.dev, data.len())?;
    let o = flash(&[
        OsStr::new("--bmap"),
        map.as_os_str(),
        img.as_os_str(),
        lo.dev.as_os_str(),
    ]);
    ensure!(code(&o) == 0, "{}", show(&o));
    ensure!(json(&o)?["devices"][0]["verified"] == true, "{}", show(&o));
    let after = device_bytes(&lo.dev, data.len())?;
    let wrong = not_as_mapped(&ranges, &data, &before, &after);
    ensure!(wrong == 0, "{wrong} sectors are not what the map says");

    // The image changed after the map was made: caught, first MiB untouched.
    let f = std::fs::OpenOptions::new().write(true).open(&img)?;
    f.write_all_at(b"changed", 300 * 4096 + 10)?;
    drop(f);
    let head_before = device_bytes(&lo.dev, 1 << 20)?;
    let o = flash(&[
        OsStr::new("--bmap"),
        map.as_os_str(),
        img.as_os_str(),
        lo.dev.as_os_str(),
    ]);
    fails_with(&o, 1, "do not match the checksum in the bmap file")?;
    ensure!(
        device_bytes(&lo.dev, 1 << 20)? == head_before,
        "the first MiB was written"
    );

    // An edited map.
    let text = std::fs::read_to_string(&map)?.replace("> 300-304 <", "> 300-305 <");
    std::fs::write(&map, text)?;
    let o = flash(&[
        OsStr::new("--bmap"),
        map.as_os_str(),
        img.as_os_str(),
        lo.dev.as_os_str(),
    ]);
    fails_with(&o, 2, "own checksum does not match")?;
    Ok(())
}

/// `--zero-first` (BLKZEROOUT, then all-zero blocks skipped) and `--zeroed`
/// give an exact device from a mostly-zero image; `--skip-identical`
/// rewrites only what differs.
pub fn zeros_and_identical() -> R {
    let dir = fixture::run_root().join("flash-zeros");
    std::fs::create_dir_all(&dir)?;
    let img = dir.join("sparse.img");
    let f = std::fs::File::create(&img)?;
    f.set_len(20 << 20)?;
    f.write_all_at(&trees::bytes(3 << 16, 30), 10 << 16)?;
    f.write_all_at(&trees::bytes(1000, 31), 15 << 20)?;
    drop(f);
    let data = std::fs::read(&img)?;
    let lo = Loop::new("zeros", 32, 512, false)?;
    lo.fill("/dev/urandom", 32)?;
    let o = flash(&[
        OsStr::new("--zero-first"),
        img.as_os_str(),
        lo.dev.as_os_str(),
    ]);
    ensure!(code(&o) == 0, "{}", show(&o));
    ensure!(
        device_bytes(&lo.dev, data.len())? == data,
        "--zero-first: the device differs"
    );

    lo.fill("/dev/zero", 32)?;
    let o = flash(&[OsStr::new("--zeroed"), img.as_os_str(), lo.dev.as_os_str()]);
    ensure!(code(&o) == 0, "{}", show(&o));
    ensure!(
        device_bytes(&lo.dev, data.len())? == data,
        "--zeroed: the device differs"
    );

    // One 4 KiB block changed behind our back: only its chunk is rewritten.
    fixture::sh(
        Command::new("dd")
            .args([
                "if=/dev/urandom",
                "bs=4096",
                "count=1",
                "seek=700",
                "oflag=direct",
            ])
            .args(["conv=notrunc", "status=none"])
            .arg(format!("of={}", lo.dev.display())),
    )?;
    let o = flash(&[
        OsStr::new("--skip-identical"),
        img.as_os_str(),
        lo.dev.as_os_str(),
    ]);
    ensure!(code(&o) == 0, "{}", show(&o));
    let same = json(&o)?["devices"][0]["identical_bytes"]
        .as_u64()
        .unwrap_or(0);
    ensure!(
        same >= (data.len() - (4 << 20)) as u64 && same < data.len() as u64,
        "{same} of {} bytes left as they were: {}",
        data.len(),
        show(&o)
    );
    ensure!(
        device_bytes(&lo.dev, data.len())? == data,
        "--skip-identical: the device differs"
    );
    Ok(())
}

/// A write that fails (EIO injected on the second one) is reported with
/// its offset; the device is not verified, the first MiB not written, and
/// the exit code says nothing was written correctly.
pub fn io_error() -> R {
    let dir = fixture::run_root().join("flash-eio");
    std::fs::create_dir_all(&dir)?;
    let data = trees::bytes(12 << 20, 40);
    let img = dir.join("image.raw");
    std::fs::write(&img, &data)?;
    let lo = Loop::new("eio", 16, 512, false)?;
    let head_before = device_bytes(&lo.dev, 1 << 20)?;
    let o = crate::kopiru_injected("pwrite64:error=EIO:when=2")
        .args(["flash", "--json", "--yes", "--no-progress"])
        .arg(&img)
        .arg(&lo.dev)
        .output()?;
    ensure!(code(&o) == 1, "want exit 1: {}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    ensure!(
        err.contains(&format!("{}: write at offset", lo.dev.display()))
            && err.contains("Input/output error"),
        "{}",
        show(&o)
    );
    ensure!(
        device_bytes(&lo.dev, 1 << 20)? == head_before,
        "the first MiB was written"
    );
    Ok(())
}

/// The whole device's bytes (O_DIRECT), to compare before and after.
pub(crate) fn whole_device(lo: &Loop) -> Result<Vec<u8>, Failed> {
    let len = std::fs::metadata(&lo.backing)?.len() as usize;
    device_bytes(&lo.dev, len)
}

/// A single-block `xz -6` image of 256 MiB streams in bounded memory: the
/// decoder needs its 8 MiB dictionary, kopiru at most 16 MiB more (once,
/// the whole block was held: 516 MiB). A multi-block one keeps --memory
/// (once it took 43 MiB under --memory 32M). The device ends up byte-exact.
pub fn xz_single_block_memory() -> R {
    use std::io::Write;
    const MIB: u64 = 256;
    const DICT: u64 = 8 << 20; // xz -6
    let dir = fixture::run_root().join("flash-xz-memory");
    std::fs::create_dir_all(&dir)?;
    let raw = dir.join("image.raw");
    let xz = dir.join("image.raw.xz");
    // Text lines with a block number every 4 KiB: real-ish, and xz -6
    // compresses it in seconds (real files would take minutes here).
    let line = b"kopiru flash: a line of text in a disk image, compressed as one xz block\n";
    let mut w = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&raw)?);
    let mut block = Vec::with_capacity(4096);
    for i in 0..(MIB << 8) {
        block.clear();
        writeln!(block, "block {i:012}")?;
        while block.len() < 4096 {
            let n = line.len().min(4096 - block.len());
            block.extend_from_slice(&line[..n]);
        }
        w.write_all(&block)?;
    }
    w.flush()?;
    drop(w);
    // -T1: one block, no sizes in its header (xz 5.6 defaults to -T0).
    let out = std::fs::File::create(&xz)?;
    let st = Command::new("xz")
        .args(["-6", "-T1", "-c"])
        .arg(&raw)
        .stdout(out)
        .status()?;
    ensure!(st.success(), "xz -6 failed");
    let list = fixture::sh(Command::new("xz").args(["--robot", "--list"]).arg(&xz))?;
    let blocks = list
        .lines()
        .find_map(|l| l.strip_prefix("totals\t"))
        .and_then(|t| t.split('\t').nth(1))
        .unwrap_or("?");
    ensure!(
        blocks == "1",
        "want one block, xz --list says {blocks}:\n{list}"
    );

    let lo = Loop::new("xz-memory", MIB + 4, 512, true)?;
    let peak = flash_peak(&xz, &lo, &[], MIB << 20)?;
    // Plus 4 MiB for the program itself (code, libc, stacks), as below: the
    // debug binary with the HTTP/TLS client (issue 30) peaks 2.7 MiB higher
    // here (26.8 MiB; main's 24.0), the release one 0.4 MiB (19.2 MiB).
    let bound = DICT + (16 << 20) + (4 << 20);
    ensure!(
        peak <= bound,
        "peak RSS {} KiB, over the bound {} KiB (dictionary + 16 MiB + 4 MiB of program)",
        peak >> 10,
        bound >> 10
    );
    // A multi-block image (xz -T2 -3: 4 MiB dictionary, blocks of 12 MiB
    // that record their sizes) with --memory 32M: the budget holds, kopiru's
    // own buffers counted (plus 4 MiB for the program itself: code, libc,
    // stacks). Where threads fit the budget they may decode; on two CPUs
    // one does (the writer has the other), in the dictionary and 16 MiB.
    let multi = dir.join("image-mt.raw.xz");
    let out = std::fs::File::create(&multi)?;
    let st = Command::new("xz")
        .args(["-3", "-T2", "-c"])
        .arg(&raw)
        .stdout(out)
        .status()?;
    ensure!(st.success(), "xz -3 -T2 failed");
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let bound = match cpus {
        // One decoder thread: the dictionary (4 MiB) and 16 MiB, and 4 MiB
        // for the program as on more CPUs (22.9 MiB measured with the
        // HTTP/TLS client linked in, issue 30).
        ..=2 => (4 << 20) + (16 << 20) + (4 << 20),
        _ => (32 << 20) + (4 << 20),
    };
    let peak = flash_peak(&multi, &lo, &["--memory", "32M"], MIB << 20)?;
    ensure!(
        peak <= bound,
        "peak RSS {} KiB with --memory 32M on {cpus} CPUs, over {} KiB",
        peak >> 10,
        bound >> 10
    );
    // Byte-exact, read around the page cache.
    let cmp = fixture::sh(Command::new("sh").arg("-c").arg(format!(
        "dd if='{}' iflag=direct bs=4M count={} status=none | cmp - '{}' && echo same",
        lo.dev.display(),
        MIB / 4,
        raw.display()
    )))?;
    ensure!(cmp.trim() == "same", "the device differs: {cmp}");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Flashes `image` onto `lo` with `args`, checks it verified `bytes`, and
/// returns kopiru's peak RSS in bytes: VmHWM of its own address space, read
/// until it exits (wait4's ru_maxrss would count this process's memory,
/// from before the exec, too). The peak is while decoding; the read-back
/// that follows takes seconds, so the last reading has it.
fn flash_peak(image: &Path, lo: &Loop, args: &[&str], bytes: u64) -> Result<u64, Failed> {
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_kopiru"))
        .args(["flash", "--json", "--yes", "--no-progress"])
        .args(args)
        .arg(image)
        .arg(&lo.dev)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let status_file = format!("/proc/{}/status", child.id());
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let (mut o, mut e) = (String::new(), String::new());
        let _ = std::io::Read::read_to_string(&mut stdout, &mut o);
        let _ = std::io::Read::read_to_string(&mut stderr, &mut e);
        (o, e)
    });
    let mut peak_kib = 0u64;
    let status = loop {
        if let Ok(s) = std::fs::read_to_string(&status_file) {
            let hwm = s
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok());
            peak_kib = peak_kib.max(hwm.unwrap_or(0));
        }
        if let Some(st) = child.try_wait()? {
            break st;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let (json_out, err) = out.join().unwrap_or_default();
    ensure!(
        status.success(),
        "kopiru flash failed ({status}): {json_out}\n{err}"
    );
    let j: serde_json::Value = serde_json::from_str(&json_out)?;
    ensure!(
        j["devices"][0]["verified"] == true && j["image_bytes"] == bytes,
        "{j}"
    );
    ensure!(peak_kib > 0, "no VmHWM read from {status_file}");
    Ok(peak_kib << 10)
}

/// Why the flash tests cannot run here, if they cannot: they need loop
/// devices and the compressors and sfdisk.
pub(crate) fn unavailable() -> Option<String> {
    fixture::loop_unavailable().or_else(|| {
        ["xz", "zstd", "bzip2", "gzip", "sfdisk"]
            .iter()
            .find(|t| !fixture::have(t))
            .map(|t| format!("{t} not installed (scripts/test.sh installs it)"))
    })
}

/// Why the tests that use bmaptool cannot run here, if they cannot.
pub(crate) fn bmaptool_unavailable() -> Option<String> {
    (!fixture::have("bmaptool"))
        .then(|| "bmaptool not installed (scripts/test.sh installs bmap-tools)".into())
}

/// Registers this module's trials.
pub fn trials(add: Add) {
    let needs = unavailable();
    add("flash_formats".into(), needs.clone(), Box::new(formats));
    add(
        "flash_xz_single_block_memory".into(),
        needs.clone(),
        Box::new(xz_single_block_memory),
    );
    add(
        "flash_verify_reads_device".into(),
        needs.clone().or_else(strace_unavailable),
        Box::new(verify_reads_device),
    );
    add(
        "flash_several_devices".into(),
        needs.clone(),
        Box::new(several_devices),
    );
    add(
        "flash_bmap".into(),
        needs.clone().or_else(bmaptool_unavailable),
        Box::new(bmap),
    );
    add(
        "flash_zeros_and_identical".into(),
        needs.clone(),
        Box::new(zeros_and_identical),
    );
    add(
        "flash_io_error".into(),
        needs.or_else(strace_unavailable),
        Box::new(io_error),
    );
}
