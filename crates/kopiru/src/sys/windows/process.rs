//! The process's own state (umask, user, handle limit) and the questions
//! kopiru asks about other processes (alive? holding a lock?), as
//! `sys/process.rs` on Unix.

use std::io;
use std::os::windows::io::{FromRawHandle, OwnedHandle};

use windows_sys::Win32::Foundation::{
    CloseHandle, GetLastError, ERROR_ACCESS_DENIED, ERROR_ALREADY_EXISTS, STILL_ACTIVE,
};
use windows_sys::Win32::Storage::FileSystem::{
    GetFileInformationByHandle, BY_HANDLE_FILE_INFORMATION,
};
use windows_sys::Win32::System::Threading::{
    CreateEventW, GetExitCodeProcess, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION,
};

use super::{cvt, FdRef};

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

/// Locks the file or directory of `fd` for as long as `fd` stays open, as
/// `flock(LOCK_EX | LOCK_NB)` does on Unix (true: taken, or already held
/// through this same `fd`; false: held elsewhere). kopiru locks a staged
/// tree's directory so that a second kopiru copying to the same
/// destination at once leaves it alone. Windows cannot lock a directory's
/// bytes, so the lock is a named event, `Local\kopiru-lock-` and the
/// volume serial number and file index: such an object exists exactly
/// while a handle to it is open, and the holder's handle is kept in `fd`
/// (closed with it, or by Windows when the process dies, as a `flock` is
/// released). `Local\` is the logon session's namespace: runs in two
/// sessions are not kept apart.
pub fn try_lock(fd: FdRef) -> io::Result<bool> {
    if fd.lock.get().is_some() {
        return Ok(true);
    }
    // SAFETY: all-zero is a valid BY_HANDLE_FILE_INFORMATION (integers).
    let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: a handle borrowed from a live Fd; `info` a valid out-pointer.
    cvt(unsafe { GetFileInformationByHandle(fd.handle()?, &mut info) })?;
    let name = format!(
        "Local\\kopiru-lock-{:08x}-{:08x}{:08x}\0",
        info.dwVolumeSerialNumber, info.nFileIndexHigh, info.nFileIndexLow
    );
    let wname: Vec<u16> = name.encode_utf16().collect();
    // SAFETY: `wname` is NUL-terminated UTF-16 and outlives the call; no
    // security attributes; a manual-reset event, never signalled or waited on.
    let h = unsafe { CreateEventW(std::ptr::null(), 1, 0, wname.as_ptr()) };
    if h.is_null() {
        // SAFETY: read right after the failed CreateEventW.
        return match unsafe { GetLastError() } {
            // The event exists, made by a run we may not open (another
            // user, or elevated): held.
            ERROR_ACCESS_DENIED => Ok(false),
            _ => Err(super::last_error()),
        };
    }
    // SAFETY: read right after CreateEventW, which set it.
    let existed = unsafe { GetLastError() } == ERROR_ALREADY_EXISTS;
    // SAFETY: CreateEventW returned a handle that nothing else owns.
    let held = unsafe { OwnedHandle::from_raw_handle(h as _) };
    if existed {
        return Ok(false);
    }
    // Only this thread got Ok(true) from a fresh event on this fd, so the
    // cell is empty; were it not, the extra handle would be dropped.
    let _ = fd.lock.set(held);
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

/// Where a user's programs keep state: `%LOCALAPPDATA%`; `None` where it
/// is not set.
pub fn state_dir() -> Option<std::path::PathBuf> {
    let local = std::env::var_os("LOCALAPPDATA").filter(|d| !d.is_empty())?;
    Some(std::path::PathBuf::from(local))
}

#[cfg(test)]
mod tests {
    use super::super::{open_path, scratch, AsFd, OPEN_DIR_FLAGS};
    use super::try_lock;

    #[test]
    fn a_directory_lock_is_held_until_its_handle_closes() {
        let dir = scratch("lock");
        let a = open_path(&dir, OPEN_DIR_FLAGS).unwrap();
        assert!(try_lock(a.as_fd()).unwrap(), "the first lock is taken");
        assert!(try_lock(a.as_fd()).unwrap(), "held through the same handle");
        let b = open_path(&dir, OPEN_DIR_FLAGS).unwrap();
        assert!(
            !try_lock(b.as_fd()).unwrap(),
            "a second handle finds it held"
        );
        let other = scratch("lock-other");
        let c = open_path(&other, OPEN_DIR_FLAGS).unwrap();
        assert!(try_lock(c.as_fd()).unwrap(), "another directory is free");
        drop(a);
        assert!(
            try_lock(b.as_fd()).unwrap(),
            "free once the holder is closed"
        );
        drop((b, c));
        std::fs::remove_dir_all(dir).unwrap();
        std::fs::remove_dir_all(other).unwrap();
    }
}
