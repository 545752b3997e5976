//! Checks of a whole request made after planning and before anything is
//! written: `--method clone` where no clone is possible is refused once,
//! instead of failing every file and leaving an empty skeleton tree.

use crate::copy::plan::Job;
use crate::error::{Error, Op, Refusal, Side};
use crate::options::{CopyOptions, MethodChoice, SparseMode};
use crate::paths::join_name;
use crate::sys::AsFd;
use crate::sys::{self, Fd, FileKind};
use std::collections::HashSet;
use std::ffi::{CStr, CString};
use std::path::PathBuf;
use std::rc::Rc;

/// Files a walk looks at, at most, for a sample to clone: a tree that has
/// no regular file among its first entries is not probed (its files fail
/// one by one, as before).
const MAX_LOOKED_AT: usize = 100_000;

/// With `--method clone`: whether every job can clone, tried on the first
/// regular file of each source (cloned to a scratch name in the directory
/// the copy will write into, then removed), once per pair of source and
/// destination filesystems. The first pair that cannot clone refuses the
/// whole request: `None` when the request may go ahead.
///
/// Only the filesystem's answer refuses (EXDEV, EOPNOTSUPP, ENOTTY, ENOSYS,
/// EINVAL): a sample that cannot be opened, or a scratch file that cannot
/// be made (a read-only or full destination), leaves the request to the
/// copy, which reports those per file.
pub(crate) fn clone_possible(jobs: &[Job], opts: &CopyOptions) -> Option<Error> {
    // Nothing is cloned without data (--attributes-only, -l, -s).
    if opts.method != MethodChoice::Clone || opts.attributes_only || opts.link_files.is_some() {
        return None;
    }
    let mut tried = HashSet::new();
    for job in jobs {
        let dst_path = join_name(&job.dst_parent, &job.dst_name);
        if opts.sparse == SparseMode::Never {
            let why = "--sparse never writes every byte, a clone shares them".to_string();
            return Some(refusal(dst_path, why));
        }
        let Some((sample, sample_path)) = sample(job, opts) else {
            continue;
        };
        // The directory the files will be written in: the destination
        // itself when it is an existing directory (it may be a mount
        // point), else the one it will be made in.
        let into = sys::open_dir(job.dst_dir.as_fd(), &job.dst_name).ok();
        let dst_dir = into.as_ref().unwrap_or(&job.dst_dir);
        let (Ok(s), Ok(d)) = (sys::fstat(sample.as_fd()), sys::fstat(dst_dir.as_fd())) else {
            continue;
        };
        if !tried.insert((s.dev, d.dev)) {
            continue;
        }
        match crate::probe::clone_refused(sample.as_fd(), dst_dir.as_fd()) {
            None => {}
            Some(e) => {
                let fs = |fd: &Fd| sys::fs_type(fd.as_fd()).unwrap_or_else(|_| "?".into());
                let (from, to) = (fs(&sample), fs(dst_dir));
                let between = match (s.dev == d.dev, from == to) {
                    (true, _) => format!("on {to}"),
                    (false, true) => format!("between two {to} filesystems"),
                    (false, false) => format!("from {from} to {to}"),
                };
                let why = format!(
                    "{} ({}) cloning '{}' {between}",
                    crate::error::reason(&e),
                    sys::errno_name(&e),
                    crate::paths::Escaped(sample_path.as_os_str()),
                );
                return Some(refusal(dst_path, why));
            }
        }
    }
    None
}

fn refusal(dst: PathBuf, why: String) -> Error {
    Error::refused(
        Side::Destination,
        dst,
        Op::Clone,
        Refusal::CannotClone { why },
    )
}

/// The first regular file of a job's source (the source itself, or the
/// first found in its tree, depth first), open for reading, and its path.
fn sample(job: &Job, opts: &CopyOptions) -> Option<(Fd, PathBuf)> {
    let src_path = join_name(&job.src_parent, &job.src_name);
    let st = sys::stat_at(job.src_dir.as_fd(), &job.src_name, job.follow).ok()?;
    match st.kind() {
        FileKind::File => open(&job.src_dir, &job.src_name, job.follow).map(|fd| (fd, src_path)),
        FileKind::Dir => {
            let root =
                sys::open_source(job.src_dir.as_fd(), &job.src_name, true, job.follow, false)
                    .ok()?;
            let follow_all = opts.follow == crate::options::Follow::Always;
            first_file(root, src_path, follow_all)
        }
        _ => None,
    }
}

/// Opens a source file read-only, leaving its access time alone where we
/// may.
fn open(dir: &Fd, name: &CStr, follow: bool) -> Option<Fd> {
    sys::open_source(dir.as_fd(), name, false, follow, true)
        .or_else(|_| sys::open_source(dir.as_fd(), name, false, follow, false))
        .ok()
}

/// The first regular file under `root`, those of a directory before its
/// subdirectories' (symlinks followed only with `-L`). Only the
/// directories above the one being read are kept open.
fn first_file(root: Fd, root_path: PathBuf, follow: bool) -> Option<(Fd, PathBuf)> {
    let mut stack: Vec<(Rc<Fd>, CString, PathBuf)> = Vec::new();
    let mut next = Some((Rc::new(root), root_path));
    let mut looked_at = 0;
    loop {
        let (dir, path) = match next.take() {
            Some(d) => d,
            None => {
                let (parent, name, path) = stack.pop()?;
                match sys::open_source(parent.as_fd(), &name, true, follow, false) {
                    Ok(fd) => (Rc::new(fd), path),
                    Err(_) => continue,
                }
            }
        };
        let Ok(entries) = sys::read_dir(dir.as_fd()) else {
            continue;
        };
        let mut subdirs = Vec::new();
        for e in entries {
            looked_at += 1;
            if looked_at > MAX_LOOKED_AT {
                return None;
            }
            let kind = match e.kind {
                Some(FileKind::Symlink) if follow => None,
                k => k,
            };
            let kind = match kind {
                Some(k) => k,
                None => match sys::stat_at(dir.as_fd(), &e.name, follow) {
                    Ok(st) => st.kind(),
                    Err(_) => continue,
                },
            };
            match kind {
                FileKind::File => {
                    if let Some(fd) = open(&dir, &e.name, follow) {
                        return Some((fd, path.join(sys::os_str(&e.name))));
                    }
                }
                FileKind::Dir => subdirs.push(e.name),
                _ => {}
            }
        }
        for name in subdirs.into_iter().rev() {
            let p = path.join(sys::os_str(&name));
            stack.push((dir.clone(), name, p));
        }
    }
}
