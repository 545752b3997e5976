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
        match punch_zeros {
            true => skipped_tail = write_nonzero(dst, chunk, off)?,
            false => sys::pwrite_all(dst, chunk, off).map_err(|e| (Op::Write, e))?,
        }
        off += n as u64;
        watch.bytes(n as u64);
    }
    if skipped_tail && punch_zeros {
        sys::ftruncate(dst, off).map_err(|e| (Op::Truncate, e))?;
    }
    Ok(off)
}

/// `--sparse always`: a hole is left wherever a whole block of this many
/// bytes is zeros (as cp makes holes of every zero block, not only of
/// large runs).
const HOLE_BLOCK: usize = 4096;

/// Writes the blocks of `chunk` (read at `off`) that are not all zeros,
/// each run of them in one write. Whether its last block was left out.
fn write_nonzero(dst: FdRef, chunk: &[u8], off: u64) -> Result<bool, DataError> {
    let mut run: Option<usize> = None;
    let mut last_zero = false;
    for (i, block) in chunk.chunks(HOLE_BLOCK).enumerate() {
        let at = i * HOLE_BLOCK;
        last_zero = block.iter().all(|&b| b == 0);
        match (last_zero, run) {
            (false, None) => run = Some(at),
            (true, Some(start)) => {
                sys::pwrite_all(dst, &chunk[start..at], off + start as u64)
                    .map_err(|e| (Op::Write, e))?;
                run = None;
            }
            _ => {}
        }
    }
    if let Some(start) = run {
        sys::pwrite_all(dst, &chunk[start..], off + start as u64).map_err(|e| (Op::Write, e))?;
    }
    Ok(last_zero)
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
