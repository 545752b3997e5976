//! Verification: what was written where (hashed as the image was read, or
//! the mapped image itself), and each device read back around every cache
//! and compared, 64 KiB piece by piece.

use super::device::Dev;
use super::{DeviceResult, FlashEvents, VERIFY_BLOCK};
use crate::sys::AsFd;
use crate::sys::{self, Aligned};
use crate::{Cancel, Error, Op, Side};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

fn block_hash(h: &blake3::Hasher) -> u64 {
    let b = h.finalize();
    u64::from_le_bytes(b.as_bytes()[..8].try_into().expect("8 bytes"))
}

/// What was written where: (offset, length, hash) of pieces of at most
/// 64 KiB, for the read-back.
#[derive(Default)]
pub(super) struct Written {
    pub pieces: Vec<(u64, u32, u64)>,
    /// No hashes: the read-back compares with the mapped image itself.
    pub unhashed: bool,
}

impl Written {
    pub fn record(&mut self, off: u64, data: &[u8]) {
        for (i, p) in data.chunks(VERIFY_BLOCK).enumerate() {
            let hash = match self.unhashed {
                true => 0,
                false => {
                    let mut h = blake3::Hasher::new();
                    h.update(p);
                    block_hash(&h)
                }
            };
            let at = off + (i * VERIFY_BLOCK) as u64;
            self.pieces.push((at, p.len() as u32, hash));
        }
    }
}

/// The result of each device, read back (in parallel, a thread each) when
/// there is `written` to verify and it has not failed already. The
/// devices' errors are moved into the results. True with them: a read-back
/// was cancelled (that device's `verified` is left `None`).
pub(super) fn verify_all(
    devs: &mut [Dev],
    written: Option<&Written>,
    mapping: Option<&sys::Mapping>,
    chunk: usize,
    cancel: &Cancel,
    events: &dyn FlashEvents,
) -> (Vec<DeviceResult>, bool) {
    let stopped = AtomicBool::new(false);
    let cancelled = &stopped;
    let results = std::thread::scope(|sc| {
        let handles: Vec<_> = devs
            .iter_mut()
            .map(|d| {
                sc.spawn(move || {
                    let mut r = DeviceResult {
                        path: d.path.clone(),
                        error: d.error.take(),
                        error_at: d.error_at,
                        verified: None,
                        mismatch_at: None,
                        direct: d.direct,
                        identical_bytes: d.identical,
                        written_to: d.written_to,
                        head_written: d.head_written,
                    };
                    let Some(written) = written.filter(|_| r.error.is_none()) else {
                        return r;
                    };
                    match read_back(&d.device, written, mapping, chunk, cancel, events) {
                        Ok(None) => r.verified = Some(true),
                        Ok(Some(off)) => {
                            r.verified = Some(false);
                            r.mismatch_at = Some(off);
                        }
                        Err(e) if sys::is_cancelled(&e) => {
                            cancelled.store(true, Ordering::Relaxed);
                        }
                        Err(e) => {
                            r.error = Some(Error::io(Side::Destination, &d.path, Op::Verify, e))
                        }
                    }
                    r
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("verify thread"))
            .collect()
    });
    (results, stopped.into_inner())
}

/// Reads back every written piece of `path` (sorted by offset) around the
/// page cache, in order, and compares: with the mapped image when there is
/// one, else with the hashes taken as it was read. `Some(offset)`: where
/// the first piece that differs starts.
fn read_back(
    path: &Path,
    written: &Written,
    image: Option<&sys::Mapping>,
    chunk: usize,
    cancel: &Cancel,
    events: &dyn FlashEvents,
) -> io::Result<Option<u64>> {
    let fd = sys::open_path_uncached(path)?;
    let mut buf = Aligned::new(chunk);
    let pieces = &written.pieces;
    let mut i = 0;
    while i < pieces.len() {
        cancel.check()?;
        // A run of contiguous pieces that fits the buffer, read at once
        // (O_DIRECT: from an aligned offset, whole aligned blocks).
        let start = pieces[i].0;
        let base = start / sys::DIRECT_ALIGN as u64 * sys::DIRECT_ALIGN as u64;
        let mut j = i;
        let mut end = start;
        while j < pieces.len()
            && pieces[j].0 == end
            && (j == i || (end + u64::from(pieces[j].1) - base) as usize <= chunk)
        {
            end += u64::from(pieces[j].1);
            j += 1;
        }
        let want = (end - base) as usize;
        let aligned = want.div_ceil(sys::DIRECT_ALIGN) * sys::DIRECT_ALIGN;
        let mut got = 0;
        while got < want {
            let n = sys::pread(fd.as_fd(), &mut buf.buf()[got..aligned], base + got as u64)?;
            if n == 0 {
                return Ok(Some(base + got as u64));
            }
            got += n;
        }
        for &(off, len, hash) in &pieces[i..j] {
            let at = (off - base) as usize;
            let got = &buf.get()[at..at + len as usize];
            let same = match image {
                Some(m) => *got == m.bytes()[off as usize..off as usize + len as usize],
                None => {
                    let mut h = blake3::Hasher::new();
                    h.update(got);
                    block_hash(&h) == hash
                }
            };
            if !same {
                return Ok(Some(off));
            }
        }
        if let Some(m) = image {
            m.release(start as usize, (end - start) as usize);
        }
        events.verified(end - start);
        i = j;
    }
    Ok(None)
}
