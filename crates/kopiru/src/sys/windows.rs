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

use std::ffi::{CStr, CString, OsString};
use std::fs::File;
use std::io;
use std::os::windows::ffi::{OsStrExt, OsStringExt};
use std::os::windows::io::{AsRawHandle, FromRawHandle, IntoRawHandle};
use std::path::{Path, PathBuf};

use windows_sys::Win32::Foundation::{
    CloseHandle, GetLastError, ERROR_ACCESS_DENIED, ERROR_BROKEN_PIPE, ERROR_FILE_NOT_FOUND,
    ERROR_HANDLE_EOF, ERROR_NO_MORE_FILES, FILETIME, GENERIC_READ, GENERIC_WRITE, HANDLE,
    INVALID_HANDLE_VALUE, STILL_ACTIVE,
};
use windows_sys::Win32::Storage::FileSystem::{
    CreateDirectoryW, CreateFileW, CreateHardLinkW, CreateSymbolicLinkW, DeleteFileW,
    FileAttributeTagInfo, FileBasicInfo, FileEndOfFileInfo, FindClose, FindExInfoBasic,
    FindExSearchNameMatch, FindFirstFileExW, FindNextFileW, FlushFileBuffers, GetFileAttributesW,
    GetFileInformationByHandle, GetFileInformationByHandleEx, GetVolumeInformationByHandleW,
    MoveFileExW, ReadFile, RemoveDirectoryW, SetFileAttributesW, SetFileInformationByHandle,
    SetFileTime, WriteFile, BY_HANDLE_FILE_INFORMATION, CREATE_NEW, FILE_ATTRIBUTE_ARCHIVE,
    FILE_ATTRIBUTE_DIRECTORY, FILE_ATTRIBUTE_HIDDEN, FILE_ATTRIBUTE_NORMAL,
    FILE_ATTRIBUTE_NOT_CONTENT_INDEXED, FILE_ATTRIBUTE_READONLY, FILE_ATTRIBUTE_REPARSE_POINT,
    FILE_ATTRIBUTE_SYSTEM, FILE_ATTRIBUTE_TAG_INFO, FILE_BASIC_INFO, FILE_END_OF_FILE_INFO,
    FILE_FLAG_BACKUP_SEMANTICS, FILE_FLAG_NO_BUFFERING, FILE_FLAG_OPEN_REPARSE_POINT,
    FILE_LIST_DIRECTORY, FILE_READ_ATTRIBUTES, FILE_SHARE_DELETE, FILE_SHARE_READ,
    FILE_SHARE_WRITE, FILE_WRITE_ATTRIBUTES, FIND_FIRST_EX_LARGE_FETCH, INVALID_FILE_ATTRIBUTES,
    MOVEFILE_REPLACE_EXISTING, MOVEFILE_WRITE_THROUGH, OPEN_EXISTING,
    SYMBOLIC_LINK_FLAG_ALLOW_UNPRIVILEGED_CREATE, SYMBOLIC_LINK_FLAG_DIRECTORY, SYNCHRONIZE,
    WIN32_FIND_DATAW,
};
use windows_sys::Win32::System::SystemServices::{
    IO_REPARSE_TAG_MOUNT_POINT, IO_REPARSE_TAG_SYMLINK,
};
use windows_sys::Win32::System::Threading::{
    GetExitCodeProcess, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION,
};
use windows_sys::Win32::System::IO::OVERLAPPED;

/// An open handle and the full path it was opened by; closed on drop.
#[derive(Debug)]
pub struct Fd {
    file: File,
    path: PathBuf,
}

impl Fd {
    /// A second handle to the same file (`DuplicateHandle`).
    pub fn try_clone(&self) -> io::Result<Fd> {
        Ok(Fd {
            file: self.file.try_clone()?,
            path: self.path.clone(),
        })
    }
}

/// A borrowed [`Fd`]: a handle and its path.
#[derive(Clone, Copy, Debug)]
pub struct FdRef<'a> {
    file: &'a File,
    path: &'a Path,
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
    Ok(Fd { file, path })
}

/// A point in time with nanoseconds (Windows keeps 100 ns).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Timespec {
    /// Seconds since the Unix epoch.
    pub sec: i64,
    /// Nanoseconds within the second.
    pub nsec: i64,
}

/// Seconds from 1601-01-01 (FILETIME's epoch) to 1970-01-01.
const EPOCH_DIFF: i64 = 11_644_473_600;
const TICKS: i64 = 10_000_000;

impl Timespec {
    fn from_ticks(t: i64) -> Timespec {
        Timespec {
            sec: t.div_euclid(TICKS) - EPOCH_DIFF,
            nsec: t.rem_euclid(TICKS) * 100,
        }
    }

    fn from_filetime(ft: FILETIME) -> Timespec {
        Timespec::from_ticks(((ft.dwHighDateTime as i64) << 32) | ft.dwLowDateTime as i64)
    }

    /// 100 ns ticks since 1601; times before then become 1601 (0 means
    /// "leave unchanged" to Windows, so the earliest kept is one tick).
    fn ticks(self) -> i64 {
        let t = (self.sec + EPOCH_DIFF)
            .saturating_mul(TICKS)
            .saturating_add(self.nsec / 100);
        t.max(1)
    }

    fn filetime(self) -> FILETIME {
        let t = self.ticks() as u64;
        FILETIME {
            dwLowDateTime: t as u32,
            dwHighDateTime: (t >> 32) as u32,
        }
    }
}

/// What kind of thing a directory entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link or a junction.
    Symlink,
    /// A named pipe (never found on Windows filesystems).
    Fifo,
    /// A character device (never found on Windows filesystems).
    CharDevice,
    /// A block device (never found on Windows filesystems).
    BlockDevice,
    /// A Unix socket (an AF_UNIX reparse point; copied as unsupported).
    Socket,
}

const S_IFMT: u32 = 0o170_000;
const S_IFDIR: u32 = 0o040_000;
const S_IFREG: u32 = 0o100_000;
const S_IFLNK: u32 = 0o120_000;

impl FileKind {
    /// The kind encoded in a Unix-style `st_mode`.
    pub fn from_mode(mode: u32) -> FileKind {
        match mode & S_IFMT {
            S_IFDIR => FileKind::Dir,
            S_IFLNK => FileKind::Symlink,
            0o010_000 => FileKind::Fifo,
            0o020_000 => FileKind::CharDevice,
            0o060_000 => FileKind::BlockDevice,
            0o140_000 => FileKind::Socket,
            _ => FileKind::File,
        }
    }

    fn from_attributes(attrs: u32, reparse_tag: u32) -> FileKind {
        if attrs & FILE_ATTRIBUTE_REPARSE_POINT != 0
            && (reparse_tag == IO_REPARSE_TAG_SYMLINK || reparse_tag == IO_REPARSE_TAG_MOUNT_POINT)
        {
            FileKind::Symlink
        } else if attrs & FILE_ATTRIBUTE_DIRECTORY != 0 {
            FileKind::Dir
        } else {
            FileKind::File
        }
    }
}

/// One entry of a directory listing.
pub struct DirEntry {
    /// The entry's name.
    pub name: CString,
    /// Its kind, from the attributes the listing returns with each name.
    pub kind: Option<FileKind>,
    /// Always 0: the listing does not return file ids.
    pub ino: u64,
}

/// The fields of a file's information kopiru uses, in Unix terms, plus the
/// Windows attributes and creation time.
#[derive(Clone, Copy, Debug)]
pub struct Stat {
    /// Volume serial number.
    pub dev: u64,
    /// File index (the NTFS file id).
    pub ino: u64,
    /// Type and permission bits, made from the attributes: 0o644 for a
    /// file, 0o444 if read-only; 0o755 for a directory; 0o777 for a link.
    pub mode: u32,
    /// Number of hard links.
    pub nlink: u64,
    /// Always 0: owners are security descriptors, not kept yet.
    pub uid: u32,
    /// Always 0.
    pub gid: u32,
    /// Always 0.
    pub rdev: u64,
    /// Size in bytes.
    pub size: u64,
    /// Last access.
    pub atime: Timespec,
    /// Last write.
    pub mtime: Timespec,
    /// Creation.
    pub btime: Timespec,
    /// `FILE_ATTRIBUTE_*` bits.
    pub attributes: u32,
}

impl Stat {
    /// The kind of file.
    pub fn kind(&self) -> FileKind {
        FileKind::from_mode(self.mode)
    }

    /// Type and permission bits.
    pub fn type_and_perm(&self) -> u32 {
        self.mode & (S_IFMT | 0o777)
    }

    /// Permission bits.
    pub fn perm(&self) -> u32 {
        self.mode & 0o7777
    }

    /// Never: holes are not looked for on Windows yet.
    pub fn looks_sparse(&self) -> bool {
        false
    }
}

fn mode_of(kind: FileKind, attrs: u32) -> u32 {
    match kind {
        FileKind::Dir => S_IFDIR | 0o755,
        FileKind::Symlink => S_IFLNK | 0o777,
        _ if attrs & FILE_ATTRIBUTE_READONLY != 0 => S_IFREG | 0o444,
        _ => S_IFREG | 0o644,
    }
}

fn reparse_tag(h: HANDLE, attrs: u32) -> u32 {
    if attrs & FILE_ATTRIBUTE_REPARSE_POINT == 0 {
        return 0;
    }
    // SAFETY: FILE_ATTRIBUTE_TAG_INFO is plain data: all zeros is a valid value.
    let mut info: FILE_ATTRIBUTE_TAG_INFO = unsafe { std::mem::zeroed() };
    // SAFETY: `h` is an open handle; `info` is a FILE_ATTRIBUTE_TAG_INFO of the size given.
    let ok = unsafe {
        GetFileInformationByHandleEx(
            h,
            FileAttributeTagInfo,
            (&mut info as *mut FILE_ATTRIBUTE_TAG_INFO).cast(),
            std::mem::size_of::<FILE_ATTRIBUTE_TAG_INFO>() as u32,
        )
    };
    if ok == 0 {
        // Without the tag, a reparse point is taken for a link.
        IO_REPARSE_TAG_SYMLINK
    } else {
        info.ReparseTag
    }
}

/// Information on an open handle (`GetFileInformationByHandle`).
pub fn fstat(fd: FdRef) -> io::Result<Stat> {
    let h = fd.handle()?;
    // SAFETY: BY_HANDLE_FILE_INFORMATION is plain data: all zeros is a valid value.
    let mut i: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: `h` is an open handle and `i` a valid out-pointer.
    cvt(unsafe { GetFileInformationByHandle(h, &mut i) })?;
    let attrs = i.dwFileAttributes;
    let kind = FileKind::from_attributes(attrs, reparse_tag(h, attrs));
    let size = ((i.nFileSizeHigh as u64) << 32) | i.nFileSizeLow as u64;
    Ok(Stat {
        dev: i.dwVolumeSerialNumber as u64,
        ino: ((i.nFileIndexHigh as u64) << 32) | i.nFileIndexLow as u64,
        mode: mode_of(kind, attrs),
        nlink: i.nNumberOfLinks as u64,
        uid: 0,
        gid: 0,
        rdev: 0,
        size,
        atime: Timespec::from_filetime(i.ftLastAccessTime),
        mtime: Timespec::from_filetime(i.ftLastWriteTime),
        btime: Timespec::from_filetime(i.ftCreationTime),
        attributes: attrs,
    })
}

fn open_flags(follow: bool) -> u32 {
    let mut flags = FILE_FLAG_BACKUP_SEMANTICS;
    if !follow {
        flags |= FILE_FLAG_OPEN_REPARSE_POINT;
    }
    flags
}

/// Information on `name` under `dir`, not following a final link unless
/// `follow` (opens the file for its attributes only).
pub fn stat_at(dir: FdRef, name: &CStr, follow: bool) -> io::Result<Stat> {
    let fd = create_file(
        full(dir, name)?,
        FILE_READ_ATTRIBUTES,
        OPEN_EXISTING,
        open_flags(follow),
    )?;
    fstat(fd.as_fd())
}

/// Information on a command-line path.
pub fn stat_path(path: &Path, follow: bool) -> io::Result<Stat> {
    let fd = create_file(
        verbatim(path)?,
        FILE_READ_ATTRIBUTES,
        OPEN_EXISTING,
        open_flags(follow),
    )?;
    fstat(fd.as_fd())
}

/// The flag of [`open_path`] that asks for a directory.
pub const O_DIRECTORY: i32 = 0x1_0000;
/// Flags of [`open_path`] for a directory to read.
pub const OPEN_DIR_FLAGS: i32 = O_DIRECTORY;

/// Opens a command-line path for reading (a directory with [`O_DIRECTORY`]).
pub fn open_path(path: &Path, flags: i32) -> io::Result<Fd> {
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

/// Opens the parent directory of a command-line path and returns it with the
/// path's last name; a root, "." and ".." give the directory itself and ".".
pub fn open_parent(path: &Path) -> io::Result<(Fd, CString)> {
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => {
            let parent = match parent.as_os_str().is_empty() {
                true => Path::new("."),
                false => parent,
            };
            Ok((open_path(parent, O_DIRECTORY)?, super::cstring(name)?))
        }
        _ => Ok((open_path(path, O_DIRECTORY)?, CString::from(c"."))),
    }
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
    let target = std::fs::read_link(full(dir, name)?)?;
    super::cstring(target.as_os_str())
}

/// `CreateSymbolicLinkW`: a directory link when the target (resolved from
/// the link's directory) is a directory now. Needs Developer Mode or the
/// symbolic-link privilege.
pub fn symlink_at(target: &CStr, dir: FdRef, name: &CStr) -> io::Result<()> {
    let link = full(dir, name)?;
    let t = Path::new(super::os_str(target));
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

fn basic_info(h: HANDLE) -> io::Result<FILE_BASIC_INFO> {
    // SAFETY: FILE_BASIC_INFO is plain data: all zeros is a valid value.
    let mut info: FILE_BASIC_INFO = unsafe { std::mem::zeroed() };
    // SAFETY: `h` is an open handle; `info` is a FILE_BASIC_INFO of the size given.
    cvt(unsafe {
        GetFileInformationByHandleEx(
            h,
            FileBasicInfo,
            (&mut info as *mut FILE_BASIC_INFO).cast(),
            std::mem::size_of::<FILE_BASIC_INFO>() as u32,
        )
    })?;
    Ok(info)
}

/// Sets attributes (and the creation time, when not 0) through the handle;
/// the other times are left as they are.
fn set_basic(h: HANDLE, attrs: u32, creation: i64) -> io::Result<()> {
    let info = FILE_BASIC_INFO {
        CreationTime: creation,
        LastAccessTime: 0,
        LastWriteTime: 0,
        ChangeTime: 0,
        FileAttributes: if attrs == 0 {
            FILE_ATTRIBUTE_NORMAL
        } else {
            attrs
        },
    };
    // SAFETY: `h` is an open handle; `info` is a FILE_BASIC_INFO of the size given.
    cvt(unsafe {
        SetFileInformationByHandle(
            h,
            FileBasicInfo,
            (&info as *const FILE_BASIC_INFO).cast(),
            std::mem::size_of::<FILE_BASIC_INFO>() as u32,
        )
    })
}

fn with_readonly(attrs: u32, mode: u32) -> u32 {
    if mode & 0o222 == 0 {
        attrs | FILE_ATTRIBUTE_READONLY
    } else {
        attrs & !FILE_ATTRIBUTE_READONLY
    }
}

/// The permission bits that Windows has: a file without write bits gets the
/// read-only attribute, one with them loses it. Directories are left alone.
pub fn fchmod(fd: FdRef, mode: u32) -> io::Result<()> {
    let h = fd.handle()?;
    let info = basic_info(h)?;
    let attrs = info.FileAttributes;
    if attrs & FILE_ATTRIBUTE_DIRECTORY != 0 {
        return Ok(());
    }
    let want = with_readonly(attrs, mode) & !FILE_ATTRIBUTE_NORMAL;
    if want == attrs {
        return Ok(());
    }
    set_basic(h, want, 0)
}

/// [`fchmod`] by name.
pub fn chmod_at(dir: FdRef, name: &CStr, mode: u32) -> io::Result<()> {
    let w = wide(&full(dir, name)?);
    // SAFETY: `w` is a NUL-terminated UTF-16 path that outlives the call.
    let attrs = unsafe { GetFileAttributesW(w.as_ptr()) };
    if attrs == INVALID_FILE_ATTRIBUTES {
        return Err(last_error());
    }
    if attrs & FILE_ATTRIBUTE_DIRECTORY != 0 {
        return Ok(());
    }
    // SAFETY: `w` is a NUL-terminated UTF-16 path that outlives the call.
    cvt(unsafe { SetFileAttributesW(w.as_ptr(), with_readonly(attrs, mode)) })
}

/// Nothing: owners are security descriptors on Windows, not copied yet, and
/// every [`Stat`] has owner 0.
pub fn fchown(_fd: FdRef, _uid: u32, _gid: u32) -> io::Result<()> {
    Ok(())
}

/// Nothing, as [`fchown`].
pub fn chown_at(_dir: FdRef, _name: &CStr, _uid: u32, _gid: u32) -> io::Result<()> {
    Ok(())
}

/// The owner, group and DACL of a file, as `GetSecurityInfo` returns them
/// (pointers into `sd`, freed on drop).
struct Security {
    owner: windows_sys::Win32::Security::PSID,
    group: windows_sys::Win32::Security::PSID,
    dacl: *mut windows_sys::Win32::Security::ACL,
    sd: windows_sys::Win32::Security::PSECURITY_DESCRIPTOR,
}

impl Security {
    fn of(h: HANDLE) -> io::Result<Security> {
        use windows_sys::Win32::Security::Authorization::{GetSecurityInfo, SE_FILE_OBJECT};
        use windows_sys::Win32::Security::{
            DACL_SECURITY_INFORMATION, GROUP_SECURITY_INFORMATION, OWNER_SECURITY_INFORMATION,
        };
        let mut s = Security {
            owner: std::ptr::null_mut(),
            group: std::ptr::null_mut(),
            dacl: std::ptr::null_mut(),
            sd: std::ptr::null_mut(),
        };
        // SAFETY: `h` is an open handle with READ_CONTROL; the out-pointers
        // are valid, and GetSecurityInfo points them into one allocation
        // it returns in `sd`, freed by Drop.
        let e = unsafe {
            GetSecurityInfo(
                h,
                SE_FILE_OBJECT,
                OWNER_SECURITY_INFORMATION | GROUP_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION,
                &mut s.owner,
                &mut s.group,
                &mut s.dacl,
                std::ptr::null_mut(),
                &mut s.sd,
            )
        };
        if e != 0 {
            return Err(io::Error::from_raw_os_error(e as i32));
        }
        Ok(s)
    }

    /// Whether the DACL is protected from inheriting its parent's ACEs.
    fn dacl_protected(&self) -> bool {
        use windows_sys::Win32::Security::{GetSecurityDescriptorControl, SE_DACL_PROTECTED};
        let (mut control, mut rev) = (0u16, 0u32);
        // SAFETY: `sd` is the descriptor GetSecurityInfo returned.
        let ok = unsafe { GetSecurityDescriptorControl(self.sd, &mut control, &mut rev) };
        ok != 0 && control & SE_DACL_PROTECTED != 0
    }
}

impl Drop for Security {
    fn drop(&mut self) {
        // SAFETY: `sd` was allocated by GetSecurityInfo (LocalAlloc) and is
        // freed once; the SID and ACL pointers into it die with it.
        unsafe { windows_sys::Win32::Foundation::LocalFree(self.sd) };
    }
}

fn sid_eq(a: windows_sys::Win32::Security::PSID, b: windows_sys::Win32::Security::PSID) -> bool {
    // SAFETY: both are SIDs inside live security descriptors, or null
    // (checked first).
    !a.is_null() && !b.is_null() && unsafe { windows_sys::Win32::Security::EqualSid(a, b) } != 0
}

/// With `-a` (or `--preserve owner`): the source's DACL (protected from
/// inheritance or not, as the source's is), then its owner and group, onto
/// `dst`, through a second handle opened with `WRITE_DAC | WRITE_OWNER`.
/// Returns the DACL's result and the owner's: as on Unix, giving a file to
/// another owner needs privilege (SeRestorePrivilege), so that error is a
/// warning the caller reports as chown's. An owner and group that are
/// already the source's are not set again.
pub fn copy_security(src: FdRef, dst: FdRef) -> (io::Result<()>, io::Result<()>) {
    use windows_sys::Win32::Security::Authorization::{SetSecurityInfo, SE_FILE_OBJECT};
    use windows_sys::Win32::Security::{
        DACL_SECURITY_INFORMATION, GROUP_SECURITY_INFORMATION, OWNER_SECURITY_INFORMATION,
        PROTECTED_DACL_SECURITY_INFORMATION, UNPROTECTED_DACL_SECURITY_INFORMATION,
    };
    use windows_sys::Win32::Storage::FileSystem::{READ_CONTROL, WRITE_DAC, WRITE_OWNER};
    let from = match src.handle().and_then(Security::of) {
        Ok(s) => s,
        Err(e) => return (Err(e), Ok(())),
    };
    let flags = FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT;
    let path = dst.path.to_path_buf();
    let (h, owner_open) = match create_file(
        path.clone(),
        READ_CONTROL | WRITE_DAC | WRITE_OWNER,
        OPEN_EXISTING,
        flags,
    ) {
        Ok(fd) => (fd, Ok(())),
        Err(e) => match create_file(path, READ_CONTROL | WRITE_DAC, OPEN_EXISTING, flags) {
            Ok(fd) => (fd, Err(e)),
            Err(e2) => return (Err(e2), Err(e)),
        },
    };
    let hd = match h.as_fd().handle() {
        Ok(hd) => hd,
        Err(e) => return (Err(e), Ok(())),
    };
    let protection = if from.dacl_protected() {
        PROTECTED_DACL_SECURITY_INFORMATION
    } else {
        UNPROTECTED_DACL_SECURITY_INFORMATION
    };
    let dacl = if from.dacl.is_null() {
        // A null DACL (everyone may do anything) has nothing to copy.
        Ok(())
    } else {
        // SAFETY: `hd` is open with WRITE_DAC; the ACL lives in `from.sd`.
        let e = unsafe {
            SetSecurityInfo(
                hd,
                SE_FILE_OBJECT,
                DACL_SECURITY_INFORMATION | protection,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                from.dacl,
                std::ptr::null(),
            )
        };
        match e {
            0 => Ok(()),
            e => Err(io::Error::from_raw_os_error(e as i32)),
        }
    };
    let now = Security::of(hd);
    let same = now
        .as_ref()
        .is_ok_and(|n| sid_eq(n.owner, from.owner) && sid_eq(n.group, from.group));
    let owner = match (same, owner_open) {
        (true, _) => Ok(()),
        (false, Err(e)) => Err(e),
        (false, Ok(())) => {
            // SAFETY: `hd` is open with WRITE_OWNER; the SIDs live in
            // `from.sd`.
            let e = unsafe {
                SetSecurityInfo(
                    hd,
                    SE_FILE_OBJECT,
                    OWNER_SECURITY_INFORMATION | GROUP_SECURITY_INFORMATION,
                    from.owner,
                    from.group,
                    std::ptr::null(),
                    std::ptr::null(),
                )
            };
            match e {
                0 => Ok(()),
                e => Err(io::Error::from_raw_os_error(e as i32)),
            }
        }
    };
    (dacl, owner)
}

/// The attributes kopiru keeps from a source.
const KEPT_ATTRIBUTES: u32 = FILE_ATTRIBUTE_READONLY
    | FILE_ATTRIBUTE_HIDDEN
    | FILE_ATTRIBUTE_SYSTEM
    | FILE_ATTRIBUTE_ARCHIVE
    | FILE_ATTRIBUTE_NOT_CONTENT_INDEXED;

/// What Windows keeps beyond the Unix metadata: the hidden, system, archive
/// and not-indexed attributes (with `attributes`) and the creation time
/// (with `times`), through an open handle.
pub fn platform_meta(fd: FdRef, st: &Stat, attributes: bool, times: bool) -> io::Result<()> {
    let h = fd.handle()?;
    let now = basic_info(h)?.FileAttributes & !FILE_ATTRIBUTE_NORMAL;
    let mut attrs = now;
    if attributes {
        // Read-only is the mode's business (fchmod); directories keep theirs.
        let keep = KEPT_ATTRIBUTES & !FILE_ATTRIBUTE_READONLY;
        attrs = (now & !keep) | (st.attributes & keep);
    }
    let creation = if times { st.btime.ticks() } else { 0 };
    if attrs == now && creation == 0 {
        return Ok(());
    }
    set_basic(h, attrs, creation)
}

/// Access and write times to 100 ns (`SetFileTime`).
pub fn futimens(fd: FdRef, atime: Timespec, mtime: Timespec) -> io::Result<()> {
    let h = fd.handle()?;
    let (a, m) = (atime.filetime(), mtime.filetime());
    // SAFETY: `h` is an open handle; `a` and `m` live through the call.
    cvt(unsafe { SetFileTime(h, std::ptr::null(), &a, &m) })
}

/// [`futimens`] by name, on a link itself rather than its target.
pub fn utimens_at(dir: FdRef, name: &CStr, atime: Timespec, mtime: Timespec) -> io::Result<()> {
    let fd = create_file(
        full(dir, name)?,
        FILE_WRITE_ATTRIBUTES,
        OPEN_EXISTING,
        open_flags(false),
    )?;
    futimens(fd.as_fd(), atime, mtime)
}

fn overlapped(offset: u64) -> OVERLAPPED {
    // SAFETY: OVERLAPPED is plain data: all zeros is a valid value.
    let mut ov: OVERLAPPED = unsafe { std::mem::zeroed() };
    ov.Anonymous.Anonymous.Offset = offset as u32;
    ov.Anonymous.Anonymous.OffsetHigh = (offset >> 32) as u32;
    ov
}

fn read_at(fd: FdRef, buf: &mut [u8], offset: Option<u64>) -> io::Result<usize> {
    let h = fd.handle()?;
    let len = buf.len().min(1 << 30) as u32;
    let mut got = 0u32;
    let mut ov = offset.map(overlapped);
    let ovp = ov
        .as_mut()
        .map_or(std::ptr::null_mut(), |o| o as *mut OVERLAPPED);
    // SAFETY: `h` is an open synchronous handle; `buf` holds at least `len` bytes; `ovp` is null or points to `ov`, alive through the (synchronous) call.
    let ok = unsafe { ReadFile(h, buf.as_mut_ptr(), len, &mut got, ovp) };
    if ok == 0 {
        // SAFETY: read right after the failed ReadFile.
        let e = unsafe { GetLastError() };
        if e == ERROR_HANDLE_EOF || e == ERROR_BROKEN_PIPE {
            return Ok(0);
        }
        return Err(io::Error::from_raw_os_error(e as i32));
    }
    Ok(got as usize)
}

/// Reads from the file position.
pub fn read(fd: FdRef, buf: &mut [u8]) -> io::Result<usize> {
    read_at(fd, buf, None)
}

/// Reads at `offset`.
pub fn pread(fd: FdRef, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    read_at(fd, buf, Some(offset))
}

/// Writes all of `buf` at `offset`.
pub fn pwrite_all(fd: FdRef, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
    let h = fd.handle()?;
    while !buf.is_empty() {
        let len = buf.len().min(1 << 30) as u32;
        let mut put = 0u32;
        let mut ov = overlapped(offset);
        // SAFETY: `h` is an open synchronous handle; `buf` holds at least `len` bytes; `ov` lives through the (synchronous) call.
        cvt(unsafe { WriteFile(h, buf.as_ptr(), len, &mut put, &mut ov) })?;
        if put == 0 {
            return Err(io::Error::from(io::ErrorKind::WriteZero));
        }
        buf = &buf[put as usize..];
        offset += put as u64;
    }
    Ok(())
}

/// Sets the file's size (`FileEndOfFileInfo`).
pub fn ftruncate(fd: FdRef, len: u64) -> io::Result<()> {
    let h = fd.handle()?;
    let info = FILE_END_OF_FILE_INFO {
        EndOfFile: len as i64,
    };
    // SAFETY: `h` is an open handle; `info` is a FILE_END_OF_FILE_INFO of the size given.
    cvt(unsafe {
        SetFileInformationByHandle(
            h,
            FileEndOfFileInfo,
            (&info as *const FILE_END_OF_FILE_INFO).cast(),
            std::mem::size_of::<FILE_END_OF_FILE_INFO>() as u32,
        )
    })
}

/// Not yet (`FSCTL_QUERY_ALLOCATED_RANGES` would do it): files are copied
/// whole.
pub fn seek_data(_fd: FdRef, _offset: u64, _hole: bool) -> io::Result<Option<u64>> {
    Err(super::unsupported())
}

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
pub fn euid() -> u32 {
    0
}

/// Nothing: Windows has no per-process limit on handles to raise.
pub fn raise_fd_limit() {}

/// The name of a named data stream as `FindFirstStreamW` spells it
/// (`:name:$DATA`), without the colons and type; `None` for the file's
/// own data (`::$DATA`) and for streams of other types.
fn stream_name(raw: &[u16]) -> Option<OsString> {
    const DATA: &[u16] = &[
        b':' as u16,
        b'$' as u16,
        b'D' as u16,
        b'A' as u16,
        b'T' as u16,
        b'A' as u16,
    ];
    let rest = raw.strip_prefix(&[b':' as u16])?;
    let name = rest.strip_suffix(DATA)?;
    (!name.is_empty()).then(|| OsString::from_wide(name))
}

/// The path of the stream `name` of the file `fd` was opened by.
fn stream_path(fd: FdRef, name: &CStr) -> PathBuf {
    let mut p = fd.path.as_os_str().to_os_string();
    p.push(":");
    p.push(super::os_str(name));
    PathBuf::from(p)
}

/// Alternate data streams play the part of extended attributes on Windows
/// (copied with `-a` or `--preserve xattrs`): the names of the file's named
/// data streams (`FindFirstStreamW`). A filesystem without them (FAT) or a
/// file with none gives an empty list.
pub fn xattr_list(fd: FdRef) -> io::Result<Vec<CString>> {
    use windows_sys::Win32::Foundation::{
        ERROR_CALL_NOT_IMPLEMENTED, ERROR_INVALID_FUNCTION, ERROR_INVALID_PARAMETER,
        ERROR_NOT_SUPPORTED,
    };
    use windows_sys::Win32::Storage::FileSystem::{
        FindFirstStreamW, FindNextStreamW, FindStreamInfoStandard, WIN32_FIND_STREAM_DATA,
    };
    let w = wide(fd.path);
    let mut data = WIN32_FIND_STREAM_DATA::default();
    // SAFETY: `w` is a NUL-terminated UTF-16 path and `data` a
    // WIN32_FIND_STREAM_DATA, what FindStreamInfoStandard fills.
    let h = unsafe {
        FindFirstStreamW(
            w.as_ptr(),
            FindStreamInfoStandard,
            (&mut data as *mut WIN32_FIND_STREAM_DATA).cast(),
            0,
        )
    };
    let mut out = Vec::new();
    if h == INVALID_HANDLE_VALUE {
        // SAFETY: no other call since FindFirstStreamW.
        let e = unsafe { GetLastError() };
        return match e {
            ERROR_HANDLE_EOF
            | ERROR_INVALID_PARAMETER
            | ERROR_NOT_SUPPORTED
            | ERROR_INVALID_FUNCTION
            | ERROR_CALL_NOT_IMPLEMENTED => Ok(out),
            _ => Err(io::Error::from_raw_os_error(e as i32)),
        };
    }
    loop {
        let len = data
            .cStreamName
            .iter()
            .position(|&c| c == 0)
            .unwrap_or(data.cStreamName.len());
        if let Some(name) = stream_name(&data.cStreamName[..len]) {
            out.push(super::cstring(&name)?);
        }
        // SAFETY: `h` is the open search handle, `data` as above.
        if unsafe { FindNextStreamW(h, (&mut data as *mut WIN32_FIND_STREAM_DATA).cast()) } == 0 {
            // SAFETY: read right after the failed call; `h` is closed once.
            let e = unsafe { GetLastError() };
            // SAFETY: `h` is the open search handle, closed once.
            unsafe { FindClose(h) };
            if e == ERROR_HANDLE_EOF {
                return Ok(out);
            }
            return Err(io::Error::from_raw_os_error(e as i32));
        }
    }
}

/// The contents of the named stream `name` (see [`xattr_list`]).
pub fn xattr_get(fd: FdRef, name: &CStr) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let s = create_file(
        stream_path(fd, name),
        GENERIC_READ,
        OPEN_EXISTING,
        FILE_FLAG_BACKUP_SEMANTICS,
    )?;
    let mut v = Vec::new();
    (&s.file).read_to_end(&mut v)?;
    Ok(v)
}

/// Creates (or replaces) the named stream `name` with `value`.
pub fn xattr_set(fd: FdRef, name: &CStr, value: &[u8]) -> io::Result<()> {
    use std::io::Write;
    use windows_sys::Win32::Storage::FileSystem::CREATE_ALWAYS;
    let s = create_file(
        stream_path(fd, name),
        GENERIC_WRITE,
        CREATE_ALWAYS,
        FILE_FLAG_BACKUP_SEMANTICS,
    )?;
    (&s.file).write_all(value)?;
    close(s)
}

/// Closes a handle and reports the error `CloseHandle` returns.
pub fn close(fd: Fd) -> io::Result<()> {
    let h = fd.file.into_raw_handle();
    // SAFETY: the handle was taken out of the File (into_raw_handle), so it is closed exactly once, here.
    cvt(unsafe { CloseHandle(h as HANDLE) })
}

/// Threads of a [`Closer`]'s pool.
const CLOSER_THREADS: usize = 4;
/// Handles waiting for a closer thread at most: with the threads' own,
/// at most `CLOSER_THREADS + CLOSER_QUEUE` finished files are open at once;
/// a worker that finds the queue full waits.
const CLOSER_QUEUE: usize = 64;

/// Closes the destination files the tree code finished on a pool of
/// [`CLOSER_THREADS`] threads, started at the first file. Defender (and
/// other filter drivers) scan a file when its last handle is closed, which
/// makes `CloseHandle` take 1–10 ms; on the pool that time overlaps the
/// copying of the next files instead of adding to it.
///
/// What kopiru guarantees does not change: a file is handed over only once
/// its data and metadata are written and, under `--sync file`/`end`,
/// flushed (`FlushFileBuffers` returned), and every handle is opened with
/// `FILE_SHARE_DELETE`, so the file can be renamed to its final name while
/// the pool still holds it. A `CloseHandle` error is kept with the handle's
/// path and reported by [`Closer::finish`] as that file's error: the run
/// still fails (exit 23), even though the error comes late. (For a valid
/// handle `NtClose` does not fail: the I/O manager ignores the status of
/// the filesystem's cleanup and close requests, so data errors cannot
/// surface there, and FlushFileBuffers has reported them before. The
/// errors are kept all the same.)
///
/// [`Closer::finish`] closes the queue and joins the threads: the run calls
/// it before it renames staged trees into place (Windows refuses to rename
/// a directory with open files below it) and before it returns its summary.
#[derive(Default)]
pub struct Closer {
    pool: std::sync::OnceLock<Option<ClosePool>>,
    errors: std::sync::Arc<std::sync::Mutex<Vec<(PathBuf, io::Error)>>>,
}

struct ClosePool {
    tx: std::sync::Mutex<Option<std::sync::mpsc::SyncSender<Fd>>>,
    threads: std::sync::Mutex<Vec<std::thread::JoinHandle<()>>>,
}

impl Closer {
    /// A closer for one run: its threads start at the first file.
    pub fn new() -> Closer {
        Closer::default()
    }

    /// Hands `fd` to the pool (waiting while its queue is full), or closes
    /// it here when the pool could not start or has finished. `Ok` means
    /// "handed over": a later failure comes from [`Closer::finish`].
    pub fn close(&self, fd: Fd) -> io::Result<()> {
        let pool = self.pool.get_or_init(|| self.start());
        let tx = pool
            .as_ref()
            .and_then(|p| p.tx.lock().expect("closer lock").clone());
        match tx {
            Some(tx) => match tx.send(fd) {
                Ok(()) => Ok(()),
                // Every thread has ended: close it here.
                Err(std::sync::mpsc::SendError(fd)) => close(fd),
            },
            None => close(fd),
        }
    }

    fn start(&self) -> Option<ClosePool> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Fd>(CLOSER_QUEUE);
        let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
        let mut threads = Vec::new();
        for i in 0..CLOSER_THREADS {
            let (rx, errors) = (rx.clone(), self.errors.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("kopiru-close-{i}"))
                .stack_size(64 << 10)
                .spawn(move || loop {
                    // The lock is held only while waiting for the next
                    // handle, not while closing it.
                    let next = rx.lock().expect("closer lock").recv();
                    let Ok(fd) = next else { return };
                    let path = fd.path.clone();
                    if let Err(e) = close(fd) {
                        errors.lock().expect("closer lock").push((path, e));
                    }
                });
            match spawned {
                Ok(t) => threads.push(t),
                Err(_) => break,
            }
        }
        if threads.is_empty() {
            return None;
        }
        Some(ClosePool {
            tx: std::sync::Mutex::new(Some(tx)),
            threads: std::sync::Mutex::new(threads),
        })
    }

    /// Closes every handle handed over, joins the pool's threads, and
    /// returns the `CloseHandle` errors with the paths the files were opened
    /// by. Later [`Closer::close`] calls close at once.
    pub fn finish(&self) -> Vec<(PathBuf, io::Error)> {
        if let Some(Some(pool)) = self.pool.get() {
            drop(pool.tx.lock().expect("closer lock").take());
            let threads = std::mem::take(&mut *pool.threads.lock().expect("closer lock"));
            for t in threads {
                let _ = t.join();
            }
        }
        std::mem::take(&mut *self.errors.lock().expect("closer lock"))
    }
}

impl Drop for Closer {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Alignment of buffers, offsets and lengths for uncached reads.
pub const DIRECT_ALIGN: usize = 4096;

/// A buffer aligned to [`DIRECT_ALIGN`], allocated once and reused.
pub struct Aligned {
    raw: Vec<u8>,
    off: usize,
    /// Usable length.
    pub len: usize,
}

impl Aligned {
    /// A zeroed buffer of `len` usable bytes.
    pub fn new(len: usize) -> Aligned {
        let raw = vec![0u8; len + DIRECT_ALIGN];
        let off = raw.as_ptr().align_offset(DIRECT_ALIGN);
        Aligned { raw, off, len }
    }

    /// The aligned bytes, to fill.
    pub fn buf(&mut self) -> &mut [u8] {
        &mut self.raw[self.off..self.off + self.len]
    }
}

/// Reads every entry of an open directory, except `.` and `..`, with one
/// `FindFirstFileExW(FindExInfoBasic, FIND_FIRST_EX_LARGE_FETCH)` pass: each
/// name comes with its attributes, so no entry is opened to learn its kind.
pub fn read_dir(dir: FdRef) -> io::Result<Vec<DirEntry>> {
    let pattern = wide(&dir.path.join("*"));
    // SAFETY: WIN32_FIND_DATAW is plain data: all zeros is a valid value.
    let mut data: WIN32_FIND_DATAW = unsafe { std::mem::zeroed() };
    // SAFETY: `pattern` is a NUL-terminated UTF-16 path; `data` is the WIN32_FIND_DATAW that FindExInfoBasic fills; no filter is passed.
    let h = unsafe {
        FindFirstFileExW(
            pattern.as_ptr(),
            FindExInfoBasic,
            (&mut data as *mut WIN32_FIND_DATAW).cast(),
            FindExSearchNameMatch,
            std::ptr::null(),
            FIND_FIRST_EX_LARGE_FETCH,
        )
    };
    let mut out = Vec::new();
    if h == INVALID_HANDLE_VALUE {
        // SAFETY: read right after the failed FindFirstFileExW.
        let e = unsafe { GetLastError() };
        if e == ERROR_FILE_NOT_FOUND {
            return Ok(out);
        }
        return Err(io::Error::from_raw_os_error(e as i32));
    }
    loop {
        let len = data
            .cFileName
            .iter()
            .position(|&c| c == 0)
            .unwrap_or(data.cFileName.len());
        let name = OsString::from_wide(&data.cFileName[..len]);
        if name != "." && name != ".." {
            let tag = if data.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT != 0 {
                data.dwReserved0
            } else {
                0
            };
            out.push(DirEntry {
                name: super::cstring(&name)?,
                kind: Some(FileKind::from_attributes(data.dwFileAttributes, tag)),
                ino: 0,
            });
        }
        // SAFETY: `h` is the open search handle and `data` as above.
        if unsafe { FindNextFileW(h, &mut data) } == 0 {
            // SAFETY: read right after the failed FindNextFileW.
            let e = unsafe { GetLastError() };
            // SAFETY: `h` is the open search handle, closed once.
            unsafe { FindClose(h) };
            if e == ERROR_NO_MORE_FILES {
                return Ok(out);
            }
            return Err(io::Error::from_raw_os_error(e as i32));
        }
    }
}

/// Whether cloning creates the destination itself.
pub const CLONE_CREATES_FILE: bool = false;

/// Makes `dst` share all of `src`'s clusters (`FSCTL_DUPLICATE_EXTENTS_TO_FILE`,
/// ReFS and Dev Drive only): see [`refs_clone`]. Compile-checked only.
pub fn clone_fd(src: FdRef, dst: FdRef) -> io::Result<()> {
    refs_clone(src, dst)
}

/// Not on Windows: see [`CLONE_CREATES_FILE`].
pub fn clone_new(_src: FdRef, _dir: FdRef, _name: &CStr) -> io::Result<()> {
    Err(super::unsupported())
}

/// Whether a whole directory tree can be cloned in one call.
pub const CLONES_TREES: bool = false;

/// Not on Windows.
pub fn clone_tree(_src_dir: FdRef, _src: &CStr, _dst_dir: FdRef, _dst: &CStr) -> io::Result<()> {
    Err(super::unsupported())
}

/// Whether the platform has an in-kernel copy between open handles: no
/// (CopyFile2 works on names and creates the destination: see
/// [`COPY_CREATES_FILE`]).
pub const HAS_OFFLOAD: bool = false;

/// Whether [`copy_file_new`] exists: `CopyFile2`, which creates the copy
/// itself (and clones blocks by itself on ReFS and Dev Drive since Windows
/// 11 24H2, offloads with ODX and SMB).
pub const COPY_CREATES_FILE: bool = true;

/// Whether kernel32 exports `CopyFile2` (Windows 8 and later do; Wine 8
/// does not, and its loader turns the import into a stub that aborts the
/// process when called). Looked up once.
pub fn has_copy_file2() -> bool {
    use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleW, GetProcAddress};
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        let k32: Vec<u16> = "kernel32.dll".encode_utf16().chain(Some(0)).collect();
        // SAFETY: a NUL-terminated UTF-16 module name; kernel32 is loaded in
        // every process, and its handle needs no release.
        let module = unsafe { GetModuleHandleW(k32.as_ptr()) };
        // SAFETY: a NUL-terminated ANSI name; the address found is only
        // compared with null, never called through.
        !module.is_null()
            && unsafe { GetProcAddress(module, c"CopyFile2".as_ptr().cast()) }.is_some()
    })
}

/// What [`copy_file_progress`] is given through CopyFile2's context pointer.
struct CopyProgress<'a> {
    go_on: &'a mut dyn FnMut(u64) -> bool,
    total: u64,
    /// The failure a COPYFILE2_CALLBACK_ERROR message reported.
    failed: Option<windows_sys::core::HRESULT>,
}

/// CopyFile2's progress routine: passes the bytes copied so far to the
/// caller's `go_on` at each chunk, and at every other message (so a cancel
/// is seen before the first chunk ends too); cancels when it says stop.
///
/// # Safety
/// Only CopyFile2 calls it, during [`copy_file_new`]'s call, with a valid
/// message and the context pointer given there (see the body).
unsafe extern "system" fn copy_file_progress(
    msg: *const windows_sys::Win32::Storage::FileSystem::COPYFILE2_MESSAGE,
    ctx: *const core::ffi::c_void,
) -> windows_sys::Win32::Storage::FileSystem::COPYFILE2_MESSAGE_ACTION {
    use windows_sys::Win32::Storage::FileSystem::{
        COPYFILE2_CALLBACK_CHUNK_FINISHED, COPYFILE2_CALLBACK_ERROR, COPYFILE2_PROGRESS_CANCEL,
        COPYFILE2_PROGRESS_CONTINUE,
    };
    // SAFETY: CopyFile2 calls this routine only during the call in
    // `copy_file_new`, on that thread, with the context pointer given there
    // (a live, exclusively borrowed CopyProgress) and a valid message.
    let (msg, p) = unsafe { (&*msg, &mut *(ctx as *mut CopyProgress)) };
    if msg.Type == COPYFILE2_CALLBACK_CHUNK_FINISHED {
        // SAFETY: ChunkFinished is the union member this message type holds.
        p.total = unsafe { msg.Info.ChunkFinished.uliTotalBytesTransferred };
    }
    if msg.Type == COPYFILE2_CALLBACK_ERROR {
        // An error is not retried (CONTINUE could mean "try again"): the
        // copy is stopped, and copy_file_new reports this error rather
        // than the cancel's.
        // SAFETY: Error is the union member this message type holds.
        p.failed = Some(unsafe { msg.Info.Error.hrFailure });
        return COPYFILE2_PROGRESS_CANCEL;
    }
    if (p.go_on)(p.total) {
        COPYFILE2_PROGRESS_CONTINUE
    } else {
        COPYFILE2_PROGRESS_CANCEL
    }
}

/// An HRESULT as an `io::Error`: the Win32 error it wraps, when it wraps one.
fn hresult_error(hr: windows_sys::core::HRESULT) -> io::Error {
    const FACILITY_WIN32: u32 = 7;
    let h = hr as u32;
    if (h >> 16) & 0x1fff == FACILITY_WIN32 {
        io::Error::from_raw_os_error((h & 0xffff) as i32)
    } else {
        io::Error::other(format!("CopyFile2 failed: HRESULT {h:#010x}"))
    }
}

/// Copies the file `src` was opened by to the new name `name` under `dir`
/// with `CopyFile2` (`COPY_FILE_FAIL_IF_EXISTS`: the name must be free, so
/// it is always one kopiru chose; `COPY_FILE_COPY_SYMLINK`: a source
/// replaced by a link since it was opened is copied as a link, which the
/// open below refuses). `go_on` is given the bytes copied so far as they
/// grow and stops the copy by returning false (CopyFile2 then removes what
/// it made, and this returns ERROR_REQUEST_ABORTED).
///
/// Returns the new file opened to read and write, looking as
/// [`create_new`] with `mode` and the data written would: CopyFile2 also
/// copies the source's attributes and times, which are set back to
/// read-only-or-not and "now", so that the caller applies what `--preserve`
/// asks, as for every other file. (It copies alternate data streams and
/// extended attributes too; those stay.)
pub fn copy_file_new(
    src: FdRef,
    dir: FdRef,
    name: &CStr,
    mode: u32,
    go_on: &mut dyn FnMut(u64) -> bool,
) -> io::Result<Fd> {
    use windows_sys::Win32::Storage::FileSystem::{
        CopyFile2, COPYFILE2_EXTENDED_PARAMETERS, COPY_FILE_COPY_SYMLINK, COPY_FILE_FAIL_IF_EXISTS,
    };
    if !has_copy_file2() {
        return Err(io::Error::from_raw_os_error(
            windows_sys::Win32::Foundation::ERROR_CALL_NOT_IMPLEMENTED as i32,
        ));
    }
    let to = full(dir, name)?;
    let (ws, wd) = (wide(src.path), wide(&to));
    let mut ctx = CopyProgress {
        go_on,
        total: 0,
        failed: None,
    };
    let params = COPYFILE2_EXTENDED_PARAMETERS {
        dwSize: std::mem::size_of::<COPYFILE2_EXTENDED_PARAMETERS>() as u32,
        dwCopyFlags: COPY_FILE_FAIL_IF_EXISTS | COPY_FILE_COPY_SYMLINK,
        pfCancel: std::ptr::null_mut(),
        pProgressRoutine: Some(copy_file_progress),
        pvCallbackContext: (&mut ctx as *mut CopyProgress).cast(),
    };
    // SAFETY: both names are NUL-terminated UTF-16 that outlive the call;
    // `params` and the context it points to live until it returns, and the
    // progress routine matches PCOPYFILE2_PROGRESS_ROUTINE.
    let hr = unsafe { CopyFile2(ws.as_ptr(), wd.as_ptr(), &params) };
    if hr < 0 {
        let e = hresult_error(ctx.failed.filter(|&f| f < 0).unwrap_or(hr));
        // CopyFile2 removes a destination it created and could not finish;
        // should one be left, it is removed here, unless the name was
        // taken before (then it is not kopiru's).
        let taken = matches!(
            e.raw_os_error().map(|c| c as u32),
            Some(windows_sys::Win32::Foundation::ERROR_FILE_EXISTS)
                | Some(windows_sys::Win32::Foundation::ERROR_ALREADY_EXISTS)
        );
        if !taken {
            let _ = unlink_at(dir, name, false);
        }
        return Err(e);
    }
    let opened = open_copy(&to, mode);
    if opened.is_err() {
        let _ = unlink_at(dir, name, false);
    }
    opened
}

/// Opens what CopyFile2 made at `path` to read and write, with the
/// attributes and times a new file has (see [`copy_file_new`]).
fn open_copy(path: &Path, mode: u32) -> io::Result<Fd> {
    let w = wide(path);
    // A read-only copy (of a read-only source) cannot be opened to write:
    // the attribute is cleared first and set again through the handle,
    // which keeps its right to write, as create_new's does.
    // SAFETY: `w` is a NUL-terminated UTF-16 path.
    cvt(unsafe { SetFileAttributesW(w.as_ptr(), FILE_ATTRIBUTE_NORMAL) })?;
    let fd = create_file(
        path.to_path_buf(),
        GENERIC_READ | GENERIC_WRITE,
        OPEN_EXISTING,
        FILE_FLAG_OPEN_REPARSE_POINT,
    )?;
    if fstat(fd.as_fd())?.kind() != FileKind::File {
        return Err(super::loop_error());
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| Timespec {
            sec: d.as_secs() as i64,
            nsec: d.subsec_nanos() as i64,
        })
        .unwrap_or_default()
        .ticks();
    let info = FILE_BASIC_INFO {
        CreationTime: 0,
        LastAccessTime: now,
        LastWriteTime: now,
        ChangeTime: 0,
        FileAttributes: with_readonly(FILE_ATTRIBUTE_NORMAL, mode),
    };
    let h = fd.as_fd().handle()?;
    // SAFETY: `h` is the open handle of `fd`; `info` is a FILE_BASIC_INFO of
    // the size given.
    cvt(unsafe {
        SetFileInformationByHandle(
            h,
            FileBasicInfo,
            (&info as *const FILE_BASIC_INFO).cast(),
            std::mem::size_of::<FILE_BASIC_INFO>() as u32,
        )
    })?;
    Ok(fd)
}

/// Not yet (CopyFile2 works on names, not on open handles).
pub fn copy_range(_src: FdRef, _so: u64, _dst: FdRef, _do: u64, _len: usize) -> io::Result<usize> {
    Err(super::unsupported())
}

/// ReFS block cloning of a whole file: the destination is extended to the
/// source's size, then cluster-aligned ranges under 4 GiB are duplicated.
/// Fails with ERROR_NOT_SUPPORTED where the volume lacks
/// FILE_SUPPORTS_BLOCK_REFCOUNTING (NTFS, FAT, Wine), so the caller steps
/// down to the read/write loop.
fn refs_clone(src: FdRef, dst: FdRef) -> io::Result<()> {
    use windows_sys::Win32::System::Ioctl::{
        DUPLICATE_EXTENTS_DATA, FSCTL_DUPLICATE_EXTENTS_TO_FILE,
    };
    use windows_sys::Win32::System::SystemServices::FILE_SUPPORTS_BLOCK_REFCOUNTING;
    use windows_sys::Win32::System::IO::DeviceIoControl;
    let (sh, dh) = (src.handle()?, dst.handle()?);
    let mut fs_flags = 0u32;
    // SAFETY: `dh` is an open handle; null buffers with 0 lengths are allowed, `fs_flags` is a valid out-pointer.
    cvt(unsafe {
        GetVolumeInformationByHandleW(
            dh,
            std::ptr::null_mut(),
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut fs_flags,
            std::ptr::null_mut(),
            0,
        )
    })?;
    if fs_flags & FILE_SUPPORTS_BLOCK_REFCOUNTING == 0 {
        return Err(super::unsupported());
    }
    // A ReFS bug can give a clone of zeros of a source just written by
    // other threads at once (microsoft/CopyOnWrite#12). kopiru clones only
    // sources it did not write in this run, and its read-only handle could
    // not flush them anyway.
    let size = fstat(src)?.size;
    ftruncate(dst, size)?;
    // Ranges are whole clusters (4 or 64 KiB on ReFS): the last one is
    // rounded up past the end of file, which ReFS accepts; each call stays
    // under 4 GiB.
    let cluster = cluster_size(dst)?;
    let max = (4u64 << 30) - cluster;
    let end = size.div_ceil(cluster) * cluster;
    let mut off = 0u64;
    while off < end {
        let len = (end - off).min(max);
        let req = DUPLICATE_EXTENTS_DATA {
            FileHandle: sh,
            SourceFileOffset: off as i64,
            TargetFileOffset: off as i64,
            ByteCount: len as i64,
        };
        let mut ret = 0u32;
        // SAFETY: `dh` and `sh` are open handles; `req` is a DUPLICATE_EXTENTS_DATA of the size given, alive through the (synchronous) call; no output buffer.
        cvt(unsafe {
            DeviceIoControl(
                dh,
                FSCTL_DUPLICATE_EXTENTS_TO_FILE,
                (&req as *const DUPLICATE_EXTENTS_DATA).cast(),
                std::mem::size_of::<DUPLICATE_EXTENTS_DATA>() as u32,
                std::ptr::null_mut(),
                0,
                &mut ret,
                std::ptr::null_mut(),
            )
        })?;
        off += len;
    }
    Ok(())
}

/// The cluster size of the volume that holds `fd`.
fn cluster_size(fd: FdRef) -> io::Result<u64> {
    use windows_sys::Win32::Storage::FileSystem::{GetDiskFreeSpaceW, GetVolumePathNameW};
    let path = wide(fd.path);
    let mut root = vec![0u16; path.len() + 1];
    // SAFETY: `path` is NUL-terminated UTF-16; `root` holds `root.len()` units.
    cvt(unsafe { GetVolumePathNameW(path.as_ptr(), root.as_mut_ptr(), root.len() as u32) })?;
    let (mut per_cluster, mut bytes, mut free, mut total) = (0u32, 0u32, 0u32, 0u32);
    // SAFETY: `root` is the NUL-terminated volume path just filled; the others are valid out-pointers.
    cvt(unsafe {
        GetDiskFreeSpaceW(
            root.as_ptr(),
            &mut per_cluster,
            &mut bytes,
            &mut free,
            &mut total,
        )
    })?;
    Ok((per_cluster as u64 * bytes as u64).max(512))
}

/// The name of the filesystem an open file lives on ("ntfs", "refs", ...).
pub fn fs_type(fd: FdRef) -> io::Result<String> {
    let h = fd.handle()?;
    let mut name = [0u16; 64];
    // SAFETY: `h` is an open handle; `name` holds `name.len()` units; null buffers with 0 lengths are allowed.
    cvt(unsafe {
        GetVolumeInformationByHandleW(
            h,
            std::ptr::null_mut(),
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            name.as_mut_ptr(),
            name.len() as u32,
        )
    })?;
    let len = name.iter().position(|&c| c == 0).unwrap_or(name.len());
    Ok(String::from_utf16_lossy(&name[..len]).to_lowercase())
}

/// Whether [`sync_fs`] writes every file's dirty data: no, Windows has no
/// `syncfs` for unprivileged processes.
pub const FS_SYNC_WRITES_FILES: bool = false;

/// `FlushFileBuffers` on each file before the end-of-run flush, which does
/// nothing more on Windows ([`sync_fs`]).
pub fn before_fs_sync(fd: FdRef) -> io::Result<()> {
    sync_file(fd)
}

/// Makes one file durable (`FlushFileBuffers`: data, size and metadata, and
/// the drive's cache). A directory opened without write access cannot be
/// flushed: its entries are made durable by NTFS's journal and by renames
/// with MOVEFILE_WRITE_THROUGH, so that refusal is not an error.
pub fn sync_file(fd: FdRef) -> io::Result<()> {
    let h = fd.handle()?;
    // SAFETY: `h` is an open handle.
    match cvt(unsafe { FlushFileBuffers(h) }) {
        Err(e) if e.raw_os_error() == Some(ERROR_ACCESS_DENIED as i32) => {
            match fstat(fd).map(|st| st.kind()) {
                Ok(FileKind::Dir) => Ok(()),
                _ => Err(e),
            }
        }
        r => r,
    }
}

/// Nothing: flushing a whole volume needs administrator rights on Windows.
/// Each file was flushed by [`before_fs_sync`].
pub fn sync_fs(_fd: FdRef) -> io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::windows::fs::OpenOptionsExt;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("kopiru-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// Every handle given to the pool is closed once `finish` returns: each
    /// file can then be opened with no sharing at all, which Windows refuses
    /// while any other handle to it is open.
    #[test]
    fn closer_closes_every_handle_by_finish() {
        let d = scratch("closer");
        let dir = open_path(&d, O_DIRECTORY).unwrap();
        let closer = Closer::new();
        let n = 3 * (CLOSER_THREADS + CLOSER_QUEUE);
        for i in 0..n {
            let name = CString::new(format!("f{i}")).unwrap();
            let fd = create_new(dir.as_fd(), &name, 0o644).unwrap();
            pwrite_all(fd.as_fd(), format!("data {i}").as_bytes(), 0).unwrap();
            closer.close(fd).unwrap();
        }
        assert!(closer.finish().is_empty());
        for i in 0..n {
            let p = d.join(format!("f{i}"));
            let exclusive = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .share_mode(0)
                .open(&p);
            assert!(exclusive.is_ok(), "f{i} still open: {exclusive:?}");
            drop(exclusive);
            assert_eq!(std::fs::read(&p).unwrap(), format!("data {i}").as_bytes());
        }
        // After finish, a handle is closed at once.
        let fd = create_new(dir.as_fd(), c"late", 0o644).unwrap();
        closer.close(fd).unwrap();
        drop(dir);
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// CopyFile2 copies the data to a new name, calls the progress routine
    /// with the bytes copied so far (ending at the size), and gives back a
    /// writable handle even to the copy of a read-only source.
    #[test]
    fn copy_file_new_copies_and_reports_progress() {
        let d = scratch("copyfile2");
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(d.join("src"), &data).unwrap();
        let mut perms = std::fs::metadata(d.join("src")).unwrap().permissions();
        perms.set_readonly(true);
        std::fs::set_permissions(d.join("src"), perms).unwrap();
        let dir = open_path(&d, O_DIRECTORY).unwrap();
        let src = open_source(dir.as_fd(), c"src", false, false, false).unwrap();
        if !has_copy_file2() {
            // Wine 8: refused with the error that steps down to the stream
            // loop, and nothing created (test-windows.sh skips loudly).
            let e = copy_file_new(src.as_fd(), dir.as_fd(), c"dst", 0o644, &mut |_| true);
            assert_eq!(
                e.unwrap_err().raw_os_error(),
                Some(windows_sys::Win32::Foundation::ERROR_CALL_NOT_IMPLEMENTED as i32)
            );
            assert!(!d.join("dst").exists());
            return;
        }
        let mut seen = Vec::new();
        let mut go_on = |total: u64| {
            seen.push(total);
            true
        };
        let fd = copy_file_new(src.as_fd(), dir.as_fd(), c"dst", 0o444, &mut go_on).unwrap();
        pwrite_all(fd.as_fd(), b"!", data.len() as u64).unwrap();
        let st = fstat(fd.as_fd()).unwrap();
        assert_eq!(st.size, data.len() as u64 + 1);
        assert_eq!(st.perm(), 0o444, "read-only again, through the handle");
        drop(fd);
        let got = std::fs::read(d.join("dst")).unwrap();
        assert_eq!(&got[..data.len()], &data[..]);
        assert_eq!(
            seen.last(),
            Some(&(data.len() as u64)),
            "progress: {seen:?}"
        );
        assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
        // The name must be free: never onto a file kopiru did not create.
        let e = copy_file_new(src.as_fd(), dir.as_fd(), c"dst", 0o644, &mut |_| true).unwrap_err();
        assert_eq!(
            e.raw_os_error(),
            Some(windows_sys::Win32::Foundation::ERROR_FILE_EXISTS as i32)
        );
        assert_eq!(std::fs::read(d.join("dst")).unwrap().len(), data.len() + 1);
        drop((src, dir));
        for n in ["src", "dst"] {
            let mut p = std::fs::metadata(d.join(n)).unwrap().permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            p.set_readonly(false);
            std::fs::set_permissions(d.join(n), p).unwrap();
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// Cancelled from the progress routine (as the engine does when its
    /// Cancel is set): CopyFile2 stops, and no file is left under the new
    /// name.
    #[test]
    fn copy_file_new_cancelled_leaves_nothing() {
        let d = scratch("copyfile2-cancel");
        std::fs::write(d.join("src"), vec![1u8; 4 << 20]).unwrap();
        let dir = open_path(&d, O_DIRECTORY).unwrap();
        let src = open_source(dir.as_fd(), c"src", false, false, false).unwrap();
        if !has_copy_file2() {
            // Wine 8: see copy_file_new_copies_and_reports_progress.
            assert!(copy_file_new(src.as_fd(), dir.as_fd(), c"dst", 0o644, &mut |_| true).is_err());
            assert!(!d.join("dst").exists());
            return;
        }
        let cancel = crate::Cancel::new();
        let mut calls = 0;
        let mut go_on = |_total: u64| {
            calls += 1;
            cancel.cancel();
            !cancel.is_cancelled()
        };
        let r = copy_file_new(src.as_fd(), dir.as_fd(), c"dst", 0o644, &mut go_on);
        assert!(calls > 0, "the progress routine was never called");
        let e = r.unwrap_err();
        assert_eq!(
            e.raw_os_error(),
            Some(windows_sys::Win32::Foundation::ERROR_REQUEST_ABORTED as i32),
            "{e}"
        );
        assert!(!d.join("dst").exists());
        drop((src, dir));
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// Placement by handle (FileRenameInfoEx, POSIX semantics) replaces a
    /// file that is still open elsewhere; where it is refused (Wine 8, FAT,
    /// old Windows) the error is one of those that send rename_at to
    /// MoveFileExW, and rename_at replaces all the same. Prints which, for
    /// test-windows.sh.
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

    #[test]
    fn stream_names() {
        let w = |s: &str| s.encode_utf16().collect::<Vec<u16>>();
        assert_eq!(stream_name(&w("::$DATA")), None);
        assert_eq!(
            stream_name(&w(":Zone.Identifier:$DATA")),
            Some("Zone.Identifier".into())
        );
        assert_eq!(stream_name(&w(":ünï:$DATA")), Some("ünï".into()));
        assert_eq!(stream_name(&w(":x:$INDEX_ALLOCATION")), None);
    }

    /// Named streams listed, read and written where the filesystem has
    /// them; where it has none (Wine 8), a file lists none, so a copy
    /// copies none. Prints which, for test-windows.sh.
    #[test]
    fn alternate_data_streams_or_none() {
        let d = scratch("ads");
        std::fs::write(d.join("f"), b"main").unwrap();
        std::fs::write(d.join("g"), b"other").unwrap();
        let dir = open_path(&d, O_DIRECTORY).unwrap();
        let f = open_source(dir.as_fd(), c"f", false, false, false).unwrap();
        let g = open_existing_rw(dir.as_fd(), c"g").unwrap();
        let set = xattr_set(f.as_fd(), c"note", b"a stream");
        let listed = xattr_list(f.as_fd()).unwrap();
        match set {
            Ok(()) if !listed.is_empty() => {
                println!("KOPIRU-ADS: supported");
                assert_eq!(listed, vec![CString::from(c"note")]);
                let v = xattr_get(f.as_fd(), c"note").unwrap();
                assert_eq!(v, b"a stream");
                xattr_set(g.as_fd(), c"note", &v).unwrap();
                assert_eq!(xattr_get(g.as_fd(), c"note").unwrap(), b"a stream");
                assert_eq!(std::fs::read(d.join("g")).unwrap(), b"other");
            }
            r => {
                // Wine 8 has no streams: FindFirstStreamW lists none, and
                // "f:note" is made as a file of that name beside f.
                let why = match r {
                    Ok(()) => "writing f:note made no stream (a file of that name?)".to_string(),
                    Err(e) => e.to_string(),
                };
                println!("KOPIRU-ADS: none: {why}");
                assert!(listed.is_empty());
            }
        }
        assert_eq!(std::fs::read(d.join("f")).unwrap(), b"main");
        drop((f, g, dir));
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// The DACL (in SDDL) and owner of a file.
    fn sddl(h: HANDLE) -> String {
        use windows_sys::Win32::Security::Authorization::{
            ConvertSecurityDescriptorToStringSecurityDescriptorW, SDDL_REVISION_1,
        };
        use windows_sys::Win32::Security::{DACL_SECURITY_INFORMATION, OWNER_SECURITY_INFORMATION};
        let s = Security::of(h).unwrap();
        let mut out: *mut u16 = std::ptr::null_mut();
        let mut len = 0u32;
        // SAFETY: `s.sd` is a live descriptor; `out` receives a LocalAlloc'd
        // string of `len` characters, freed below.
        let ok = unsafe {
            ConvertSecurityDescriptorToStringSecurityDescriptorW(
                s.sd,
                SDDL_REVISION_1,
                OWNER_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION,
                &mut out,
                &mut len,
            )
        };
        assert_ne!(ok, 0, "{}", io::Error::last_os_error());
        // SAFETY: `out` holds `len` UTF-16 units (with the NUL or not).
        let text =
            String::from_utf16_lossy(unsafe { std::slice::from_raw_parts(out, len as usize) });
        // SAFETY: allocated by the conversion, freed once.
        unsafe { windows_sys::Win32::Foundation::LocalFree(out.cast()) };
        text.trim_end_matches('\0').to_string()
    }

    /// With -a, the source's DACL (here a protected one that only lets
    /// Everyone read) and owner end up on the copy. Prints whether this
    /// Windows (or Wine) kept a DACL set on the source, for test-windows.sh.
    #[test]
    fn security_descriptor_copied() {
        use windows_sys::Win32::Security::Authorization::{
            ConvertStringSecurityDescriptorToSecurityDescriptorW, SetSecurityInfo, SDDL_REVISION_1,
            SE_FILE_OBJECT,
        };
        use windows_sys::Win32::Security::{
            GetSecurityDescriptorDacl, ACL, DACL_SECURITY_INFORMATION,
            PROTECTED_DACL_SECURITY_INFORMATION,
        };
        let d = scratch("security");
        std::fs::write(d.join("src"), b"s").unwrap();
        std::fs::write(d.join("dst"), b"d").unwrap();
        let dir = open_path(&d, O_DIRECTORY).unwrap();
        let src = create_file(
            d.join("src"),
            GENERIC_READ | windows_sys::Win32::Storage::FileSystem::WRITE_DAC,
            OPEN_EXISTING,
            0,
        )
        .unwrap();
        let wanted: Vec<u16> = "D:P(A;;FR;;;WD)(A;;FA;;;SY)"
            .encode_utf16()
            .chain(Some(0))
            .collect();
        let mut sd = std::ptr::null_mut();
        // SAFETY: a NUL-terminated SDDL string; `sd` receives a LocalAlloc'd
        // descriptor, freed below.
        let ok = unsafe {
            ConvertStringSecurityDescriptorToSecurityDescriptorW(
                wanted.as_ptr(),
                SDDL_REVISION_1,
                &mut sd,
                std::ptr::null_mut(),
            )
        };
        assert_ne!(ok, 0);
        let (mut present, mut defaulted, mut acl) = (0, 0, std::ptr::null_mut::<ACL>());
        // SAFETY: `sd` is the descriptor just made; the ACL points into it.
        assert_ne!(
            unsafe { GetSecurityDescriptorDacl(sd, &mut present, &mut acl, &mut defaulted) },
            0
        );
        // SAFETY: `src` is open with WRITE_DAC; `acl` lives in `sd`.
        let e = unsafe {
            SetSecurityInfo(
                src.as_fd().handle().unwrap(),
                SE_FILE_OBJECT,
                DACL_SECURITY_INFORMATION | PROTECTED_DACL_SECURITY_INFORMATION,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                acl,
                std::ptr::null(),
            )
        };
        // SAFETY: made above, freed once.
        unsafe { windows_sys::Win32::Foundation::LocalFree(sd) };
        let dst = open_existing_rw(dir.as_fd(), c"dst").unwrap();
        let before = sddl(dst.as_fd().handle().unwrap());
        let src_sddl = sddl(src.as_fd().handle().unwrap());
        let (dacl, owner) = copy_security(src.as_fd(), dst.as_fd());
        dacl.unwrap();
        owner.unwrap();
        let after = sddl(dst.as_fd().handle().unwrap());
        if e == 0 && src_sddl.contains("D:P(A;;FR;;;WD)") {
            println!("KOPIRU-SECURITY: kept");
            assert_ne!(before, after);
            assert_eq!(after, src_sddl);
        } else {
            println!("KOPIRU-SECURITY: not kept: SetSecurityInfo gave {e}, the source reads back {src_sddl}");
            assert_eq!(
                after.split("D:").next(),
                src_sddl.split("D:").next(),
                "owner"
            );
        }
        drop((src, dst, dir));
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// A `CloseHandle` failure on the pool is not lost: `finish` returns it
    /// with the path the handle was opened by.
    #[test]
    fn closer_reports_a_failed_close() {
        // A handle value no object has in this test process (handles are
        // small multiples of 4), so CloseHandle fails (ERROR_INVALID_HANDLE).
        let bogus = 0x7fff_fff0usize as HANDLE;
        // SAFETY: the File is never read, written or dropped: the pool takes
        // its raw value back (into_raw_handle) and closes it, which fails
        // without touching any real object.
        let file = unsafe { File::from_raw_handle(bogus as _) };
        let fd = Fd {
            file,
            path: PathBuf::from(r"\\?\Z:\nowhere"),
        };
        let closer = Closer::new();
        closer.close(fd).unwrap();
        let errors = closer.finish();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].0, PathBuf::from(r"\\?\Z:\nowhere"));
        assert_eq!(
            errors[0].1.raw_os_error(),
            Some(windows_sys::Win32::Foundation::ERROR_INVALID_HANDLE as i32)
        );
    }
}
