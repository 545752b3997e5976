//! Opening files and directories, and making, linking, renaming and
//! removing names (placement: a rename by handle with POSIX semantics, or
//! MoveFileExW where that is refused).

use std::ffi::{CStr, CString};
use std::io;
use std::os::windows::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use windows_sys::Win32::Foundation::{ERROR_ACCESS_DENIED, FILETIME, GENERIC_READ, GENERIC_WRITE};
use windows_sys::Win32::Storage::FileSystem::{
    CreateDirectoryW, CreateHardLinkW, CreateSymbolicLinkW, DeleteFileW, GetFileAttributesW,
    MoveFileExW, RemoveDirectoryW, SetFileAttributesW, SetFileInformationByHandle, SetFileTime,
    CREATE_NEW, FILE_ATTRIBUTE_DIRECTORY, FILE_ATTRIBUTE_NORMAL, FILE_ATTRIBUTE_READONLY,
    FILE_FLAG_BACKUP_SEMANTICS, FILE_FLAG_NO_BUFFERING, FILE_FLAG_OPEN_REPARSE_POINT,
    FILE_LIST_DIRECTORY, FILE_READ_ATTRIBUTES, FILE_WRITE_ATTRIBUTES, INVALID_FILE_ATTRIBUTES,
    MOVEFILE_REPLACE_EXISTING, MOVEFILE_WRITE_THROUGH, OPEN_EXISTING,
    SYMBOLIC_LINK_FLAG_ALLOW_UNPRIVILEGED_CREATE, SYMBOLIC_LINK_FLAG_DIRECTORY, SYNCHRONIZE,
};

use super::stat::{fstat, FileKind};
use super::{create_file, cvt, full, last_error, open_flags, verbatim, wide, AsFd, Fd, FdRef};

/// The flag of [`open_path`] that asks for a directory.
pub const O_DIRECTORY: i32 = 0x1_0000;
/// Flags of [`open_path`] for a directory to read.
pub const OPEN_DIR_FLAGS: i32 = O_DIRECTORY;
/// The same: Windows has no directory opened for searching only.
pub const SEARCH_DIR_FLAGS: i32 = OPEN_DIR_FLAGS;

/// Opens a command-line path for reading (a directory with [`O_DIRECTORY`]).
pub fn open_path(path: &Path, flags: i32) -> io::Result<Fd> {
    // Opening to write (flash, dedupe) is not done here yet.
    if flags & !O_DIRECTORY != 0 {
        return Err(super::unsupported());
    }
    let fd = create_file(
        verbatim(path)?,
        GENERIC_READ,
        OPEN_EXISTING,
        FILE_FLAG_BACKUP_SEMANTICS,
    )?;
    if flags & O_DIRECTORY != 0 && fstat(fd.as_fd())?.kind() != FileKind::Dir {
        return Err(not_a_directory());
    }
    Ok(fd)
}

fn not_a_directory() -> io::Error {
    io::Error::from_raw_os_error(windows_sys::Win32::Foundation::ERROR_DIRECTORY as i32)
}

/// Opens a source file or directory for reading, never through a final link
/// unless `follow` (a link met gives [`super::loop_error`], as O_NOFOLLOW).
/// With `noatime`, asks that reading through this handle leave the access
/// time alone (`SetFileTime` with -1); that needs the right to write
/// attributes, and [`super::noatime_refused`] tells the caller to retry
/// without.
///
/// [`super::noatime_refused`]: crate::sys::noatime_refused
pub fn open_source(
    dir: FdRef,
    name: &CStr,
    is_dir: bool,
    follow: bool,
    noatime: bool,
) -> io::Result<Fd> {
    let mut access = GENERIC_READ;
    if noatime {
        access |= FILE_WRITE_ATTRIBUTES;
    }
    let fd = create_file(full(dir, name)?, access, OPEN_EXISTING, open_flags(follow))?;
    let st = fstat(fd.as_fd())?;
    if !follow && st.kind() == FileKind::Symlink {
        return Err(super::loop_error());
    }
    if is_dir && st.kind() != FileKind::Dir {
        return Err(not_a_directory());
    }
    if noatime {
        keep_atime(&fd)?;
    }
    Ok(fd)
}

fn keep_atime(fd: &Fd) -> io::Result<()> {
    let keep = FILETIME {
        dwLowDateTime: u32::MAX,
        dwHighDateTime: u32::MAX,
    };
    let h = fd.as_fd().handle()?;
    // SAFETY: `h` is an open handle; `keep` lives through the call; null leaves a time as it is.
    cvt(unsafe { SetFileTime(h, std::ptr::null(), &keep, std::ptr::null()) })
}

/// Creates a new file for writing; fails with AlreadyExists if the name is
/// taken. A `mode` without write bits makes it read-only, as `open(O_CREAT)`
/// with such a mode does on Unix: the returned handle can still write.
pub fn create_new(dir: FdRef, name: &CStr, mode: u32) -> io::Result<Fd> {
    let attrs = match mode & 0o222 {
        0 => FILE_ATTRIBUTE_READONLY,
        _ => FILE_ATTRIBUTE_NORMAL,
    };
    create_file(
        full(dir, name)?,
        GENERIC_READ | GENERIC_WRITE,
        CREATE_NEW,
        attrs | FILE_FLAG_OPEN_REPARSE_POINT,
    )
}

/// Opens an existing file (not through a link) to read and write it: a
/// partial copy that is continued.
pub fn open_existing_rw(dir: FdRef, name: &CStr) -> io::Result<Fd> {
    let fd = create_file(
        full(dir, name)?,
        GENERIC_READ | GENERIC_WRITE,
        OPEN_EXISTING,
        FILE_FLAG_OPEN_REPARSE_POINT,
    )?;
    match fstat(fd.as_fd())?.kind() {
        FileKind::File => Ok(fd),
        FileKind::Symlink => Err(super::loop_error()),
        _ => Err(io::Error::from_raw_os_error(ERROR_ACCESS_DENIED as i32)),
    }
}

/// Opens an existing file to write into it (`--inplace`), emptied first
/// (`truncate`); Windows' devices are not files kopiru writes into, so
/// `follow` only allows a link to be followed.
pub fn open_write_existing(
    dir: FdRef,
    name: &CStr,
    follow: bool,
    truncate: bool,
) -> io::Result<Fd> {
    let flags = match follow {
        true => 0,
        false => FILE_FLAG_OPEN_REPARSE_POINT,
    };
    let fd = create_file(full(dir, name)?, GENERIC_WRITE, OPEN_EXISTING, flags)?;
    match fstat(fd.as_fd())?.kind() {
        FileKind::File => {}
        FileKind::Symlink => return Err(super::loop_error()),
        _ => return Err(io::Error::from_raw_os_error(ERROR_ACCESS_DENIED as i32)),
    }
    if truncate {
        super::ftruncate(fd.as_fd(), 0)?;
    }
    Ok(fd)
}

/// Opens an existing directory (not through a link), with the right to set
/// its times and attributes where that is granted.
pub fn open_dir(dir: FdRef, name: &CStr) -> io::Result<Fd> {
    let path = full(dir, name)?;
    let read = FILE_LIST_DIRECTORY | FILE_READ_ATTRIBUTES | SYNCHRONIZE;
    let flags = open_flags(false);
    let fd = match create_file(
        path.clone(),
        read | FILE_WRITE_ATTRIBUTES,
        OPEN_EXISTING,
        flags,
    ) {
        Err(e) if e.raw_os_error() == Some(ERROR_ACCESS_DENIED as i32) => {
            create_file(path, read, OPEN_EXISTING, flags)?
        }
        r => r?,
    };
    match fstat(fd.as_fd())?.kind() {
        FileKind::Dir => Ok(fd),
        FileKind::Symlink => Err(super::loop_error()),
        _ => Err(not_a_directory()),
    }
}

/// Opens a file for reading around the cache (`FILE_FLAG_NO_BUFFERING`:
/// reads need [`DIRECT_ALIGN`]-aligned buffers, offsets and lengths), or
/// normally where that is refused.
///
/// [`DIRECT_ALIGN`]: super::DIRECT_ALIGN
pub fn open_uncached(dir: FdRef, name: &CStr) -> io::Result<Fd> {
    let path = full(dir, name)?;
    let flags = FILE_FLAG_OPEN_REPARSE_POINT | FILE_FLAG_BACKUP_SEMANTICS;
    let access = GENERIC_READ | FILE_WRITE_ATTRIBUTES;
    let fd = match create_file(
        path.clone(),
        access,
        OPEN_EXISTING,
        flags | FILE_FLAG_NO_BUFFERING,
    ) {
        Ok(fd) => fd,
        Err(_) => create_file(path, GENERIC_READ, OPEN_EXISTING, flags)?,
    };
    let _ = keep_atime(&fd);
    Ok(fd)
}

/// `CreateDirectoryW` (the mode is not used: directories have no read-only
/// attribute that means what it does on Unix).
pub fn mkdir_at(dir: FdRef, name: &CStr, _mode: u32) -> io::Result<()> {
    let w = wide(&full(dir, name)?);
    // SAFETY: `w` is a NUL-terminated UTF-16 path that outlives the call; null security attributes are allowed.
    cvt(unsafe { CreateDirectoryW(w.as_ptr(), std::ptr::null()) })
}

/// The target of a symbolic link or junction, as stored.
pub fn read_link_at(dir: FdRef, name: &CStr) -> io::Result<CString> {
    let path = full(dir, name)?;
    if let Some(target) = super::junction::target(path.clone())? {
        return super::cstring(&target);
    }
    let target = std::fs::read_link(path)?;
    super::cstring(target.as_os_str())
}

/// `CreateSymbolicLinkW`: a directory link when the target (resolved from
/// the link's directory) is a directory now. Needs Developer Mode or the
/// symbolic-link privilege. A target read from a junction (`\??\...`) makes
/// a junction again.
pub fn symlink_at(target: &CStr, dir: FdRef, name: &CStr) -> io::Result<()> {
    let link = full(dir, name)?;
    let t = Path::new(super::os_str(target));
    if t.as_os_str()
        .as_encoded_bytes()
        .starts_with(super::junction::PREFIX.as_bytes())
    {
        return super::junction::make(&link, t);
    }
    let resolved = match link.parent() {
        Some(p) if t.is_relative() => p.join(t),
        _ => t.to_path_buf(),
    };
    let mut flags = SYMBOLIC_LINK_FLAG_ALLOW_UNPRIVILEGED_CREATE;
    if resolved.is_dir() {
        flags |= SYMBOLIC_LINK_FLAG_DIRECTORY;
    }
    let (wl, wt) = (wide(&link), wide(t));
    // SAFETY: `wl` and `wt` are NUL-terminated UTF-16 paths that outlive the call.
    if unsafe { CreateSymbolicLinkW(wl.as_ptr(), wt.as_ptr(), flags) } {
        Ok(())
    } else {
        Err(last_error())
    }
}

/// `CreateHardLinkW`.
pub fn link_at(old_dir: FdRef, old: &CStr, new_dir: FdRef, new: &CStr) -> io::Result<()> {
    let (o, n) = (wide(&full(old_dir, old)?), wide(&full(new_dir, new)?));
    // SAFETY: `n` and `o` are NUL-terminated UTF-16 paths; null security attributes are allowed.
    cvt(unsafe { CreateHardLinkW(n.as_ptr(), o.as_ptr(), std::ptr::null()) })
}

/// Renames `from` to `to` through a handle:
/// `SetFileInformationByHandle(FileRenameInfoEx)` with
/// `FILE_RENAME_FLAG_POSIX_SEMANTICS` (a replaced file still open elsewhere
/// loses its name at once, as on Unix, instead of the rename failing), and
/// `FILE_RENAME_FLAG_REPLACE_IF_EXISTS` when `replace`. Windows 10 1709 and
/// later on NTFS; FAT, older Windows and Wine 8 refuse it (the callers then
/// use MoveFileExW). The rename is one NTFS journal transaction, durable as
/// MOVEFILE_WRITE_THROUGH's.
fn rename_by_handle(from: &Path, to: &Path, replace: bool) -> io::Result<()> {
    use windows_sys::Win32::Storage::FileSystem::{FileRenameInfoEx, DELETE, FILE_RENAME_INFO};
    use windows_sys::Win32::System::WindowsProgramming::{
        FILE_RENAME_FLAG_POSIX_SEMANTICS, FILE_RENAME_FLAG_REPLACE_IF_EXISTS,
    };
    let fd = create_file(
        from.to_path_buf(),
        DELETE | SYNCHRONIZE,
        OPEN_EXISTING,
        FILE_FLAG_OPEN_REPARSE_POINT | FILE_FLAG_BACKUP_SEMANTICS,
    )?;
    let name: Vec<u16> = to.as_os_str().encode_wide().collect();
    let name_bytes = name.len() * 2;
    let offset = std::mem::offset_of!(FILE_RENAME_INFO, FileName);
    // The structure ends with the name (NUL-terminated, though its length
    // leaves the NUL out): a buffer of u64s keeps its alignment.
    let size = offset + name_bytes + 2;
    let mut buf = vec![0u64; size.div_ceil(8)];
    let info = buf.as_mut_ptr().cast::<FILE_RENAME_INFO>();
    let mut flags = FILE_RENAME_FLAG_POSIX_SEMANTICS;
    if replace {
        flags |= FILE_RENAME_FLAG_REPLACE_IF_EXISTS;
    }
    // SAFETY: `buf` is zeroed, aligned for FILE_RENAME_INFO and `size`
    // bytes long or more, so the header fields and `name_bytes` bytes of
    // name after `offset` (then the zero NUL) are inside it.
    unsafe {
        (*info).Anonymous.Flags = flags;
        (*info).RootDirectory = std::ptr::null_mut();
        (*info).FileNameLength = name_bytes as u32;
        std::ptr::copy_nonoverlapping(
            name.as_ptr(),
            buf.as_mut_ptr().cast::<u8>().add(offset).cast::<u16>(),
            name.len(),
        );
    }
    let h = fd.as_fd().handle()?;
    // SAFETY: `h` is the open handle of `fd` (opened with DELETE); `info`
    // points to `size` initialised bytes of a FILE_RENAME_INFO.
    cvt(unsafe { SetFileInformationByHandle(h, FileRenameInfoEx, info.cast(), size as u32) })
}

/// Whether [`rename_by_handle`] failed because this Windows, filesystem or
/// Wine does not have it (then MoveFileExW is used).
fn rename_by_handle_refused(e: &io::Error) -> bool {
    use windows_sys::Win32::Foundation::{
        ERROR_CALL_NOT_IMPLEMENTED, ERROR_INVALID_FUNCTION, ERROR_INVALID_PARAMETER,
        ERROR_NOT_SUPPORTED,
    };
    matches!(
        e.raw_os_error().map(|c| c as u32),
        Some(
            ERROR_INVALID_PARAMETER
                | ERROR_NOT_SUPPORTED
                | ERROR_INVALID_FUNCTION
                | ERROR_CALL_NOT_IMPLEMENTED
        )
    )
}

/// Set once [`rename_by_handle`] was refused in this process: from then on
/// kopiru renames with MoveFileExW only (one refused call, not one per
/// file; a run that also writes to NTFS then uses MoveFileExW there too).
static RENAME_BY_HANDLE_REFUSED: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Renames by handle where that works, else with MoveFileExW: see
/// [`rename_by_handle`]. Any other failure of the handle rename (the
/// target read-only, say) is retried with MoveFileExW too, whose error is
/// the one reported.
fn rename_path(from: &Path, to: &Path, replace: bool) -> io::Result<()> {
    use std::sync::atomic::Ordering;
    if !RENAME_BY_HANDLE_REFUSED.load(Ordering::Relaxed) {
        match rename_by_handle(from, to, replace) {
            Ok(()) => return Ok(()),
            Err(e) if rename_by_handle_refused(&e) => {
                RENAME_BY_HANDLE_REFUSED.store(true, Ordering::Relaxed);
            }
            Err(_) => {}
        }
    }
    let flags = if replace {
        MOVEFILE_REPLACE_EXISTING
    } else {
        0
    };
    move_file(from.to_path_buf(), to.to_path_buf(), flags)
}

fn move_file(old: PathBuf, new: PathBuf, flags: u32) -> io::Result<()> {
    let (o, n) = (wide(&old), wide(&new));
    // SAFETY: `o` and `n` are NUL-terminated UTF-16 paths that outlive the call.
    cvt(unsafe { MoveFileExW(o.as_ptr(), n.as_ptr(), flags | MOVEFILE_WRITE_THROUGH) })
}

/// Renames, replacing: `SetFileInformationByHandle(FileRenameInfoEx)` with
/// POSIX semantics where that works, else `MoveFileExW(MOVEFILE_REPLACE_EXISTING
/// | MOVEFILE_WRITE_THROUGH)` ([`rename_path`]). As a Unix rename, it
/// replaces a read-only file too (Windows refuses that until the attribute
/// is cleared).
pub fn rename_at(old_dir: FdRef, old: &CStr, new_dir: FdRef, new: &CStr) -> io::Result<()> {
    let (from, to) = (full(old_dir, old)?, full(new_dir, new)?);
    match rename_path(&from, &to, true) {
        Err(e) if e.raw_os_error() == Some(ERROR_ACCESS_DENIED as i32) => {
            let w = wide(&to);
            // SAFETY: `w` is a NUL-terminated UTF-16 path that outlives the call.
            let attrs = unsafe { GetFileAttributesW(w.as_ptr()) };
            let readonly_file = attrs != INVALID_FILE_ATTRIBUTES
                && attrs & FILE_ATTRIBUTE_READONLY != 0
                && attrs & FILE_ATTRIBUTE_DIRECTORY == 0;
            if !readonly_file {
                return Err(e);
            }
            // SAFETY: `w` is a NUL-terminated UTF-16 path that outlives the call.
            cvt(unsafe { SetFileAttributesW(w.as_ptr(), attrs & !FILE_ATTRIBUTE_READONLY) })?;
            move_file(from, to, MOVEFILE_REPLACE_EXISTING)
        }
        r => r,
    }
}

/// Renames without replacing ([`rename_path`]: by handle with POSIX
/// semantics, else `MoveFileExW(MOVEFILE_WRITE_THROUGH)`): fails with
/// AlreadyExists instead of replacing.
pub fn rename_noreplace(old_dir: FdRef, old: &CStr, new_dir: FdRef, new: &CStr) -> io::Result<()> {
    rename_path(&full(old_dir, old)?, &full(new_dir, new)?, false)
}

/// Removes a file (or an empty directory with `is_dir`). As on Unix, the
/// read-only attribute does not stop it; a link to a directory is removed
/// as a directory.
pub fn unlink_at(dir: FdRef, name: &CStr, is_dir: bool) -> io::Result<()> {
    let path = full(dir, name)?;
    let w = wide(&path);
    let remove = |dir: bool| {
        // SAFETY: `w` is a NUL-terminated UTF-16 path that outlives the call (both branches).
        cvt(unsafe {
            if dir {
                RemoveDirectoryW(w.as_ptr())
            } else {
                DeleteFileW(w.as_ptr())
            }
        })
    };
    match remove(is_dir) {
        Err(e) if e.raw_os_error() == Some(ERROR_ACCESS_DENIED as i32) => {
            // SAFETY: `w` is a NUL-terminated UTF-16 path that outlives the call.
            let attrs = unsafe { GetFileAttributesW(w.as_ptr()) };
            if attrs == INVALID_FILE_ATTRIBUTES {
                return Err(e);
            }
            if !is_dir && attrs & FILE_ATTRIBUTE_DIRECTORY != 0 {
                return remove(true);
            }
            if attrs & FILE_ATTRIBUTE_READONLY != 0 {
                // SAFETY: `w` is a NUL-terminated UTF-16 path that outlives the call.
                cvt(unsafe { SetFileAttributesW(w.as_ptr(), attrs & !FILE_ATTRIBUTE_READONLY) })?;
                return remove(is_dir);
            }
            Err(e)
        }
        r => r,
    }
}

/// No FIFOs or device nodes on Windows filesystems.
pub fn mknod_at(_dir: FdRef, _name: &CStr, _mode: u32, _rdev: u64) -> io::Result<()> {
    Err(super::unsupported())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::windows::{pread, scratch};

    /// Placement by handle (FileRenameInfoEx, POSIX semantics) replaces a
    /// file that is still open elsewhere; where it is refused (Wine 8, FAT,
    /// old Windows) the error is one of those that send rename_at to
    /// MoveFileExW, and rename_at replaces all the same. Prints which, for
    /// scripts/test/windows.sh.
    #[test]
    fn rename_by_handle_or_moved() {
        let d = scratch("rename");
        let dir = open_path(&d, O_DIRECTORY).unwrap();
        let p = |n: &CStr| full(dir.as_fd(), n).unwrap();
        std::fs::write(d.join("new"), b"new").unwrap();
        std::fs::write(d.join("old"), b"old").unwrap();
        let held = open_source(dir.as_fd(), c"old", false, false, false).unwrap();
        match rename_by_handle(&p(c"new"), &p(c"old"), true) {
            Ok(()) => {
                println!("KOPIRU-RENAME-BY-HANDLE: used");
                assert_eq!(std::fs::read(d.join("old")).unwrap(), b"new");
                assert!(!d.join("new").exists());
                let mut buf = [0u8; 8];
                let n = pread(held.as_fd(), &mut buf, 0).unwrap();
                assert_eq!(&buf[..n], b"old", "the replaced file, still open");
                std::fs::write(d.join("third"), b"3").unwrap();
                let e = rename_by_handle(&p(c"third"), &p(c"old"), false).unwrap_err();
                assert_eq!(e.kind(), io::ErrorKind::AlreadyExists, "{e}");
            }
            Err(e) => {
                println!("KOPIRU-RENAME-BY-HANDLE: refused: {e}");
                assert!(rename_by_handle_refused(&e), "{e}");
            }
        }
        drop(held);
        std::fs::write(d.join("again"), b"again").unwrap();
        rename_at(dir.as_fd(), c"again", dir.as_fd(), c"old").unwrap();
        assert_eq!(std::fs::read(d.join("old")).unwrap(), b"again");
        std::fs::write(d.join("more"), b"more").unwrap();
        let e = rename_noreplace(dir.as_fd(), c"more", dir.as_fd(), c"old").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists, "{e}");
        drop(dir);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
