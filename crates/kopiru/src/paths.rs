//! Paths as text, without losing a byte. A name that is not UTF-8 (or holds
//! control characters) must still be findable from a message or `--json`:
//! such bytes are written as `\xHH`, and a backslash as `\\`; everything
//! else is written as it is. Reading `\\` as `\` and `\xHH` as that byte
//! gives the name back exactly.
//!
//! On Windows a path is UTF-16, `\` is its separator and no name can hold
//! one, so backslashes are written as they are (`C:\Users`). What a name
//! can hold that text cannot show is an unpaired surrogate (and, made
//! through the NT API, a control character): those are written as
//! `<U+XXXX>`, the UTF-16 code unit in hex, and so is `<` itself (which
//! Win32 names cannot hold, but NT names can), so that every `<` in the
//! text starts an escape. Reading each `<U+XXXX>` as that code unit gives
//! the path back exactly.

use std::ffi::OsStr;
use std::fmt::{self, Write};
use std::path::{Path, PathBuf};

/// `dir/name` as a message shows it: `name` alone when `dir` is the
/// current directory (`big`, not `./big`).
pub fn join(dir: &Path, name: &OsStr) -> PathBuf {
    // Comparing paths walks their components, about a thousand
    // instructions for a deep one (callgrind): only a path made of dots
    // and separators can be ".".
    let dots = dir
        .as_os_str()
        .as_encoded_bytes()
        .iter()
        .all(|b| matches!(b, b'.' | b'/' | b'\\'));
    if dots && dir == Path::new(".") {
        return PathBuf::from(name);
    }
    // `Path::join` parses both sides again (another ~600 instructions);
    // a name from a listing has no separator, so bytes can be appended.
    #[cfg(unix)]
    if !name.as_encoded_bytes().starts_with(b"/") {
        let dir = dir.as_os_str();
        let mut joined = std::ffi::OsString::with_capacity(dir.len() + 1 + name.len());
        joined.push(dir);
        if !dir.is_empty() && !dir.as_encoded_bytes().ends_with(b"/") {
            joined.push("/");
        }
        joined.push(name);
        return joined.into();
    }
    dir.join(name)
}

/// Displays an `OsStr` with the lossless escape above.
pub struct Escaped<'a>(pub &'a OsStr);

#[cfg(windows)]
impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use std::os::windows::ffi::OsStrExt;
        for c in char::decode_utf16(self.0.encode_wide()) {
            match c {
                Ok(c) if c == '<' || c.is_control() => write!(f, "<U+{:04X}>", c as u32)?,
                Ok(c) => f.write_char(c)?,
                Err(e) => write!(f, "<U+{:04X}>", e.unpaired_surrogate())?,
            }
        }
        Ok(())
    }
}

#[cfg(not(windows))]
impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut bytes = self.0.as_encoded_bytes();
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
}

/// `s` as text with the lossless escape.
pub fn escape(s: &OsStr) -> String {
    Escaped(s).to_string()
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

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

    #[test]
    fn join_is_path_join_without_a_leading_dot() {
        for dir in ["/a/b", "/a/b/", "a", "", "/", "./x", "..", "a/./"] {
            for name in ["n", "n.txt", "sub/n", "/abs", ".."] {
                assert_eq!(
                    join(Path::new(dir), OsStr::new(name)),
                    Path::new(dir).join(name),
                    "{dir:?} {name:?}"
                );
            }
        }
        for dot in [".", "./", "././"] {
            assert_eq!(
                join(Path::new(dot), os(b"big\xff")),
                Path::new(os(b"big\xff"))
            );
        }
    }
}

#[cfg(all(test, windows))]
mod tests {
    use super::*;
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
