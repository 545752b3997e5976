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
mod fs;

#[cfg(target_os = "linux")]
fn main() {
    std::process::exit(fs::main());
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("kopiru-slowfs: Linux only (FUSE)");
    std::process::exit(2);
}
