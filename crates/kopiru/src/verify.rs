//! Comparing two trees by content: `kopiru verify` and `copy --verify`.
//! Source files are read normally; destination files are read around the
//! page cache (O_DIRECT on Linux, F_NOCACHE on macOS), so what is compared is
//! what the device holds, not what kopiru just wrote into memory. Both sides
//! are hashed with BLAKE3.

use crate::par::par_map;
use crate::sys::{self, Aligned, Fd, FileKind, Stat};
use crate::CopyError;
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Read size for hashing.
const CHUNK: usize = 1 << 20;

/// One way the destination differs from the source.
#[derive(Debug, Clone)]
pub struct Difference {
    /// The path, relative to the compared roots ("" for the roots).
    pub path: PathBuf,
    /// What differs ("content differs", "missing in destination", ...).
    pub what: String,
}

/// What a comparison found.
#[derive(Debug, Default)]
pub struct VerifyReport {
    /// Regular files compared by content.
    pub files: u64,
    /// Bytes hashed on each side.
    pub bytes: u64,
    /// Differences, in path order per directory.
    pub differences: Vec<Difference>,
    /// Entries that could not be read.
    pub errors: Vec<CopyError>,
}

/// How to compare.
#[derive(Clone, Copy, Debug)]
pub struct VerifyOptions {
    /// Hashing threads; 0 picks from the machine.
    pub jobs: usize,
    /// Whether entries only in the destination count as differences (not
    /// after copying into a directory that held other things).
    pub extra_is_difference: bool,
}

/// A regular file present on both sides with the same size.
struct FilePair {
    src_dir: Arc<Fd>,
    dst_dir: Arc<Fd>,
    name: CString,
    rel: PathBuf,
}

struct Walk {
    opts: VerifyOptions,
    files: Vec<FilePair>,
    report: VerifyReport,
}

/// Compares the tree (or file) `dst` with `src`.
pub fn verify(src: &Path, dst: &Path, opts: VerifyOptions) -> VerifyReport {
    let mut walk = Walk {
        opts,
        files: Vec::new(),
        report: VerifyReport::default(),
    };
    match (sys::open_parent(src), sys::open_parent(dst)) {
        (Ok((sd, sn)), Ok((dd, dn))) => {
            walk.entry(&Arc::new(sd), &sn, &Arc::new(dd), &dn, Path::new(""))
        }
        (Err(e), _) => walk.report.errors.push(CopyError::io(src, "open", &e)),
        (_, Err(e)) => walk.report.errors.push(CopyError::io(dst, "open", &e)),
    }
    let Walk {
        files, mut report, ..
    } = walk;
    let (differences, errors) = hash_all(&files, opts, src, &mut report);
    report.differences.extend(differences);
    report.errors.extend(errors);
    report
}

impl Walk {
    fn differ(&mut self, rel: &Path, what: impl Into<String>) {
        self.report.differences.push(Difference {
            path: rel.to_path_buf(),
            what: what.into(),
        });
    }

    /// Compares one entry present (or not) on both sides.
    fn entry(&mut self, sd: &Arc<Fd>, sn: &CStr, dd: &Arc<Fd>, dn: &CStr, rel: &Path) {
        let s = match sys::stat_at(sd.as_fd(), sn, false) {
            Ok(s) => s,
            Err(e) => {
                return self
                    .report
                    .errors
                    .push(CopyError::io(rel, "stat source", &e))
            }
        };
        let d = match sys::stat_at(dd.as_fd(), dn, false) {
            Ok(d) => d,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                return self.differ(rel, "missing in destination")
            }
            Err(e) => return self.report.errors.push(CopyError::io(rel, "stat", &e)),
        };
        if s.kind() != d.kind() {
            let what = format!("{} in source, {} in destination", kind(&s), kind(&d));
            return self.differ(rel, what);
        }
        match s.kind() {
            FileKind::File if s.size != d.size => {
                let what = format!("size differs: {} vs {} bytes", s.size, d.size);
                self.differ(rel, what);
            }
            FileKind::File => self.files.push(FilePair {
                src_dir: sd.clone(),
                dst_dir: dd.clone(),
                name: dn.to_owned(),
                rel: rel.to_path_buf(),
            }),
            FileKind::Symlink => {
                let a = sys::read_link_at(sd.as_fd(), sn);
                let b = sys::read_link_at(dd.as_fd(), dn);
                match (a, b) {
                    (Ok(a), Ok(b)) if a == b => {}
                    (Ok(_), Ok(_)) => self.differ(rel, "symlink target differs"),
                    (Err(e), _) | (_, Err(e)) => {
                        self.report.errors.push(CopyError::io(rel, "readlink", &e))
                    }
                }
            }
            FileKind::Dir => self.dir(sd, sn, dd, dn, rel),
            FileKind::CharDevice | FileKind::BlockDevice if s.rdev != d.rdev => {
                self.differ(rel, "device number differs")
            }
            _ => {}
        }
    }

    fn dir(&mut self, sd: &Fd, sn: &CStr, dd: &Fd, dn: &CStr, rel: &Path) {
        let (s, d) = match (sys::open_dir(sd.as_fd(), sn), sys::open_dir(dd.as_fd(), dn)) {
            (Ok(s), Ok(d)) => (Arc::new(s), Arc::new(d)),
            (Err(e), _) | (_, Err(e)) => {
                return self.report.errors.push(CopyError::io(rel, "open", &e))
            }
        };
        let list = |fd: &Fd| -> io::Result<Vec<CString>> {
            let mut names: Vec<CString> = sys::read_dir(fd.as_fd())?
                .into_iter()
                .map(|e| e.name)
                .collect();
            names.sort();
            Ok(names)
        };
        let (snames, dnames) = match (list(&s), list(&d)) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) => {
                return self
                    .report
                    .errors
                    .push(CopyError::io(rel, "read directory", &e))
            }
        };
        for name in &snames {
            let sub = rel.join(sys::os_str(name));
            self.entry(&s, name, &d, name, &sub);
        }
        if self.opts.extra_is_difference {
            for name in dnames.iter().filter(|n| snames.binary_search(n).is_err()) {
                self.differ(&rel.join(sys::os_str(name)), "only in destination");
            }
        }
    }
}

fn kind(st: &Stat) -> &'static str {
    match st.kind() {
        FileKind::File => "file",
        FileKind::Dir => "directory",
        FileKind::Symlink => "symlink",
        _ => "special file",
    }
}

/// Hashes every pair on worker threads; returns the content differences
/// and read errors.
fn hash_all(
    files: &[FilePair],
    opts: VerifyOptions,
    src_root: &Path,
    report: &mut VerifyReport,
) -> (Vec<Difference>, Vec<CopyError>) {
    let all: Vec<usize> = (0..files.len()).collect();
    let results = par_map(&all, opts.jobs, |i, buf: &mut Option<Aligned>| {
        let buf = buf.get_or_insert_with(|| Aligned::new(CHUNK)).buf();
        let f = &files[i];
        let src = sys::open_source(f.src_dir.as_fd(), &f.name, false, false, true)
            .or_else(|_| sys::open_source(f.src_dir.as_fd(), &f.name, false, false, false));
        src.and_then(|fd| hash_fd(&fd, buf))
            .map_err(|e| CopyError::io(src_root.join(&f.rel), "read", &e))
            .and_then(|(a, n)| {
                sys::open_uncached(f.dst_dir.as_fd(), &f.name)
                    .and_then(|fd| hash_fd(&fd, buf))
                    .map(|(b, _)| (a == b, n))
                    .map_err(|e| CopyError::io(&f.rel, "read destination", &e))
            })
    });
    report.files = files.len() as u64;
    let (mut differences, mut errors) = (Vec::new(), Vec::new());
    for (i, r) in results {
        match r {
            Ok((same, n)) => {
                report.bytes += n;
                if !same {
                    differences.push(Difference {
                        path: files[i].rel.clone(),
                        what: "content differs".into(),
                    });
                }
            }
            Err(e) => errors.push(e),
        }
    }
    differences.sort_by(|a, b| a.path.cmp(&b.path));
    (differences, errors)
}

/// BLAKE3 of everything readable from `fd`, and the byte count.
fn hash_fd(fd: &Fd, buf: &mut [u8]) -> io::Result<(blake3::Hash, u64)> {
    let mut h = blake3::Hasher::new();
    let mut total = 0u64;
    loop {
        let n = sys::pread(fd.as_fd(), buf, total)?;
        h.update(&buf[..n]);
        total += n as u64;
        // A short read is the end: reading again at an unaligned offset
        // would fail under O_DIRECT.
        if n < buf.len() {
            return Ok((h.finalize(), total));
        }
    }
}
