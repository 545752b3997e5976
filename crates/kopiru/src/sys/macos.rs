//! macOS: clonefile/fclonefileat, readdir. Compile-checked only (CI has no Mac).

use super::unix::{cvt, cvt_size, DirEntry, FdRef, FileKind};
use super::{BlockInfo, Extent, Mount, Shared};
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, AsRawFd};

// macOS has no O_NOATIME; reading a source there may update its atime.
pub(crate) const O_NOATIME: libc::c_int = 0;

/// Whether cloning creates the destination itself (`fclonefileat`) rather than
/// filling an already-open one.
pub const CLONE_CREATES_FILE: bool = true;

/// What proves later that a directory is this one and not another given
/// its inode number: device, inode and birth time (APFS does not reuse
/// inode numbers; the birth time guards HFS+).
pub fn identity(fd: FdRef) -> io::Result<Vec<u8>> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `fd` is a borrowed open descriptor; `st` points to room for one `stat`.
    cvt(unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) })?;
    // SAFETY: fstat succeeded, so it filled in `st`.
    let st = unsafe { st.assume_init() };
    let mut v = Vec::with_capacity(32);
    v.extend_from_slice(&(st.st_dev as u64).to_le_bytes());
    v.extend_from_slice(&(st.st_ino as u64).to_le_bytes());
    v.extend_from_slice(&(st.st_birthtime as i64).to_le_bytes());
    v.extend_from_slice(&(st.st_birthtime_nsec as i64).to_le_bytes());
    Ok(v)
}

/// Reads every entry of an open directory, except `.` and `..`.
pub fn read_dir(dir: FdRef) -> io::Result<Vec<DirEntry>> {
    // SAFETY: plain libc call on a borrowed descriptor; no memory is passed.
    let fd = cvt(unsafe { libc::dup(dir.as_raw_fd()) })?;
    // SAFETY: `fd` is our own duplicate; on success the DIR owns it (closedir closes it).
    let d = unsafe { libc::fdopendir(fd) };
    if d.is_null() {
        let e = io::Error::last_os_error();
        // SAFETY: fdopendir failed, so `fd` is still ours; it is closed once, here.
        unsafe { libc::close(fd) };
        return Err(e);
    }
    // SAFETY: `d` is the non-null DIR that fdopendir just returned.
    unsafe { libc::rewinddir(d) };
    let mut out = Vec::new();
    loop {
        // SAFETY: `d` is a valid DIR, used by this thread only and not yet closed.
        let ent = unsafe { libc::readdir(d) };
        if ent.is_null() {
            break;
        }
        // SAFETY: `ent` is non-null and stays valid until the next readdir or closedir on `d`;
        // the reference does not outlive this iteration.
        let ent = unsafe { &*ent };
        // SAFETY: readdir's `d_name` is NUL-terminated and lives as long as `ent`.
        let name = unsafe { CStr::from_ptr(ent.d_name.as_ptr()) };
        let bytes = name.to_bytes();
        if bytes != b"." && bytes != b".." {
            out.push(DirEntry {
                name: name.to_owned(),
                kind: FileKind::from_dtype(ent.d_type),
                ino: ent.d_ino,
            });
        }
    }
    // SAFETY: `d` is valid and closed once, here; this also closes `fd`.
    unsafe { libc::closedir(d) };
    Ok(out)
}

/// Not on macOS: clones there create the destination ([`clone_new`]).
pub fn clone_fd(_src: FdRef, _dst: FdRef) -> io::Result<()> {
    Err(super::unsupported())
}

/// Clones an open file to a new name (`fclonefileat`), data and metadata.
pub fn clone_new(src: FdRef, dir: FdRef, name: &CStr) -> io::Result<()> {
    const CLONE_NOFOLLOW: u32 = 0x0001;
    // SAFETY: `src` and `dir` are borrowed descriptors; `name` is a NUL-terminated C string.
    cvt(unsafe {
        libc::fclonefileat(
            src.as_raw_fd(),
            dir.as_raw_fd(),
            name.as_ptr(),
            CLONE_NOFOLLOW,
        )
    })?;
    Ok(())
}

/// Whether a whole directory tree can be cloned in one call ([`clone_tree`]).
pub const CLONES_TREES: bool = true;

/// Clones a whole directory tree in one call (`clonefileat`): data shared,
/// mode, times, xattrs and ACLs kept; owner kept only when privileged, and
/// setuid/setgid bits of regular files cleared (clonefile(2)).
pub fn clone_tree(src_dir: FdRef, src: &CStr, dst_dir: FdRef, dst: &CStr) -> io::Result<()> {
    const CLONE_NOFOLLOW: u32 = 0x0001;
    // SAFETY: `src` and `dst` are NUL-terminated C strings; both directories are borrowed.
    cvt(unsafe {
        libc::clonefileat(
            src_dir.as_raw_fd(),
            src.as_ptr(),
            dst_dir.as_raw_fd(),
            dst.as_ptr(),
            CLONE_NOFOLLOW,
        )
    })?;
    Ok(())
}

/// No `O_TMPFILE` on macOS: new files get a temporary name.
pub const HAS_ANONYMOUS: bool = false;

/// Never called (`HAS_ANONYMOUS` is false).
pub fn create_anonymous(_dir: FdRef, _mode: u32) -> io::Result<super::Fd> {
    Err(io::Error::from_raw_os_error(libc::ENOTSUP))
}

/// Never called (`HAS_ANONYMOUS` is false).
pub fn link_anonymous(_fd: FdRef, _dir: FdRef, _name: &CStr) -> io::Result<()> {
    Err(io::Error::from_raw_os_error(libc::ENOTSUP))
}

/// Whether the platform has an in-kernel copy call at all.
pub const HAS_OFFLOAD: bool = false;

/// macOS has no `copy_file_range`.
pub fn copy_range(_src: FdRef, _so: u64, _dst: FdRef, _do: u64, _len: usize) -> io::Result<usize> {
    Err(super::unsupported())
}

pub(crate) fn flistxattr_raw(fd: FdRef, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes (empty: only the size is asked).
    cvt_size(unsafe { libc::flistxattr(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) })
}

pub(crate) fn fgetxattr_raw(fd: FdRef, name: &CStr, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `name` is NUL-terminated; `buf` is valid for writes of `buf.len()` bytes.
    cvt_size(unsafe {
        libc::fgetxattr(
            fd.as_raw_fd(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            0,
            0,
        )
    })
}

/// Sets one extended attribute on an open file.
pub fn xattr_set(fd: FdRef, name: &CStr, value: &[u8]) -> io::Result<()> {
    // SAFETY: `name` is NUL-terminated; `value` is valid for reads of `value.len()` bytes.
    cvt(unsafe {
        libc::fsetxattr(
            fd.as_raw_fd(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
            0,
        )
    })?;
    Ok(())
}

/// The name of the filesystem an open file lives on ("apfs", "hfs", ...).
pub fn fs_type(fd: FdRef) -> io::Result<String> {
    let mut st = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: `fd` is a borrowed open descriptor; `st` points to room for one `statfs`.
    cvt(unsafe { libc::fstatfs(fd.as_raw_fd(), st.as_mut_ptr()) })?;
    // SAFETY: fstatfs succeeded (checked by `?` above), so it filled in `st`.
    let st = unsafe { st.assume_init() };
    // SAFETY: the kernel fills `f_fstypename` with a NUL-terminated name; `st` outlives `name`.
    let name = unsafe { CStr::from_ptr(st.f_fstypename.as_ptr()) };
    Ok(name.to_string_lossy().into_owned())
}

/// Whether the filesystem of `fd` is on a local device: macOS marks those
/// mounts MNT_LOCAL (APFS, HFS+, FAT and exFAT on an internal, external or
/// disk-image device); never a network one.
pub fn on_local_device(fd: FdRef) -> bool {
    let mut st = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: `fd` is a borrowed open descriptor; `st` points to room for one `statfs`.
    if unsafe { libc::fstatfs(fd.as_raw_fd(), st.as_mut_ptr()) } != 0 {
        return false;
    }
    // SAFETY: fstatfs succeeded, so it filled in `st`.
    let st = unsafe { st.assume_init() };
    st.f_flags & libc::MNT_LOCAL as u32 != 0
}

/// Whether [`sync_fs`] writes every file's dirty data: not on macOS, where
/// `F_FULLFSYNC` only flushes the drive's cache.
pub const FS_SYNC_WRITES_FILES: bool = false;

/// macOS has no `syncfs`, so this writes the file's data to the drive now
/// (`fsync`); the one `F_FULLFSYNC` at the end ([`sync_fs`]) then flushes the
/// drive's cache for all of them.
pub fn before_fs_sync(fd: FdRef) -> io::Result<()> {
    // SAFETY: plain libc call on a borrowed descriptor; no memory is passed.
    cvt(unsafe { libc::fsync(fd.as_raw_fd()) })?;
    Ok(())
}

/// Makes one file durable: `F_FULLFSYNC`, since `fsync` on macOS stops at the
/// drive's volatile cache.
pub fn sync_file(fd: FdRef) -> io::Result<()> {
    // SAFETY: plain libc call on a borrowed descriptor; no memory is passed.
    match cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_FULLFSYNC) }) {
        // Filesystems without it (network, FAT) get a plain fsync.
        Err(e) if e.raw_os_error() == Some(libc::ENOTSUP) => {
            // SAFETY: plain libc call on a borrowed descriptor; no memory is passed.
            cvt(unsafe { libc::fsync(fd.as_raw_fd()) })?;
            Ok(())
        }
        r => r.map(drop),
    }
}

/// Flushes the drive's cache (`F_FULLFSYNC`). Unlike Linux `syncfs`, this
/// does not write other files' dirty data: [`write_back`] did that per file.
pub fn sync_fs(fd: FdRef) -> io::Result<()> {
    sync_file(fd)
}

/// `renameatx_np(RENAME_EXCL)`: fails with EEXIST instead of replacing.
pub fn rename_noreplace(old_dir: FdRef, old: &CStr, new_dir: FdRef, new: &CStr) -> io::Result<()> {
    // SAFETY: `old` and `new` are NUL-terminated C strings; both directories are borrowed.
    cvt(unsafe {
        libc::renameatx_np(
            old_dir.as_raw_fd(),
            old.as_ptr(),
            new_dir.as_raw_fd(),
            new.as_ptr(),
            libc::RENAME_EXCL,
        )
    })?;
    Ok(())
}

/// Opens a file for reading with the cache bypassed (`F_NOCACHE`).
pub fn open_uncached(dir: FdRef, name: &CStr) -> io::Result<super::Fd> {
    let fd = super::unix::open_raw(dir, name, libc::O_RDONLY | libc::O_NOFOLLOW, 0)?;
    // SAFETY: plain libc call on the descriptor just opened; F_NOCACHE takes an int, no memory.
    cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_NOCACHE, 1) })?;
    Ok(fd)
}

/// macOS has no FIEMAP: no extent map, so files already sharing blocks are
/// not recognised and are cloned again.
pub fn extents(_fd: FdRef) -> io::Result<Vec<Extent>> {
    Ok(Vec::new())
}

/// Whether the filesystem of `fd` clones files (APFS).
pub fn can_share_blocks(fd: FdRef) -> bool {
    fs_type(fd).is_ok_and(|t| t == "apfs")
}

/// macOS has no verified dedupe: clones `src` to a temporary name beside
/// `dst`, compares the clone with `dst` byte for byte, gives it `dst`'s
/// mode, owner, times and extended attributes, and renames it over `dst`.
/// (A write to `dst` between the comparison and the rename would be lost;
/// the kernel's lock on Linux has no such window.)
pub fn share_blocks(
    src: FdRef,
    dst: FdRef,
    dst_dir: FdRef,
    dst_name: &CStr,
    len: u64,
) -> io::Result<Shared> {
    let tmp = CString::new(format!(".kopiru-tmp.dedupe.{}", std::process::id())).expect("no NUL");
    clone_new(src, dst_dir, &tmp)?;
    let result = (|| {
        let clone = super::unix::open_raw(dst_dir, &tmp, libc::O_RDONLY | libc::O_NOFOLLOW, 0)?;
        if !same_bytes(clone.as_fd(), dst, len)? {
            return Ok(Shared::Differs);
        }
        let st = super::unix::fstat(dst)?;
        for name in super::unix::xattr_list(dst)? {
            let value = super::unix::xattr_get(dst, &name)?;
            xattr_set(clone.as_fd(), &name, &value)?;
        }
        super::unix::fchown(clone.as_fd(), st.uid, st.gid)?;
        super::unix::fchmod(clone.as_fd(), st.perm())?;
        super::unix::futimens(clone.as_fd(), st.atime, st.mtime)?;
        super::unix::rename_at(dst_dir, &tmp, dst_dir, dst_name)?;
        Ok(Shared::Done)
    })();
    if !matches!(result, Ok(Shared::Done)) {
        let _ = super::unix::unlink_at(dst_dir, &tmp, false);
    }
    result
}

fn same_bytes(a: FdRef, b: FdRef, len: u64) -> io::Result<bool> {
    let (mut x, mut y) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    let mut off = 0u64;
    while off < len {
        let n = ((len - off) as usize).min(x.len());
        let (ra, rb) = (
            super::unix::pread(a, &mut x[..n], off)?,
            super::unix::pread(b, &mut y[..n], off)?,
        );
        if ra != rb || ra == 0 || x[..ra] != y[..rb] {
            return Ok(false);
        }
        off += ra as u64;
    }
    Ok(true)
}

/// Not written for macOS yet (`DKIOCGETBLOCKCOUNT` and friends): refused.
pub fn block_info(_fd: FdRef, _rdev: u64) -> io::Result<BlockInfo> {
    Err(super::unsupported())
}

/// Not written for macOS yet.
pub fn partitions(_rdev: u64) -> Vec<u64> {
    Vec::new()
}

/// Not written for macOS yet (getfsstat).
pub fn mounts() -> Vec<(u64, String)> {
    Vec::new()
}

/// Not read on macOS yet (`kopiru image` is Linux-only).
pub fn mount_modes() -> Vec<Mount> {
    Vec::new()
}

/// Opens a device with an exclusive lock.
pub const O_EXCLUSIVE_DEVICE: libc::c_int = libc::O_EXLOCK;
/// [`O_EXCLUSIVE_DEVICE`] for a check that must not wait for the lock.
pub const O_EXCLUSIVE_PROBE: libc::c_int = libc::O_EXLOCK | libc::O_NONBLOCK;

/// Not written for macOS yet (IOKit's media tree).
pub fn built_on(_rdev: u64) -> Vec<super::BuiltOn> {
    Vec::new()
}

/// Not written for macOS yet.
pub fn block_name(_rdev: u64) -> Option<std::path::PathBuf> {
    None
}
/// No O_DIRECT on macOS (F_NOCACHE is set after opening instead).
pub const O_DIRECT: libc::c_int = 0;

/// Not written for macOS yet.
pub fn zero_out(_fd: FdRef, _len: u64) -> io::Result<()> {
    Err(super::unsupported())
}

/// Not written for macOS yet.
pub fn is_partition(_rdev: u64) -> bool {
    false
}

/// The platform's name, for messages.
pub const PLATFORM: &str = "macOS";

/// What kopiru does not do on macOS yet (see [`super::available`]).
pub const LACKS: &[super::Feature] = &[super::Feature::Image];

/// Not written for macOS yet (IOKit's media tree): none listed.
pub fn disks() -> Vec<super::Disk> {
    Vec::new()
}

/// Not written for macOS yet.
pub fn udev_label(_dev: &std::path::Path) -> Option<String> {
    None
}
