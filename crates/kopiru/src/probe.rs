//! `probe`: what a filesystem can do, found by trying on scratch files.

use crate::error::{Error, Op};
use crate::events::Reporter;
use crate::sys::AsFd;
use crate::sys::{self, Fd, FdRef, FileKind};
use std::ffi::{CStr, CString};
use std::io;
use std::path::{Path, PathBuf};

/// Whether a method worked, and if not, why.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Trial {
    /// It worked.
    pub works: bool,
    /// The error when it did not.
    pub detail: Option<String>,
}

/// What was found about one path, or a pair.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Probe {
    /// The paths probed, with their filesystem type.
    pub paths: Vec<(PathBuf, String)>,
    /// Clone from the first path's filesystem to the last one's.
    pub clone: Trial,
    /// In-kernel copy from the first to the last.
    pub offload: Trial,
}

/// How to probe. Nothing to choose yet: the verb takes options and an
/// observer like every other, so a choice added later breaks no caller.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct ProbeOptions {}

impl ProbeOptions {
    /// What `kopiru probe` does.
    pub fn new() -> Self {
        ProbeOptions {}
    }
}

/// The directory a path names, or the one it is in. The path must exist:
/// probing a name that is not there would report the filesystem of some
/// directory above it as if it were the path's.
fn dir_of(path: &Path) -> Result<(Fd, PathBuf), Error> {
    let st = sys::stat_path(path, true).map_err(|e| Error::src(path, Op::Stat, &e))?;
    let flags = sys::OPEN_DIR_FLAGS;
    let dir = match st.kind() {
        FileKind::Dir => path,
        _ => path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new(".")),
    };
    let fd = sys::open_path(dir, flags).map_err(|e| Error::src(dir, Op::Open, &e))?;
    Ok((fd, dir.to_path_buf()))
}

/// Probes `from` (and `to`, or `from` again): filesystem types, and whether
/// clone and offload work, by trying them on 64 KiB scratch files that are
/// removed afterwards. `reporter` hears nothing yet (a probe takes well
/// under a second); it is there so every verb has the same shape.
///
/// # Errors
/// When a path does not exist or cannot be opened, or a scratch file
/// cannot be made there; the error names the path.
pub fn probe(
    from: &Path,
    to: Option<&Path>,
    _opts: &ProbeOptions,
    _reporter: &dyn Reporter,
) -> Result<Probe, Error> {
    let to_path = to.unwrap_or(from);
    let (src_dir, src_dir_path) = dir_of(from)?;
    let (dst_dir, _) = dir_of(to_path)?;
    let fs_type =
        |fd: &Fd, p: &Path| sys::fs_type(fd.as_fd()).map_err(|e| Error::src(p, Op::Stat, &e));
    let mut paths = vec![(from.to_path_buf(), fs_type(&src_dir, from)?)];
    if let Some(t) = to {
        paths.push((t.to_path_buf(), fs_type(&dst_dir, t)?));
    }
    let tag = std::process::id();
    let src_name = CString::new(format!(".kopiru-probe.{tag}.src")).expect("no NUL");
    let scratch = || src_dir_path.join(sys::os_str(&src_name));
    let src = sys::create_new(src_dir.as_fd(), &src_name, 0o600)
        .map_err(|e| Error::src(scratch(), Op::Create, &e))?;
    let result = (|| -> Result<(Trial, Trial), Error> {
        let data: Vec<u8> = (0..65536u32).map(|i| (i * 7 + 3) as u8).collect();
        sys::pwrite_all(src.as_fd(), &data, 0).map_err(|e| Error::src(scratch(), Op::Write, &e))?;
        let src = sys::open_source(src_dir.as_fd(), &src_name, false, false, false)
            .map_err(|e| Error::src(scratch(), Op::Open, &e))?;
        let clone = trial(
            &dst_dir,
            &format!(".kopiru-probe.{tag}.clone"),
            |dst_dir, name| clone_into(src.as_fd(), dst_dir.as_fd(), name),
        );
        let offload = trial(
            &dst_dir,
            &format!(".kopiru-probe.{tag}.offload"),
            |dst_dir, name| {
                let dst = sys::create_new(dst_dir.as_fd(), name, 0o600)?;
                match sys::copy_range(src.as_fd(), 0, dst.as_fd(), 0, data.len())? {
                    0 => Err(io::Error::other("copied 0 bytes")),
                    _ => Ok(()),
                }
            },
        );
        Ok((clone, offload))
    })();
    let _ = sys::unlink_at(src_dir.as_fd(), &src_name, false);
    let (clone, offload) = result?;
    Ok(Probe {
        paths,
        clone,
        offload,
    })
}

/// Clones the open file `src` to the new name `name` in `dst_dir`, the way
/// the copy does: `fclonefileat` where a clone makes its own file (macOS),
/// or a new file and `FICLONE` (Linux). On failure the name is removed
/// again if this call made it.
pub(crate) fn clone_into(src: FdRef, dst_dir: FdRef, name: &CStr) -> io::Result<()> {
    if sys::CLONE_CREATES_FILE {
        return sys::clone_new(src, dst_dir, name);
    }
    let dst = sys::create_new(dst_dir, name, 0o600)?;
    sys::clone_fd(src, dst.as_fd()).inspect_err(|_| {
        let _ = sys::unlink_at(dst_dir, name, false);
    })
}

/// Whether the filesystems refuse to clone the open regular file `src`
/// into `dst_dir`: tried on a scratch name (`.kopiru-tmp.<pid>.<n>`),
/// removed afterwards. `Some` only with the filesystem's answer (EXDEV,
/// EOPNOTSUPP, ENOTTY, ENOSYS, EINVAL); `None` when the clone worked or
/// the trial could not tell (the scratch file could not be made: read-only,
/// full, no permission).
pub(crate) fn clone_refused(src: FdRef, dst_dir: FdRef) -> Option<io::Error> {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // A temporary name as the copy makes them (counted down from the top,
    // apart from the copy's own): a kill right here leaves a leftover the
    // next run removes.
    let pid = std::process::id();
    let name = CString::new(format!(
        "{}{pid}.{}",
        crate::copy::place::TMP_PREFIX,
        u64::MAX - n
    ))
    .expect("no NUL");
    match clone_into(src, dst_dir, &name) {
        Ok(()) => {
            let _ = sys::unlink_at(dst_dir, &name, false);
            None
        }
        Err(e) => sys::clone_refused(&e).then_some(e),
    }
}

fn trial(dir: &Fd, name: &str, f: impl FnOnce(&Fd, &std::ffi::CStr) -> io::Result<()>) -> Trial {
    let name = CString::new(name).expect("no NUL");
    let r = f(dir, &name);
    let _ = sys::unlink_at(dir.as_fd(), &name, false);
    match r {
        Ok(()) => Trial {
            works: true,
            detail: None,
        },
        Err(e) => Trial {
            works: false,
            detail: Some(format!(
                "{} ({})",
                crate::error::reason(&e),
                sys::errno_name(&e)
            )),
        },
    }
}
