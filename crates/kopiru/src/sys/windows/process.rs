//! The process's own state (umask, user, handle limit) and the questions
//! kopiru asks about other processes (alive? holding a lock?), as
//! `sys/process.rs` on Unix.

use std::io;

use windows_sys::Win32::Foundation::{
    CloseHandle, GetLastError, ERROR_ACCESS_DENIED, STILL_ACTIVE,
};
use windows_sys::Win32::System::Threading::{
    GetExitCodeProcess, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION,
};

use super::FdRef;

/// No umask on Windows.
pub fn umask() -> u32 {
    0
}

/// Whether a process with this id is running.
pub fn process_alive(pid: u32) -> bool {
    // SAFETY: OpenProcess takes any id; a null result is handled.
    let h = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid) };
    if h.is_null() {
        // Access denied means it exists; an invalid id means it does not.
        // SAFETY: read right after the failed OpenProcess.
        return unsafe { GetLastError() } == ERROR_ACCESS_DENIED;
    }
    let mut code = 0u32;
    // SAFETY: `h` is the process handle just opened; `code` a valid out-pointer.
    let ok = unsafe { GetExitCodeProcess(h, &mut code) };
    // SAFETY: `h` was opened above and is closed once.
    unsafe { CloseHandle(h) };
    ok == 0 || code == STILL_ACTIVE as u32
}

/// Not yet on Windows: always "taken". Unix locks a staged tree's
/// directory (`flock`) so that a second kopiru copying to the same
/// destination at the same time leaves it alone; Windows cannot lock a
/// directory's bytes, and two such runs are not kept apart there yet.
pub fn try_lock(_fd: FdRef) -> io::Result<bool> {
    Ok(true)
}

/// Owners are not kept on Windows: kopiru acts as if it may set them (and
/// [`fchown`] does nothing).
///
/// [`fchown`]: super::fchown
pub fn euid() -> u32 {
    0
}

/// Nothing: Windows has no per-process limit on handles to raise.
pub fn raise_fd_limit() {}
