//! Reading and writing data, the aligned buffers of uncached reads, the
//! filesystem's name, and flushing.

use std::io;

use windows_sys::Win32::Foundation::{
    GetLastError, ERROR_ACCESS_DENIED, ERROR_BROKEN_PIPE, ERROR_HANDLE_EOF,
};
use windows_sys::Win32::Storage::FileSystem::{
    FileEndOfFileInfo, FlushFileBuffers, GetVolumeInformationByHandleW, ReadFile,
    SetFileInformationByHandle, WriteFile, FILE_END_OF_FILE_INFO,
};
use windows_sys::Win32::System::IO::OVERLAPPED;

use super::stat::{fstat, FileKind};
use super::{cvt, FdRef};

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
