//! Alternate data streams, copied as extended attributes are on Unix.

use std::ffi::{CStr, CString, OsString};
use std::io;
use std::os::windows::ffi::OsStringExt;
use std::path::PathBuf;

use windows_sys::Win32::Foundation::{
    GetLastError, ERROR_HANDLE_EOF, GENERIC_READ, GENERIC_WRITE, INVALID_HANDLE_VALUE,
};
use windows_sys::Win32::Storage::FileSystem::{
    FindClose, FILE_FLAG_BACKUP_SEMANTICS, OPEN_EXISTING,
};

use super::close::close;
use super::{create_file, wide, FdRef};

/// The name of a named data stream as `FindFirstStreamW` spells it
/// (`:name:$DATA`), without the colons and type; `None` for the file's
/// own data (`::$DATA`) and for streams of other types.
fn stream_name(raw: &[u16]) -> Option<OsString> {
    const DATA: &[u16] = &[
        b':' as u16,
        b'$' as u16,
        b'D' as u16,
        b'A' as u16,
        b'T' as u16,
        b'A' as u16,
    ];
    let rest = raw.strip_prefix(&[b':' as u16])?;
    let name = rest.strip_suffix(DATA)?;
    (!name.is_empty()).then(|| OsString::from_wide(name))
}

/// The path of the stream `name` of the file `fd` was opened by.
fn stream_path(fd: FdRef, name: &CStr) -> PathBuf {
    let mut p = fd.path.as_os_str().to_os_string();
    p.push(":");
    p.push(super::os_str(name));
    PathBuf::from(p)
}

/// Alternate data streams play the part of extended attributes on Windows
/// (copied with `-a` or `--preserve xattrs`): the names of the file's named
/// data streams (`FindFirstStreamW`). A filesystem without them (FAT) or a
/// file with none gives an empty list.
pub fn xattr_list(fd: FdRef) -> io::Result<Vec<CString>> {
    use windows_sys::Win32::Foundation::{
        ERROR_CALL_NOT_IMPLEMENTED, ERROR_INVALID_FUNCTION, ERROR_INVALID_PARAMETER,
        ERROR_NOT_SUPPORTED,
    };
    use windows_sys::Win32::Storage::FileSystem::{
        FindFirstStreamW, FindNextStreamW, FindStreamInfoStandard, WIN32_FIND_STREAM_DATA,
    };
    let w = wide(fd.path);
    let mut data = WIN32_FIND_STREAM_DATA::default();
    // SAFETY: `w` is a NUL-terminated UTF-16 path and `data` a
    // WIN32_FIND_STREAM_DATA, what FindStreamInfoStandard fills.
    let h = unsafe {
        FindFirstStreamW(
            w.as_ptr(),
            FindStreamInfoStandard,
            (&mut data as *mut WIN32_FIND_STREAM_DATA).cast(),
            0,
        )
    };
    let mut out = Vec::new();
    if h == INVALID_HANDLE_VALUE {
        // SAFETY: no other call since FindFirstStreamW.
        let e = unsafe { GetLastError() };
        return match e {
            ERROR_HANDLE_EOF
            | ERROR_INVALID_PARAMETER
            | ERROR_NOT_SUPPORTED
            | ERROR_INVALID_FUNCTION
            | ERROR_CALL_NOT_IMPLEMENTED => Ok(out),
            _ => Err(io::Error::from_raw_os_error(e as i32)),
        };
    }
    loop {
        let len = data
            .cStreamName
            .iter()
            .position(|&c| c == 0)
            .unwrap_or(data.cStreamName.len());
        if let Some(name) = stream_name(&data.cStreamName[..len]) {
            out.push(super::cstring(&name)?);
        }
        // SAFETY: `h` is the open search handle, `data` as above.
        if unsafe { FindNextStreamW(h, (&mut data as *mut WIN32_FIND_STREAM_DATA).cast()) } == 0 {
            // SAFETY: read right after the failed call; `h` is closed once.
            let e = unsafe { GetLastError() };
            // SAFETY: `h` is the open search handle, closed once.
            unsafe { FindClose(h) };
            if e == ERROR_HANDLE_EOF {
                return Ok(out);
            }
            return Err(io::Error::from_raw_os_error(e as i32));
        }
    }
}

/// The contents of the named stream `name` (see [`xattr_list`]).
pub fn xattr_get(fd: FdRef, name: &CStr) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let s = create_file(
        stream_path(fd, name),
        GENERIC_READ,
        OPEN_EXISTING,
        FILE_FLAG_BACKUP_SEMANTICS,
    )?;
    let mut v = Vec::new();
    (&s.file).read_to_end(&mut v)?;
    Ok(v)
}

/// Creates (or replaces) the named stream `name` with `value`.
pub fn xattr_set(fd: FdRef, name: &CStr, value: &[u8]) -> io::Result<()> {
    use std::io::Write;
    use windows_sys::Win32::Storage::FileSystem::CREATE_ALWAYS;
    let s = create_file(
        stream_path(fd, name),
        GENERIC_WRITE,
        CREATE_ALWAYS,
        FILE_FLAG_BACKUP_SEMANTICS,
    )?;
    (&s.file).write_all(value)?;
    close(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::windows::{
        open_existing_rw, open_path, open_source, scratch, AsFd, O_DIRECTORY,
    };

    #[test]
    fn stream_names() {
        let w = |s: &str| s.encode_utf16().collect::<Vec<u16>>();
        assert_eq!(stream_name(&w("::$DATA")), None);
        assert_eq!(
            stream_name(&w(":Zone.Identifier:$DATA")),
            Some("Zone.Identifier".into())
        );
        assert_eq!(stream_name(&w(":ünï:$DATA")), Some("ünï".into()));
        assert_eq!(stream_name(&w(":x:$INDEX_ALLOCATION")), None);
    }

    /// Named streams listed, read and written where the filesystem has
    /// them; where it has none (Wine 8), a file lists none, so a copy
    /// copies none. Prints which, for scripts/test/windows.sh.
    #[test]
    fn alternate_data_streams_or_none() {
        let d = scratch("ads");
        std::fs::write(d.join("f"), b"main").unwrap();
        std::fs::write(d.join("g"), b"other").unwrap();
        let dir = open_path(&d, O_DIRECTORY).unwrap();
        let f = open_source(dir.as_fd(), c"f", false, false, false).unwrap();
        let g = open_existing_rw(dir.as_fd(), c"g").unwrap();
        let set = xattr_set(f.as_fd(), c"note", b"a stream");
        let listed = xattr_list(f.as_fd()).unwrap();
        match set {
            Ok(()) if !listed.is_empty() => {
                println!("KOPIRU-ADS: supported");
                assert_eq!(listed, vec![CString::from(c"note")]);
                let v = xattr_get(f.as_fd(), c"note").unwrap();
                assert_eq!(v, b"a stream");
                xattr_set(g.as_fd(), c"note", &v).unwrap();
                assert_eq!(xattr_get(g.as_fd(), c"note").unwrap(), b"a stream");
                assert_eq!(std::fs::read(d.join("g")).unwrap(), b"other");
            }
            r => {
                // Wine 8 has no streams: FindFirstStreamW lists none, and
                // "f:note" is made as a file of that name beside f.
                let why = match r {
                    Ok(()) => "writing f:note made no stream (a file of that name?)".to_string(),
                    Err(e) => e.to_string(),
                };
                println!("KOPIRU-ADS: none: {why}");
                assert!(listed.is_empty());
            }
        }
        assert_eq!(std::fs::read(d.join("f")).unwrap(), b"main");
        drop((f, g, dir));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
