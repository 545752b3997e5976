//! What an interrupted run leaves in a destination, and what becomes of
//! it: orphaned temporary files are removed, partial copies kept for
//! `--partial`/`--resume` or removed, whole trees removed.

use super::names::{leftover_pid, partial_name, PARTIAL, TMP_PREFIX};
use super::Sink;
use crate::error::{Error, Op};
use crate::paths::join_name;
use crate::sys::{self, AsFd, Fd, FileKind, Name, NameBuf};
use std::io;
use std::path::Path;

/// Removes a file, or a directory and everything in it, adding the number
/// of names removed to `removed`.
pub(crate) fn remove_tree(dir: sys::FdRef, name: &Name, removed: &mut u64) -> io::Result<()> {
    match sys::unlink_at(dir, name, true) {
        Err(e) if e.kind() == io::ErrorKind::NotADirectory => {
            sys::unlink_at(dir, name, false)?;
            *removed += 1;
            return Ok(());
        }
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::DirectoryNotEmpty | io::ErrorKind::AlreadyExists
            ) => {}
        r => {
            *removed += u64::from(r.is_ok());
            return r;
        }
    }
    let sub = sys::open_dir(dir, name)?;
    // Copied directories can be read-only; their entries must go first.
    let _ = sys::fchmod(sub.as_fd(), 0o700);
    for e in sys::read_dir(sub.as_fd())? {
        let is_dir = match e.kind {
            Some(k) => k == FileKind::Dir,
            None => sys::stat_at(sub.as_fd(), &e.name, false)?.kind() == FileKind::Dir,
        };
        if is_dir {
            remove_tree(sub.as_fd(), &e.name, removed)?;
        } else {
            sys::unlink_at(sub.as_fd(), &e.name, false)?;
            *removed += 1;
        }
    }
    sys::unlink_at(dir, name, true)?;
    *removed += 1;
    Ok(())
}

/// Removes the temporary files an interrupted run left in a destination
/// directory this run merges into: `.kopiru-tmp.<pid>.<n>` whose process
/// is gone. (Staged trees are directories, resumed or removed by
/// [`super::Placement::stage`].) Partial copies ([`partial_name`]) are
/// returned, to be continued, when `keep_partials` (`--partial` or
/// `--resume`); otherwise removed too.
pub(super) fn clean_temps(
    dir: &Fd,
    path: &Path,
    keep_partials: bool,
    sink: &dyn Sink,
) -> Vec<NameBuf> {
    let mut partials = Vec::new();
    let entries = match sys::read_dir(dir.as_fd()) {
        Ok(e) => e,
        Err(e) => {
            sink.warn(Error::dst(path, Op::ReadDirectory, &e));
            return partials;
        }
    };
    for e in entries {
        match leftover(&e) {
            None => continue,
            Some(Leftover::Partial) if keep_partials => {
                partials.push(e.name);
                continue;
            }
            Some(_) => {}
        }
        if let Err(err) = sys::unlink_at(dir.as_fd(), &e.name, false) {
            if err.kind() != io::ErrorKind::IsADirectory {
                let at = join_name(path, &e.name);
                sink.warn(Error::dst(at, Op::Remove, &err));
            }
        }
    }
    partials
}

/// Removes what interrupted runs left in `dir` once no process of this
/// run writes there any more (a shard's rank 0, at the end): temporary
/// files whose process is gone, as [`clean_temps`], and every partial copy.
pub(crate) fn remove_leftovers(dir: sys::FdRef) -> io::Result<()> {
    for e in sys::read_dir(dir)? {
        if leftover(&e).is_none() {
            continue;
        }
        match sys::unlink_at(dir, &e.name, false) {
            Err(err)
                if !matches!(
                    err.kind(),
                    io::ErrorKind::IsADirectory | io::ErrorKind::NotFound
                ) =>
            {
                return Err(err)
            }
            _ => {}
        }
    }
    Ok(())
}

/// Removes the partial copies `left` in `dir` that no file of this run
/// continued (their source is gone, excluded or failed again before its
/// data): nothing is kept that no run would use.
pub(super) fn drop_partials(dir: sys::FdRef, path: &Path, left: Vec<NameBuf>, sink: &dyn Sink) {
    for name in left {
        match sys::unlink_at(dir, &name, false) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                sink.warn(Error::dst(join_name(path, &name), Op::Remove, &e));
            }
            _ => {}
        }
    }
}

/// After a file's data failed or was cancelled part-way (`--partial`):
/// keeps what `written` holds under the file's partial name, for a later
/// run to continue; an empty one is removed. True if kept.
pub(super) fn keep_partial(dir: sys::FdRef, written: &Name, dst_name: &Name) -> bool {
    let part = partial_name(dst_name);
    let has_data = sys::stat_at(dir, written, false).is_ok_and(|st| st.size > 0);
    has_data && (written == part.as_c_str() || sys::rename_at(dir, written, dir, &part).is_ok())
}

/// What an interrupted run may leave in a destination directory.
enum Leftover {
    /// A partial copy ([`partial_name`]), to be continued or removed.
    Partial,
    /// A temporary file (`.kopiru-tmp.<pid>.<n>`) whose process is gone.
    Orphan,
}

/// Whether `e` is a leftover: not a directory (staged trees are dealt
/// with elsewhere), and a partial copy or an orphaned temporary file; a
/// live process's temporary file, or a name without a pid, is not.
fn leftover(e: &sys::DirEntry) -> Option<Leftover> {
    let bytes = sys::name_bytes(&e.name);
    if !bytes.starts_with(TMP_PREFIX.as_bytes()) || e.kind == Some(FileKind::Dir) {
        return None;
    }
    let partial = bytes[TMP_PREFIX.len()..].starts_with(PARTIAL.as_bytes());
    match partial {
        true => Some(Leftover::Partial),
        false => match leftover_pid(&e.name).is_none_or(sys::process_alive) {
            true => None,
            false => Some(Leftover::Orphan),
        },
    }
}
