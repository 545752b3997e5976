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
use std::fmt;
use std::path::{Path, PathBuf};

/// `dir/name` as a message shows it: `name` alone when `dir` is the
/// current directory (`big`, not `./big`).
pub(crate) fn join(dir: &Path, name: &OsStr) -> PathBuf {
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
    if let Some(joined) = crate::sys::append_name(dir, name) {
        return joined;
    }
    dir.join(name)
}

/// `dir/name` for a name read from a directory listing (or made to be
/// one), as [`join`] spells it: the one way the walk makes a path to show.
pub(crate) fn join_name(dir: &Path, name: &crate::sys::Name) -> PathBuf {
    join(dir, crate::sys::os_str(name))
}

/// Displays an `OsStr` with the lossless escape above.
#[derive(Debug, Clone, Copy)]
pub struct Escaped<'a>(pub &'a OsStr);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::sys::write_escaped(f, self.0)
    }
}

/// `s` as text with the lossless escape.
pub fn escape(s: &OsStr) -> String {
    Escaped(s).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

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
            assert_eq!(join(Path::new(dot), OsStr::new("big")), Path::new("big"));
        }
    }
}
