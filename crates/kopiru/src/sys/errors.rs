//! Error codes the engine above `sys` tests or makes, by what they mean.
//!
//! These are written once with the C library's errno values, as the
//! callers wrote them before they moved here. On Windows `libc`'s values
//! are the C runtime's errno numbers, while `raw_os_error` there holds a
//! Win32 error: the checks below compare and make the same numbers there
//! as before (ENOENT is 2 in both tables, ERROR_FILE_NOT_FOUND; the others
//! do not name the same error).

use std::io;

/// Whether an error says the name is not there (ENOENT).
pub fn is_not_found(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENOENT)
}

/// The error of an operation stopped because it was cancelled (ECANCELED).
pub fn cancelled() -> io::Error {
    io::Error::from_raw_os_error(libc::ECANCELED)
}

/// Whether an error is [`cancelled`]'s.
#[cfg_attr(windows, allow(dead_code))] // flash and image only, Unix-only
pub fn is_cancelled(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ECANCELED)
}

/// The error of an argument the OS would not take (EINVAL).
pub fn invalid_argument() -> io::Error {
    io::Error::from_raw_os_error(libc::EINVAL)
}

/// Whether listing a file's extended attributes failed because its
/// filesystem has none (EOPNOTSUPP).
pub fn xattrs_unsupported(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EOPNOTSUPP)
}

/// Whether a clone or offload error says the method does not work on this
/// filesystem (or between these two) at all, rather than for this one file:
/// EXDEV, ENOSYS, EOPNOTSUPP, ENOTTY, ENOTSUP.
pub fn is_filesystem_wide(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EXDEV | libc::ENOSYS | libc::EOPNOTSUPP | libc::ENOTTY)
    ) || e.raw_os_error() == Some(libc::ENOTSUP)
}

/// Whether a trial clone was refused because cloning does not work here
/// (as opposed to failing for another reason): EXDEV, EOPNOTSUPP, ENOTTY,
/// ENOSYS, EINVAL, ENOTSUP.
pub fn clone_refused(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EXDEV | libc::EOPNOTSUPP | libc::ENOTTY | libc::ENOSYS | libc::EINVAL)
    ) || e.raw_os_error() == Some(libc::ENOTSUP)
}
