//! Applying metadata to a copy, in the order that keeps each piece: owner
//! (a chown clears set-uid bits and file capabilities), then xattrs (ACLs
//! and capabilities among them), then mode, then times (last, since every
//! other change touches ctime only but writes would touch mtime).
//!
//! cp's rules, where the source's pieces are not asked for: a new entry's
//! mode is the source's permission bits less the umask, without set-uid,
//! set-gid or sticky; a file that replaces another takes the replaced one's
//! mode, owner, group and extended attributes (its ACL among them), as cp
//! keeps them by writing into it; a directory merged into keeps its mode.
//! Set-uid and set-gid survive only where the owner (group) they were set
//! for still owns the copy.

use crate::error::Op;
use crate::options::Preserve;
use crate::sys::{self, FdRef, FileKind, Stat};
use std::ffi::{CStr, CString};
use std::io;

/// Where metadata goes: an open descriptor, or a name in a directory (for
/// symlinks and special files, which cannot be opened for this).
pub(crate) enum Target<'a> {
    Fd(FdRef<'a>),
    At(FdRef<'a>, &'a CStr),
}

/// What was at the destination before, whose metadata a copy keeps where
/// the source's is not asked for.
#[derive(Clone, Copy)]
pub(crate) enum Before<'a> {
    /// Nothing: a new entry.
    Nothing,
    /// A regular file this one replaces under its name (`old`; `fd`: open
    /// to read its extended attributes, where it could be opened).
    Replaced {
        old: &'a Stat,
        fd: Option<FdRef<'a>>,
    },
    /// The same entry, written into or merged into: what it has stays.
    Same,
}

/// The copy as it is now: the permission bits it was made with (or has)
/// and its owner if known, so that an unneeded chmod or chown is skipped.
#[derive(Clone, Copy)]
pub(crate) struct Now {
    pub(crate) perm: u32,
    pub(crate) owner: Option<(u32, u32)>,
}

/// A piece of metadata that could not be kept.
pub(crate) type Warning = (crate::error::Op, io::Error);

/// The permission bits a new file is created with: its final ones where
/// they are known now (so that nothing is readable for a moment that will
/// not be; a file replacing a 0600 one is 0600 from its first byte), less
/// group and other while an owner is still to be given to it (cp's rule:
/// the wrong group must not read it before the chown).
/// With xattrs kept, the owner may write it until they are set (a user's
/// `user.*` attributes need write permission even through a descriptor,
/// so a read-only file's were lost).
pub(crate) fn create_perm(
    st: &Stat,
    before: Before,
    preserve: &Preserve,
    owner_changes: bool,
) -> u32 {
    let perm = match (before, preserve.mode) {
        (Before::Replaced { old, .. }, false) => old.perm(),
        _ => st.perm(),
    } & 0o777;
    let perm = match owner_changes {
        true => perm & 0o700,
        false => perm,
    };
    match preserve.xattrs {
        true => perm | 0o200,
        false => perm,
    }
}

/// Applies the metadata `preserve` asks for to `target`, a copy of the
/// source `st` (`src`: open, for its xattrs), where `before` was. `now`:
/// the copy as made. Failures are returned as warnings: the data is
/// there, a piece of metadata is not.
pub(crate) fn apply(
    target: Target,
    (src, st): (Option<FdRef>, &Stat),
    before: Before,
    now: Now,
    preserve: &Preserve,
    umask: u32,
) -> Vec<Warning> {
    let mut warnings = Vec::new();
    let is_link = st.kind() == FileKind::Symlink;
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
    // The owner the copy should have: the source's when kept, a replaced
    // file's otherwise (cp writes into it, keeping its owner).
    let owner_wanted = match (preserve.owner, before) {
        (true, _) => Some((st.uid, st.gid)),
        (false, Before::Replaced { old, .. }) => Some((old.uid, old.gid)),
        _ => None,
    };
    let mut owner = now.owner;
    let mut owner_changed = false;
    if let Some((uid, gid)) = owner_wanted.filter(|w| now.owner != Some(*w)) {
        match chown(&target, uid, gid) {
            Ok(()) => {
                owner_changed = true;
                owner = Some((uid, gid));
            }
            Err(e) => {
                // Not permitted to give the file away: keep at least the group,
                // if we are a member of it.
                let group_kept = chown(&target, u32::MAX, gid).is_ok();
                owner_changed = group_kept;
                let what = match group_kept {
                    true => Op::ChownGroupOnly,
                    false => Op::Chown,
                };
                owner = None;
                warnings.push((what, e));
            }
        }
    }
    // After the owner: a chown clears file capabilities.
    let mut acl_set = false;
    if let Target::Fd(dst) = &target {
        // The replaced file's first, then the source's over them: all of
        // them, or with the mode only its ACL (cp's -p keeps ACLs as part
        // of the mode).
        let old = match (preserve.xattrs, before) {
            (false, Before::Replaced { fd, .. }) => fd.map(|o| {
                // With the mode kept, the source's ACL (or none) replaces
                // the old file's, as cp -p sets it.
                let which = match preserve.mode {
                    true => Xattrs::AllButCapabilitiesAndAcls,
                    false => Xattrs::AllButCapabilities,
                };
                (o, which)
            }),
            _ => None,
        };
        let new = match (preserve.xattrs, preserve.mode) {
            (true, _) => src.map(|s| (s, Xattrs::All)),
            (false, true) => src.map(|s| (s, Xattrs::Acls)),
            (false, false) => None,
        };
        for (from, which) in [old, new].into_iter().flatten() {
            match copy_xattrs(from, *dst, which) {
                // An ACL set changes the mode bits: the chmod below is done.
                Ok(acl) => acl_set |= acl,
                Err(e) => warnings.push((Op::Xattr, e)),
            }
        }
    }
    if !is_link {
        let is_dir = st.kind() == FileKind::Dir;
        // The mode wanted, and whose owner its set-uid and set-gid bits
        // were set for. A new directory keeps its sticky bit (cp's).
        let plain = match is_dir {
            true => 0o1777,
            false => 0o777,
        };
        let want = match (preserve.mode, before) {
            (true, _) => Some((st.perm(), (st.uid, st.gid))),
            // A write into a set-uid file clears its set-uid and set-gid
            // bits unless the writer may keep them (root): so here.
            (false, Before::Replaced { old, .. }) => {
                let kept = match sys::euid() {
                    0 => old.perm(),
                    _ => old.perm() & !0o6000,
                };
                Some((kept, (old.uid, old.gid)))
            }
            (false, Before::Same) => None,
            (false, Before::Nothing) => {
                let bits = match (preserve.plain_mode, is_dir) {
                    (true, true) => 0o777,
                    (true, false) => 0o666,
                    (false, _) => st.perm() & plain,
                };
                Some((bits & !umask, (st.uid, st.gid)))
            }
        };
        if let Some((mut want, (uid, gid))) = want {
            if want & 0o6000 != 0 {
                let owner = owner.or_else(|| owner_of(&target));
                if owner.is_none_or(|(u, _)| u != uid) {
                    want &= !0o4000;
                }
                if owner.is_none_or(|(_, g)| g != gid) {
                    want &= !0o2000;
                }
            }
            // A directory keeps the set-gid and sticky bits it has: one
            // merged into keeps its own (cp -a's), a new one the set-gid
            // bit it took from its parent.
            if is_dir {
                want |= match before {
                    Before::Same => now.perm & 0o3000,
                    _ if !preserve.mode && want != now.perm => mode_of(&target) & 0o2000,
                    _ => 0,
                };
            }
            // A chown clears set-uid and set-gid: they are set again.
            let suid_bits_lost = owner_changed && want & 0o6000 != 0;
            if want != now.perm || suid_bits_lost || acl_set {
                let r = match target {
                    Target::Fd(fd) => sys::fchmod(fd, want),
                    Target::At(dir, name) => sys::chmod_at(dir, name, want),
                };
                if let Err(e) = r {
                    warnings.push((Op::Chmod, e));
                }
            }
        }
    }
    // Windows attributes and creation time (nothing on Unix). Hidden,
    // system and the rest are kept by default there, as CopyFile and
    // Explorer keep them; --no-preserve=mode drops them.
    let attributes = preserve.mode || (cfg!(windows) && !preserve.plain_mode);
    if let (Target::Fd(fd), true) = (&target, attributes || preserve.times) {
        if let Err(e) = sys::platform_meta(*fd, st, attributes, preserve.times) {
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

/// The owner of `target` now, by a stat (needed only for a mode with
/// set-uid or set-gid bits).
fn owner_of(target: &Target) -> Option<(u32, u32)> {
    let st = match *target {
        Target::Fd(fd) => sys::fstat(fd),
        Target::At(dir, name) => sys::stat_at(dir, name, false),
    };
    st.ok().map(|st| (st.uid, st.gid))
}

/// Which extended attributes [`copy_xattrs`] copies.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Xattrs {
    All,
    /// From the file a copy replaces, whose attributes stay with its name
    /// as cp's write into it keeps them: all but file capabilities (a
    /// write clears those: a changed program must not keep its privileges).
    AllButCapabilities,
    /// The same, and no POSIX ACLs (the source's mode is kept instead).
    AllButCapabilitiesAndAcls,
    /// POSIX ACLs only (the mode kept, as cp's `-p` keeps them).
    Acls,
}

/// Whether the directory `dir` has a default ACL (new entries in it
/// inherit it, not the umask).
pub(crate) fn has_default_acl(dir: FdRef) -> bool {
    sys::xattr_get(dir, c"system.posix_acl_default").is_ok()
}

/// The permission bits of `target` now, by a stat (0 if it fails).
fn mode_of(target: &Target) -> u32 {
    let st = match *target {
        Target::Fd(fd) => sys::fstat(fd),
        Target::At(dir, name) => sys::stat_at(dir, name, false),
    };
    st.map_or(0, |st| st.perm())
}

/// Copies the extended attributes of `src` to `dst`, those `which` says.
/// Whether a POSIX ACL was among them.
fn copy_xattrs(src: FdRef, dst: FdRef, which: Xattrs) -> io::Result<bool> {
    let names = match sys::xattr_list(src) {
        Ok(n) => n,
        // The source filesystem has no xattrs: nothing to keep.
        Err(e) if sys::xattrs_unsupported(&e) => return Ok(false),
        Err(e) => return Err(e),
    };
    let mut first_err = None;
    let keep = |n: &CString| match which {
        Xattrs::All => !fs_internal_xattr(n),
        Xattrs::AllButCapabilities => {
            !(fs_internal_xattr(n) || n.as_bytes() == b"security.capability")
        }
        Xattrs::AllButCapabilitiesAndAcls => {
            !(fs_internal_xattr(n)
                || n.as_bytes() == b"security.capability"
                || n.as_bytes().starts_with(b"system.posix_acl_"))
        }
        Xattrs::Acls => n.as_bytes().starts_with(b"system.posix_acl_"),
    };
    let mut acl = false;
    for name in names.into_iter().filter(keep) {
        let r = sys::xattr_get(src, &name).and_then(|v| sys::xattr_set(dst, &name, &v));
        match r {
            Ok(()) => acl |= name.as_bytes().starts_with(b"system.posix_acl_access"),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    first_err.map_or(Ok(acl), Err)
}

/// Xattrs that are a filesystem's own representation of something else (XFS
/// shows POSIX ACLs a second time as `trusted.SGI_ACL_*`): copying them would
/// leave junk on other filesystems. The same list as attr's /etc/xattr.conf.
fn fs_internal_xattr(name: &CStr) -> bool {
    let n = name.to_bytes();
    n.starts_with(b"trusted.SGI_ACL_") || n.starts_with(b"xfsroot.")
}
