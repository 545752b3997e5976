//! Windows: the same operations as `unix.rs`, through `windows-sys`.
//!
//! Windows has no `*at` calls. An [`Fd`] here is an open handle together
//! with the full path it was opened by (`\\?\`-prefixed, so paths longer
//! than 260 characters work), and "relative to a directory handle" means
//! "under that directory's path". Handles are opened with FILE_SHARE_DELETE
//! (open files can be renamed and removed, as on Unix), so a directory
//! renamed between two calls is not followed as `openat` follows it: the
//! next call uses the old path.
//!
//! Names are the NUL-terminated WTF-8 bytes of the `OsStr` (Rust's own
//! lossless encoding of UTF-16, `OsStr::as_encoded_bytes`), so that the tree
//! code keeps one `Name` type on every platform. Windows names cannot hold
//! NUL.
//!
//! By subject: `stat.rs` (file information and directory listings),
//! `ops.rs` (opening, creating, linking, renaming and removing names),
//! `meta.rs` (attributes, times, security descriptors), `streams.rs`
//! (alternate data streams as extended attributes), `data.rs` (reading,
//! writing, flushing), `copy.rs` (block cloning and CopyFile2),
//! `close.rs` (closing, and the pool of closer threads) and `process.rs`;
//! this file holds the handle types and the path helpers they all use.

use std::ffi::{CStr, OsString};
use std::fs::File;
use std::io;
use std::os::windows::ffi::OsStrExt;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use windows_sys::Win32::Foundation::{HANDLE, INVALID_HANDLE_VALUE};
use windows_sys::Win32::Storage::FileSystem::{
    CreateFileW, FILE_FLAG_BACKUP_SEMANTICS, FILE_FLAG_OPEN_REPARSE_POINT, FILE_SHARE_DELETE,
    FILE_SHARE_READ, FILE_SHARE_WRITE,
};

// The platform-independent helpers of `sys`, which the files below call as
// `super::cstring(..)`, `super::loop_error()`, ..., as `unix.rs` does.
use super::{cstring, loop_error, os_str, unsupported};

mod absent;
mod close;
mod copy;
mod data;
mod junction;
mod meta;
mod ops;
mod process;
mod stat;
mod streams;

pub use self::absent::*;
pub use self::close::*;
pub use self::copy::*;
pub use self::data::*;
pub use self::meta::*;
pub use self::ops::*;
pub use self::process::*;
pub use self::stat::*;
pub use self::streams::*;

/// An open handle and the full path it was opened by, and the lock taken
/// through it ([`try_lock`]); closed on drop.
#[derive(Debug)]
pub struct Fd {
    file: File,
    path: PathBuf,
    lock: OnceLock<OwnedHandle>,
}

impl Fd {
    fn new(file: File, path: PathBuf) -> Fd {
        Fd {
            file,
            path,
            lock: OnceLock::new(),
        }
    }

    /// A second handle to the same file (`DuplicateHandle`), without the
    /// first one's lock.
    pub fn try_clone(&self) -> io::Result<Fd> {
        Ok(Fd::new(self.file.try_clone()?, self.path.clone()))
    }
}

/// A borrowed [`Fd`]: a handle, its path and its lock.
#[derive(Clone, Copy, Debug)]
pub struct FdRef<'a> {
    file: &'a File,
    path: &'a Path,
    lock: &'a OnceLock<OwnedHandle>,
}

/// Borrowing a handle as an [`FdRef`], as `std::os::fd::AsFd` on Unix.
pub trait AsFd {
    /// The borrowed handle.
    fn as_fd(&self) -> FdRef<'_>;
}

impl AsFd for Fd {
    fn as_fd(&self) -> FdRef<'_> {
        FdRef {
            file: &self.file,
            path: &self.path,
            lock: &self.lock,
        }
    }
}

impl AsFd for FdRef<'_> {
    fn as_fd(&self) -> FdRef<'_> {
        *self
    }
}

impl<T: AsFd + ?Sized> AsFd for &T {
    fn as_fd(&self) -> FdRef<'_> {
        (**self).as_fd()
    }
}

impl<T: AsFd + ?Sized> AsFd for std::sync::Arc<T> {
    fn as_fd(&self) -> FdRef<'_> {
        (**self).as_fd()
    }
}

impl<T: AsFd + ?Sized> AsFd for std::rc::Rc<T> {
    fn as_fd(&self) -> FdRef<'_> {
        (**self).as_fd()
    }
}

impl<T: AsFd + ?Sized> AsFd for Box<T> {
    fn as_fd(&self) -> FdRef<'_> {
        (**self).as_fd()
    }
}

impl FdRef<'_> {
    fn handle(&self) -> io::Result<HANDLE> {
        Ok(self.file.as_raw_handle() as HANDLE)
    }
}

fn last_error() -> io::Error {
    io::Error::last_os_error()
}

fn cvt(ok: windows_sys::core::BOOL) -> io::Result<()> {
    if ok == 0 {
        Err(last_error())
    } else {
        Ok(())
    }
}

/// A path as the NUL-terminated UTF-16 Windows wants.
fn wide(p: &Path) -> Vec<u16> {
    p.as_os_str().encode_wide().chain(Some(0)).collect()
}

/// An absolute path with the `\\?\` prefix, so that no length limit and no
/// reinterpretation of names (trailing dots and spaces) applies.
fn verbatim(p: &Path) -> io::Result<PathBuf> {
    let s = p.as_os_str().to_string_lossy();
    if s.starts_with(r"\\?\") {
        return Ok(p.to_path_buf());
    }
    let abs = std::path::absolute(p)?;
    let a = abs.as_os_str().to_string_lossy();
    if a.starts_with(r"\\?\") || a.starts_with(r"\\.\") {
        return Ok(abs);
    }
    let mut out = OsString::new();
    match a.strip_prefix(r"\\") {
        Some(_) => {
            out.push(r"\\?\UNC\");
            out.push(&abs.as_os_str().to_string_lossy()[2..]);
            if abs.to_str().is_none() {
                // A non-Unicode UNC path: keep it as it is.
                return Ok(abs);
            }
        }
        None => {
            out.push(r"\\?\");
            out.push(abs.as_os_str());
        }
    }
    Ok(PathBuf::from(out))
}

/// The full path of `name` under `dir` ("." is the directory itself).
fn full(dir: FdRef, name: &CStr) -> io::Result<PathBuf> {
    let n = super::os_str(name);
    if n == "." {
        return Ok(dir.path.to_path_buf());
    }
    if n == ".." {
        return Ok(dir.path.parent().unwrap_or(dir.path).to_path_buf());
    }
    Ok(dir.path.join(n))
}

const SHARE_ALL: u32 = FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE;

/// `CreateFileW` into an [`Fd`].
fn create_file(path: PathBuf, access: u32, disposition: u32, flags: u32) -> io::Result<Fd> {
    let w = wide(&path);
    // SAFETY: `w` is a NUL-terminated UTF-16 path that outlives the call; null security attributes and template are allowed.
    let h = unsafe {
        CreateFileW(
            w.as_ptr(),
            access,
            SHARE_ALL,
            std::ptr::null(),
            disposition,
            flags,
            std::ptr::null_mut(),
        )
    };
    if h == INVALID_HANDLE_VALUE {
        return Err(last_error());
    }
    // SAFETY: CreateFileW returned a valid handle that nothing else owns; the File closes it.
    let file = unsafe { File::from_raw_handle(h as _) };
    Ok(Fd::new(file, path))
}

fn open_flags(follow: bool) -> u32 {
    let mut flags = FILE_FLAG_BACKUP_SEMANTICS;
    if !follow {
        flags |= FILE_FLAG_OPEN_REPARSE_POINT;
    }
    flags
}

/// A new empty directory for a test, under the temporary directory.
#[cfg(test)]
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kopiru-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The platform's name, for messages.
pub const PLATFORM: &str = "Windows";

/// What kopiru does not do on Windows yet (see [`super::available`]).
pub const LACKS: &[super::Feature] = &[
    super::Feature::Flash,
    super::Feature::Image,
    super::Feature::Dedupe,
    super::Feature::Shard,
];
