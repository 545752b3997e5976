//! Operations on the backing files (Linux): their errors as FUSE's errno,
//! their kinds and times as FUSE's, and their descriptors.

use fuser::{FileType, TimeOrNow};
use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::io::FromRawFd;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub(super) fn errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

pub(super) fn cpath(p: &Path) -> Result<CString, i32> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| libc::EINVAL)
}

pub(super) fn last_errno() -> i32 {
    errno(&io::Error::last_os_error())
}

pub(super) fn time(secs: i64, nsecs: i64) -> SystemTime {
    match secs >= 0 {
        true => UNIX_EPOCH + Duration::new(secs as u64, nsecs as u32),
        false => UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs()),
    }
}

pub(super) fn kind(t: fs::FileType) -> FileType {
    if t.is_dir() {
        FileType::Directory
    } else if t.is_symlink() {
        FileType::Symlink
    } else if t.is_fifo() {
        FileType::NamedPipe
    } else if t.is_socket() {
        FileType::Socket
    } else if t.is_block_device() {
        FileType::BlockDevice
    } else if t.is_char_device() {
        FileType::CharDevice
    } else {
        FileType::RegularFile
    }
}

/// Calls `f` with the descriptor `fh` (an open backing file), not closing it.
pub(super) fn with_fd<T>(fh: u64, f: impl FnOnce(&fs::File) -> T) -> T {
    // SAFETY: `fh` is a descriptor this process opened (create, open) and
    // keeps open until release; ManuallyDrop keeps it from being closed here.
    let file = std::mem::ManuallyDrop::new(unsafe { fs::File::from_raw_fd(fh as i32) });
    f(&file)
}

pub(super) fn open_fd(path: &Path, flags: i32, mode: u32) -> Result<u64, i32> {
    let c = cpath(path)?;
    // O_DIRECT is the kernel's business here (its reads come through FUSE
    // in any case); on the backing file it would want aligned buffers.
    let flags = (flags & !libc::O_DIRECT) | libc::O_CLOEXEC;
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    let fd = unsafe { libc::open(c.as_ptr(), flags, mode) };
    match fd < 0 {
        true => Err(last_errno()),
        false => Ok(fd as u64),
    }
}

pub(super) fn set_times(
    path: &Path,
    atime: Option<TimeOrNow>,
    mtime: Option<TimeOrNow>,
) -> Result<(), i32> {
    let ts = |t: Option<TimeOrNow>| match t {
        None => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        Some(TimeOrNow::Now) => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        },
        Some(TimeOrNow::SpecificTime(t)) => {
            let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
            libc::timespec {
                tv_sec: d.as_secs() as libc::time_t,
                tv_nsec: d.subsec_nanos() as _,
            }
        }
    };
    let times = [ts(atime), ts(mtime)];
    let c = cpath(path)?;
    // SAFETY: `c` is NUL-terminated and `times` holds two timespecs, both
    // alive for the call.
    let r = unsafe {
        libc::utimensat(
            libc::AT_FDCWD,
            c.as_ptr(),
            times.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    match r {
        0 => Ok(()),
        _ => Err(last_errno()),
    }
}
