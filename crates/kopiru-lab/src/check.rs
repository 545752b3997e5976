//! The crash invariants, checked on a mounted replay of the log.
//!
//! * Final names: every regular file under a name that is not a kopiru
//!   temporary is byte-identical to the source file of that path, or to the
//!   old version (`--old`, for a merge over an older copy). Absent is fine.
//! * Complete (`--complete`, after the exit-0 mark): every source file and
//!   directory is present, and every file is exact.
//! * Exact (`--exact`): complete, and nothing else is there but kopiru's
//!   temporaries (after `--delete`; a source or reference directory that
//!   must be untouched).

use std::collections::BTreeSet;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// kopiru's temporary names start with this (see `durable::TMP_PREFIX`).
pub const TMP_PREFIX: &str = ".kopiru-tmp.";

#[derive(Debug, Default)]
pub struct Report {
    pub exact: u64,
    pub old: u64,
    pub temporaries: u64,
    pub violations: Vec<String>,
}

fn is_temporary(rel: &Path) -> bool {
    rel.components()
        .any(|c| c.as_os_str().to_string_lossy().starts_with(TMP_PREFIX))
}

/// Whether two files hold the same bytes; `None` if `b` is not a regular file.
fn same(a: &Path, b: &Path) -> io::Result<Option<bool>> {
    let mb = match fs::symlink_metadata(b) {
        Ok(m) if m.is_file() => m,
        Ok(_) => return Ok(None),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if fs::metadata(a)?.len() != mb.len() {
        return Ok(Some(false));
    }
    let (mut fa, mut fb) = (fs::File::open(a)?, fs::File::open(b)?);
    let (mut ba, mut bb) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
    loop {
        let n = fa.read(&mut ba)?;
        if n == 0 {
            return Ok(Some(true));
        }
        fb.read_exact(&mut bb[..n])?;
        if ba[..n] != bb[..n] {
            return Ok(Some(false));
        }
    }
}

fn walk(root: &Path, rel: &Path, out: &mut Vec<(PathBuf, fs::FileType)>) -> io::Result<()> {
    let mut names: Vec<_> = fs::read_dir(root.join(rel))?.collect::<Result<_, _>>()?;
    names.sort_by_key(|e| e.file_name());
    for e in names {
        let r = rel.join(e.file_name());
        let t = e.file_type()?;
        out.push((r.clone(), t));
        if t.is_dir() {
            walk(root, &r, out)?;
        }
    }
    Ok(())
}

fn describe(p: &Path) -> String {
    match fs::symlink_metadata(p) {
        Ok(m) => format!("{} bytes", m.len()),
        Err(_) => "absent".to_string(),
    }
}

/// How much of the source `dst` must hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Want {
    /// Only that what is under a final name is exact (or old).
    FinalNames,
    /// Every source entry, exact.
    Complete,
    /// Every source entry, exact, and nothing else.
    Exact,
}

/// Checks `dst` against `src` (and `old`, if given).
pub fn check(src: &Path, dst: &Path, old: Option<&Path>, want: Want) -> io::Result<Report> {
    let complete = want != Want::FinalNames;
    let mut r = Report::default();
    let mut seen = BTreeSet::new();
    let mut reported = BTreeSet::new();
    let mut found = Vec::new();
    if dst.is_dir() {
        walk(dst, Path::new(""), &mut found)?;
    }
    for (rel, t) in &found {
        if is_temporary(rel) {
            r.temporaries += 1;
            continue;
        }
        seen.insert(rel.clone());
        if want == Want::Exact && fs::symlink_metadata(src.join(rel)).is_err() {
            reported.insert(rel.clone());
            r.violations
                .push(format!("{}: present, but not in the source", rel.display()));
            continue;
        }
        if !t.is_file() {
            continue;
        }
        let d = dst.join(rel);
        if same(&d, &src.join(rel))? == Some(true) {
            r.exact += 1;
        } else if old.is_some_and(|o| same(&d, &o.join(rel)).ok() == Some(Some(true))) {
            r.old += 1;
        } else {
            reported.insert(rel.clone());
            r.violations.push(format!(
                "{}: final name holds {}, source holds {}",
                rel.display(),
                describe(&d),
                describe(&src.join(rel))
            ));
        }
    }
    if complete {
        let mut want = Vec::new();
        walk(src, Path::new(""), &mut want)?;
        for (rel, t) in want {
            if !seen.contains(&rel) {
                r.violations
                    .push(format!("{}: missing after exit 0", rel.display()));
            } else if t.is_file()
                && !reported.contains(&rel)
                && same(&src.join(&rel), &dst.join(&rel))? != Some(true)
            {
                // The old version, which is not enough after exit 0.
                r.violations.push(format!(
                    "{}: not the new content after exit 0",
                    rel.display()
                ));
            }
        }
    }
    Ok(r)
}
