//! Copies onto a share: the simulated one, kopiru-slowfs (a FUSE
//! passthrough that delays each metadata operation by 1 ms; no network).

use super::fixture::{self, Fs};
use super::{code, json, show, Add, R};
use libtest_mimic::Failed;
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
        "shares::workers_double_while_the_rate_rises".into(),
        slowfs_unavailable(),
        Box::new(workers_follow_rate),
    );
    let ext4 = || Fs::Ext4.unavailable().or_else(super::strace_unavailable);
    add(
        "shares::timed_creates_raise_workers".into(),
        ext4().or_else(overlay_unavailable),
        Box::new(timed_creates),
    );
    add(
        "shares::slow_local_disk_is_no_share".into(),
        ext4().or_else(|| Fs::Btrfs.unavailable()),
        Box::new(slow_local_disk),
    );
}

/// Why overlayfs cannot be mounted here, if it cannot.
fn overlay_unavailable() -> Option<String> {
    let _ = Command::new("modprobe").arg("overlay").output();
    let known = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
    let has = known.lines().any(|l| l.split_whitespace().last() == Some("overlay"));
    (!has).then(|| "the kernel has no overlayfs (modprobe overlay failed)".into())
}

/// A filesystem whose type says nothing of where its operations go, and
/// with no block device behind it, is timed on its first creates: overlayfs
/// (its layers may be on any filesystem) over a local ext4, with every
/// `openat` delayed by 2 ms (strace's fault injection, standing in for a
/// server's round trips), gets the round-trip defaults, more workers than
/// CPUs, and says why; the same copy without the delay does not. Both
/// copies exact.
fn timed_creates() -> R {
    let w = fixture::workdir(Fs::Ext4, "timed-creates")?;
    let src = w.join("src");
    small_tree(&src, 12, 12, 1)?;
    let (lower, upper, work, mnt) = (w.join("lower"), w.join("upper"), w.join("work"), w.join("mnt"));
    for d in [&lower, &upper, &work, &mnt] {
        std::fs::create_dir_all(d)?;
    }
    let opts = format!(
        "lowerdir={},upperdir={},workdir={}",
        lower.display(),
        upper.display(),
        work.display()
    );
    fixture::sh(Command::new("mount").args(["-t", "overlay", "overlay", "-o", &opts]).arg(&mnt))?;
    let r = (|| -> R {
        let plain = mnt.join("plain");
        let o = super::kopiru(["copy".as_ref(), "--json".as_ref(), src.as_os_str(), plain.as_os_str()]);
        let j = json(&o)?;
        ensure!(
            code(&o) == 0
                && j["round_trip_filesystem"].is_null()
                && j["workers"].as_u64().is_some_and(|n| n <= cpus()),
            "a quick copy onto overlayfs took the round-trip defaults: {}",
            show(&o)
        );
        let slow = mnt.join("slow");
        let o = super::kopiru_injected("openat:delay_exit=2000")
            .args(["copy".as_ref(), "--json".as_ref(), src.as_os_str(), slow.as_os_str()])
            .output()?;
        let j = json(&o)?;
        let why = j["round_trip_filesystem"].as_str().unwrap_or_default();
        ensure!(
            code(&o) == 0
                && why.starts_with("overlayfs (timed: ")
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
    })();
    let unmounted = fixture::sh(Command::new("umount").arg(&mnt));
    r?;
    unmounted?;
    Ok(())
}

/// A slow local disk is no share: on a loop device's ext4 (a block device
/// behind it) and on Btrfs (an anonymous device number per subvolume,
/// known by its type), with every `openat` delayed by 2 ms, nothing is
/// timed: the copy keeps one worker per CPU, `--json` names no round-trip
/// filesystem, and the copy is exact. An SD card, a USB hard disk or a
/// busy machine would gain nothing from a share's 32 to 256 workers.
fn slow_local_disk() -> R {
    for fs in [Fs::Ext4, Fs::Btrfs] {
        let w = fixture::workdir(fs, "slow-local-disk")?;
        let src = w.join("src");
        small_tree(&src, 12, 12, 1)?;
        let dst = w.join("dst");
        let o = super::kopiru_injected("openat:delay_exit=2000")
            .args(["copy".as_ref(), "--json".as_ref(), src.as_os_str(), dst.as_os_str()])
            .output()?;
        let j = json(&o)?;
        ensure!(
            code(&o) == 0
                && j["round_trip_filesystem"].is_null()
                && j["workers"].as_u64().is_some_and(|n| n <= cpus())
                && j["worker_steps"] == serde_json::json!([]),
            "slow creates on a local {} were taken for a share: {}",
            fs.name(),
            show(&o)
        );
        let v = super::kopiru(["verify".as_ref(), src.as_os_str(), dst.as_os_str()]);
        ensure!(code(&v) == 0 && v.stdout.is_empty(), "{}", show(&v));
    }
    Ok(())
}

/// A fresh work directory `name`-PID under the temporary directory, with
/// its src (not made), root (the share's backing) and mnt.
fn share_dirs(name: &str) -> std::io::Result<(PathBuf, PathBuf, PathBuf, PathBuf)> {
    let w = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&w);
    let (src, root, mnt) = (w.join("src"), w.join("root"), w.join("mnt"));
    for d in [&root, &mnt] {
        std::fs::create_dir_all(d)?;
    }
    Ok((w, src, root, mnt))
}

/// `dirs` directories d00, d01, ... of `files` small files f00, f01, ...;
/// the file fNN of dDD holds "DD/NN\n" repeated up to `repeat` times (NN+1,
/// at most `repeat`): files of a few sizes.
fn small_tree(src: &Path, dirs: usize, files: usize, repeat: usize) -> std::io::Result<()> {
    for d in 0..dirs {
        let dir = src.join(format!("d{d:02}"));
        std::fs::create_dir_all(&dir)?;
        for f in 0..files {
            let line = format!("{d}/{f}\n");
            std::fs::write(dir.join(format!("f{f:02}")), line.repeat((f + 1).min(repeat)))?;
        }
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
        Mounted::serving(root, mnt, delay_ms, 256)
    }

    /// A share whose server works on at most `threads` operations at once.
    fn serving(root: &Path, mnt: &Path, delay_ms: &str, threads: u32) -> Result<Mounted, String> {
        let mut child = Command::new(slowfs_bin())
            .arg(root)
            .arg(mnt)
            .args(["--delay-ms", delay_ms, "--threads", &threads.to_string()])
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
    let (w, src, root, mnt) = share_dirs("kopiru-shares")?;
    // 24 directories of 12 small files, a larger file, a symlink.
    small_tree(&src, 24, 12, 12)?;
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
        ensure!(
            j["workers"].as_u64().is_some_and(|n| n <= 2) && j["worker_steps"] == serde_json::json!([]),
            "{}",
            show(&o)
        );
        let v = super::kopiru(["verify".as_ref(), src.as_os_str(), dst2.as_os_str()]);
        ensure!(code(&v) == 0 && v.stdout.is_empty(), "{}", show(&v));
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&w);
    r
}

/// The worker count on a share follows the rate: it starts at 32 and
/// doubles while a doubling raises the rate of finished entries by 15%.
/// Against a server of 256 threads (10 ms a metadata operation: the rate
/// is bound by round trips, not by the CPU, even with other tests running)
/// 64 workers finish more than 32; against one that works on 6 operations at once
/// (1 ms), more workers finish no more, and the count stops by the rule,
/// short of the cap of 256. Both copies exact, read behind the share.
fn workers_follow_rate() -> R {
    let (w, src, root, mnt) = share_dirs("kopiru-window")?;
    // 80 directories of 50 small files: enough work in flight for 128.
    small_tree(&src, 80, 50, 1)?;
    let copy = |delay_ms: &str, server_threads: u32, name: &str| -> Result<Vec<(u64, f64)>, Failed> {
        let share = Mounted::serving(&root, &mnt, delay_ms, server_threads)?;
        let dst = share.mnt.join(name);
        let o = super::kopiru(["copy".as_ref(), "--json".as_ref(), src.as_os_str(), dst.as_os_str()]);
        drop(share);
        let j = json(&o)?;
        ensure!(code(&o) == 0 && j["files"] == 80 * 50, "{}", show(&o));
        let behind = root.join(name);
        let v = super::kopiru(["verify".as_ref(), src.as_os_str(), behind.as_os_str()]);
        ensure!(code(&v) == 0 && v.stdout.is_empty(), "{}", show(&v));
        let steps: Vec<(u64, f64)> = j["worker_steps"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|s| {
                        let n = s["workers"].as_u64().unwrap_or(0);
                        (n, s["entries_per_second"].as_f64().unwrap_or(0.0))
                    })
                    .collect()
            })
            .unwrap_or_default();
        // The rule, step by step: each count is twice the one before,
        // which had raised the rate by 15% on its own predecessor.
        let doubling = steps.windows(2).all(|p| p[1].0 == (2 * p[0].0).min(256));
        let rose = steps.windows(3).all(|p| p[1].1 >= 1.15 * p[0].1);
        ensure!(
            // 32, or the CPU count where that is more.
            steps.first().is_some_and(|s| s.0 == 32u64.max(cpus())) && doubling && rose,
            "steps {steps:?} against the rule: {}",
            show(&o)
        );
        Ok(steps)
    };
    let r = (|| -> R {
        let wide = copy("10", 256, "wide")?;
        ensure!(
            wide.len() >= 2 && wide[1].1 >= 1.15 * wide[0].1,
            "with a server of 256 threads the count did not double: {wide:?}"
        );
        let narrow = copy("1", 6, "narrow")?;
        let stopped = match narrow.as_slice() {
            [.., a, b] => b.0 < 256 && b.1 < 1.15 * a.1,
            _ => false,
        };
        ensure!(
            stopped,
            "against a server of 6 threads the count did not stop by the rule: {narrow:?}"
        );
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&w);
    r
}
