//! The only place with platform `#[cfg]`s. Everything above this module calls
//! these functions and reads the same on every OS; a platform that cannot do
//! something returns [`unsupported`] so the caller steps down its ladder.

// C types differ by platform (mode_t is u16 on macOS, u32 on Linux): casts
// that are no-ops on one are needed on the other.
#![allow(clippy::unnecessary_cast, clippy::useless_conversion)]

use std::ffi::{CStr, CString, OsStr};
use std::io;

mod unix;
pub use unix::*;

#[cfg(unix)]
mod process;
#[cfg(unix)]
pub use process::*;

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub use linux::*;

#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "macos")]
pub use macos::*;

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
compile_error!("kopiru supports Linux and macOS for now");

/// The error a platform returns for an operation it does not have.
pub fn unsupported() -> io::Error {
    io::Error::from_raw_os_error(libc::EOPNOTSUPP)
}

/// Whether an error from a clone or offload call means "this method does not
/// work here" (fall back to the next one) rather than a real failure. The list
/// is the union of GNU cp's `is_CLONENOTSUP` and Rust std's kernel_copy.
pub fn is_not_supported(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(
            libc::ENOSYS
                | libc::EXDEV
                | libc::EOPNOTSUPP
                | libc::EINVAL
                | libc::EPERM
                | libc::ETXTBSY
                | libc::ENOTTY
                | libc::EBADF
                | libc::EACCES
                | libc::EISDIR
        )
    ) || err.raw_os_error() == Some(libc::ENOTSUP)
}

/// A short name for an errno, for `--explain` ("EXDEV").
pub fn errno_name(err: &io::Error) -> &'static str {
    match err.raw_os_error() {
        Some(libc::EXDEV) => "EXDEV",
        Some(libc::ENOSYS) => "ENOSYS",
        Some(libc::EOPNOTSUPP) => "EOPNOTSUPP",
        Some(libc::EINVAL) => "EINVAL",
        Some(libc::EPERM) => "EPERM",
        Some(libc::ETXTBSY) => "ETXTBSY",
        Some(libc::ENOTTY) => "ENOTTY",
        Some(libc::EBADF) => "EBADF",
        Some(libc::EACCES) => "EACCES",
        Some(libc::EISDIR) => "EISDIR",
        _ => "error",
    }
}

/// A path component or path as the C string the kernel wants.
pub fn cstring(s: &OsStr) -> io::Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(s.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// A kernel name back as an `OsStr`, for messages and paths.
pub fn os_str(name: &CStr) -> &OsStr {
    use std::os::unix::ffi::OsStrExt;
    OsStr::from_bytes(name.to_bytes())
}

/// A name within a directory, as the OS takes it (a NUL-terminated byte
/// string on Unix). The tree code passes names only through these types.
#[cfg(unix)]
pub type Name = CStr;
/// An owned [`Name`].
#[cfg(unix)]
pub type NameBuf = CString;
/// The tree code borrows descriptors through this trait.
#[cfg(unix)]
pub use std::os::fd::AsFd;

/// The name of a directory itself.
#[cfg(unix)]
pub const DOT: &Name = c".";

/// A name made by kopiru (temporary names: ASCII, no NUL).
#[cfg(unix)]
pub fn name(s: &str) -> NameBuf {
    CString::new(s).expect("kopiru's own names have no NUL")
}

/// A name's bytes, for hashing and prefix checks.
#[cfg(unix)]
pub fn name_bytes(n: &Name) -> &[u8] {
    n.to_bytes()
}

/// The error of a directory met again while following links (ELOOP).
pub fn loop_error() -> io::Error {
    io::Error::from_raw_os_error(libc::ELOOP)
}

/// The raw code of a generic I/O error.
pub const EIO: i32 = libc::EIO;

/// Whether opening with "keep access times" was refused because we do not
/// own the file (EPERM; EACCES means the file cannot be read at all).
pub fn noatime_refused(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EPERM)
}
