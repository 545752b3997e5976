//! Calls that are the same on every Unix kopiru supports: all directory-relative
//! (`*at`) so that paths longer than PATH_MAX work and nothing is looked up twice.

use super::Space;
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::Path;

/// An open file descriptor, closed on drop.
pub type Fd = OwnedFd;
/// A borrowed file descriptor.
pub type FdRef<'a> = BorrowedFd<'a>;

pub(crate) fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

pub(crate) fn cvt_size(ret: libc::ssize_t) -> io::Result<usize> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret as usize)
    }
}

/// Retries a call interrupted by a signal.
pub(crate) fn retry<T>(mut f: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match f() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// A point in time with nanoseconds, as the kernel keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Timespec {
    /// Seconds since the epoch.
    pub sec: i64,
    /// Nanoseconds within the second.
    pub nsec: i64,
}

impl Timespec {
    fn to_libc(self) -> libc::timespec {
        libc::timespec {
            // `as _`: naming libc::time_t warns on musl (deprecated there
            // until the libc crate settles its width; 64-bit on 64-bit
            // targets either way).
            tv_sec: self.sec as _,
            tv_nsec: self.nsec as _,
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
    /// A symbolic link.
    Symlink,
    /// A named pipe.
    Fifo,
    /// A character device.
    CharDevice,
    /// A block device.
    BlockDevice,
    /// A Unix socket.
    Socket,
}

impl FileKind {
    /// The kind encoded in a `st_mode`.
    pub fn from_mode(mode: u32) -> FileKind {
        match mode & libc::S_IFMT as u32 {
            m if m == libc::S_IFDIR as u32 => FileKind::Dir,
            m if m == libc::S_IFLNK as u32 => FileKind::Symlink,
            m if m == libc::S_IFIFO as u32 => FileKind::Fifo,
            m if m == libc::S_IFCHR as u32 => FileKind::CharDevice,
            m if m == libc::S_IFBLK as u32 => FileKind::BlockDevice,
            m if m == libc::S_IFSOCK as u32 => FileKind::Socket,
            _ => FileKind::File,
        }
    }

    pub(crate) fn from_dtype(d_type: u8) -> Option<FileKind> {
        Some(match d_type {
            libc::DT_REG => FileKind::File,
            libc::DT_DIR => FileKind::Dir,
            libc::DT_LNK => FileKind::Symlink,
            libc::DT_FIFO => FileKind::Fifo,
            libc::DT_CHR => FileKind::CharDevice,
            libc::DT_BLK => FileKind::BlockDevice,
            libc::DT_SOCK => FileKind::Socket,
            _ => return None,
        })
    }
}

/// One entry of a directory listing.
pub struct DirEntry {
    /// The entry's name.
    pub name: CString,
    /// Its kind, when the filesystem reports it (`d_type`); `None` means stat it.
    pub kind: Option<FileKind>,
    /// Inode number, for ordering.
    pub ino: u64,
}

/// The fields of `stat` kopiru uses.
#[derive(Clone, Copy, Debug)]
pub struct Stat {
    /// Device the inode lives on.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
    /// Type and permission bits.
    pub mode: u32,
    /// Number of hard links.
    pub nlink: u64,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Device number, for device nodes.
    pub rdev: u64,
    /// Size in bytes.
    pub size: u64,
    /// Allocated 512-byte blocks.
    pub blocks: u64,
    /// Last access.
    pub atime: Timespec,
    /// Last modification.
    pub mtime: Timespec,
}

impl Stat {
    fn from_libc(st: &libc::stat) -> Stat {
        Stat {
            dev: st.st_dev as u64,
            ino: st.st_ino as u64,
            mode: st.st_mode as u32,
            nlink: st.st_nlink as u64,
            uid: st.st_uid,
            gid: st.st_gid,
            rdev: st.st_rdev as u64,
            size: st.st_size as u64,
            blocks: st.st_blocks as u64,
            atime: Timespec {
                sec: st.st_atime as i64,
                nsec: st.st_atime_nsec as i64,
            },
            mtime: Timespec {
                sec: st.st_mtime as i64,
                nsec: st.st_mtime_nsec as i64,
            },
        }
    }

    /// The kind of file.
    pub fn kind(&self) -> FileKind {
        FileKind::from_mode(self.mode)
    }

    /// Type and permission bits, as `mknod` takes them.
    pub fn type_and_perm(&self) -> u32 {
        self.mode & (libc::S_IFMT as u32 | 0o777)
    }

    /// Permission bits including setuid, setgid and sticky.
    pub fn perm(&self) -> u32 {
        self.mode & 0o7777
    }

    /// Whether fewer blocks are allocated than the size needs: the file has holes.
    pub fn looks_sparse(&self) -> bool {
        self.size > 0 && self.blocks.saturating_mul(512) < self.size
    }
}

/// `fstat` on an open descriptor.
pub fn fstat(fd: FdRef) -> io::Result<Stat> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `fd` is a borrowed open descriptor; `st` points to room for one `stat`.
    cvt(unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) })?;
    // SAFETY: fstat succeeded (checked by `?` above), so it filled in `st`.
    Ok(Stat::from_libc(unsafe { &st.assume_init() }))
}

/// `fstatat`, not following a final symlink unless `follow`.
pub fn stat_at(dir: FdRef, name: &CStr, follow: bool) -> io::Result<Stat> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    let flags = if follow { 0 } else { libc::AT_SYMLINK_NOFOLLOW };
    // SAFETY: `name` is a NUL-terminated C string; `st` points to room for one `stat`.
    cvt(unsafe { libc::fstatat(dir.as_raw_fd(), name.as_ptr(), st.as_mut_ptr(), flags) })?;
    // SAFETY: fstatat succeeded (checked by `?` above), so it filled in `st`.
    Ok(Stat::from_libc(unsafe { &st.assume_init() }))
}

/// `stat`/`lstat` on a path (used only for the command-line arguments).
pub fn stat_path(path: &Path, follow: bool) -> io::Result<Stat> {
    let c = super::cstring(path.as_os_str())?;
    stat_at(cwd(), &c, follow)
}

/// The current directory as a directory descriptor for `*at` calls.
pub fn cwd() -> FdRef<'static> {
    // SAFETY: AT_FDCWD is not -1 and is never closed; `*at` calls take it as the current
    // directory (other calls on it just fail with EBADF).
    unsafe { BorrowedFd::borrow_raw(libc::AT_FDCWD) }
}

pub(crate) fn open_raw(dir: FdRef, name: &CStr, flags: libc::c_int, mode: u32) -> io::Result<Fd> {
    let flags = flags | libc::O_CLOEXEC | libc::O_NOCTTY;
    retry(|| {
        // SAFETY: `name` is a NUL-terminated C string that outlives the call; `dir` is borrowed.
        let fd = cvt(unsafe {
            libc::openat(dir.as_raw_fd(), name.as_ptr(), flags, mode as libc::c_uint)
        })?;
        // SAFETY: openat succeeded, so `fd` is a new open descriptor that nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    })
}

/// Opens a source file or directory read-only, never following a final
/// symlink unless `follow`. With `noatime`, asks the kernel not to update the
/// access time (so reading the source does not modify it); callers retry
/// without when this returns EPERM (not the owner).
pub fn open_source(
    dir: FdRef,
    name: &CStr,
    is_dir: bool,
    follow: bool,
    noatime: bool,
) -> io::Result<Fd> {
    let mut flags = libc::O_RDONLY;
    if is_dir {
        flags |= libc::O_DIRECTORY;
    }
    if !follow {
        flags |= libc::O_NOFOLLOW;
    }
    if noatime {
        flags |= super::O_NOATIME;
    }
    open_raw(dir, name, flags, 0)
}

/// Creates a new file for writing; fails with EEXIST if the name is taken.
pub fn create_new(dir: FdRef, name: &CStr, mode: u32) -> io::Result<Fd> {
    open_raw(
        dir,
        name,
        libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW,
        mode,
    )
}

/// Opens an existing file (not through a symlink) to read and write it:
/// a partial copy that is continued.
pub fn open_existing_rw(dir: FdRef, name: &CStr) -> io::Result<Fd> {
    open_raw(dir, name, libc::O_RDWR | libc::O_NOFOLLOW, 0)
}

/// Opens an existing entry to write into it, as cp writes into an
/// existing destination: a FIFO or device (`follow`: reached through a
/// symlink, as `/dev/stdout` is), or a regular file written in place
/// (`--inplace`), emptied first (`truncate`).
pub fn open_write_existing(
    dir: FdRef,
    name: &CStr,
    follow: bool,
    truncate: bool,
) -> io::Result<Fd> {
    let mut flags = libc::O_WRONLY;
    if !follow {
        flags |= libc::O_NOFOLLOW;
    }
    if truncate {
        flags |= libc::O_TRUNC;
    }
    open_raw(dir, name, flags, 0)
}

/// Opens an existing directory (not through a symlink) for `*at` calls.
pub fn open_dir(dir: FdRef, name: &CStr) -> io::Result<Fd> {
    open_raw(
        dir,
        name,
        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
        0,
    )
}

/// Opens a path for reading (command-line arguments and the probe).
pub fn open_path(path: &Path, flags: libc::c_int) -> io::Result<Fd> {
    let c = super::cstring(path.as_os_str())?;
    open_raw(cwd(), &c, flags, 0)
}

/// Opens a path with `flags` (`O_CREAT`: made with `mode`), for the
/// devices and images of `flash` and `image`.
pub fn open_path_mode(path: &Path, flags: libc::c_int, mode: u32) -> io::Result<Fd> {
    let c = super::cstring(path.as_os_str())?;
    open_raw(cwd(), &c, flags, mode)
}

/// [`open_uncached`](super::open_uncached) of a path.
pub fn open_path_uncached(path: &Path) -> io::Result<Fd> {
    let c = super::cstring(path.as_os_str())?;
    super::open_uncached(cwd(), &c)
}

/// `mkdirat`.
pub fn mkdir_at(dir: FdRef, name: &CStr, mode: u32) -> io::Result<()> {
    // SAFETY: `dir` is a borrowed descriptor and `name` a NUL-terminated C string.
    cvt(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode as libc::mode_t) })?;
    Ok(())
}

/// `readlinkat`, for any length of target.
pub fn read_link_at(dir: FdRef, name: &CStr) -> io::Result<CString> {
    let mut buf = vec![0u8; 256];
    loop {
        // SAFETY: `name` is NUL-terminated; `buf` is valid for writes of `buf.len()` bytes.
        let n = cvt_size(unsafe {
            libc::readlinkat(
                dir.as_raw_fd(),
                name.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        })?;
        if n < buf.len() {
            buf.truncate(n);
            return CString::new(buf).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL));
        }
        buf.resize(buf.len() * 4, 0);
    }
}

/// `symlinkat`.
pub fn symlink_at(target: &CStr, dir: FdRef, name: &CStr) -> io::Result<()> {
    // SAFETY: `target` and `name` are NUL-terminated C strings; `dir` is borrowed.
    cvt(unsafe { libc::symlinkat(target.as_ptr(), dir.as_raw_fd(), name.as_ptr()) })?;
    Ok(())
}

/// `linkat` without following symlinks.
pub fn link_at(old_dir: FdRef, old: &CStr, new_dir: FdRef, new: &CStr) -> io::Result<()> {
    // SAFETY: `old` and `new` are NUL-terminated C strings; both directories are borrowed.
    cvt(unsafe {
        libc::linkat(
            old_dir.as_raw_fd(),
            old.as_ptr(),
            new_dir.as_raw_fd(),
            new.as_ptr(),
            0,
        )
    })?;
    Ok(())
}

/// `renameat`, replacing the target.
pub fn rename_at(old_dir: FdRef, old: &CStr, new_dir: FdRef, new: &CStr) -> io::Result<()> {
    // SAFETY: `old` and `new` are NUL-terminated C strings; both directories are borrowed.
    cvt(unsafe {
        libc::renameat(
            old_dir.as_raw_fd(),
            old.as_ptr(),
            new_dir.as_raw_fd(),
            new.as_ptr(),
        )
    })?;
    Ok(())
}

/// `unlinkat` of a file (or of a directory with `dir`).
pub fn unlink_at(dir: FdRef, name: &CStr, is_dir: bool) -> io::Result<()> {
    let flags = if is_dir { libc::AT_REMOVEDIR } else { 0 };
    // SAFETY: `dir` is a borrowed descriptor and `name` a NUL-terminated C string.
    cvt(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) })?;
    Ok(())
}

/// `mknodat`: re-creates a FIFO, device node or socket.
pub fn mknod_at(dir: FdRef, name: &CStr, mode: u32, rdev: u64) -> io::Result<()> {
    // SAFETY: `dir` is a borrowed descriptor and `name` a NUL-terminated C string.
    cvt(unsafe {
        libc::mknodat(
            dir.as_raw_fd(),
            name.as_ptr(),
            mode as libc::mode_t,
            rdev as libc::dev_t,
        )
    })?;
    Ok(())
}

/// `fchmod`.
pub fn fchmod(fd: FdRef, mode: u32) -> io::Result<()> {
    // SAFETY: plain libc call on a borrowed descriptor; no memory is passed.
    cvt(unsafe { libc::fchmod(fd.as_raw_fd(), mode as libc::mode_t) })?;
    Ok(())
}

/// `fchown`.
pub fn fchown(fd: FdRef, uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: plain libc call on a borrowed descriptor; no memory is passed.
    cvt(unsafe { libc::fchown(fd.as_raw_fd(), uid, gid) })?;
    Ok(())
}

/// `fchownat` without following a final symlink.
pub fn chown_at(dir: FdRef, name: &CStr, uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: `dir` is a borrowed descriptor and `name` a NUL-terminated C string.
    cvt(unsafe {
        libc::fchownat(
            dir.as_raw_fd(),
            name.as_ptr(),
            uid,
            gid,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })?;
    Ok(())
}

/// `futimens`: access and modification times to the nanosecond.
pub fn futimens(fd: FdRef, atime: Timespec, mtime: Timespec) -> io::Result<()> {
    let times = [atime.to_libc(), mtime.to_libc()];
    // SAFETY: `times` is the array of two timespecs futimens reads; `fd` is borrowed.
    cvt(unsafe { libc::futimens(fd.as_raw_fd(), times.as_ptr()) })?;
    Ok(())
}

/// `utimensat` without following a final symlink.
pub fn utimens_at(dir: FdRef, name: &CStr, atime: Timespec, mtime: Timespec) -> io::Result<()> {
    let times = [atime.to_libc(), mtime.to_libc()];
    // SAFETY: `name` is NUL-terminated and `times` holds the two timespecs utimensat reads.
    cvt(unsafe {
        libc::utimensat(
            dir.as_raw_fd(),
            name.as_ptr(),
            times.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })?;
    Ok(())
}

/// `read` into `buf`, retrying on EINTR.
pub fn read(fd: FdRef, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes; `fd` is borrowed.
    retry(|| cvt_size(unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) }))
}

/// `pread` at `offset`.
pub fn pread(fd: FdRef, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    retry(|| {
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes; `fd` is borrowed.
        cvt_size(unsafe {
            libc::pread(
                fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                offset as libc::off_t,
            )
        })
    })
}

/// Writes all of `buf` at the current position: into a pipe, a FIFO or a
/// character device, which have no offsets.
pub fn write_all(fd: FdRef, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        let n = retry(|| {
            // SAFETY: `buf` is valid for reads of `buf.len()` bytes; `fd` is borrowed.
            cvt_size(unsafe { libc::write(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) })
        })?;
        if n == 0 {
            return Err(io::Error::from(io::ErrorKind::WriteZero));
        }
        buf = &buf[n..];
    }
    Ok(())
}

/// Writes all of `buf` at `offset`.
pub fn pwrite_all(fd: FdRef, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        let n = retry(|| {
            // SAFETY: `buf` is valid for reads of `buf.len()` bytes; `fd` is borrowed.
            cvt_size(unsafe {
                libc::pwrite(
                    fd.as_raw_fd(),
                    buf.as_ptr().cast(),
                    buf.len(),
                    offset as libc::off_t,
                )
            })
        })?;
        if n == 0 {
            return Err(io::Error::from(io::ErrorKind::WriteZero));
        }
        buf = &buf[n..];
        offset += n as u64;
    }
    Ok(())
}

/// `ftruncate`.
pub fn ftruncate(fd: FdRef, len: u64) -> io::Result<()> {
    // SAFETY: plain libc call on a borrowed descriptor; no memory is passed.
    retry(|| cvt(unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) }))?;
    Ok(())
}

/// Where the next data (or hole) begins at or after `offset`; `None` past the
/// last data.
pub fn seek_data(fd: FdRef, offset: u64, hole: bool) -> io::Result<Option<u64>> {
    let whence = if hole {
        libc::SEEK_HOLE
    } else {
        libc::SEEK_DATA
    };
    // SAFETY: plain libc call on a borrowed descriptor; it only moves the file offset.
    let r = unsafe { libc::lseek(fd.as_raw_fd(), offset as libc::off_t, whence) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENXIO) {
            return Ok(None);
        }
        return Err(e);
    }
    Ok(Some(r as u64))
}

/// Nothing to do: on Unix a range never written is a hole already.
pub fn make_sparse(_fd: FdRef) -> io::Result<()> {
    Ok(())
}

/// Lists extended attribute names of an open file.
pub fn xattr_list(fd: FdRef) -> io::Result<Vec<CString>> {
    let mut buf = vec![0u8; 1024];
    let n = loop {
        match super::flistxattr_raw(fd, &mut buf) {
            Ok(n) => break n,
            Err(e) if e.raw_os_error() == Some(libc::ERANGE) => {
                let need = super::flistxattr_raw(fd, &mut [])?;
                buf.resize(need.max(buf.len() * 2), 0);
            }
            Err(e) => return Err(e),
        }
    };
    Ok(buf[..n]
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| CString::new(s).expect("split on NUL"))
        .collect())
}

/// Reads one extended attribute value of an open file.
pub fn xattr_get(fd: FdRef, name: &CStr) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; 256];
    loop {
        match super::fgetxattr_raw(fd, name, &mut buf) {
            Ok(n) => {
                buf.truncate(n);
                return Ok(buf);
            }
            Err(e) if e.raw_os_error() == Some(libc::ERANGE) => {
                let need = super::fgetxattr_raw(fd, name, &mut [])?;
                buf.resize(need.max(buf.len() * 2), 0);
            }
            Err(e) => return Err(e),
        }
    }
}

/// Whether we may write `name` in `dir` (`faccessat` with our effective
/// ids): whether cp could open it to write into it.
pub fn writable_at(dir: FdRef, name: &CStr) -> bool {
    // SAFETY: `dir` is a borrowed descriptor and `name` a NUL-terminated C string.
    unsafe { libc::faccessat(dir.as_raw_fd(), name.as_ptr(), libc::W_OK, libc::AT_EACCESS) == 0 }
}

/// `fchmodat` (the target is never a symlink: used on FIFOs and device nodes
/// kopiru just created).
pub fn chmod_at(dir: FdRef, name: &CStr, mode: u32) -> io::Result<()> {
    // SAFETY: `dir` is a borrowed descriptor and `name` a NUL-terminated C string.
    cvt(unsafe { libc::fchmodat(dir.as_raw_fd(), name.as_ptr(), mode as libc::mode_t, 0) })?;
    Ok(())
}

/// Closes a descriptor and reports the error `close` returns (NFS and some
/// FUSE filesystems report write-back failures only here).
pub fn close(fd: Fd) -> io::Result<()> {
    use std::os::fd::IntoRawFd;
    // SAFETY: `into_raw_fd` gave up ownership, so the descriptor is closed exactly once.
    cvt(unsafe { libc::close(fd.into_raw_fd()) })?;
    Ok(())
}

/// Nothing on Unix: owners are `fchown`'s, ACLs are xattrs.
#[inline]
pub fn copy_security(_src: FdRef, _dst: FdRef) -> (io::Result<()>, io::Result<()>) {
    (Ok(()), Ok(()))
}

/// Whether [`copy_file_new`] exists: no, on Unix (Windows' CopyFile2).
pub const COPY_CREATES_FILE: bool = false;

/// Never on Unix: see [`COPY_CREATES_FILE`].
#[inline]
pub fn has_copy_file2() -> bool {
    false
}

/// Not on Unix: see [`COPY_CREATES_FILE`].
pub fn copy_file_new(
    _src: FdRef,
    _dir: FdRef,
    _name: &CStr,
    _mode: u32,
    _go_on: &mut dyn FnMut(u64) -> bool,
) -> io::Result<Fd> {
    Err(super::unsupported())
}

/// Where the tree code closes the destination files it finished: on Unix,
/// at once on the worker ([`close`]), so that an error `close` returns is
/// that file's error. (Windows closes them on a pool of threads.)
#[derive(Default)]
pub struct Closer;

impl Closer {
    /// A closer for one run.
    pub fn new() -> Closer {
        Closer
    }

    /// Closes `fd` now: [`close`].
    #[inline]
    pub fn close(&self, fd: Fd) -> io::Result<()> {
        close(fd)
    }

    /// Nothing is left to close on Unix: no errors.
    pub fn finish(&self) -> Vec<(std::path::PathBuf, io::Error)> {
        Vec::new()
    }
}

/// Where the OS says outright that `fd` is on a network share, the
/// protocol: never here, where the filesystem's type says it
/// ([`round_trip_fs`](super::round_trip_fs)).
pub fn remote_share(_fd: FdRef) -> Option<String> {
    None
}

/// Free bytes and the block size of the filesystem of `fd`.
pub fn fs_space(fd: FdRef) -> io::Result<Space> {
    let mut st = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: `fd` is a borrowed open descriptor; `st` points to room for one `statfs`.
    cvt(unsafe { libc::fstatfs(fd.as_raw_fd(), st.as_mut_ptr()) })?;
    // SAFETY: fstatfs succeeded (checked by `?` above), so it filled in `st`.
    let st = unsafe { st.assume_init() };
    Ok(Space {
        free: st.f_bfree as u64 * st.f_bsize as u64,
        block: st.f_bsize as u64,
    })
}
