//! The rungs of the copy ladder below the stream loop: ReFS block cloning
//! (`FSCTL_DUPLICATE_EXTENTS_TO_FILE`) and `CopyFile2`.

use std::ffi::CStr;
use std::io;
use std::path::Path;

use windows_sys::Win32::Foundation::{GENERIC_READ, GENERIC_WRITE};
use windows_sys::Win32::Storage::FileSystem::{
    FileBasicInfo, GetVolumeInformationByHandleW, SetFileAttributesW, SetFileInformationByHandle,
    FILE_ATTRIBUTE_NORMAL, FILE_BASIC_INFO, FILE_FLAG_OPEN_REPARSE_POINT, OPEN_EXISTING,
};

use super::data::ftruncate;
use super::meta::with_readonly;
use super::ops::unlink_at;
use super::stat::{fstat, FileKind, Timespec};
use super::{create_file, cvt, full, wide, AsFd, Fd, FdRef};

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

/// No nameless files on Windows: new files get a temporary name.
pub const HAS_ANONYMOUS: bool = false;

/// Never called (`HAS_ANONYMOUS` is false).
pub fn create_anonymous(_dir: FdRef, _mode: u32) -> io::Result<Fd> {
    Err(super::unsupported())
}

/// Never called (`HAS_ANONYMOUS` is false).
pub fn link_anonymous(_fd: FdRef, _dir: FdRef, _name: &CStr) -> io::Result<()> {
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
///
/// [`create_new`]: super::create_new
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::windows::{open_path, open_source, pwrite_all, scratch, O_DIRECTORY};

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
            // loop, and nothing created (scripts/test/windows.sh skips loudly).
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
}
