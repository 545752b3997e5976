//! The names kopiru gives what is not in place yet: temporary files,
//! staged trees and partial copies. All start with [`TMP_PREFIX`], so a
//! later run recognises them; those of a file or tree are derived from its
//! final name, so a later run finds them again.

use crate::sys::{self, Name, NameBuf};

/// Every temporary name kopiru makes starts with this, so leftovers are
/// recognisable (and removed by the next run once their process is gone).
pub const TMP_PREFIX: &str = ".kopiru-tmp.";

/// What follows [`TMP_PREFIX`] in a partial copy's name.
pub(super) const PARTIAL: &str = "part.";

/// A new temporary name `.kopiru-tmp.<pid>.<n>`, so that a later run can
/// tell a leftover (its process is gone) from a live run's file.
pub(super) fn temporary(pid: u32, n: u64) -> NameBuf {
    sys::name(&format!("{TMP_PREFIX}{pid}.{n}"))
}

/// FNV-1a of a name: short, stable and dependency-free; it only has to
/// tell destinations in one directory apart.
pub(crate) fn name_hash(name: &Name) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in sys::name_bytes(name) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The name a new top-level tree is built under beside its destination:
/// the same for every run, so `--resume` finds it.
pub(crate) fn staged_name(dst_name: &Name) -> NameBuf {
    let h = name_hash(dst_name);
    sys::name(&format!("{TMP_PREFIX}tree.{h:016x}"))
}

/// The name a file's partial copy is kept under (`--partial`) in its
/// destination directory: the same for every run, so a later run finds it.
pub(crate) fn partial_name(dst_name: &Name) -> NameBuf {
    let h = name_hash(dst_name);
    sys::name(&format!("{TMP_PREFIX}{PARTIAL}{h:016x}"))
}

/// The process id in a temporary name `.kopiru-tmp.<pid>.<n>`.
pub(crate) fn leftover_pid(name: &Name) -> Option<u32> {
    let rest = sys::name_bytes(name).strip_prefix(TMP_PREFIX.as_bytes())?;
    let rest = std::str::from_utf8(rest).ok()?;
    let (pid, n) = rest.split_once('.')?;
    n.parse::<u64>().ok()?;
    pid.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staged_and_file_names_are_stable_and_distinct() {
        let a = staged_name(&sys::name("copy"));
        assert_eq!(a, staged_name(&sys::name("copy")));
        assert_ne!(a, staged_name(&sys::name("copy2")));
        assert!(sys::name_bytes(&a).starts_with(b".kopiru-tmp.tree."));
        let p = partial_name(&sys::name("copy"));
        assert!(sys::name_bytes(&p).starts_with(b".kopiru-tmp.part."));
        assert_ne!(a, p);
    }

    #[test]
    fn leftovers_name_their_process() {
        assert_eq!(leftover_pid(&temporary(1234, 7)), Some(1234));
        assert_eq!(leftover_pid(&sys::name(".kopiru-tmp.1234.7")), Some(1234));
        assert_eq!(leftover_pid(&sys::name(".kopiru-tmp.tree.00ff")), None);
        assert_eq!(leftover_pid(&sys::name(".kopiru-tmp.file.00ff")), None);
        assert_eq!(leftover_pid(&sys::name("other.1234.7")), None);
        assert_eq!(leftover_pid(&sys::name(".kopiru-tmp.12x.7")), None);
    }
}
