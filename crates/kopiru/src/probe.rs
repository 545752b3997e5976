//! `probe`: what a filesystem can do, found by trying on scratch files.

use crate::sys::{self, Fd};
use std::ffi::CString;
use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

/// Whether a method worked, and if not, why.
#[derive(Debug, Clone)]
pub struct Trial {
    /// It worked.
    pub works: bool,
    /// The error when it did not.
    pub detail: Option<String>,
}

/// What was found about one path, or a pair.
#[derive(Debug, Clone)]
pub struct Probe {
    /// The paths probed, with their filesystem type.
    pub paths: Vec<(PathBuf, String)>,
    /// Clone from the first path's filesystem to the last one's.
    pub clone: Trial,
    /// In-kernel copy from the first to the last.
    pub offload: Trial,
}

/// The directory a path names, or the one it is in.
fn dir_of(path: &Path) -> io::Result<Fd> {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY;
    sys::open_path(path, flags).or_else(|_| {
        let parent = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        sys::open_path(parent, flags)
    })
}

/// Probes `from` (and `to`, or `from` again): filesystem types, and whether
/// clone and offload work, by trying them on 64 KiB scratch files that are
/// removed afterwards.
///
/// # Errors
/// When a path cannot be opened or a scratch file cannot be created there.
pub fn probe(from: &Path, to: Option<&Path>) -> io::Result<Probe> {
    let to_path = to.unwrap_or(from);
    let src_dir = dir_of(from)?;
    let dst_dir = dir_of(to_path)?;
    let mut paths = vec![(from.to_path_buf(), sys::fs_type(src_dir.as_fd())?)];
    if let Some(t) = to {
        paths.push((t.to_path_buf(), sys::fs_type(dst_dir.as_fd())?));
    }
    let tag = std::process::id();
    let src_name = CString::new(format!(".kopiru-probe.{tag}.src")).expect("no NUL");
    let src = sys::create_new(src_dir.as_fd(), &src_name, 0o600)?;
    let result = (|| -> io::Result<(Trial, Trial)> {
        let data: Vec<u8> = (0..65536u32).map(|i| (i * 7 + 3) as u8).collect();
        sys::pwrite_all(src.as_fd(), &data, 0)?;
        let src = sys::open_source(src_dir.as_fd(), &src_name, false, false, false)?;
        let clone = trial(
            &dst_dir,
            &format!(".kopiru-probe.{tag}.clone"),
            |dst_dir, name| {
                if sys::CLONE_CREATES_FILE {
                    return sys::clone_new(src.as_fd(), dst_dir.as_fd(), name);
                }
                let dst = sys::create_new(dst_dir.as_fd(), name, 0o600)?;
                sys::clone_fd(src.as_fd(), dst.as_fd())
            },
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
