//! kopiru-slowfs: a *simulated* network share, for tests and benchmarks.
//!
//! A FUSE passthrough of ROOT at MNT that waits `--delay-ms` before each
//! metadata operation (lookup and getattr that reach it, create, mknod,
//! mkdir, open, opendir, flush (what `close` waits for), setattr, rename,
//! link, unlink, rmdir, symlink, readlink, fsync, statfs,
//! copy_file_range), as a round trip to a server would, and not before data
//! reads and writes. Operations run on a pool of threads (`--threads`), so
//! operations in flight overlap as they do on a server: N client threads get
//! about N times one thread's rate, up to the pool's size and the CPU.
//!
//! It is a simulation: no network, no server caches, no close-to-open
//! consistency beyond FUSE's own; the kernel caches lookups and attributes
//! for `--ttl-ms` (1 s by default), as an NFS client does.
//!
//! Usage: `kopiru-slowfs ROOT MNT [--delay-ms N] [--threads N] [--ttl-ms N]`;
//! runs in the foreground until MNT is unmounted (`fusermount3 -u MNT` or
//! `umount MNT`).

#[cfg(target_os = "linux")]
mod backing;
#[cfg(target_os = "linux")]
mod fs;

#[cfg(target_os = "linux")]
fn main() {
    std::process::exit(run());
}

#[cfg(target_os = "linux")]
use std::{path::PathBuf, time::Duration};

#[cfg(target_os = "linux")]
fn usage() -> i32 {
    eprintln!(
        "usage: kopiru-slowfs ROOT MNT [--delay-ms N] [--threads N] [--ttl-ms N]\n\
         A simulated network share: ROOT seen at MNT through FUSE, each metadata\n\
         operation delayed by --delay-ms (default 1), data reads and writes not.\n\
         Runs until MNT is unmounted."
    );
    2
}

#[cfg(target_os = "linux")]
fn run() -> i32 {
    let mut args = std::env::args_os().skip(1);
    let mut pos = Vec::new();
    let (mut delay_us, mut threads, mut ttl_ms) = (1000u64, 256usize, 1000u64);
    while let Some(a) = args.next() {
        let mut num = |what: &str| -> Option<f64> {
            let v = args.next()?.to_str()?.parse::<f64>().ok();
            if v.is_none() {
                eprintln!("kopiru-slowfs: {what} wants a number");
            }
            v
        };
        match a.to_str() {
            Some("--delay-ms") => match num("--delay-ms") {
                Some(v) => delay_us = (v * 1000.0) as u64,
                None => return usage(),
            },
            Some("--threads") => match num("--threads") {
                Some(v) if v >= 1.0 => threads = v as usize,
                _ => return usage(),
            },
            Some("--ttl-ms") => match num("--ttl-ms") {
                Some(v) => ttl_ms = v as u64,
                None => return usage(),
            },
            Some("-h" | "--help") => return usage(),
            _ => pos.push(PathBuf::from(a)),
        }
    }
    let [root, mnt] = &pos[..] else {
        return usage();
    };
    fs::mount(
        root,
        mnt,
        Duration::from_micros(delay_us),
        Duration::from_millis(ttl_ms),
        threads,
    )
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("kopiru-slowfs: Linux only (FUSE)");
    std::process::exit(2);
}
