//! The process's own state: umask, user, descriptor limit, and the
//! questions kopiru asks about other processes (alive? holding a lock?).

use super::{cvt, FdRef};
use std::io;
use std::os::fd::AsRawFd;

/// Descriptor-table size reserved at start: each queued directory holds
/// two descriptors, so this covers a few thousand queued directories.
const FD_TABLE_RESERVE: libc::rlim_t = 16384;

/// The process umask, read once (it can only be read by setting it).
pub fn umask() -> u32 {
    // SAFETY: umask only swaps the process's mask; it is put back at once.
    let old = unsafe { libc::umask(0o022) };
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    old as u32
}

/// Whether a process with this id is running on this machine (ids that
/// are no process's, 0 and above `i32::MAX`, count as running: what they
/// name is left alone).
pub fn process_alive(pid: u32) -> bool {
    if pid == 0 || pid > i32::MAX as u32 {
        return true;
    }
    // SAFETY: signal 0 only checks that the process exists.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    r == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Takes an exclusive lock on an open file or directory without waiting
/// (`flock`): held by this open file description (and its duplicates)
/// until the last of them is closed, whatever happens to the process.
/// `Ok(false)`: another holds it.
pub fn try_lock(fd: FdRef) -> io::Result<bool> {
    // SAFETY: flock on a descriptor we borrow; no memory is passed.
    match cvt(unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) }) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The effective user id.
pub fn euid() -> u32 {
    // SAFETY: geteuid cannot fail and touches no memory.
    unsafe { libc::geteuid() }
}

/// Raises the soft limit on open files to the hard limit: the parallel walk
/// keeps two descriptors per directory in progress.
pub fn raise_fd_limit() {
    // SAFETY: rlimit is plain data, zeroed is valid; get/setrlimit write
    // only into it, and dup2 targets a descriptor number we do not use.
    unsafe {
        let mut lim = std::mem::zeroed::<libc::rlimit>();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return;
        }
        if lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max.min(1 << 20);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
        // Grow the descriptor table now, while it is cheap. Linux grows it
        // by doubling as descriptors are opened, and in a process with
        // several threads each growth waits for an RCU grace period
        // (milliseconds): on a node_modules tree the workers slept ~20 ms
        // in `expand_files` while directories were queued. A descriptor
        // at a high number makes the kernel size the table for it once
        // (F_DUPFD takes the first free number from there: nothing open is
        // replaced).
        let top = (lim.rlim_cur.min(FD_TABLE_RESERVE) as libc::c_int) - 1;
        if top > 2 {
            let fd = libc::fcntl(2, libc::F_DUPFD_CLOEXEC, top);
            if fd >= 0 {
                libc::close(fd);
            }
        }
    }
}

/// Where a user's programs keep state: `$XDG_STATE_HOME`, or
/// `~/.local/state`; `None` without a home.
pub fn state_dir() -> Option<std::path::PathBuf> {
    use std::path::PathBuf;
    match std::env::var_os("XDG_STATE_HOME") {
        Some(d) if !d.is_empty() => Some(PathBuf::from(d)),
        _ => Some(PathBuf::from(std::env::var_os("HOME")?).join(".local/state")),
    }
}
