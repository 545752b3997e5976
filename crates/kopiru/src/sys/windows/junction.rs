//! Junctions (mount-point reparse points): read as links, made again as
//! junctions. A junction's target is kept as its "substitute name", `\??\`
//! and an absolute path; kopiru reads a junction as a link whose target is
//! that NT form. `std::fs::read_link` never gives it for a symbolic link
//! (it turns `\??\` into `\\?\`), so a target that begins with `\??\` tells
//! [`super::symlink_at`] to make a junction, which, unlike a directory
//! symbolic link, needs no privilege or Developer Mode.

use std::ffi::OsString;
use std::io;
use std::mem::offset_of;
use std::os::windows::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use windows_sys::Wdk::Storage::FileSystem::{REPARSE_DATA_BUFFER, REPARSE_DATA_BUFFER_0_1};
use windows_sys::Win32::Foundation::GENERIC_WRITE;
use windows_sys::Win32::Storage::FileSystem::{
    CreateDirectoryW, RemoveDirectoryW, FILE_FLAG_BACKUP_SEMANTICS, FILE_FLAG_OPEN_REPARSE_POINT,
    MAXIMUM_REPARSE_DATA_BUFFER_SIZE, OPEN_EXISTING,
};
use windows_sys::Win32::System::Ioctl::{FSCTL_GET_REPARSE_POINT, FSCTL_SET_REPARSE_POINT};
use windows_sys::Win32::System::SystemServices::IO_REPARSE_TAG_MOUNT_POINT;
use windows_sys::Win32::System::IO::DeviceIoControl;

use super::{create_file, cvt, wide, AsFd};

/// The start of a junction's target as kopiru reads it.
pub(super) const PREFIX: &str = r"\??\";

/// Where the path names start in the buffer, and the header before
/// `ReparseDataLength` counts (tag, length, reserved).
const PATHS: usize =
    offset_of!(REPARSE_DATA_BUFFER, Anonymous) + offset_of!(REPARSE_DATA_BUFFER_0_1, PathBuffer);
const HEADER: usize = offset_of!(REPARSE_DATA_BUFFER, Anonymous);

/// The target of the junction at `path` (`\??\C:\...`), or `None` when it
/// is another kind of reparse point (a symbolic link).
pub(super) fn target(path: PathBuf) -> io::Result<Option<OsString>> {
    // No access asked: the profile's compatibility junctions deny listing
    // to everyone, and reading the reparse data needs none.
    let fd = create_file(
        path,
        0,
        OPEN_EXISTING,
        FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT,
    )?;
    // u32s, so the buffer is aligned for the header's fields.
    let mut buf = vec![0u32; MAXIMUM_REPARSE_DATA_BUFFER_SIZE as usize / 4];
    let mut got = 0u32;
    // SAFETY: an open handle; no input; `buf` is writable for the length
    // given and outlives the (synchronous) call; `got` a valid out-pointer.
    cvt(unsafe {
        DeviceIoControl(
            fd.as_fd().handle()?,
            FSCTL_GET_REPARSE_POINT,
            std::ptr::null(),
            0,
            buf.as_mut_ptr().cast(),
            MAXIMUM_REPARSE_DATA_BUFFER_SIZE,
            &mut got,
            std::ptr::null_mut(),
        )
    })?;
    let bytes: Vec<u8> = buf.iter().flat_map(|w| w.to_ne_bytes()).collect();
    let u16_at = |at: usize| u16::from_ne_bytes([bytes[at], bytes[at + 1]]) as usize;
    if (got as usize) < PATHS || buf[0] != IO_REPARSE_TAG_MOUNT_POINT {
        return Ok(None);
    }
    let mount = HEADER;
    let offset = u16_at(mount + offset_of!(REPARSE_DATA_BUFFER_0_1, SubstituteNameOffset));
    let len = u16_at(mount + offset_of!(REPARSE_DATA_BUFFER_0_1, SubstituteNameLength));
    let name = bytes
        .get(PATHS + offset..PATHS + offset + len)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "a junction's name out of its buffer",
            )
        })?;
    let wide: Vec<u16> = name
        .chunks_exact(2)
        .map(|c| u16::from_ne_bytes([c[0], c[1]]))
        .collect();
    Ok(Some(OsString::from_wide(&wide)))
}

/// Makes a junction at `link` to `target` (`\??\C:\...`): an empty
/// directory given the mount-point reparse data; removed again if that
/// fails.
pub(super) fn make(link: &Path, target: &Path) -> io::Result<()> {
    let subst: Vec<u16> = target.as_os_str().encode_wide().collect();
    // The print name: the path without `\??\` (`\??\UNC\server\share`
    // prints as `\\server\share`).
    let rest = &subst[PREFIX.len()..];
    let unc: Vec<u16> = "UNC\\".encode_utf16().collect();
    let print: Vec<u16> = match rest.strip_prefix(&unc[..]) {
        Some(share) => "\\\\".encode_utf16().chain(share.iter().copied()).collect(),
        None => rest.to_vec(),
    };
    // Substitute name, NUL, print name, NUL.
    let names = (subst.len() + 1 + print.len() + 1) * 2;
    let data_len = PATHS - HEADER + names;
    if PATHS + names > MAXIMUM_REPARSE_DATA_BUFFER_SIZE as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "junction target too long",
        ));
    }
    let mut buf = vec![0u8; PATHS + names];
    let mut put16 =
        |at: usize, v: usize| buf[at..at + 2].copy_from_slice(&(v as u16).to_ne_bytes());
    let mount = HEADER;
    put16(offset_of!(REPARSE_DATA_BUFFER, ReparseDataLength), data_len);
    put16(
        mount + offset_of!(REPARSE_DATA_BUFFER_0_1, SubstituteNameOffset),
        0,
    );
    put16(
        mount + offset_of!(REPARSE_DATA_BUFFER_0_1, SubstituteNameLength),
        subst.len() * 2,
    );
    put16(
        mount + offset_of!(REPARSE_DATA_BUFFER_0_1, PrintNameOffset),
        (subst.len() + 1) * 2,
    );
    put16(
        mount + offset_of!(REPARSE_DATA_BUFFER_0_1, PrintNameLength),
        print.len() * 2,
    );
    buf[..4].copy_from_slice(&IO_REPARSE_TAG_MOUNT_POINT.to_ne_bytes());
    let text = subst.iter().chain([&0]).chain(print.iter()).chain([&0]);
    for (i, w) in text.enumerate() {
        buf[PATHS + i * 2..PATHS + i * 2 + 2].copy_from_slice(&w.to_ne_bytes());
    }
    let wl = wide(link);
    // SAFETY: `wl` is a NUL-terminated UTF-16 path that outlives the call; no security attributes.
    cvt(unsafe { CreateDirectoryW(wl.as_ptr(), std::ptr::null()) })?;
    let set = || -> io::Result<()> {
        let fd = create_file(
            link.to_path_buf(),
            GENERIC_WRITE,
            OPEN_EXISTING,
            FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT,
        )?;
        let mut got = 0u32;
        // SAFETY: an open handle; `buf` holds the reparse data of the length
        // given and outlives the (synchronous) call; no output.
        cvt(unsafe {
            DeviceIoControl(
                fd.as_fd().handle()?,
                FSCTL_SET_REPARSE_POINT,
                buf.as_ptr().cast(),
                buf.len() as u32,
                std::ptr::null_mut(),
                0,
                &mut got,
                std::ptr::null_mut(),
            )
        })
    };
    set().inspect_err(|_| {
        // SAFETY: `wl` as above; the directory made just now, still empty.
        unsafe { RemoveDirectoryW(wl.as_ptr()) };
    })
}

#[cfg(test)]
mod tests {
    use super::super::{cstring, AsFd};
    use super::super::{
        open_path, read_link_at, scratch, stat_at, symlink_at, FileKind, O_DIRECTORY,
    };

    /// A junction made by `symlink_at` from a `\??\` target reads back as a
    /// link with that target, and its directory's entries show through it.
    /// Where the filesystem cannot make one (Wine 8 has no reparse points),
    /// says so; scripts/test/windows.sh reads which it was.
    #[test]
    fn junction_made_again_as_a_junction() {
        let d = scratch("junction");
        std::fs::create_dir(d.join("target")).unwrap();
        std::fs::write(d.join("target").join("f"), b"through").unwrap();
        let dir = open_path(&d, O_DIRECTORY).unwrap();
        let target = format!(r"\??\{}", d.join("target").display());
        let target = target.replace(r"\??\\\?\", r"\??\");
        let t = cstring(std::ffi::OsStr::new(&target)).unwrap();
        match symlink_at(&t, dir.as_fd(), c"junc") {
            Ok(()) => {
                println!("KOPIRU-JUNCTION: made");
                let st = stat_at(dir.as_fd(), c"junc", false).unwrap();
                assert_eq!(st.kind(), FileKind::Symlink);
                assert_eq!(read_link_at(dir.as_fd(), c"junc").unwrap(), t);
                assert_eq!(std::fs::read(d.join("junc").join("f")).unwrap(), b"through");
                std::fs::remove_dir(d.join("junc")).unwrap();
            }
            Err(e) => {
                println!("KOPIRU-JUNCTION: refused: {e}");
                assert!(
                    !d.join("junc").exists(),
                    "a failed junction left its directory"
                );
            }
        }
        drop(dir);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
