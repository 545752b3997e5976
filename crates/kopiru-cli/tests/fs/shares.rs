//! Copies onto a share: the simulated one, kopiru-slowfs (a FUSE
//! passthrough that delays each metadata operation by 1 ms; no network).

use super::{code, json, show, Add, R};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub fn trials(add: Add) {
    add(
        "shares::slowfs_copy_exact_with_more_workers".into(),
        slowfs_unavailable(),
        Box::new(slowfs_copy),
    );
    add(
        "shares::timed_creates_raise_workers".into(),
        super::strace_unavailable(),
        Box::new(timed_creates),
    );
}

/// A share whose type `statfs` does not name is found by timing its first
/// creates: with every `openat` delayed by 2 ms (strace's fault injection,
/// standing in for a server's round trips) a copy on a local ext4 gets the
/// round-trip defaults, more workers than CPUs, and says why; the same
/// copy without the delay does not. Both copies exact.
fn timed_creates() -> R {
    use super::fixture::{self, Fs};
    let w = fixture::workdir(Fs::Ext4, "timed-creates")?;
    let src = w.join("src");
    for d in 0..12 {
        let dir = src.join(format!("d{d:02}"));
        std::fs::create_dir_all(&dir)?;
        for f in 0..12 {
            std::fs::write(dir.join(format!("f{f:02}")), format!("{d}/{f}\n"))?;
        }
    }
    let plain = w.join("plain");
    let o = super::kopiru(["copy".as_ref(), "--json".as_ref(), src.as_os_str(), plain.as_os_str()]);
    let j = json(&o)?;
    ensure!(
        code(&o) == 0
            && j["round_trip_filesystem"].is_null()
            && j["workers"].as_u64().is_some_and(|n| n <= cpus()),
        "a local copy took the round-trip defaults: {}",
        show(&o)
    );
    let slow = w.join("slow");
    let o = super::kopiru_injected("openat:delay_exit=2000")
        .args(["copy".as_ref(), "--json".as_ref(), src.as_os_str(), slow.as_os_str()])
        .output()?;
    let j = json(&o)?;
    let why = j["round_trip_filesystem"].as_str().unwrap_or_default();
    ensure!(
        code(&o) == 0
            && why.starts_with("ext4 (timed: ")
            // Raised mid-run: workers start as later directories queue
            // work, which these 12 directories give them.
            && j["workers"].as_u64().is_some_and(|n| n > cpus())
            // Timed, the filesystem may be local: its offloads are not
            // claimed as the server's.
            && j["server_side_files"] == 0,
        "slow creates were not told: {}",
        show(&o)
    );
    for dst in [&plain, &slow] {
        let v = super::kopiru(["verify".as_ref(), src.as_os_str(), dst.as_os_str()]);
        ensure!(code(&v) == 0 && v.stdout.is_empty(), "{}", show(&v));
    }
    Ok(())
}

/// The workers kopiru starts by default on a local disk: one per CPU (2
/// where the count is unknown, as the engine's par::workers says).
fn cpus() -> u64 {
    std::thread::available_parallelism().map_or(2, |n| n.get() as u64)
}

/// kopiru-slowfs, built beside kopiru (`cargo build -p kopiru-slowfs`).
fn slowfs_bin() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_kopiru")).with_file_name("kopiru-slowfs")
}

fn slowfs_unavailable() -> Option<String> {
    // SAFETY: a plain libc call without arguments.
    if unsafe { libc::geteuid() } != 0 && !super::fixture::have("fusermount3") {
        return Some("not root and no fusermount3 (apt-get install fuse3)".into());
    }
    if !Path::new("/dev/fuse").exists() {
        return Some("no /dev/fuse: the kernel has no FUSE here".into());
    }
    if !slowfs_bin().exists() {
        return Some(format!(
            "{} not built (cargo build -p kopiru-slowfs; scripts/test.sh does)",
            slowfs_bin().display()
        ));
    }
    None
}

/// A mounted kopiru-slowfs, unmounted when dropped.
struct Mounted {
    child: Child,
    mnt: PathBuf,
}

impl Mounted {
    fn new(root: &Path, mnt: &Path, delay_ms: &str) -> Result<Mounted, String> {
        let mut child = Command::new(slowfs_bin())
            .arg(root)
            .arg(mnt)
            .args(["--delay-ms", delay_ms])
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("kopiru-slowfs: {e}"))?;
        // It says so once mounted.
        let mut line = String::new();
        let out = child.stdout.take().expect("piped");
        std::io::BufReader::new(out)
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        let m = Mounted {
            child,
            mnt: mnt.to_path_buf(),
        };
        match line.starts_with("kopiru-slowfs:") {
            true => Ok(m),
            false => Err(format!("kopiru-slowfs did not mount: {line:?}")),
        }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let unmounted = Command::new("umount")
            .arg(&self.mnt)
            .status()
            .is_ok_and(|s| s.success());
        if !unmounted {
            let _ = Command::new("fusermount3")
                .args(["-u", "-z"])
                .arg(&self.mnt)
                .status();
        }
        let _ = self.child.wait();
    }
}

fn slowfs_copy() -> R {
    let w = std::env::temp_dir().join(format!("kopiru-shares-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&w);
    let (src, root, mnt) = (w.join("src"), w.join("root"), w.join("mnt"));
    for d in [&root, &mnt] {
        std::fs::create_dir_all(d)?;
    }
    // 24 directories of 12 small files, a larger file, a symlink.
    for d in 0..24 {
        let dir = src.join(format!("d{d:02}"));
        std::fs::create_dir_all(&dir)?;
        for f in 0..12 {
            std::fs::write(dir.join(format!("f{f:02}")), format!("{d}/{f}\n").repeat(f + 1))?;
        }
    }
    std::fs::write(src.join("big"), vec![7u8; 3 << 20])?;
    std::os::unix::fs::symlink("d00/f00", src.join("link"))?;
    let r = (|| -> R {
        let share = Mounted::new(&root, &mnt, "1")?;
        let dst = share.mnt.join("dst");
        let o = super::kopiru([
            "copy".as_ref(),
            "--json".as_ref(),
            src.as_os_str(),
            dst.as_os_str(),
        ]);
        let j = json(&o)?;
        ensure!(code(&o) == 0 && j["files"] == 24 * 12 + 1, "{}", show(&o));
        // Timing-free evidence: the default ran more workers than the
        // machine's CPUs would give it (one per CPU; 2 here), and said why.
        let workers = j["workers"].as_u64().unwrap_or(0);
        // From a local disk, no byte can be the server's to copy.
        ensure!(
            workers > cpus() && j["round_trip_filesystem"] == "fuse" && j["server_side_files"] == 0,
            "workers {workers}, {}",
            show(&o)
        );
        let v = super::kopiru(["verify".as_ref(), src.as_os_str(), dst.as_os_str()]);
        ensure!(code(&v) == 0 && v.stdout.is_empty(), "{}", show(&v));
        // -j still fixes the count.
        let dst2 = share.mnt.join("dst2");
        let o = super::kopiru([
            "copy".as_ref(),
            "-j".as_ref(),
            "2".as_ref(),
            "--json".as_ref(),
            "--explain".as_ref(),
            src.as_os_str(),
            dst2.as_os_str(),
        ]);
        ensure!(code(&o) == 0, "{}", show(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        ensure!(
            out.contains("ran: on fuse, where each operation is a round trip"),
            "{}",
            show(&o)
        );
        let last = out.lines().last().unwrap_or_default();
        let j: serde_json::Value = serde_json::from_str(last)?;
        ensure!(j["workers"].as_u64().is_some_and(|n| n <= 2), "{}", show(&o));
        let v = super::kopiru(["verify".as_ref(), src.as_os_str(), dst2.as_os_str()]);
        ensure!(code(&v) == 0 && v.stdout.is_empty(), "{}", show(&v));
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&w);
    r
}
