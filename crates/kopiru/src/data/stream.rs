//! Read and write through the worker's reused buffer, until read() says EOF.

use super::{DataError, SourceDigest, Watch};
use crate::error::Op;
use crate::sys::{self, FdRef};

/// Copies everything `src` yields from offset `from` on (0: by plain reads,
/// which pseudo-files need; else at positions); `expected` bytes are
/// expected (the size the buffer is grown to). With `punch_zeros`, blocks
/// of zeros are skipped (left as holes) and the size set at the end. What
/// is read is added to `digest`. Returns the offset reached.
#[allow(clippy::too_many_arguments)]
pub(super) fn copy(
    src: FdRef,
    dst: FdRef,
    from: u64,
    expected: u64,
    punch_zeros: bool,
    buf: &mut Vec<u8>,
    mut digest: Option<&mut SourceDigest>,
    watch: &Watch,
) -> Result<u64, DataError> {
    // Zeros are found in whole buffers: 1 MiB always, so that where holes
    // fall does not depend on what this worker copied before.
    let buf = super::buffer(buf, if punch_zeros { u64::MAX } else { expected });
    let mut off = from;
    let mut skipped_tail = false;
    loop {
        watch.check(Op::Read)?;
        let n = match from {
            0 => sys::read(src, buf),
            _ => sys::pread(src, buf, off),
        };
        let n = n.map_err(|e| (Op::Read, e))?;
        if n == 0 {
            break;
        }
        let chunk = &buf[..n];
        if let Some(d) = digest.as_deref_mut() {
            d.update_at(off, chunk);
        }
        if punch_zeros && chunk.iter().all(|&b| b == 0) {
            skipped_tail = true;
        } else {
            sys::pwrite_all(dst, chunk, off).map_err(|e| (Op::Write, e))?;
            skipped_tail = false;
        }
        off += n as u64;
        watch.bytes(n as u64);
    }
    if skipped_tail {
        sys::ftruncate(dst, off).map_err(|e| (Op::Truncate, e))?;
    }
    Ok(off)
}

/// Copies everything `src` yields into `dst` by plain reads and writes, at
/// no offsets: a FIFO, a character device or a pipe named as DEST (cp
/// writes into it). No holes are made. What is read is added to `digest`.
/// Returns the bytes copied.
pub(super) fn pipe(
    src: FdRef,
    dst: FdRef,
    buf: &mut Vec<u8>,
    mut digest: Option<&mut SourceDigest>,
    watch: &Watch,
) -> Result<u64, DataError> {
    let buf = super::buffer(buf, u64::MAX);
    let mut off = 0;
    loop {
        watch.check(Op::Read)?;
        let n = sys::read(src, buf).map_err(|e| (Op::Read, e))?;
        if n == 0 {
            return Ok(off);
        }
        if let Some(d) = digest.as_deref_mut() {
            d.update_at(off, &buf[..n]);
        }
        sys::write_all(dst, &buf[..n]).map_err(|e| (Op::Write, e))?;
        off += n as u64;
        watch.bytes(n as u64);
    }
}
