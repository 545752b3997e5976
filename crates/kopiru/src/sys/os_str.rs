//! OS strings as text and as paths: how `paths.rs`'s lossless escape reads
//! a name (bytes on Unix, UTF-16 on Windows), and the separator a name is
//! appended with.

use std::ffi::OsStr;
use std::fmt::{self, Write};
use std::path::{Path, PathBuf};

/// `dir/name` without `Path::join`'s parsing of both sides (another ~600
/// instructions), for a `name` that does not start with `/`; `None` where
/// `Path::join` must do it (an absolute `name`, or any name on Windows).
#[cfg(unix)]
pub fn append_name(dir: &Path, name: &OsStr) -> Option<PathBuf> {
    if name.as_encoded_bytes().starts_with(b"/") {
        return None;
    }
    let dir = dir.as_os_str();
    let mut joined = std::ffi::OsString::with_capacity(dir.len() + 1 + name.len());
    joined.push(dir);
    if !dir.is_empty() && !dir.as_encoded_bytes().ends_with(b"/") {
        joined.push("/");
    }
    joined.push(name);
    Some(joined.into())
}

/// A path's bytes as written to a file by Unix (`OsStr::as_bytes`), back
/// as an `OsStr`.
#[cfg(unix)]
pub fn bytes_os_str(b: &[u8]) -> &OsStr {
    use std::os::unix::ffi::OsStrExt;
    OsStr::from_bytes(b)
}

/// A path's bytes as Unix holds them (`OsStr::as_bytes`), to be written
/// to a file and read back by [`bytes_os_str`].
#[cfg(unix)]
pub fn os_str_bytes(s: &OsStr) -> &[u8] {
    use std::os::unix::ffi::OsStrExt;
    s.as_bytes()
}

/// Bytes written by [`os_str_bytes`] back as an `OsStr`: UTF-8 only, any
/// other name as U+FFFD (bytes read from a file are not trusted to be
/// WTF-8; `--shard`, the one user, is not available on Windows yet).
#[cfg(windows)]
pub fn bytes_os_str(b: &[u8]) -> &OsStr {
    OsStr::new(std::str::from_utf8(b).unwrap_or("\u{FFFD}"))
}

/// A path's bytes (its WTF-8), to be written to a file and read back by
/// [`bytes_os_str`].
#[cfg(windows)]
pub fn os_str_bytes(s: &OsStr) -> &[u8] {
    s.as_encoded_bytes()
}

/// Always `None` on Windows: `Path::join` joins.
#[cfg(windows)]
pub fn append_name(_dir: &Path, _name: &OsStr) -> Option<PathBuf> {
    None
}

/// Writes `s` with the escape `paths.rs` describes: on Windows each
/// unpaired surrogate, control character and `<` as `<U+XXXX>`.
#[cfg(windows)]
pub fn write_escaped(f: &mut fmt::Formatter<'_>, s: &OsStr) -> fmt::Result {
    use std::os::windows::ffi::OsStrExt;
    for c in char::decode_utf16(s.encode_wide()) {
        match c {
            Ok(c) if c == '<' || c.is_control() => write!(f, "<U+{:04X}>", c as u32)?,
            Ok(c) => f.write_char(c)?,
            Err(e) => write!(f, "<U+{:04X}>", e.unpaired_surrogate())?,
        }
    }
    Ok(())
}

/// Writes `s` with the escape `paths.rs` describes: on Unix each byte that
/// is not UTF-8 or is a control character as `\xHH`, a backslash as `\\`.
#[cfg(not(windows))]
pub fn write_escaped(f: &mut fmt::Formatter<'_>, s: &OsStr) -> fmt::Result {
    let mut bytes = s.as_encoded_bytes();
    while !bytes.is_empty() {
        let (good, bad) = match std::str::from_utf8(bytes) {
            Ok(s) => (s, &[][..]),
            Err(e) => {
                let (good, rest) = bytes.split_at(e.valid_up_to());
                // SAFETY: `valid_up_to` bytes were just checked as UTF-8.
                let good = unsafe { std::str::from_utf8_unchecked(good) };
                let bad_len = e.error_len().unwrap_or(rest.len());
                (good, &rest[..bad_len])
            }
        };
        for c in good.chars() {
            match c {
                '\\' => f.write_str("\\\\")?,
                // C0, DEL and C1 controls: their UTF-8 bytes.
                c if c.is_control() => {
                    let mut b = [0; 4];
                    for byte in c.encode_utf8(&mut b).bytes() {
                        write!(f, "\\x{byte:02x}")?;
                    }
                }
                c => f.write_char(c)?,
            }
        }
        for b in bad {
            write!(f, "\\x{b:02x}")?;
        }
        bytes = &bytes[good.len() + bad.len()..];
    }
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use crate::paths::{escape, join};
    use std::ffi::OsStr;
    use std::path::Path;

    fn os(b: &[u8]) -> &OsStr {
        use std::os::unix::ffi::OsStrExt;
        OsStr::from_bytes(b)
    }

    #[test]
    fn escapes_only_what_it_must() {
        assert_eq!(escape(os(b"plain/na\xc3\xafve.txt")), "plain/naïve.txt");
        assert_eq!(escape(os(b"bad\xffname")), "bad\\xffname");
        assert_eq!(escape(os(b"back\\slash")), "back\\\\slash");
        assert_eq!(escape(os(b"new\nline")), "new\\x0aline");
        assert_eq!(escape(os(b"\xe2\x82")), "\\xe2\\x82");
    }

    /// The rest of `join`'s test is in `paths.rs`.
    #[test]
    fn join_keeps_a_name_that_is_not_utf8() {
        for dot in [".", "./", "././"] {
            assert_eq!(
                join(Path::new(dot), os(b"big\xff")),
                Path::new(os(b"big\xff"))
            );
        }
        assert_eq!(
            join(Path::new("a"), os(b"big\xff")),
            Path::new("a").join(os(b"big\xff"))
        );
    }
}

#[cfg(all(test, windows))]
mod tests {
    use crate::paths::escape;
    use std::ffi::OsString;
    use std::os::windows::ffi::{OsStrExt, OsStringExt};

    fn wide(units: &[u16]) -> OsString {
        OsString::from_wide(units)
    }

    fn w(s: &str) -> Vec<u16> {
        s.encode_utf16().collect()
    }

    /// The reverse of the escape: each `<U+XXXX>` back to its code unit.
    fn unescape(s: &str) -> OsString {
        let mut out = Vec::new();
        let mut rest = s;
        while let Some(i) = rest.find("<U+") {
            out.extend(rest[..i].encode_utf16());
            let end = rest[i..].find('>').expect("an escape ends with >") + i;
            out.push(u16::from_str_radix(&rest[i + 3..end], 16).expect("hex"));
            rest = &rest[end + 1..];
        }
        out.extend(rest.encode_utf16());
        OsString::from_wide(&out)
    }

    #[test]
    fn windows_paths_keep_single_backslashes_and_escape_only_what_they_must() {
        let plain = wide(&w(r"C:\Users\naïve\日本語.txt"));
        assert_eq!(escape(&plain), r"C:\Users\naïve\日本語.txt");
        let verbatim = wide(&w(r"\\?\C:\x41\u{D800}"));
        assert_eq!(escape(&verbatim), r"\\?\C:\x41\u{D800}");
        let mut lone = w(r"C:\a");
        lone.push(0xD800);
        lone.extend(w("b"));
        let lone = wide(&lone);
        assert_eq!(escape(&lone), r"C:\a<U+D800>b");
        let odd = wide(&w("C:\\less<than\nnew"));
        assert_eq!(escape(&odd), r"C:\less<U+003C>than<U+000A>new");
        let low = wide(&[0xDC00, b'<' as u16, b'U' as u16]);
        assert_eq!(escape(&low), "<U+DC00><U+003C>U");
        for p in [plain, verbatim, lone, odd, low] {
            assert_eq!(
                unescape(&escape(&p)).encode_wide().collect::<Vec<_>>(),
                p.encode_wide().collect::<Vec<_>>()
            );
        }
    }
}
