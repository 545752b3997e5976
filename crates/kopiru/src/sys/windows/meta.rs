//! Metadata beyond the data: the read-only and other attributes, times,
//! owners and security descriptors.

use std::ffi::CStr;
use std::io;

use windows_sys::Win32::Foundation::HANDLE;
use windows_sys::Win32::Storage::FileSystem::{
    FileBasicInfo, GetFileAttributesW, GetFileInformationByHandleEx, SetFileAttributesW,
    SetFileInformationByHandle, SetFileTime, FILE_ATTRIBUTE_ARCHIVE, FILE_ATTRIBUTE_DIRECTORY,
    FILE_ATTRIBUTE_HIDDEN, FILE_ATTRIBUTE_NORMAL, FILE_ATTRIBUTE_NOT_CONTENT_INDEXED,
    FILE_ATTRIBUTE_READONLY, FILE_ATTRIBUTE_SYSTEM, FILE_BASIC_INFO, FILE_FLAG_BACKUP_SEMANTICS,
    FILE_FLAG_OPEN_REPARSE_POINT, FILE_WRITE_ATTRIBUTES, INVALID_FILE_ATTRIBUTES, OPEN_EXISTING,
};

use super::stat::{Stat, Timespec};
use super::{create_file, cvt, full, last_error, open_flags, wide, AsFd, FdRef};

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

pub(super) fn with_readonly(attrs: u32, mode: u32) -> u32 {
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
/// Whether `name` in `dir` may be written: its read-only attribute unset.
pub fn writable_at(dir: FdRef, name: &CStr) -> bool {
    super::stat::stat_at(dir, name, false).is_ok_and(|st| st.perm() & 0o200 != 0)
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::windows::{open_existing_rw, open_path, scratch, O_DIRECTORY};
    use windows_sys::Win32::Foundation::GENERIC_READ;

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
    /// Windows (or Wine) kept a DACL set on the source, for scripts/test/windows.sh.
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
}
