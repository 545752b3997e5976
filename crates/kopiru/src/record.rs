//! Which copies this user made, so that running the same command again
//! names the same copy. cp's rule sends `copy SRC DEST` into `DEST/SRC` once
//! `DEST` exists, so a second run of a command that made `DEST` would nest
//! a second copy inside the first. Each time kopiru makes a new directory
//! tree under a new name (a staged tree published), it appends a line
//! `SRC_DEV SRC_INO DEST_DEV DEST_INO DEST` (DEST its real path, with
//! kopiru's lossless escape) to a small file of the caller's
//! choice (the command line uses `$XDG_STATE_HOME/kopiru/copies`); when
//! `DEST` is a directory without `DEST/SRC` and that file says `DEST` is a
//! copy of `SRC`, the copy merges into `DEST` as `-T` would. Nothing is
//! written into the copy itself, so `-a` copies stay exact.

use std::io::{self, Write};
use std::path::Path;

/// Lines kept when the file is rewritten, and the length that triggers it.
const KEEP: usize = 2000;
const REWRITE_ABOVE: u64 = 256 << 10;

/// One line of the record: source and copy by (device, inode), and the
/// copy's real path (an inode number alone can be reused by an unrelated
/// directory once the copy is deleted).
type Entry<'a> = ((u64, u64), (u64, u64), &'a str);

/// Whether `file` says the directory `dst` (device, inode) at the real
/// path `dst_path` was made by kopiru as a copy of `src`.
pub(crate) fn is_copy_of(file: &Path, src: (u64, u64), dst: (u64, u64), dst_path: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(file) else {
        return false;
    };
    let path = crate::paths::escape(dst_path.as_os_str());
    text.lines()
        .rev()
        .any(|l| parse(l) == Some((src, dst, path.as_str())))
}

fn parse(line: &str) -> Option<Entry<'_>> {
    let mut words = line.splitn(5, ' ');
    let mut num = || words.next()?.parse::<u64>().ok();
    let (a, b, c, d) = (num()?, num()?, num()?, num()?);
    Some(((a, b), (c, d), words.next()?))
}

/// The usual place of the record, shared by the command and the Node
/// binding so that either one's rerun finds the other's copies:
/// `$XDG_STATE_HOME/kopiru/copies`, or `~/.local/state/kopiru/copies`
/// (on Windows `%LOCALAPPDATA%\kopiru\copies`); `None` without a home.
pub fn default_path() -> Option<std::path::PathBuf> {
    use std::path::PathBuf;
    if cfg!(windows) {
        let local = std::env::var_os("LOCALAPPDATA").filter(|d| !d.is_empty())?;
        return Some(PathBuf::from(local).join("kopiru").join("copies"));
    }
    let state = match std::env::var_os("XDG_STATE_HOME") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(std::env::var_os("HOME")?).join(".local/state"),
    };
    Some(state.join("kopiru/copies"))
}

/// Appends that `dst` is a copy of `src` (one whole line per write, so
/// several processes may append), keeping the file small.
pub(crate) fn record(
    file: &Path,
    src: (u64, u64),
    dst: (u64, u64),
    dst_path: &Path,
) -> io::Result<()> {
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let path = crate::paths::escape(dst_path.as_os_str());
    let line = format!("{} {} {} {} {path}\n", src.0, src.1, dst.0, dst.1);
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
        assert!(!is_copy_of(&file, (1, 2), (3, 4), p));
        record(&file, (1, 2), (3, 4), p).unwrap();
        record(&file, (5, 6), (7, 8), q).unwrap();
        assert!(is_copy_of(&file, (1, 2), (3, 4), p));
        assert!(is_copy_of(&file, (5, 6), (7, 8), q));
        assert!(!is_copy_of(&file, (1, 2), (7, 8), q));
        // The same inode at another path is another directory.
        assert!(!is_copy_of(&file, (1, 2), (3, 4), q));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn ignores_bad_lines() {
        assert_eq!(parse("1 2 3 4"), None);
        assert_eq!(parse("a 2 3 4 /x"), None);
        assert_eq!(parse("1 2 3 4 /x y"), Some(((1, 2), (3, 4), "/x y")));
    }
}
