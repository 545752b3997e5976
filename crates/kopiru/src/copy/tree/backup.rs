//! `--backup`: before an existing destination entry is replaced, it gets a
//! second name, `name~` or `name.~N~` (cp's). The backup is a hard link
//! made under a temporary name and renamed into place, so the entry keeps
//! its own name until the new one replaces it: there is no moment without
//! either. (Where hard links are refused, it is renamed instead.)

use super::node::DirNode;
use super::worker::Worker;
use crate::options::Backup;
use crate::sys::{self, AsFd, Name, NameBuf};
use std::ffi::OsString;
use std::io;

impl Worker<'_, '_, '_> {
    /// Gives the entry `name` in `dir` its backup name (`kind` from the
    /// options), before it is replaced.
    /// `src`: the source's identity; a backup name that is the source
    /// itself is refused (cp: "backing up would destroy source").
    pub(crate) fn back_up(
        &self,
        dir: &DirNode,
        name: &Name,
        kind: Backup,
        src: (u64, u64),
    ) -> io::Result<()> {
        let suffix = self.sh.opts.backup_suffix();
        let backup = backup_name(dir, name, kind, suffix)?;
        let fd = dir.dst.as_fd();
        if sys::stat_at(fd, &backup, false).is_ok_and(|st| (st.dev, st.ino) == src) {
            return Err(io::Error::other(
                "backing it up would destroy the source (its backup name is the source)",
            ));
        }
        let tmp = self.sh.place.tmp_name();
        match sys::link_at(fd, name, fd, &tmp) {
            Ok(()) => sys::rename_at(fd, &tmp, fd, &backup).inspect_err(|_| {
                let _ = sys::unlink_at(fd, &tmp, false);
            }),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(e),
            Err(_) => sys::rename_at(fd, name, fd, &backup),
        }
    }
}

/// `name~`, or `name.~N~` with N one more than the highest numbered backup
/// of `name` in `dir` (`Existing`: numbered if there is one already).
fn backup_name(
    dir: &DirNode,
    name: &Name,
    kind: Backup,
    suffix: &std::ffi::OsStr,
) -> io::Result<NameBuf> {
    let base = sys::os_str(name).as_encoded_bytes();
    let highest = match kind {
        Backup::Simple => None,
        Backup::Numbered | Backup::Existing => {
            let mut n = None;
            // A descriptor of its own: the directory's was listed already
            // and reading it again would continue where that ended.
            let here = sys::open_dir(dir.dst.as_fd(), sys::DOT)?;
            for e in sys::read_dir(here.as_fd())? {
                let b = sys::os_str(&e.name).as_encoded_bytes();
                let number = b
                    .strip_prefix(base)
                    .and_then(|r| r.strip_prefix(b".~"))
                    .and_then(|r| r.strip_suffix(b"~"))
                    .and_then(|r| std::str::from_utf8(r).ok())
                    .and_then(|r| r.parse::<u64>().ok());
                n = n.max(number);
            }
            n
        }
    };
    let mut s = OsString::from(sys::os_str(name));
    match (kind, highest) {
        (Backup::Simple, _) | (Backup::Existing, None) => s.push(suffix),
        (_, n) => s.push(format!(".~{}~", n.unwrap_or(0) + 1)),
    }
    sys::cstring(&s)
}
