//! Linux: FICLONE, copy_file_range, getdents64, O_NOATIME.

use super::unix::{cvt, cvt_size, retry, DirEntry, FdRef, FileKind};
use super::{BlockInfo, Extent, Mount, Shared};
use std::cell::RefCell;
use std::ffi::CStr;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

pub(crate) const O_NOATIME: libc::c_int = libc::O_NOATIME;

/// Whether cloning creates the destination itself (macOS `fclonefileat`) rather
/// than filling an already-open one (Linux `FICLONE`).
pub const CLONE_CREATES_FILE: bool = false;

thread_local! {
    // One large buffer per thread, reused: big getdents64 reads cut syscalls on
    // large directories (glibc's readdir uses 32 KiB).
    static DENTS_BUF: RefCell<Vec<u8>> = RefCell::new(vec![0u8; 256 * 1024]);
}

/// Reads every entry of an open directory, except `.` and `..`, from its
/// start (as on the other systems), even if `dir` was read before.
pub fn read_dir(dir: FdRef) -> io::Result<Vec<DirEntry>> {
    // SAFETY: lseek on a descriptor we borrow; it moves only its offset.
    cvt_size(unsafe { libc::lseek(dir.as_raw_fd(), 0, libc::SEEK_SET) } as libc::ssize_t)?;
    DENTS_BUF.with(|buf| {
        let mut buf = buf.borrow_mut();
        let mut out = Vec::new();
        loop {
            let n = retry(|| {
                // SAFETY: `buf` is valid for writes of `buf.len()` bytes; `dir` is borrowed.
                cvt_size(unsafe {
                    libc::syscall(
                        libc::SYS_getdents64,
                        dir.as_raw_fd(),
                        buf.as_mut_ptr(),
                        buf.len(),
                    ) as libc::ssize_t
                })
            })?;
            if n == 0 {
                return Ok(out);
            }
            let mut pos = 0;
            while pos < n {
                // struct linux_dirent64 { u64 ino; i64 off; u16 reclen; u8 type; char name[]; }
                let rec = &buf[pos..n];
                let ino = u64::from_ne_bytes(rec[0..8].try_into().expect("8 bytes"));
                let reclen = u16::from_ne_bytes([rec[16], rec[17]]) as usize;
                let d_type = rec[18];
                let name = CStr::from_bytes_until_nul(&rec[19..reclen])
                    .map_err(|_| io::Error::from_raw_os_error(libc::EIO))?;
                let bytes = name.to_bytes();
                if bytes != b"." && bytes != b".." {
                    out.push(DirEntry {
                        name: name.to_owned(),
                        kind: FileKind::from_dtype(d_type),
                        ino,
                    });
                }
                pos += reclen;
            }
        }
    })
}

/// Makes `dst` share all of `src`'s data blocks (`FICLONE`).
pub fn clone_fd(src: FdRef, dst: FdRef) -> io::Result<()> {
    // SAFETY: FICLONE takes the source descriptor as its int argument; no memory is passed.
    cvt(unsafe { libc::ioctl(dst.as_raw_fd(), libc::FICLONE, src.as_raw_fd()) })?;
    Ok(())
}

/// Not on Linux: see [`CLONE_CREATES_FILE`].
pub fn clone_new(_src: FdRef, _dir: FdRef, _name: &CStr) -> io::Result<()> {
    Err(super::unsupported())
}

/// Whether a whole directory tree can be cloned in one call ([`clone_tree`]).
pub const CLONES_TREES: bool = false;

/// Not on Linux: a whole directory cannot be cloned in one call.
pub fn clone_tree(_src_dir: FdRef, _src: &CStr, _dst_dir: FdRef, _dst: &CStr) -> io::Result<()> {
    Err(super::unsupported())
}

/// New files can be made without a name and named once whole
/// ([`create_anonymous`], [`link_anonymous`]), where the filesystem has
/// `O_TMPFILE` and `/proc` is mounted.
pub const HAS_ANONYMOUS: bool = true;

/// A new file without a name in `dir` (`O_TMPFILE`): nobody sees it until
/// [`link_anonymous`] names it, and it vanishes if the process dies first.
/// EOPNOTSUPP (or EISDIR on old kernels) where the filesystem cannot.
pub fn create_anonymous(dir: FdRef, mode: u32) -> io::Result<super::Fd> {
    super::unix::open_raw(dir, c".", libc::O_WRONLY | libc::O_TMPFILE, mode)
}

/// Names the file of `fd` (from [`create_anonymous`]) `name` in `dir`:
/// `linkat(AT_EMPTY_PATH)`, which needs CAP_DAC_READ_SEARCH (ENOENT
/// without it), else `linkat` of its `/proc/self/fd` entry, which needs no
/// privilege but a path lookup through /proc. EEXIST when the name is taken.
pub fn link_anonymous(fd: FdRef, dir: FdRef, name: &CStr) -> io::Result<()> {
    use std::sync::atomic::{AtomicBool, Ordering};
    static EMPTY_PATH_REFUSED: AtomicBool = AtomicBool::new(false);
    if !EMPTY_PATH_REFUSED.load(Ordering::Relaxed) {
        // SAFETY: an empty NUL-terminated name; both descriptors are borrowed.
        let r = cvt(unsafe {
            libc::linkat(
                fd.as_raw_fd(),
                c"".as_ptr(),
                dir.as_raw_fd(),
                name.as_ptr(),
                libc::AT_EMPTY_PATH,
            )
        });
        match r {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                EMPTY_PATH_REFUSED.store(true, Ordering::Relaxed);
            }
            r => return r.map(drop),
        }
    }
    let proc = std::ffi::CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .expect("no NUL in a number");
    // SAFETY: both names are NUL-terminated and outlive the call; `dir` is borrowed.
    cvt(unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            proc.as_ptr(),
            dir.as_raw_fd(),
            name.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    })
    .map(drop)
}

/// What proves later that a directory is this one and not another that
/// was given its inode number after it was deleted: its device, its file
/// handle (`name_to_handle_at`: the inode number with its generation, which
/// ext4, XFS and tmpfs draw at random for each new inode and Btrfs takes
/// from the creating transaction, the same check NFS makes to answer
/// ESTALE), and its birth time where the filesystem keeps one. EOPNOTSUPP
/// where the filesystem gives no handles (then nothing is proven).
pub fn identity(fd: FdRef) -> io::Result<Vec<u8>> {
    const MAX_HANDLE_SZ: usize = 128;
    #[repr(C)]
    struct Handle {
        bytes: libc::c_uint,
        kind: libc::c_int,
        data: [u8; MAX_HANDLE_SZ],
    }
    let mut h = Handle {
        bytes: MAX_HANDLE_SZ as libc::c_uint,
        kind: 0,
        data: [0; MAX_HANDLE_SZ],
    };
    let mut mount_id: libc::c_int = 0;
    // SAFETY: `h` is a `struct file_handle` with room for MAX_HANDLE_SZ bytes
    // (as `bytes` says); the name is an empty NUL-terminated string.
    cvt(unsafe {
        libc::name_to_handle_at(
            fd.as_raw_fd(),
            c"".as_ptr(),
            (&mut h as *mut Handle).cast(),
            &mut mount_id,
            libc::AT_EMPTY_PATH,
        )
    })?;
    let mut stx = std::mem::MaybeUninit::<libc::statx>::zeroed();
    // SAFETY: `stx` points to room for one `statx`; the name is empty and NUL-terminated.
    cvt(unsafe {
        libc::statx(
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_BTIME,
            stx.as_mut_ptr(),
        )
    })?;
    // SAFETY: statx succeeded, so it filled in `stx` (and it was zeroed before).
    let stx = unsafe { stx.assume_init() };
    let dev = super::fstat(fd)?.dev;
    let len = (h.bytes as usize).min(MAX_HANDLE_SZ);
    let mut v = Vec::with_capacity(8 + 4 + len + 12);
    v.extend_from_slice(&dev.to_le_bytes());
    v.extend_from_slice(&h.kind.to_le_bytes());
    v.extend_from_slice(&h.data[..len]);
    if stx.stx_mask & libc::STATX_BTIME != 0 {
        v.extend_from_slice(&stx.stx_btime.tv_sec.to_le_bytes());
        v.extend_from_slice(&stx.stx_btime.tv_nsec.to_le_bytes());
    }
    Ok(v)
}

/// Whether the platform has an in-kernel copy call at all.
pub const HAS_OFFLOAD: bool = true;

/// `copy_file_range` of up to `len` bytes at explicit offsets (so the file
/// positions stay untouched). Returns the bytes copied; 0 means end of file.
pub fn copy_range(
    src: FdRef,
    src_off: u64,
    dst: FdRef,
    dst_off: u64,
    len: usize,
) -> io::Result<usize> {
    let mut so = src_off as libc::loff_t;
    let mut d = dst_off as libc::loff_t;
    retry(|| {
        // SAFETY: `so` and `d` are live `loff_t`s the kernel reads and updates; no buffers.
        cvt_size(unsafe {
            libc::copy_file_range(src.as_raw_fd(), &mut so, dst.as_raw_fd(), &mut d, len, 0)
        })
    })
}

pub(crate) fn flistxattr_raw(fd: FdRef, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes (empty: only the size is asked).
    cvt_size(unsafe { libc::flistxattr(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) })
}

pub(crate) fn fgetxattr_raw(fd: FdRef, name: &CStr, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `name` is NUL-terminated; `buf` is valid for writes of `buf.len()` bytes.
    cvt_size(unsafe {
        libc::fgetxattr(
            fd.as_raw_fd(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
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
        )
    })?;
    Ok(())
}

/// The name of the filesystem an open file lives on ("ext4", "xfs", ...).
pub fn fs_type(fd: FdRef) -> io::Result<String> {
    let mut st = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: `fd` is a borrowed open descriptor; `st` points to room for one `statfs`.
    cvt(unsafe { libc::fstatfs(fd.as_raw_fd(), st.as_mut_ptr()) })?;
    // SAFETY: fstatfs succeeded (checked by `?` above), so it filled in `st`.
    let magic = unsafe { st.assume_init() }.f_type as u64;
    Ok(match magic {
        0xEF53 => "ext4".into(), // ext2/3/4 share the magic
        0x5846_5342 => "xfs".into(),
        0x9123_683E => "btrfs".into(),
        0xCA45_1A4E => "bcachefs".into(),
        0x2FC1_2FC1 => "zfs".into(),
        0xF2F5_2010 => "f2fs".into(),
        0x0102_1994 => "tmpfs".into(),
        0x8584_58F6 => "ramfs".into(),
        0x9660 => "iso9660".into(),
        0x1501_3346 => "udf".into(),
        0x482B => "hfsplus".into(),
        0x7371_7368 => "squashfs".into(),
        0xE0F5_E1E2 => "erofs".into(),
        0x3153_464A => "jfs".into(),
        0x5265_4973 => "reiserfs".into(),
        0x3434 => "nilfs2".into(),
        0x794C_7630 => "overlayfs".into(),
        0x9FA0 => "proc".into(),
        0x6265_6572 => "sysfs".into(),
        0x6969 => "nfs".into(),
        0x00C3_6400 => "ceph".into(),
        0x0BD0_0BD0 => "lustre".into(),
        0x4750_4653 => "gpfs".into(),
        0x5346_414F | 0x6B41_4653 => "afs".into(),
        0x1983_0326 => "beegfs".into(),
        0x2003_0528 => "orangefs".into(),
        0xFE53_4D42 | 0xFF53_4D42 => "smb".into(),
        0x6573_5546 => "fuse".into(),
        0x4D44 => "vfat".into(),
        0x2011_BAB0 => "exfat".into(),
        0x7366_746E | 0x5346_544E => "ntfs".into(),
        0x0102_1997 => "9p".into(),
        0x5A3C_69F0 => "aufs".into(),
        0x6E73_6673 => "nsfs".into(),
        other => format!("unknown (0x{other:x})"),
    })
}

/// Whether [`sync_fs`] writes every file's dirty data (Linux `syncfs`), so
/// nothing is needed per file.
pub const FS_SYNC_WRITES_FILES: bool = true;

/// Nothing to do per file on Linux: `syncfs` writes everything.
pub fn before_fs_sync(_fd: FdRef) -> io::Result<()> {
    Ok(())
}

/// Makes one file (or directory) durable: data, size and metadata.
pub fn sync_file(fd: FdRef) -> io::Result<()> {
    // SAFETY: plain libc call on a borrowed descriptor; no memory is passed.
    cvt(unsafe { libc::fsync(fd.as_raw_fd()) })?;
    Ok(())
}

/// Makes everything written on `fd`'s filesystem durable (`syncfs`). Since
/// Linux 5.8 it reports write-back errors of any file on that filesystem that
/// happened after `fd` was opened.
pub fn sync_fs(fd: FdRef) -> io::Result<()> {
    // SAFETY: plain libc call on a borrowed descriptor; no memory is passed.
    cvt(unsafe { libc::syncfs(fd.as_raw_fd()) })?;
    Ok(())
}

/// `renameat2(RENAME_NOREPLACE)`: fails with EEXIST instead of replacing.
/// Filesystems without it (EINVAL) get `link` + `unlink` for files, and for
/// directories (which cannot be linked) a check then a plain rename.
pub fn rename_noreplace(old_dir: FdRef, old: &CStr, new_dir: FdRef, new: &CStr) -> io::Result<()> {
    // SAFETY: renameat2 takes (int, const char *, int, const char *, unsigned); `old` and `new`
    // are NUL-terminated C strings that outlive the call.
    let r = cvt(unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            old_dir.as_raw_fd(),
            old.as_ptr(),
            new_dir.as_raw_fd(),
            new.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    } as libc::c_int);
    match r {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
        r => return r.map(drop),
    }
    match super::unix::link_at(old_dir, old, new_dir, new) {
        Ok(()) => super::unix::unlink_at(old_dir, old, false),
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
            match super::unix::stat_at(new_dir, new, false) {
                Ok(_) => Err(io::Error::from_raw_os_error(libc::EEXIST)),
                Err(_) => super::unix::rename_at(old_dir, old, new_dir, new),
            }
        }
        Err(e) => Err(e),
    }
}

/// Opens a file for reading from the device rather than the page cache:
/// O_DIRECT, or where that is refused, a normal open after dropping the
/// file's clean cached pages. Reads need [`DIRECT_ALIGN`]-aligned buffers.
/// The read leaves the file's access time alone where we may ask that (a
/// verified copy keeps its source's times).
pub fn open_uncached(dir: FdRef, name: &CStr) -> io::Result<super::Fd> {
    let mut flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NOATIME;
    loop {
        match super::unix::open_raw(dir, name, flags | libc::O_DIRECT, 0) {
            // O_NOATIME needs the file's owner (or CAP_FOWNER).
            Err(e) if e.raw_os_error() == Some(libc::EPERM) && flags & libc::O_NOATIME != 0 => {
                flags &= !libc::O_NOATIME;
            }
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                let fd = super::unix::open_raw(dir, name, flags, 0)?;
                // SAFETY: plain libc call on the descriptor just opened; no memory is passed.
                unsafe { libc::posix_fadvise(fd.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
                return Ok(fd);
            }
            r => return r,
        }
    }
}

#[repr(C)]
struct FiemapHeader {
    start: u64,
    length: u64,
    flags: u32,
    mapped_extents: u32,
    extent_count: u32,
    reserved: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct FiemapExtent {
    logical: u64,
    physical: u64,
    length: u64,
    reserved64: [u64; 2],
    flags: u32,
    reserved: [u32; 3],
}

const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
const FIEMAP_FLAG_SYNC: u32 = 1;
const FIEMAP_EXTENT_LAST: u32 = 0x1;
const FIEMAP_EXTENT_UNKNOWN: u32 = 0x2;
const FIEMAP_EXTENT_DELALLOC: u32 = 0x4;
const FIEMAP_EXTENT_ENCODED: u32 = 0x8;
const FIEMAP_EXTENT_DATA_INLINE: u32 = 0x200;
const FIEMAP_EXTENT_SHARED: u32 = 0x2000;

/// A file's extents (FIEMAP, after writing back its dirty data).
pub fn extents(fd: FdRef) -> io::Result<Vec<Extent>> {
    const BATCH: usize = 64;
    #[repr(C)]
    struct Req {
        head: FiemapHeader,
        ext: [FiemapExtent; BATCH],
    }
    let mut out = Vec::new();
    let mut start = 0u64;
    loop {
        // SAFETY: `Req` holds only integers, for which all zeros is a valid value.
        let mut req: Req = unsafe { std::mem::zeroed() };
        req.head.start = start;
        req.head.length = u64::MAX - start;
        req.head.flags = FIEMAP_FLAG_SYNC;
        req.head.extent_count = BATCH as u32;
        // SAFETY: `req` is a `struct fiemap` header followed by room for `extent_count` (BATCH)
        // extents, in the kernel's layout; the kernel writes at most that many.
        cvt(unsafe { libc::ioctl(fd.as_raw_fd(), FS_IOC_FIEMAP as _, &mut req) })?;
        let n = req.head.mapped_extents as usize;
        let opaque = FIEMAP_EXTENT_UNKNOWN
            | FIEMAP_EXTENT_DELALLOC
            | FIEMAP_EXTENT_ENCODED
            | FIEMAP_EXTENT_DATA_INLINE;
        for e in &req.ext[..n.min(BATCH)] {
            out.push(Extent {
                logical: e.logical,
                physical: e.physical,
                length: e.length,
                shared: e.flags & FIEMAP_EXTENT_SHARED != 0,
                opaque: e.flags & opaque != 0,
                inline: e.flags & FIEMAP_EXTENT_DATA_INLINE != 0,
            });
        }
        match req.ext[..n.min(BATCH)].last() {
            Some(last) if last.flags & FIEMAP_EXTENT_LAST == 0 && n == BATCH => {
                start = last.logical + last.length;
            }
            _ => return Ok(out),
        }
    }
}

#[repr(C)]
struct DedupeRange {
    src_offset: u64,
    src_length: u64,
    dest_count: u16,
    reserved1: u16,
    reserved2: u32,
    dest_fd: i64,
    dest_offset: u64,
    bytes_deduped: u64,
    status: i32,
    reserved: u32,
}

const FIDEDUPERANGE: libc::c_ulong = 0xC018_9436;

/// Largest range asked of the kernel per call (Btrfs caps dedupe at 16 MiB).
const DEDUPE_CHUNK: u64 = 16 << 20;

/// Makes `dst` share `src`'s blocks for their first `len` bytes with the
/// kernel's verified dedupe (`FIDEDUPERANGE`), in chunks the kernel takes.
/// The kernel compares the bytes under lock: a destination that changed is
/// left alone. (`dst_dir` and `dst_name` are used on macOS only.)
pub fn share_blocks(
    src: FdRef,
    dst: FdRef,
    _dst_dir: FdRef,
    _dst_name: &CStr,
    len: u64,
) -> io::Result<Shared> {
    let mut off = 0u64;
    while off < len {
        let mut req = DedupeRange {
            src_offset: off,
            src_length: (len - off).min(DEDUPE_CHUNK),
            dest_count: 1,
            reserved1: 0,
            reserved2: 0,
            dest_fd: i64::from(dst.as_raw_fd()),
            dest_offset: off,
            bytes_deduped: 0,
            status: 0,
            reserved: 0,
        };
        // SAFETY: `req` is a `file_dedupe_range` with `dest_count` 1 followed by its one
        // `file_dedupe_range_info`, the layout the kernel reads and writes.
        cvt(unsafe { libc::ioctl(src.as_raw_fd(), FIDEDUPERANGE as _, &mut req) })?;
        match req.status {
            0 if req.bytes_deduped > 0 => off += req.bytes_deduped,
            0 => return Err(io::Error::from_raw_os_error(libc::EIO)),
            1 => return Ok(Shared::Differs),
            e => return Err(io::Error::from_raw_os_error(-e)),
        }
    }
    Ok(Shared::Done)
}

/// Whether the filesystem of `fd` (a regular file) can share blocks between
/// files: a zero-length dedupe of the file with itself is refused where it
/// cannot.
pub fn can_share_blocks(fd: FdRef) -> bool {
    let mut req = DedupeRange {
        src_offset: 0,
        src_length: 0,
        dest_count: 1,
        reserved1: 0,
        reserved2: 0,
        dest_fd: i64::from(fd.as_raw_fd()),
        dest_offset: 0,
        bytes_deduped: 0,
        status: 0,
        reserved: 0,
    };
    // SAFETY: `req` is a `file_dedupe_range` with `dest_count` 1 followed by its one
    // `file_dedupe_range_info`, the layout the kernel reads and writes.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), FIDEDUPERANGE as _, &mut req) };
    r == 0 && req.status >= 0
}

const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;
const BLKSSZGET: libc::c_ulong = 0x1268;
const BLKPBSZGET: libc::c_ulong = 0x127B;
const BLKIOOPT: libc::c_ulong = 0x1279;

/// A block device's directory in sysfs.
fn sysfs_dir(rdev: u64) -> String {
    let (maj, min) = (
        libc::major(rdev as libc::dev_t),
        libc::minor(rdev as libc::dev_t),
    );
    format!("/sys/dev/block/{maj}:{min}")
}

/// Whether the filesystem of `fd` is on a block device: its device number
/// has one in sysfs, with a request queue (its own, or its disk's for a
/// partition): a disk, a partition, a loop, device-mapper or md device,
/// rotational or not. A network or FUSE filesystem has an anonymous device
/// number with nothing behind it, and so have tmpfs, overlayfs and each
/// Btrfs subvolume (their types tell those apart).
pub fn on_local_device(fd: FdRef) -> bool {
    let Ok(st) = super::unix::fstat(fd) else {
        return false;
    };
    let dir = sysfs_dir(st.dev);
    ["queue", "../queue"]
        .iter()
        .any(|q| std::path::Path::new(&format!("{dir}/{q}")).is_dir())
}

fn sysfs(rdev: u64, rel: &str) -> Option<String> {
    std::fs::read_to_string(format!("{}/{rel}", sysfs_dir(rdev)))
        .ok()
        .map(|s| s.trim().to_string())
}

/// Size, topology and model of an open block device (`rdev`: its number).
pub fn block_info(fd: FdRef, rdev: u64) -> io::Result<BlockInfo> {
    let mut size = 0u64;
    // SAFETY: BLKGETSIZE64 writes one u64 through the pointer, and `size` is a u64.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), BLKGETSIZE64 as _, &mut size) })?;
    let int = |req: libc::c_ulong| {
        let mut v: libc::c_int = 0;
        // SAFETY: BLKSSZGET, BLKPBSZGET and BLKIOOPT write one (unsigned) int; `v` is a c_int.
        cvt(unsafe { libc::ioctl(fd.as_raw_fd(), req as _, &mut v) }).map(|_| v.max(0) as u32)
    };
    let max_kb: u64 = sysfs(rdev, "queue/max_sectors_kb")
        .or_else(|| sysfs(rdev, "../queue/max_sectors_kb"))
        .and_then(|s| s.parse().ok())
        .unwrap_or(512);
    Ok(BlockInfo {
        size,
        logical: int(BLKSSZGET)?,
        physical: int(BLKPBSZGET)?,
        optimal: int(BLKIOOPT).unwrap_or(0),
        max_request: max_kb * 1024,
        model: model_of(rdev),
    })
}

/// Vendor and model (sysfs), or what backs a loop device.
fn model_of(rdev: u64) -> String {
    match (sysfs(rdev, "device/vendor"), sysfs(rdev, "device/model")) {
        (v, Some(m)) if !m.is_empty() => {
            format!("{} {m}", v.unwrap_or_default()).trim().to_string()
        }
        _ => match sysfs(rdev, "loop/backing_file") {
            Some(f) => format!("loop device backed by {f}"),
            None => sysfs(rdev, "device/name").unwrap_or_default(),
        },
    }
}

/// Every whole disk with media in it (sysfs `/sys/class/block`), but RAM
/// disks, zram, device-mapper and RAID sets, optical and floppy drives:
/// what a disk image may be written to. Readable by any user.
pub fn disks() -> Vec<super::Disk> {
    const NOT_DISKS: [&str; 7] = ["ram", "zram", "dm-", "md", "sr", "fd", "nbd"];
    let mut out = Vec::new();
    for e in std::fs::read_dir("/sys/class/block")
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        if NOT_DISKS.iter().any(|p| name.starts_with(p)) {
            continue;
        }
        let Some(rdev) = std::fs::read_to_string(e.path().join("dev"))
            .ok()
            .and_then(|s| parse_dev(s.trim()))
        else {
            continue;
        };
        if is_partition(rdev) {
            continue;
        }
        let sectors =
            |r: u64| -> u64 { sysfs(r, "size").and_then(|s| s.parse().ok()).unwrap_or(0) };
        let size = sectors(rdev) * 512;
        if size == 0 {
            continue; // an empty card reader, an unattached loop device
        }
        // Where it hangs in the device tree says its bus.
        let path = std::fs::canonicalize(sysfs_dir(rdev)).unwrap_or_default();
        let path = path.to_string_lossy();
        let bus = if name.starts_with("loop") {
            "loop"
        } else if path.contains("/usb") {
            "usb"
        } else if name.starts_with("mmcblk") || path.contains("/mmc") {
            "mmc"
        } else if name.starts_with("nvme") {
            "nvme"
        } else if path.contains("/virtio") {
            "virtio"
        } else {
            ""
        };
        let removable =
            sysfs(rdev, "removable").as_deref() == Some("1") || matches!(bus, "usb" | "mmc");
        let mut partitions: Vec<(String, u64, u64)> = partitions(rdev)
            .into_iter()
            .filter_map(|p| {
                let pname = block_name(p)?.file_name()?.to_string_lossy().into_owned();
                Some((pname, p, sectors(p) * 512))
            })
            .collect();
        partitions.sort();
        out.push(super::Disk {
            name,
            rdev,
            size,
            removable,
            bus,
            model: model_of(rdev),
            partitions,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The filesystem label of block device `dev`, as udev names it under
/// /dev/disk/by-label (and a GPT partition's name, by-partlabel); `None`
/// where udev does not run or gives none.
pub fn udev_label(dev: &Path) -> Option<String> {
    for dir in ["/dev/disk/by-label", "/dev/disk/by-partlabel"] {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if std::fs::canonicalize(e.path()).is_ok_and(|t| t == dev) {
                return Some(unescape_udev(&e.file_name().to_string_lossy()));
            }
        }
    }
    None
}

/// udev's names escape bytes as `\xHH` (a space is `\x20`).
fn unescape_udev(s: &str) -> String {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && b.get(i + 1) == Some(&b'x') {
            if let Some(v) = s
                .get(i + 2..i + 4)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Device numbers of a block device's partitions (from sysfs).
pub fn partitions(rdev: u64) -> Vec<u64> {
    let dir = sysfs_dir(rdev);
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(&dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.join("partition").exists() {
                if let Some(d) = std::fs::read_to_string(p.join("dev"))
                    .ok()
                    .and_then(|s| parse_dev(s.trim()))
                {
                    out.push(d);
                }
            }
        }
    }
    out
}

/// Whether a block device is a partition of another (sysfs `partition`).
pub fn is_partition(rdev: u64) -> bool {
    sysfs(rdev, "partition").is_some()
}

fn parse_dev(s: &str) -> Option<u64> {
    let (a, b) = s.split_once(':')?;
    Some(libc::makedev(a.parse().ok()?, b.parse().ok()?) as u64)
}

/// The block devices built directly on `rdev`: those holding it (sysfs
/// `holders`: device-mapper, md), and the loop devices whose backing file
/// is it or a file on it. (A loop device does not claim its backing
/// device: a mounted one over a device leaves that device openable
/// exclusively, and in no mount table line.)
pub fn built_on(rdev: u64) -> Vec<super::BuiltOn> {
    built_on_in(Path::new("/sys"), rdev)
}

/// [`built_on`], with sysfs at `sys` (a made-up tree in the tests).
fn built_on_in(sys: &Path, rdev: u64) -> Vec<super::BuiltOn> {
    use super::{BuiltOn, Use};
    use std::os::unix::ffi::OsStrExt;
    let class = sys.join("class/block");
    let dev_of = |name: &std::ffi::OsStr| {
        std::fs::read_to_string(class.join(name).join("dev"))
            .ok()
            .and_then(|s| parse_dev(s.trim()))
    };
    let (maj, min) = (
        libc::major(rdev as libc::dev_t),
        libc::minor(rdev as libc::dev_t),
    );
    let mut out = Vec::new();
    let holders = sys.join(format!("dev/block/{maj}:{min}/holders"));
    for e in std::fs::read_dir(holders).into_iter().flatten().flatten() {
        let name = e.file_name();
        let Some(dev) = dev_of(&name) else { continue };
        let dm = std::fs::read_to_string(class.join(&name).join("dm/name")).unwrap_or_default();
        let shown = match dm.trim() {
            "" => Path::new("/dev").join(&name),
            dm => Path::new("/dev/mapper").join(dm),
        };
        out.push(BuiltOn {
            dev,
            name: shown,
            how: Use::Holds,
        });
    }
    for e in std::fs::read_dir(&class).into_iter().flatten().flatten() {
        let name = e.file_name();
        if !name.as_encoded_bytes().starts_with(b"loop") {
            continue;
        }
        let Ok(backing) = std::fs::read(class.join(&name).join("loop/backing_file")) else {
            continue;
        };
        let backing = backing.strip_suffix(b"\n").unwrap_or(&backing);
        let backing = PathBuf::from(std::ffi::OsStr::from_bytes(backing));
        // A deleted backing file ("... (deleted)") is not found: the
        // exclusive open is what still catches a device in use then.
        let Ok(st) = super::stat_path(&backing, true) else {
            continue;
        };
        let how = match st.kind() {
            FileKind::BlockDevice if st.rdev == rdev => Use::LoopOnDevice,
            FileKind::File if st.dev == rdev => Use::LoopOnFile(backing),
            _ => continue,
        };
        let Some(dev) = dev_of(&name) else { continue };
        out.push(BuiltOn {
            dev,
            name: Path::new("/dev").join(&name),
            how,
        });
    }
    out
}

/// The name of block device `rdev` under /dev (its sysfs name), if it has
/// one.
pub fn block_name(rdev: u64) -> Option<PathBuf> {
    let dir = std::fs::canonicalize(sysfs_dir(rdev)).ok()?;
    Some(Path::new("/dev").join(dir.file_name()?))
}

/// Every mounted filesystem's device number and mount point
/// (`/proc/self/mountinfo`).
pub fn mounts() -> Vec<(u64, String)> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            Some((parse_dev(f.get(2)?)?, f.get(4)?.to_string()))
        })
        .collect()
}

/// Every mounted filesystem's device number, mount point, and whether it
/// is read-only: its superblock's options say `ro` (a read-only bind of a
/// filesystem mounted read-write elsewhere shows up there as read-write).
pub fn mount_modes() -> Vec<Mount> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            // After the optional fields: "-", type, source, superblock options.
            let sep = f.iter().position(|&x| x == "-")?;
            let ro = f.get(sep + 3)?.split(',').any(|o| o == "ro");
            Some(Mount {
                dev: parse_dev(f.get(2)?)?,
                dir: f.get(4)?.to_string(),
                read_only: ro,
            })
        })
        .collect()
}

/// Opens a block device exclusively: the kernel refuses if it is mounted
/// or otherwise claimed.
pub const O_EXCLUSIVE_DEVICE: libc::c_int = libc::O_EXCL;
/// [`O_EXCLUSIVE_DEVICE`] for a check that must not wait: EBUSY at once.
pub const O_EXCLUSIVE_PROBE: libc::c_int = libc::O_EXCL;
/// O_DIRECT, for opening files that are written or read around the cache.
pub const O_DIRECT: libc::c_int = libc::O_DIRECT;

const BLKZEROOUT: libc::c_ulong = 0x127F;

/// Zeroes the first `len` bytes of a block device (`BLKZEROOUT`): they read
/// back as zeros afterwards, which a discard does not promise.
pub fn zero_out(fd: FdRef, len: u64) -> io::Result<()> {
    let range: [u64; 2] = [0, len];
    // SAFETY: BLKZEROOUT reads two u64s (start, length) through the pointer: `range`.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), BLKZEROOUT as _, &range) })?;
    Ok(())
}

/// The platform's name, for messages.
pub const PLATFORM: &str = "Linux";

/// What kopiru does not do on Linux yet (see [`super::available`]).
pub const LACKS: &[super::Feature] = &[];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::{BuiltOn, Use};
    use std::os::fd::AsFd;
    use std::os::unix::fs::FileTypeExt;
    use std::path::Path;

    #[test]
    fn udev_names_are_unescaped() {
        assert_eq!(unescape_udev("My\\x20Card"), "My Card");
        assert_eq!(unescape_udev("BOOT"), "BOOT");
        assert_eq!(unescape_udev("a\\xZZb"), "a\\xZZb");
    }

    /// A made-up sysfs: device 7:1 held by dm-0 (device-mapper, named
    /// "vg-root") and md0 (no dm name), and two loop devices, one backed
    /// by a file on the filesystem of this test's directory, one by a
    /// file elsewhere.
    #[test]
    fn built_on_reads_holders_and_loop_backing_files() {
        let root = std::env::temp_dir().join(format!("kopiru-sysfs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let write = |rel: &str, text: &str| {
            let p = root.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        write("dev/block/7:1/holders/dm-0", "");
        write("dev/block/7:1/holders/md0", "");
        write("class/block/dm-0/dev", "253:0\n");
        write("class/block/dm-0/dm/name", "vg-root\n");
        write("class/block/md0/dev", "9:0\n");
        let backing = root.join("backing.img");
        std::fs::write(&backing, b"").unwrap();
        let here = std::fs::metadata(&backing).unwrap();
        write("class/block/loop5/dev", "7:5\n");
        write(
            "class/block/loop5/loop/backing_file",
            &format!("{}\n", backing.display()),
        );
        write("class/block/loop6/dev", "7:6\n");
        write("class/block/loop6/loop/backing_file", "/nowhere/else.img\n");
        let mut held = built_on_in(&root, libc::makedev(7, 1) as u64);
        held.sort_by_key(|b| b.dev);
        let dev = |a, b| libc::makedev(a, b) as u64;
        assert_eq!(
            held,
            vec![
                BuiltOn {
                    dev: dev(9, 0),
                    name: "/dev/md0".into(),
                    how: Use::Holds
                },
                BuiltOn {
                    dev: dev(253, 0),
                    name: "/dev/mapper/vg-root".into(),
                    how: Use::Holds
                },
            ]
        );
        // The file's filesystem is the device below loop5.
        use std::os::unix::fs::MetadataExt;
        let on_fs = built_on_in(&root, here.dev());
        assert_eq!(
            on_fs,
            vec![BuiltOn {
                dev: dev(7, 5),
                name: "/dev/loop5".into(),
                how: Use::LoopOnFile(backing.clone())
            }]
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    fn open_dir(path: &Path) -> crate::sys::Fd {
        crate::sys::open_path(path, libc::O_RDONLY | libc::O_DIRECTORY).expect("open dir")
    }

    /// A filesystem mounted from a block device, under its own device
    /// number (/proc/self/mountinfo: a source that is a block device, a
    /// major number not 0: not Btrfs's anonymous one), has a local device
    /// behind it; proc, with an anonymous number, has none.
    #[test]
    fn local_device_by_its_number() {
        assert!(!on_local_device(open_dir(Path::new("/proc")).as_fd()));
        let info = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
        let on_disk = info.lines().find_map(|l| {
            let (mount, fs) = l.split_once(" - ")?;
            let mount: Vec<&str> = mount.split(' ').collect();
            let source = fs.split(' ').nth(1)?;
            let major = mount.get(2)?.split(':').next()?;
            let is_block = std::fs::metadata(source).is_ok_and(|m| m.file_type().is_block_device());
            (is_block && major != "0").then(|| mount.get(4).map(|p| p.to_string()))?
        });
        match on_disk {
            Some(p) => assert!(on_local_device(open_dir(Path::new(&p)).as_fd()), "{p}"),
            None => eprintln!("!!! SKIPPED: the block-device half: no filesystem is mounted from a block device here"),
        }
    }
}
