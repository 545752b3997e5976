//! The encoders of `kopiru image`, each on several threads: zstd and xz by
//! their C libraries' own multi-threaded encoders (sys/c_libs.rs; none on
//! other platforms yet), gzip as independent members (gz_pool.rs).
//!
//! Each reports its work done: the image bytes compressed and written,
//! not those handed over. The encoders take input well ahead of their
//! threads (xz at level 6 on two threads: 48 MiB), and a bar that counted
//! input stood still at "ETA 1s" for 12 s, then jumped (issue 26).

use super::gz_pool::GzPool;
use super::xz_out::XzOut;
use crate::sys;
use crate::Cancel;
use std::fs::File;
use std::io::{self, BufWriter, Write};

/// A compressed stream being written.
pub(crate) trait Encode {
    /// Hands over all of `data` (the next image bytes), checking `cancel`
    /// and calling `at` with the image bytes compressed so far between
    /// calls into the encoder.
    fn put(&mut self, data: &[u8], cancel: &Cancel, at: &mut dyn FnMut(u64)) -> io::Result<()>;

    /// Ends the stream, calling `at` with the work done as it completes.
    fn finish(self: Box<Self>, cancel: &Cancel, at: &mut dyn FnMut(u64)) -> io::Result<()>;
}

/// A format's encoder constructor (the codec table's `encoder.new`):
/// writing to `out` at `level` on `threads` threads, for an image of
/// `size` bytes.
pub(crate) type NewEncoder =
    fn(out: BufWriter<File>, level: i32, threads: u32, size: u64) -> io::Result<Box<dyn Encode>>;

/// The encoder's output buffer.
pub(crate) const OUT_BUF: usize = 1 << 20;

/// Bytes handed to zstd at a time, between checks of the cancel handle.
const FEED: usize = 1 << 20;

pub(super) fn new_zstd(
    out: BufWriter<File>,
    level: i32,
    threads: u32,
    size: u64,
) -> io::Result<Box<dyn Encode>> {
    Ok(Box::new(ZstdOut::new(out, level, threads, size)?))
}

pub(super) fn new_xz(
    out: BufWriter<File>,
    level: i32,
    threads: u32,
    _: u64,
) -> io::Result<Box<dyn Encode>> {
    Ok(Box::new(XzOut::new(out, level as u32, threads, OUT_BUF)?))
}

pub(super) fn new_gzip(
    out: BufWriter<File>,
    level: i32,
    threads: u32,
    _: u64,
) -> io::Result<Box<dyn Encode>> {
    Ok(Box::new(GzPool::new(out, level as u32, threads)))
}

impl Encode for XzOut {
    fn put(&mut self, data: &[u8], cancel: &Cancel, at: &mut dyn FnMut(u64)) -> io::Result<()> {
        self.write_all(data, cancel, at)
    }
    fn finish(self: Box<Self>, cancel: &Cancel, at: &mut dyn FnMut(u64)) -> io::Result<()> {
        XzOut::finish(*self, cancel, at)
    }
}

impl Encode for GzPool {
    fn put(&mut self, data: &[u8], _: &Cancel, at: &mut dyn FnMut(u64)) -> io::Result<()> {
        GzPool::put(self, data)?;
        at(self.done_in());
        Ok(())
    }
    fn finish(self: Box<Self>, _: &Cancel, at: &mut dyn FnMut(u64)) -> io::Result<()> {
        GzPool::finish(*self, at)
    }
}

/// zstd's multi-threaded encoder (sys::ZstdEncoder): its frame
/// progression says how much input its workers have compressed.
struct ZstdOut {
    enc: sys::ZstdEncoder,
    out: BufWriter<File>,
    buf: Vec<u8>,
}

impl ZstdOut {
    fn new(out: BufWriter<File>, level: i32, threads: u32, size: u64) -> io::Result<ZstdOut> {
        // Workers even for one thread: compression then overlaps reading
        // and hashing, on another core. The frame records the image's
        // size: `kopiru flash` refuses a device too small before writing,
        // and scales its bar to it.
        Ok(ZstdOut {
            enc: sys::ZstdEncoder::new(level, threads, size)?,
            out,
            buf: vec![0; OUT_BUF],
        })
    }

    /// One call: takes what zstd takes of `input`, writes what it gives.
    fn code(&mut self, input: &[u8], finish: bool) -> io::Result<sys::Coded> {
        let c = self.enc.code(input, &mut self.buf, finish)?;
        self.out.write_all(&self.buf[..c.made])?;
        Ok(c)
    }
}

impl Encode for ZstdOut {
    fn put(&mut self, data: &[u8], cancel: &Cancel, at: &mut dyn FnMut(u64)) -> io::Result<()> {
        for piece in data.chunks(FEED) {
            let mut rest = piece;
            while !rest.is_empty() {
                cancel.check()?;
                rest = &rest[self.code(rest, false)?.taken..];
                at(self.enc.done_in());
            }
        }
        Ok(())
    }

    fn finish(mut self: Box<Self>, cancel: &Cancel, at: &mut dyn FnMut(u64)) -> io::Result<()> {
        loop {
            cancel.check()?;
            let ended = self.code(&[], true)?.ended;
            at(self.enc.done_in());
            if ended {
                return self.out.flush();
            }
        }
    }
}
