//! Copy only the data ranges of a file with holes (SEEK_DATA / SEEK_HOLE).

use super::{Rung, SourceDigest, Watch};
use crate::error::Op;
use crate::sys::{self, FdRef, Stat};

/// Copies the data ranges of `src`, with `copy_file_range` when `offload`
/// (falling back to pread/pwrite if the first call says "not here"), then sets
/// the size so a trailing hole stays a hole. If a range ends early (the file is
/// shorter than `stat` said, as sysfs files are) the copy ends there.
/// Returns the data bytes copied and the file's size. Data read through the
/// buffer is added to `digest` (which is only given without `offload`).
pub(super) fn copy(
    src: FdRef,
    st: &Stat,
    dst: FdRef,
    mut offload: bool,
    buf: &mut Vec<u8>,
    mut digest: Option<&mut SourceDigest>,
    watch: &Watch,
) -> Rung<(u64, u64)> {
    let mut pos = 0u64;
    let mut data_bytes = 0u64;
    let mut end = st.size;
    // Windows: the ranges skipped stay holes only in a file marked sparse
    // before anything is written (a no-op on Unix).
    if let Err(e) = sys::make_sparse(dst) {
        let w = format!(
            "sparse: marking the copy sparse: {}",
            crate::error::reason(&e)
        );
        return Rung::NotSupported(e, w);
    }
    while pos < st.size {
        let data = match sys::seek_data(src, pos, false) {
            Ok(Some(d)) if d < st.size => d,
            Ok(_) => break,
            Err(e) if pos == 0 => {
                let w = format!("sparse: SEEK_DATA: {}", crate::error::reason(&e));
                return Rung::NotSupported(e, w);
            }
            Err(e) => return Rung::Failed((Op::Seek, e)),
        };
        let hole = match sys::seek_data(src, data, true) {
            Ok(h) => h.unwrap_or(st.size).min(st.size),
            Err(e) => return Rung::Failed((Op::Seek, e)),
        };
        let first = data_bytes == 0;
        let range = (data, hole);
        let got = match copy_range(
            (src, dst),
            range,
            &mut offload,
            first,
            buf,
            digest.as_deref_mut(),
            watch,
        ) {
            Ok(g) => g,
            Err(e) => return Rung::Failed(e),
        };
        data_bytes += got;
        watch.bytes(got);
        if got < hole - data {
            end = data + got;
            break;
        }
        pos = hole;
    }
    if let Err(e) = sys::ftruncate(dst, end) {
        return Rung::Failed((Op::Truncate, e));
    }
    Rung::Done((data_bytes, end))
}

/// Copies `[from, to)`; returns the bytes copied (fewer at end of file).
fn copy_range(
    (src, dst): (FdRef, FdRef),
    (from, to): (u64, u64),
    offload: &mut bool,
    first: bool,
    buf: &mut Vec<u8>,
    mut digest: Option<&mut SourceDigest>,
    watch: &Watch,
) -> Result<u64, super::DataError> {
    let mut off = from;
    while *offload && off < to {
        watch.check(Op::CopyFileRange)?;
        let want = (to - off).min(super::offload::MAX_CHUNK) as usize;
        match sys::copy_range(src, off, dst, off, want) {
            Ok(0) if first && off == from => *offload = false,
            Ok(0) => return Ok(off - from),
            Ok(n) => off += n as u64,
            Err(e) if first && off == from && sys::is_not_supported(&e) => *offload = false,
            Err(e) => return Err((Op::CopyFileRange, e)),
        }
    }
    let buf = super::buffer(buf, to - off);
    while off < to {
        watch.check(Op::Read)?;
        let want = ((to - off) as usize).min(buf.len());
        let n = sys::pread(src, &mut buf[..want], off).map_err(|e| (Op::Read, e))?;
        if n == 0 {
            break;
        }
        if let Some(d) = digest.as_deref_mut() {
            d.update_at(off, &buf[..n]);
        }
        sys::pwrite_all(dst, &buf[..n], off).map_err(|e| (Op::Write, e))?;
        off += n as u64;
    }
    Ok(off - from)
}
