//! Applying metadata to a copy, in the order that keeps each piece: xattrs,
//! then owner (which clears setuid bits), then mode, then times (last, since
//! every other change touches ctime only but writes would touch mtime).

use crate::error::Op;
use crate::options::Preserve;
use crate::sys::{self, FdRef, FileKind, Stat};
use std::ffi::CStr;
use std::io;

/// Where metadata goes: an open descriptor, or a name in a directory (for
/// symlinks and special files, which cannot be opened for this).
pub(crate) enum Target<'a> {
    Fd(FdRef<'a>),
    At(FdRef<'a>, &'a CStr),
}

/// A piece of metadata that could not be kept.
pub(crate) type Warning = (crate::error::Op, io::Error);

/// Applies the metadata `preserve` asks for. `created_perm` is the permission
/// the object has now and `owner_now` its owner if known, so that an unneeded
/// chmod or chown is skipped. `src` gives access to the source's xattrs.
/// Failures are returned as warnings: the data is there, a piece of metadata
/// is not.
pub(crate) fn apply(
    target: Target,
    src: Option<FdRef>,
    st: &Stat,
    created_perm: u32,
    owner_now: Option<(u32, u32)>,
    preserve: &Preserve,
    umask: u32,
) -> Vec<Warning> {
    let mut warnings = Vec::new();
    let is_link = st.kind() == FileKind::Symlink;
    if preserve.xattrs {
        if let (Some(src), Target::Fd(dst)) = (src, &target) {
            if let Err(e) = copy_xattrs(src, *dst) {
                warnings.push((Op::Xattr, e));
            }
        }
    }
    // Windows: the security descriptor, with the owner (nothing on Unix,
    // whose owners are the chown below).
    if let (true, Some(src), Target::Fd(dst)) = (preserve.owner, src, &target) {
        let (dacl, owner) = sys::copy_security(src, *dst);
        if let Err(e) = dacl {
            warnings.push((Op::Security, e));
        }
        if let Err(e) = owner {
            warnings.push((Op::Chown, e));
        }
    }
    let mut owner_changed = false;
    if preserve.owner && owner_now != Some((st.uid, st.gid)) {
        match chown(&target, st.uid, st.gid) {
            Ok(()) => owner_changed = true,
            Err(e) => {
                // Not permitted to give the file away: keep at least the group,
                // if we are a member of it.
                let group_kept = chown(&target, u32::MAX, st.gid).is_ok();
                owner_changed = group_kept;
                let what = if group_kept {
                    Op::ChownGroupOnly
                } else {
                    Op::Chown
                };
                warnings.push((what, e));
            }
        }
    }
    if !is_link {
        let want = if preserve.mode {
            st.perm()
        } else {
            st.perm() & 0o777 & !umask
        };
        let suid_bits_lost = owner_changed && want & 0o6000 != 0;
        if want != created_perm || suid_bits_lost {
            let r = match target {
                Target::Fd(fd) => sys::fchmod(fd, want),
                Target::At(dir, name) => sys::chmod_at(dir, name, want),
            };
            if let Err(e) = r {
                warnings.push((Op::Chmod, e));
            }
        }
    }
    // Windows attributes and creation time (nothing on Unix).
    if let (Target::Fd(fd), true) = (&target, preserve.mode || preserve.times) {
        if let Err(e) = sys::platform_meta(*fd, st, preserve.mode, preserve.times) {
            let op = if preserve.mode {
                Op::Chmod
            } else {
                Op::SetTimes
            };
            warnings.push((op, e));
        }
    }
    if preserve.times {
        let r = match target {
            Target::Fd(fd) => sys::futimens(fd, st.atime, st.mtime),
            Target::At(dir, name) => sys::utimens_at(dir, name, st.atime, st.mtime),
        };
        if let Err(e) = r {
            warnings.push((Op::SetTimes, e));
        }
    }
    warnings
}

fn chown(target: &Target, uid: u32, gid: u32) -> io::Result<()> {
    match *target {
        Target::Fd(fd) => sys::fchown(fd, uid, gid),
        Target::At(dir, name) => sys::chown_at(dir, name, uid, gid),
    }
}

fn copy_xattrs(src: FdRef, dst: FdRef) -> io::Result<()> {
    let names = match sys::xattr_list(src) {
        Ok(n) => n,
        // The source filesystem has no xattrs: nothing to keep.
        Err(e) if sys::xattrs_unsupported(&e) => return Ok(()),
        Err(e) => return Err(e),
    };
    let mut first_err = None;
    for name in names.into_iter().filter(|n| !fs_internal_xattr(n)) {
        let r = sys::xattr_get(src, &name).and_then(|v| sys::xattr_set(dst, &name, &v));
        if let Err(e) = r {
            first_err.get_or_insert(e);
        }
    }
    first_err.map_or(Ok(()), Err)
}

/// Xattrs that are a filesystem's own representation of something else (XFS
/// shows POSIX ACLs a second time as `trusted.SGI_ACL_*`): copying them would
/// leave junk on other filesystems. The same list as attr's /etc/xattr.conf.
fn fs_internal_xattr(name: &CStr) -> bool {
    let n = name.to_bytes();
    n.starts_with(b"trusted.SGI_ACL_") || n.starts_with(b"xfsroot.")
}
