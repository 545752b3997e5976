//! File information in Unix terms ([`Stat`], [`FileKind`], [`Timespec`])
//! and directory listings.

use std::ffi::{CStr, CString, OsString};
use std::io;
use std::os::windows::ffi::OsStringExt;
use std::path::Path;

use windows_sys::Win32::Foundation::{
    GetLastError, ERROR_FILE_NOT_FOUND, ERROR_NO_MORE_FILES, FILETIME, HANDLE, INVALID_HANDLE_VALUE,
};
use windows_sys::Win32::Storage::FileSystem::{
    FileAttributeTagInfo, FindClose, FindExInfoBasic, FindExSearchNameMatch, FindFirstFileExW,
    FindNextFileW, GetFileInformationByHandle, GetFileInformationByHandleEx,
    BY_HANDLE_FILE_INFORMATION, FILE_ATTRIBUTE_DIRECTORY, FILE_ATTRIBUTE_READONLY,
    FILE_ATTRIBUTE_REPARSE_POINT, FILE_ATTRIBUTE_TAG_INFO, FILE_READ_ATTRIBUTES,
    FIND_FIRST_EX_LARGE_FETCH, OPEN_EXISTING, WIN32_FIND_DATAW,
};
use windows_sys::Win32::System::SystemServices::{
    IO_REPARSE_TAG_MOUNT_POINT, IO_REPARSE_TAG_SYMLINK,
};

use super::{create_file, cvt, full, open_flags, verbatim, wide, AsFd, FdRef};

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
    pub(super) fn ticks(self) -> i64 {
        let t = (self.sec + EPOCH_DIFF)
            .saturating_mul(TICKS)
            .saturating_add(self.nsec / 100);
        t.max(1)
    }

    pub(super) fn filetime(self) -> FILETIME {
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

    /// Whether the file is marked sparse (`FILE_ATTRIBUTE_SPARSE_FILE`):
    /// only such files have holes on Windows.
    pub fn looks_sparse(&self) -> bool {
        use windows_sys::Win32::Storage::FileSystem::FILE_ATTRIBUTE_SPARSE_FILE;
        self.size > 0 && self.attributes & FILE_ATTRIBUTE_SPARSE_FILE != 0
    }

    /// The bytes a copy moves as data, for progress totals: the size (the
    /// allocated size is not in this record).
    pub fn data_bytes(&self) -> u64 {
        self.size
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

/// What proves later that a directory is this one and not another given
/// its file index: the volume, the index (on NTFS its top 16 bits are the
/// record's sequence number, raised each time the record is reused) and
/// the creation time.
pub fn identity(fd: FdRef) -> io::Result<Vec<u8>> {
    let st = fstat(fd)?;
    let mut v = Vec::with_capacity(24);
    v.extend_from_slice(&st.dev.to_le_bytes());
    v.extend_from_slice(&st.ino.to_le_bytes());
    v.extend_from_slice(&st.btime.ticks().to_le_bytes());
    Ok(v)
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
