//! The xz output: liblzma's multi-threaded encoder, driven through its C
//! interface because the progress bar needs `lzma_get_progress` (the
//! image bytes its threads have compressed), which the `liblzma` crate
//! does not expose. The threads take whole blocks of input ahead (two
//! threads at level 6: 48 MiB), so bytes handed over are not work done.
//! Dropped (an error, a cancel), it stops at once.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::mem::MaybeUninit;

use liblzma_sys as lz;

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
    stream: Box<lz::lzma_stream>,
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
        // SAFETY: lzma_mt is plain data; all-zero is its documented
        // initial state (reserved fields must be zero).
        let mut mt: lz::lzma_mt = unsafe { MaybeUninit::zeroed().assume_init() };
        mt.threads = threads.max(1);
        mt.preset = preset;
        mt.check = lz::LZMA_CHECK_CRC64;
        mt.timeout = TIMEOUT_MS;
        // SAFETY: `mt` is a valid, initialised lzma_mt with no filters.
        while mt.threads > 1 && unsafe { lz::lzma_stream_encoder_mt_memusage(&mt) } > MEMORY {
            mt.threads -= 1;
        }
        // SAFETY: an all-zero lzma_stream is LZMA_STREAM_INIT. It is boxed
        // because liblzma keeps pointers into it while it lives.
        let mut stream: Box<lz::lzma_stream> =
            Box::new(unsafe { MaybeUninit::zeroed().assume_init() });
        // SAFETY: `stream` is initialised as above and `mt` is valid.
        let ret = unsafe { lz::lzma_stream_encoder_mt(&mut *stream, &mt) };
        if ret != lz::LZMA_OK {
            // SAFETY: lzma_end frees what a failed initialisation left, and
            // takes a stream that was never initialised too.
            unsafe { lz::lzma_end(&mut *stream) };
            return Err(io::Error::other(format!(
                "xz: cannot start the encoder (liblzma error {ret})"
            )));
        }
        Ok(XzOut {
            stream,
            out,
            buf: vec![0; buf],
        })
    }

    /// Image bytes the encoder has compressed (not merely taken in).
    pub(super) fn done_in(&mut self) -> u64 {
        let (mut read, mut written) = (0u64, 0u64);
        // SAFETY: `stream` is an initialised encoder; both out-pointers
        // are valid u64s.
        unsafe { lz::lzma_get_progress(&mut *self.stream, &mut read, &mut written) };
        read
    }

    /// One call to the encoder: consumes what it takes of `input`, writes
    /// what it gives. Returns the bytes taken and whether the stream ended.
    fn code(&mut self, input: &[u8], action: lz::lzma_action) -> io::Result<(usize, bool)> {
        let s = &mut *self.stream;
        s.next_in = input.as_ptr();
        s.avail_in = input.len();
        s.next_out = self.buf.as_mut_ptr();
        s.avail_out = self.buf.len();
        // SAFETY: the in and out pointers are valid for the lengths given
        // for the duration of the call, and the stream is initialised.
        let ret = unsafe { lz::lzma_code(s, action) };
        let used = input.len() - s.avail_in;
        let made = self.buf.len() - s.avail_out;
        // Nothing of ours is left in the stream between calls.
        s.next_in = std::ptr::null();
        s.avail_in = 0;
        s.next_out = std::ptr::null_mut();
        s.avail_out = 0;
        match ret {
            lz::LZMA_OK | lz::LZMA_STREAM_END => {}
            e => return Err(io::Error::other(format!("xz: liblzma error {e}"))),
        }
        self.out.write_all(&self.buf[..made])?;
        Ok((used, ret == lz::LZMA_STREAM_END))
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
            let (used, _) = self.code(data, lz::LZMA_RUN)?;
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
            let ended = self.code(&[], lz::LZMA_FINISH)?.1;
            let done = self.done_in();
            at(done);
            if ended {
                return self.out.flush();
            }
        }
    }
}

impl Drop for XzOut {
    fn drop(&mut self) {
        // SAFETY: the stream was initialised by lzma_stream_encoder_mt and
        // is ended once; lzma_end stops and joins its threads.
        unsafe { lz::lzma_end(&mut *self.stream) };
    }
}
