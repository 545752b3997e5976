//! In-kernel copy with `copy_file_range`.

use super::{Rung, Watch};
use crate::error::Op;
use crate::sys::{self, FdRef};

/// Largest request per call. (GNU C library 2.41/2.42 corrupted ranges over 2 GiB
/// on some filesystems, and CIFS rejects them.) 64 MiB keeps a small file
/// at one call and lets a cancel stop a large one within one call.
pub(super) const MAX_CHUNK: u64 = 64 << 20;

/// Copies the bytes from `from` to `size` (the size known from `fstat`) to
/// the same offsets. Stops early if the file shrank. A file that grows
/// meanwhile is copied up to the size it had when opened, so that small
/// files cost one call. Returns the offset reached.
pub(super) fn copy(src: FdRef, from: u64, size: u64, dst: FdRef, watch: &Watch) -> Rung<u64> {
    let mut off = from;
    while off < size {
        if let Err(e) = watch.check(Op::CopyFileRange) {
            return Rung::Failed(e);
        }
        let want = (size - off).min(MAX_CHUNK) as usize;
        match sys::copy_range(src, off, dst, off, want) {
            Ok(0) if off == 0 => {
                // procfs/sysfs and some FUSE filesystems report success with no
                // data: only read() sees their content.
                let e = sys::invalid_argument();
                return Rung::NotSupported(e, "offload: 0 bytes at offset 0 (pseudo-file)".into());
            }
            Ok(0) => break,
            Ok(n) => {
                off += n as u64;
                watch.bytes(n as u64);
            }
            Err(e) if off == from && sys::is_not_supported(&e) => {
                let w = format!(
                    "offload: {} ({})",
                    crate::error::reason(&e),
                    sys::errno_name(&e)
                );
                return Rung::NotSupported(e, w);
            }
            Err(e) => return Rung::Failed((Op::CopyFileRange, e)),
        }
    }
    Rung::Done(off)
}
