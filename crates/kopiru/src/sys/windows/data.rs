//! Reading and writing data, the aligned buffers of uncached reads, the
//! filesystem's name, and flushing.

use std::io;

use windows_sys::Wdk::Storage::FileSystem::{
    FileFsDeviceInformation, NtQueryVolumeInformationFile,
};
use windows_sys::Wdk::System::SystemServices::{FILE_FS_DEVICE_INFORMATION, FILE_REMOTE_DEVICE};
use windows_sys::Win32::Foundation::{
    GetLastError, ERROR_ACCESS_DENIED, ERROR_BROKEN_PIPE, ERROR_HANDLE_EOF, ERROR_MORE_DATA,
};
use windows_sys::Win32::Storage::FileSystem::{
    FileEndOfFileInfo, FileRemoteProtocolInfo, FlushFileBuffers, GetFileInformationByHandleEx,
    GetVolumeInformationByHandleW, ReadFile, SetFileInformationByHandle, WriteFile,
    FILE_DEVICE_CD_ROM, FILE_DEVICE_DISK, FILE_DEVICE_DVD, FILE_END_OF_FILE_INFO,
    FILE_REMOTE_PROTOCOL_INFO,
};
use windows_sys::Win32::System::Ioctl::{
    FILE_ALLOCATED_RANGE_BUFFER, FILE_DEVICE_NETWORK_FILE_SYSTEM, FILE_DEVICE_VIRTUAL_DISK,
    FSCTL_QUERY_ALLOCATED_RANGES, FSCTL_SET_SPARSE,
};
use windows_sys::Win32::System::IO::{DeviceIoControl, IO_STATUS_BLOCK, OVERLAPPED};

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

/// Writes all of `buf` at the handle's current position.
pub fn write_all(fd: FdRef, mut buf: &[u8]) -> io::Result<()> {
    let h = fd.handle()?;
    while !buf.is_empty() {
        let len = buf.len().min(1 << 30) as u32;
        let mut put = 0u32;
        // SAFETY: `h` is an open synchronous handle; `buf` holds at least `len` bytes; no OVERLAPPED is passed, so the handle's own position is used.
        cvt(unsafe { WriteFile(h, buf.as_ptr(), len, &mut put, std::ptr::null_mut()) })?;
        if put == 0 {
            return Err(io::Error::from(io::ErrorKind::WriteZero));
        }
        buf = &buf[put as usize..];
    }
    Ok(())
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

/// `lseek(SEEK_DATA)` (`hole` false: where the next data at or after
/// `offset` starts) or `lseek(SEEK_HOLE)` (`hole` true: where the data at
/// `offset` ends), from `FSCTL_QUERY_ALLOCATED_RANGES`. `None`: no data
/// at or after `offset`. Only asked of files that are sparse
/// (`Stat::looks_sparse`); a filesystem without sparse files fails the call
/// and the file is copied whole.
pub fn seek_data(fd: FdRef, offset: u64, hole: bool) -> io::Result<Option<u64>> {
    let size = fstat(fd)?.size;
    if offset >= size {
        return Ok(None);
    }
    let mut at = offset;
    loop {
        let Some((start, end)) = first_allocated(fd, at, size)? else {
            // No data at or after `at`: a hole to the end.
            return Ok(if hole { Some(size) } else { None });
        };
        match hole {
            false => return Ok(Some(start.max(offset))),
            // `offset` lies in a hole: the hole is there.
            true if start > at => return Ok(Some(at)),
            // In data: the data may go on in the next range, which NTFS
            // can report separately (ranges are per 64 KiB unit runs).
            true if end >= size => return Ok(Some(size)),
            // A range that does not move on: its end is the hole.
            true if end <= at => return Ok(Some(at)),
            true => at = end,
        }
    }
}

/// The first allocated range `[start, end)` that ends after `offset`.
fn first_allocated(fd: FdRef, offset: u64, size: u64) -> io::Result<Option<(u64, u64)>> {
    let query = FILE_ALLOCATED_RANGE_BUFFER {
        FileOffset: offset as i64,
        Length: (size - offset) as i64,
    };
    let mut out = [FILE_ALLOCATED_RANGE_BUFFER {
        FileOffset: 0,
        Length: 0,
    }; 1];
    let mut got = 0u32;
    // SAFETY: `fd` is an open handle; `query` and `out` are
    // FILE_ALLOCATED_RANGE_BUFFERs of the sizes given, alive through the
    // (synchronous) call; `got` a valid out-pointer.
    let ok = unsafe {
        DeviceIoControl(
            fd.handle()?,
            FSCTL_QUERY_ALLOCATED_RANGES,
            (&query as *const FILE_ALLOCATED_RANGE_BUFFER).cast(),
            std::mem::size_of::<FILE_ALLOCATED_RANGE_BUFFER>() as u32,
            out.as_mut_ptr().cast(),
            std::mem::size_of_val(&out) as u32,
            &mut got,
            std::ptr::null_mut(),
        )
    };
    // ERROR_MORE_DATA: more ranges than room; the first one is there.
    // SAFETY: read right after the failed call.
    if ok == 0 && unsafe { GetLastError() } != ERROR_MORE_DATA {
        return Err(super::last_error());
    }
    if (got as usize) < std::mem::size_of::<FILE_ALLOCATED_RANGE_BUFFER>() {
        return Ok(None);
    }
    let start = out[0].FileOffset as u64;
    Ok(Some((start, start + out[0].Length as u64)))
}

/// Marks a new, empty destination file sparse (`FSCTL_SET_SPARSE`), so
/// that the ranges a sparse copy skips stay unallocated instead of being
/// filled with zeros when a later range is written.
pub fn make_sparse(fd: FdRef) -> io::Result<()> {
    let mut got = 0u32;
    // SAFETY: `fd` is an open handle; no input (which means "set"), no
    // output; `got` a valid out-pointer.
    cvt(unsafe {
        DeviceIoControl(
            fd.handle()?,
            FSCTL_SET_SPARSE,
            std::ptr::null(),
            0,
            std::ptr::null_mut(),
            0,
            &mut got,
            std::ptr::null_mut(),
        )
    })
}

/// The protocol of the share an open file lives on ("smb", or "remote" for
/// another), `None` for a local file: a share's volume names its own
/// filesystem ("ntfs"), so its type cannot tell. Compile-checked only:
/// Wine has no network shares.
pub fn remote_share(fd: FdRef) -> Option<String> {
    /// WNNC_NET_SMB (winnetwk.h).
    const SMB: u32 = 0x0002_0000;
    let h = fd.handle().ok()?;
    let mut info = FILE_REMOTE_PROTOCOL_INFO::default();
    // SAFETY: `h` is an open handle; `info` is a FILE_REMOTE_PROTOCOL_INFO of the size passed.
    let ok = unsafe {
        GetFileInformationByHandleEx(
            h,
            FileRemoteProtocolInfo,
            (&raw mut info).cast(),
            std::mem::size_of::<FILE_REMOTE_PROTOCOL_INFO>() as u32,
        )
    };
    // It fails (ERROR_INVALID_PARAMETER) for a local file.
    if ok != 0 {
        return Some(match info.Protocol {
            SMB => "smb".to_string(),
            _ => "remote".to_string(),
        });
    }
    // A redirector that does not answer it still marks its volumes remote.
    device_info(fd)
        .filter(|d| {
            d.Characteristics & FILE_REMOTE_DEVICE != 0
                || d.DeviceType == FILE_DEVICE_NETWORK_FILE_SYSTEM
        })
        .map(|_| "remote".to_string())
}

/// The type and characteristics of the device a file's volume is on
/// (`FileFsDeviceInformation`).
fn device_info(fd: FdRef) -> Option<FILE_FS_DEVICE_INFORMATION> {
    let h = fd.handle().ok()?;
    // SAFETY: IO_STATUS_BLOCK is plain data: all zeros is a valid value.
    let mut io_status: IO_STATUS_BLOCK = unsafe { std::mem::zeroed() };
    let mut info = FILE_FS_DEVICE_INFORMATION::default();
    // SAFETY: `h` is an open handle; `info` is a FILE_FS_DEVICE_INFORMATION of the size passed
    // and `io_status` an IO_STATUS_BLOCK, both written by the call.
    let status = unsafe {
        NtQueryVolumeInformationFile(
            h,
            &mut io_status,
            (&raw mut info).cast(),
            std::mem::size_of::<FILE_FS_DEVICE_INFORMATION>() as u32,
            FileFsDeviceInformation,
        )
    };
    (status >= 0).then_some(info)
}

/// Whether the volume of `fd` is on a local disk (a fixed or removable
/// disk, a virtual disk, an optical drive) that no redirector serves.
/// Under Wine every Unix filesystem but a network one shows as a disk.
pub fn on_local_device(fd: FdRef) -> bool {
    device_info(fd).is_some_and(|d| {
        d.Characteristics & FILE_REMOTE_DEVICE == 0
            && matches!(
                d.DeviceType,
                FILE_DEVICE_DISK | FILE_DEVICE_VIRTUAL_DISK | FILE_DEVICE_CD_ROM | FILE_DEVICE_DVD
            )
    })
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
