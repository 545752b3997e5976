//! Paths as text, without losing a byte. A name that is not UTF-8 (or holds
//! control characters) must still be findable from a message or `--json`:
//! such bytes are written as `\xHH`, and a backslash as `\\`; everything
//! else is written as it is. Reading `\\` as `\` and `\xHH` as that byte
//! gives the name back exactly.

use std::ffi::OsStr;
use std::fmt::{self, Write};

/// Displays an `OsStr` with the lossless escape above.
pub struct Escaped<'a>(pub &'a OsStr);

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
}
