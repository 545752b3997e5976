//! Which copies this user made, so that running the same command again
//! names the same copy. cp's rule sends `copy SRC DEST` into `DEST/SRC` once
//! `DEST` exists, so a second run of a command that made `DEST` would nest
//! a second copy inside the first. Each time kopiru makes a new directory
//! tree under a new name (a staged tree published), it appends a line
//! `v2 SRC_ID DEST_ID DEST` to a small file of the caller's choice (the
//! command line uses `$XDG_STATE_HOME/kopiru/copies`): the source's and the
//! copy's identities ([`sys::identity`]: device, file handle with the
//! inode's generation, birth time) in hex, and the copy's real path with
//! kopiru's lossless escape. When `DEST` is a directory without `DEST/SRC`
//! and that file says this very directory (not merely one at the same path
//! with the same inode number, which is reused once a directory is
//! deleted) is a copy of this very source, the copy merges into `DEST` as
//! `-T` would. Where an identity cannot be had (a filesystem without file
//! handles), nothing is recorded or trusted, and cp's rule holds. Nothing
//! is written into the copy itself, so `-a` copies stay exact.

use crate::sys::{self, AsFd};
use std::io::{self, Write};
use std::path::Path;

/// Lines kept when the file is rewritten, and the length that triggers it.
const KEEP: usize = 2000;
const REWRITE_ABOVE: u64 = 256 << 10;
/// The first word of a line this version writes. Lines without it (the
/// first version recorded inode numbers only) are never trusted.
const VERSION: &str = "v2";

/// The identity of the directory at `path` (followed if it is a symlink),
/// when the platform and filesystem can prove one.
pub(crate) fn identity_of(path: &Path) -> Option<Vec<u8>> {
    let dir = sys::open_path(path, sys::OPEN_DIR_FLAGS).ok()?;
    sys::identity(dir.as_fd()).ok()
}

/// Whether `file` says the directory of identity `dst` at the real path
/// `dst_path` was made by kopiru as a copy of the directory of identity
/// `src`.
pub(crate) fn is_copy_of(file: &Path, src: &[u8], dst: &[u8], dst_path: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(file) else {
        return false;
    };
    says_copy(&text, src, dst, dst_path)
}

/// [`is_copy_of`] on the record's text.
pub(crate) fn says_copy(text: &str, src: &[u8], dst: &[u8], dst_path: &Path) -> bool {
    let want = line(src, dst, dst_path);
    // Only the newline comes off: a path may end in spaces (`trim_end`
    // took them too, and a copy into `dest ` was never found again).
    let want = want.strip_suffix('\n').unwrap_or(&want);
    text.lines().rev().any(|l| l == want)
}

/// The line that records `dst` (at `dst_path`) as a copy of `src`.
pub(crate) fn line(src: &[u8], dst: &[u8], dst_path: &Path) -> String {
    let path = crate::paths::escape(dst_path.as_os_str());
    format!("{VERSION} {} {} {path}\n", hex(src), hex(dst))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The usual place of the record, shared by the command and the Node
/// binding so that either one's rerun finds the other's copies:
/// `$XDG_STATE_HOME/kopiru/copies`, or `~/.local/state/kopiru/copies`
/// (on Windows `%LOCALAPPDATA%\kopiru\copies`); `None` without a home.
pub fn default_path() -> Option<std::path::PathBuf> {
    Some(crate::sys::state_dir()?.join("kopiru").join("copies"))
}

/// Notes in `file` that the directory `copy` (open, at `path`) is a copy of
/// the source of identity `source`. Best effort, silently: without a
/// writable record (a user with no home, a read-only one) the copy is just
/// as good, and a rerun follows cp's rule.
pub(crate) fn note(file: &Path, source: Option<&[u8]>, copy: sys::FdRef, path: &Path) {
    let Some(source) = source else {
        return;
    };
    let made = sys::identity(copy).and_then(|dst| {
        let real = std::fs::canonicalize(path)?;
        append(file, &line(source, &dst, &real))
    });
    // Ignored on purpose (see above).
    drop(made);
}

/// Appends `line` (one whole line per write, so several processes may
/// append), keeping the file small.
fn append(file: &Path, line: &str) -> io::Result<()> {
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)?;
    f.write_all(line.as_bytes())?;
    if f.metadata()?.len() > REWRITE_ABOVE {
        let text = std::fs::read_to_string(file)?;
        let lines: Vec<&str> = text.lines().collect();
        let kept = lines[lines.len().saturating_sub(KEEP)..].join("\n") + "\n";
        // A name of this process's own: two trimming at once must not
        // write into one temporary.
        let tmp = file.with_extension(format!("{}.tmp", std::process::id()));
        std::fs::write(&tmp, kept)?;
        std::fs::rename(&tmp, file)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_and_finds() {
        let dir = std::env::temp_dir().join(format!("kopiru-record-{}", std::process::id()));
        let file = dir.join("copies");
        let (p, q) = (Path::new("/a copy"), Path::new("/b"));
        assert!(!is_copy_of(&file, b"s1", b"d1", p));
        append(&file, &line(b"s1", b"d1", p)).unwrap();
        append(&file, &line(b"s2", b"d2", q)).unwrap();
        assert!(is_copy_of(&file, b"s1", b"d1", p));
        assert!(is_copy_of(&file, b"s2", b"d2", q));
        assert!(!is_copy_of(&file, b"s1", b"d2", q));
        // The same directory at another path, or another directory (a
        // reused inode number has another generation or birth time) at the
        // same path: not the copy.
        assert!(!is_copy_of(&file, b"s1", b"d1", q));
        assert!(!is_copy_of(&file, b"s1", b"d1x", p));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Found by fuzz/fuzz_targets/copies_record.rs: a path that ends in
    /// white space (`dest `, `dest\u{a0}`) was never found again, so a
    /// rerun nested a second copy inside the first.
    #[test]
    fn paths_ending_in_spaces_are_found() {
        for path in ["/tmp/dest ", "/tmp/dest\u{a0}", "/tmp/dest\u{3000}", "/ "] {
            let p = Path::new(path);
            let text = format!("v2 01 02 /tmp/dest\n{}", line(b"s", b"d", p));
            assert!(says_copy(&text, b"s", b"d", p), "{path:?}");
            // Not taken for the path without them.
            let bare = Path::new(path.trim_end());
            assert!(
                !says_copy(&line(b"s", b"d", p), b"s", b"d", bare),
                "{path:?}"
            );
        }
    }
}
