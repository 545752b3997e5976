//! Continuing a partial copy (`--partial`): how much of it already holds the
//! source's bytes, and the rest of the data after that.

use super::{offload, stream, DataError, Moved, PairCaps, Rung, Watch};
use crate::error::Op;
use crate::events::{Method, Reporter};
use crate::options::{CopyOptions, MethodChoice};
use crate::sys::{self, FdRef, Stat};
use std::io;

/// Bytes compared at a time.
const CHUNK: usize = 1 << 20;

/// The length of the start of `part` (`part_size` bytes) that holds the
/// source's bytes, in whole chunks: both are read at the same offsets and
/// compared until the first chunk that differs, or the end of the shorter.
pub(crate) fn matching_prefix(
    src: FdRef,
    src_size: u64,
    part: FdRef,
    part_size: u64,
    buf: &mut Vec<u8>,
    cancel: &crate::Cancel,
) -> io::Result<u64> {
    let limit = src_size.min(part_size);
    let a = &mut super::buffer(buf, CHUNK as u64)[..CHUNK];
    let mut b = vec![0u8; CHUNK];
    let mut off = 0u64;
    while off < limit {
        cancel.check()?;
        let want = (limit - off).min(CHUNK as u64) as usize;
        let ra = read_at(src, &mut a[..want], off)?;
        let rb = read_at(part, &mut b[..want], off)?;
        if ra != want || rb != want || a[..want] != b[..want] {
            break;
        }
        off += want as u64;
    }
    Ok(off)
}

/// Reads until `buf` is full or the file ends; the bytes read.
fn read_at(fd: FdRef, buf: &mut [u8], off: u64) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match sys::pread(fd, &mut buf[got..], off + got as u64)? {
            0 => break,
            n => got += n,
        }
    }
    Ok(got)
}

/// Copies the source's data from `from` on into `dst`, whose first `from`
/// bytes already hold it, and cuts `dst` to the source's length. In-kernel
/// where the ladder allows it, else read and write. The part kept is not
/// read again, so there is no source hash (`--verify` reads the source).
#[allow(clippy::too_many_arguments)]
pub(crate) fn continue_data(
    src: FdRef,
    st: &Stat,
    dst: FdRef,
    from: u64,
    pair: &PairCaps,
    opts: &CopyOptions,
    buf: &mut Vec<u8>,
    reporter: &dyn Reporter,
) -> Result<Moved, DataError> {
    let watch = Watch {
        reporter,
        cancel: &opts.cancel,
    };
    watch.bytes(from);
    let why = format!("continued a partial copy after its first {from} bytes, which match");
    let mut method = Method::Stream;
    let mut end = None;
    let offload = matches!(opts.method, MethodChoice::Auto | MethodChoice::Offload)
        && sys::HAS_OFFLOAD
        && pair.offload.usable()
        && from < st.size;
    if offload {
        match offload::copy(src, from, st.size, dst, &watch) {
            Rung::Done(n) => {
                method = Method::Offload;
                end = Some(n);
            }
            Rung::NotSupported(e, w) if opts.method == MethodChoice::Offload => {
                return Err((Op::CopyFileRange, io::Error::new(e.kind(), w)));
            }
            Rung::NotSupported(..) => {}
            Rung::Failed(e) => return Err(e),
        }
    }
    let end = match end {
        Some(n) => n,
        None => stream::copy(
            src,
            dst,
            from,
            st.size.saturating_sub(from),
            false,
            buf,
            None,
            &watch,
        )?,
    };
    sys::ftruncate(dst, end).map_err(|e| (Op::Truncate, e))?;
    Ok(Moved {
        method,
        bytes: end,
        why_not: Some(why.into()),
        source_hash: None,
    })
}
