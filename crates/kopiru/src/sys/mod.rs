//! The only place with platform `#[cfg]`s. Everything above this module calls
//! these functions and reads the same on every OS; a platform that cannot do
//! something returns [`unsupported`] so the caller steps down its ladder.

// C types differ by platform (mode_t is u16 on macOS, u32 on Linux): casts
// that are no-ops on one are needed on the other.
#![allow(clippy::unnecessary_cast, clippy::useless_conversion)]

use std::ffi::{CStr, CString, OsStr};
use std::io;

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use unix::*;

#[cfg(unix)]
mod mapping;
#[cfg(unix)]
pub use mapping::*;

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

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use self::windows::*;

#[cfg(target_os = "linux")]
mod c_libs;
#[cfg(target_os = "linux")]
pub use c_libs::*;

#[cfg(not(target_os = "linux"))]
mod rust_libs;
#[cfg(not(target_os = "linux"))]
pub use rust_libs::*;

mod portable;
pub use portable::*;

mod os_str;
pub use os_str::*;

mod errors;
pub use errors::*;

#[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
compile_error!("kopiru supports Linux, macOS and Windows for now");

/// The error a platform returns for an operation it does not have.
#[cfg(unix)]
pub fn unsupported() -> io::Error {
    io::Error::from_raw_os_error(libc::EOPNOTSUPP)
}

/// Flags of `open_path` for a directory to read.
#[cfg(unix)]
pub const OPEN_DIR_FLAGS: libc::c_int = libc::O_RDONLY | libc::O_DIRECTORY;

/// Flags of `open_path` for a directory only searched, never listed (the
/// parent of a source named on the command line): Linux opens one that
/// may not be read (`O_PATH`), as a path lookup needs only search rights.
#[cfg(target_os = "linux")]
pub const SEARCH_DIR_FLAGS: libc::c_int = libc::O_PATH | libc::O_DIRECTORY;
#[cfg(target_os = "macos")]
pub const SEARCH_DIR_FLAGS: libc::c_int = OPEN_DIR_FLAGS;

/// Whether an error from a clone or offload call means "this method does not
/// work here" (fall back to the next one) rather than a real failure. The list
/// is the union of GNU cp's `is_CLONENOTSUP` and Rust std's kernel_copy.
#[cfg(unix)]
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
#[cfg(unix)]
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
#[cfg(unix)]
pub fn cstring(s: &OsStr) -> io::Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(s.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// A kernel name back as an `OsStr`, for messages and paths.
#[cfg(unix)]
pub fn os_str(name: &CStr) -> &OsStr {
    use std::os::unix::ffi::OsStrExt;
    OsStr::from_bytes(name.to_bytes())
}

/// A name within a directory, as the OS takes it (a NUL-terminated byte
/// string on Unix; on Windows the NUL-terminated WTF-8 of the UTF-16 name,
/// see `windows/mod.rs`). The tree code passes names only through these types.
pub type Name = CStr;
/// An owned [`Name`].
pub type NameBuf = CString;
/// The tree code borrows descriptors through this trait.
#[cfg(unix)]
pub use std::os::fd::AsFd;

/// The name of a directory itself.
pub const DOT: &Name = c".";

/// A name made by kopiru (temporary names: ASCII, no NUL).
pub fn name(s: &str) -> NameBuf {
    CString::new(s).expect("kopiru's own names have no NUL")
}

/// A name's bytes, for hashing and prefix checks.
pub fn name_bytes(n: &Name) -> &[u8] {
    n.to_bytes()
}

/// The error of a directory met again while following links (ELOOP).
#[cfg(unix)]
pub fn loop_error() -> io::Error {
    io::Error::from_raw_os_error(libc::ELOOP)
}

/// The raw code of a generic I/O error.
#[cfg(unix)]
pub const EIO: i32 = libc::EIO;

/// Whether opening with "keep access times" was refused because we do not
/// own the file (EPERM; EACCES means the file cannot be read at all).
#[cfg(unix)]
pub fn noatime_refused(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EPERM)
}

/// `open` flags for the commands Windows lacks (`flash`, `image`, `dedupe`,
/// `--shard`), which pass them to [`open_raw`] and [`open_path`] (these add
/// `O_CLOEXEC` themselves).
#[cfg(unix)]
pub use libc::{O_CREAT, O_NOFOLLOW, O_RDONLY, O_RDWR, O_WRONLY};

/// Positioned reads and writes on a `File` (`read_exact_at`, `write_all_at`).
#[cfg(unix)]
pub use std::os::unix::fs::FileExt;

/// Whether an open or a write with `O_DIRECT` was refused (EINVAL): the
/// caller goes on buffered.
#[cfg(unix)]
pub fn direct_refused(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EINVAL)
}

/// Whether an operation was not permitted (EPERM).
#[cfg(unix)]
pub fn not_permitted(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EPERM)
}

/// Whether a write failed because its device went away (ENODEV, ENXIO).
#[cfg(unix)]
pub fn device_gone(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENODEV) | Some(libc::ENXIO))
}

/// Whether a device is in use: opened exclusively elsewhere, mounted or
/// held (EBUSY; a lock held elsewhere, EWOULDBLOCK, on macOS).
#[cfg(unix)]
pub fn is_busy(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EBUSY) | Some(libc::EWOULDBLOCK)
    )
}

/// Whether a write failed for want of space (ENOSPC).
#[cfg(unix)]
pub fn no_space(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENOSPC)
}

/// Nothing beyond the Unix metadata to keep on Unix (see `windows/meta.rs`).
#[cfg(unix)]
pub fn platform_meta(_fd: FdRef, _st: &Stat, _attributes: bool, _times: bool) -> io::Result<()> {
    Ok(())
}

/// Windows error codes kopiru tests (`raw_os_error` is a Win32 error there).
#[cfg(windows)]
mod winerr {
    use windows_sys::Win32::Foundation as f;
    pub const NOT_SUPPORTED: i32 = f::ERROR_NOT_SUPPORTED as i32;
    pub const INVALID_FUNCTION: i32 = f::ERROR_INVALID_FUNCTION as i32;
    pub const NOT_SAME_DEVICE: i32 = f::ERROR_NOT_SAME_DEVICE as i32;
    pub const INVALID_PARAMETER: i32 = f::ERROR_INVALID_PARAMETER as i32;
    pub const CALL_NOT_IMPLEMENTED: i32 = f::ERROR_CALL_NOT_IMPLEMENTED as i32;
    pub const ACCESS_DENIED: i32 = f::ERROR_ACCESS_DENIED as i32;
    pub const BLOCK_TOO_MANY_REFERENCES: i32 = f::ERROR_BLOCK_TOO_MANY_REFERENCES as i32;
    pub const VIRUS_INFECTED: i32 = f::ERROR_VIRUS_INFECTED as i32;
    pub const CANT_RESOLVE_FILENAME: i32 = f::ERROR_CANT_RESOLVE_FILENAME as i32;
    pub const IO_DEVICE: i32 = f::ERROR_IO_DEVICE as i32;
}

/// The error a platform returns for an operation it does not have.
#[cfg(windows)]
pub fn unsupported() -> io::Error {
    io::Error::from_raw_os_error(winerr::NOT_SUPPORTED)
}

/// Whether an error from a clone call means "this method does not work
/// here": the errors block cloning gives on volumes, files or ranges it
/// does not take (the same list as rsync's and reflink-copy's fallbacks).
#[cfg(windows)]
pub fn is_not_supported(err: &io::Error) -> bool {
    use winerr::*;
    matches!(
        err.raw_os_error(),
        Some(
            NOT_SUPPORTED
                | INVALID_FUNCTION
                | NOT_SAME_DEVICE
                | INVALID_PARAMETER
                | CALL_NOT_IMPLEMENTED
                | ACCESS_DENIED
                | BLOCK_TOO_MANY_REFERENCES
                | VIRUS_INFECTED
        )
    )
}

/// Whether a `CopyFile2` error means it cannot work between these volumes
/// at all (not: this one file failed).
#[cfg(windows)]
pub fn copy_refused_here(err: &io::Error) -> bool {
    use winerr::*;
    matches!(
        err.raw_os_error(),
        Some(NOT_SUPPORTED | INVALID_FUNCTION | CALL_NOT_IMPLEMENTED)
    )
}

/// Never on Unix (no `copy_file_new` there).
#[cfg(unix)]
pub fn copy_refused_here(_err: &io::Error) -> bool {
    false
}

/// A short name for a Windows error, for `--explain`.
#[cfg(windows)]
pub fn errno_name(err: &io::Error) -> &'static str {
    use winerr::*;
    match err.raw_os_error() {
        Some(NOT_SUPPORTED) => "ERROR_NOT_SUPPORTED",
        Some(INVALID_FUNCTION) => "ERROR_INVALID_FUNCTION",
        Some(NOT_SAME_DEVICE) => "ERROR_NOT_SAME_DEVICE",
        Some(INVALID_PARAMETER) => "ERROR_INVALID_PARAMETER",
        Some(CALL_NOT_IMPLEMENTED) => "ERROR_CALL_NOT_IMPLEMENTED",
        Some(ACCESS_DENIED) => "ERROR_ACCESS_DENIED",
        Some(BLOCK_TOO_MANY_REFERENCES) => "ERROR_BLOCK_TOO_MANY_REFERENCES",
        Some(VIRUS_INFECTED) => "ERROR_VIRUS_INFECTED",
        _ => "error",
    }
}

/// A path component or path as a [`NameBuf`]: its WTF-8 bytes.
#[cfg(windows)]
pub fn cstring(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_encoded_bytes())
        .map_err(|_| io::Error::from_raw_os_error(winerr::INVALID_PARAMETER))
}

/// A [`Name`] back as an `OsStr`. Every `Name` kopiru holds on Windows was
/// made by [`cstring`] from an `OsStr`, or from kopiru's own ASCII names, so
/// its bytes are valid WTF-8.
#[cfg(windows)]
pub fn os_str(name: &CStr) -> &OsStr {
    let b = name.to_bytes();
    match std::str::from_utf8(b) {
        Ok(s) => OsStr::new(s),
        // SAFETY: the bytes came from `OsStr::as_encoded_bytes` (see above).
        Err(_) => unsafe { OsStr::from_encoded_bytes_unchecked(b) },
    }
}

/// The error of a directory met again while following links, or of a link
/// met where none may be.
#[cfg(windows)]
pub fn loop_error() -> io::Error {
    io::Error::from_raw_os_error(winerr::CANT_RESOLVE_FILENAME)
}

/// The raw code of a generic I/O error.
#[cfg(windows)]
pub const EIO: i32 = winerr::IO_DEVICE;

/// Whether opening with "keep access times" was refused: no right to write
/// the file's attributes.
#[cfg(windows)]
pub fn noatime_refused(e: &io::Error) -> bool {
    e.raw_os_error() == Some(winerr::ACCESS_DENIED)
}

/// Whether the first `len` bytes of `a` and `b` are the same and both end
/// there, read at positions (`pread`: the handles' positions do not move).
pub fn same_data(a: FdRef, b: FdRef, len: u64) -> bool {
    let (mut x, mut y) = (vec![0u8; 256 << 10], vec![0u8; 256 << 10]);
    let mut off = 0u64;
    loop {
        let (ra, rb) = match (pread(a, &mut x, off), pread(b, &mut y, off)) {
            (Ok(ra), Ok(rb)) => (ra, rb),
            _ => return false,
        };
        if ra != rb || x[..ra] != y[..rb] {
            return false;
        }
        if ra == 0 {
            return off == len;
        }
        off += ra as u64;
    }
}

/// What one call to an encoder ([`XzEncoder`], [`ZstdEncoder`]) did.
#[derive(Clone, Copy, Debug)]
pub struct Coded {
    /// Input bytes it took.
    pub taken: usize,
    /// Output bytes it gave.
    pub made: usize,
    /// The stream is complete (only when finishing).
    pub ended: bool,
}

/// Where a decoder ([`decode_xz`], [`decode_zstd`]) puts an image: written
/// to, or filled from a reader (straight into its own buffers).
pub trait DecodeSink: io::Write {
    /// Reads `r` to its end into the sink.
    fn fill_from(&mut self, r: &mut dyn io::Read) -> io::Result<()>;
}

/// A command or option that a platform may not have yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feature {
    /// `kopiru flash`.
    Flash,
    /// `kopiru image`.
    Image,
    /// `kopiru dedupe`.
    Dedupe,
    /// `kopiru copy --shard`.
    Shard,
}

impl Feature {
    fn name(self) -> &'static str {
        match self {
            Feature::Flash => "kopiru flash",
            Feature::Image => "kopiru image",
            Feature::Dedupe => "kopiru dedupe",
            Feature::Shard => "--shard",
        }
    }
}

/// `Ok` where this platform has `f`; else an error of kind `Unsupported`
/// that says so ("kopiru flash is not available on Windows yet").
pub fn available(f: Feature) -> io::Result<()> {
    if LACKS.contains(&f) {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("{} is not available on {PLATFORM} yet", f.name()),
        ));
    }
    Ok(())
}
