//! What `kopiru flash`, `image`, `dedupe` and `--shard` need that Windows
//! does not have in kopiru yet: each call fails as [`super::unsupported`]
//! (or finds nothing), so the engine compiles the same on every platform
//! and these commands stop at [`crate::sys::available`] before any of it
//! is reached. Positioned reads and writes on a `File` are real.

use std::ffi::CStr;
use std::fs::File;
use std::io;
use std::path::Path;

use super::{unsupported, Fd, FdRef};
use crate::sys::{BlockInfo, Extent, Mount, Shared, Space};

/// `open` flags, as the Unix-only callers pass them ([`open_raw`],
/// [`open_path_mode`]); [`super::open_path`] takes none of them but
/// [`O_RDONLY`] (none) and `O_DIRECTORY`.
pub const O_RDONLY: i32 = 0;
/// Write only.
pub const O_WRONLY: i32 = 0x1;
/// Read and write.
pub const O_RDWR: i32 = 0x2;
/// Create.
pub const O_CREAT: i32 = 0x40;
/// Never through a final link.
pub const O_NOFOLLOW: i32 = 0x2_0000;
/// Around the cache.
pub const O_DIRECT: i32 = 0x4000;
/// A device no one else has open.
pub const O_EXCLUSIVE_DEVICE: i32 = 0x80;
/// The same, for a check.
pub const O_EXCLUSIVE_PROBE: i32 = 0x80;

/// Unsupported.
pub(crate) fn open_raw(_dir: FdRef, _name: &CStr, _flags: i32, _mode: u32) -> io::Result<Fd> {
    Err(unsupported())
}

/// Unsupported.
pub fn open_path_mode(_path: &Path, _flags: i32, _mode: u32) -> io::Result<Fd> {
    Err(unsupported())
}

/// Unsupported.
pub fn open_path_uncached(_path: &Path) -> io::Result<Fd> {
    Err(unsupported())
}

/// Never: no `O_DIRECT` to refuse.
pub fn direct_refused(_e: &io::Error) -> bool {
    false
}

/// Never (the Unix EPERM a dedupe meets).
pub fn not_permitted(_e: &io::Error) -> bool {
    false
}

/// Never (the Unix ENODEV and ENXIO of a device pulled out).
pub fn device_gone(_e: &io::Error) -> bool {
    false
}

/// Whether a write failed for want of space.
pub fn no_space(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::StorageFull
}

/// Unsupported.
pub fn zero_out(_fd: FdRef, _len: u64) -> io::Result<()> {
    Err(unsupported())
}

/// Unsupported.
pub fn fs_space(_fd: FdRef) -> io::Result<Space> {
    Err(unsupported())
}

/// None known.
pub fn extents(_fd: FdRef) -> io::Result<Vec<Extent>> {
    Ok(Vec::new())
}

/// Never: no block sharing yet.
pub fn can_share_blocks(_fd: FdRef) -> bool {
    false
}

/// Unsupported.
pub fn share_blocks(
    _src: FdRef,
    _dst: FdRef,
    _dst_dir: FdRef,
    _dst_name: &CStr,
    _len: u64,
) -> io::Result<Shared> {
    Err(unsupported())
}

/// Unsupported.
pub fn block_info(_fd: FdRef, _rdev: u64) -> io::Result<BlockInfo> {
    Err(unsupported())
}

/// None known.
pub fn partitions(_rdev: u64) -> Vec<u64> {
    Vec::new()
}

/// Never.
pub fn is_partition(_rdev: u64) -> bool {
    false
}

/// None known.
pub fn built_on(_rdev: u64) -> Vec<crate::sys::BuiltOn> {
    Vec::new()
}

/// None known.
pub fn block_name(_rdev: u64) -> Option<std::path::PathBuf> {
    None
}

/// Never (the Unix EBUSY of a device in use).
pub fn is_busy(_e: &io::Error) -> bool {
    false
}

/// None known.
pub fn mounts() -> Vec<(u64, String)> {
    Vec::new()
}

/// None known.
pub fn mount_modes() -> Vec<Mount> {
    Vec::new()
}

/// No memory maps of files yet: [`Mapping::new`] says so (the caller
/// reads through buffers instead).
pub struct Mapping(std::convert::Infallible);

impl Mapping {
    /// Unsupported.
    pub fn new(_file: &File, _len: usize) -> io::Result<Mapping> {
        Err(unsupported())
    }

    /// Never called: there is no mapping.
    pub fn bytes(&self) -> &[u8] {
        match self.0 {}
    }

    /// Never called: there is no mapping.
    pub fn release(&self, _off: usize, _len: usize) {
        match self.0 {}
    }
}

/// Positioned reads and writes on a `File`, as Unix's `FileExt` (here by
/// `seek_read` and `seek_write`, which also move the file's position).
pub trait FileExt {
    /// Reads at `offset`.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// Reads all of `buf` at `offset`.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Writes all of `buf` at `offset`.
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
}

impl FileExt for File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        std::os::windows::fs::FileExt::seek_read(self, buf, offset)
    }

    fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.read_at(buf, offset) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn write_all_at(&self, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match std::os::windows::fs::FileExt::seek_write(self, buf, offset) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    buf = &buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

impl From<Fd> for File {
    /// The handle as a `File` (its lock, if any, is released).
    fn from(fd: Fd) -> File {
        fd.file
    }
}

/// None listed.
pub fn disks() -> Vec<crate::sys::Disk> {
    Vec::new()
}

/// None known.
pub fn udev_label(_dev: &Path) -> Option<String> {
    None
}
