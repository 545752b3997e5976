//! The xz output: liblzma's multi-threaded encoder (sys::XzEncoder), driven
//! through its C interface because the progress bar needs `lzma_get_progress` (the
//! image bytes its threads have compressed), which the `liblzma` crate
//! does not expose. The threads take whole blocks of input ahead (two
//! threads at level 6: 48 MiB), so bytes handed over are not work done.
//! Dropped (an error, a cancel), it stops at once.

use std::fs::File;
use std::io::{self, BufWriter, Write};

use crate::sys;

use crate::Cancel;

/// Most memory the encoder may take (liblzma's own estimate): its threads
/// are cut until it fits; one thread is used whatever it needs. `xz -T2
/// -6` peaked at 310 MB here, so about six threads of level 6 fit; level
/// 9 needs over 674 MiB a thread (xz's manual), so one; level 2, the
/// default, needs about 30 MiB a thread.
const MEMORY: u64 = 1 << 30;

/// A call that waits for a busy thread returns after this long, so that a
/// cancel, and the progress, are seen within it.
const TIMEOUT_MS: u32 = 100;

pub(super) struct XzOut {
    enc: sys::XzEncoder,
    out: BufWriter<File>,
    buf: Vec<u8>,
}

impl XzOut {
    /// Blocks that record their sizes (so that `kopiru flash` and `xz -d
    /// -T0` decode them on several threads), CRC64, at `preset`.
    pub(super) fn new(
        out: BufWriter<File>,
        preset: u32,
        threads: u32,
        buf: usize,
    ) -> io::Result<XzOut> {
        Ok(XzOut {
            enc: sys::XzEncoder::new(preset, threads, MEMORY, TIMEOUT_MS)?,
            out,
            buf: vec![0; buf],
        })
    }

    /// Image bytes the encoder has compressed (not merely taken in).
    pub(super) fn done_in(&mut self) -> u64 {
        self.enc.done_in()
    }

    /// One call to the encoder: consumes what it takes of `input`, writes
    /// what it gives. Returns the bytes taken and whether the stream ended.
    fn code(&mut self, input: &[u8], finish: bool) -> io::Result<(usize, bool)> {
        let c = self.enc.code(input, &mut self.buf, finish)?;
        self.out.write_all(&self.buf[..c.made])?;
        Ok((c.taken, c.ended))
    }

    /// Hands over all of `data`, calling `at` with the work done after
    /// each call (a call returns within the timeout).
    pub(super) fn write_all(
        &mut self,
        mut data: &[u8],
        cancel: &Cancel,
        at: &mut dyn FnMut(u64),
    ) -> io::Result<()> {
        while !data.is_empty() {
            cancel.check()?;
            let (used, _) = self.code(data, false)?;
            data = &data[used..];
            let done = self.done_in();
            at(done);
        }
        Ok(())
    }

    /// Ends the stream, calling `at` with the work done as the threads
    /// finish.
    pub(super) fn finish(mut self, cancel: &Cancel, at: &mut dyn FnMut(u64)) -> io::Result<()> {
        loop {
            cancel.check()?;
            let ended = self.code(&[], true)?.1;
            let done = self.done_in();
            at(done);
            if ended {
                return self.out.flush();
            }
        }
    }
}
