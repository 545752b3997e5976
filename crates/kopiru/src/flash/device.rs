//! One device being written: O_DIRECT where the device takes it (buffered
//! and flushed every [`DIRTY_WINDOW`] where not), a buffered descriptor for
//! a tail shorter than a sector, and an uncached reader for
//! `--skip-identical`.

use super::{FlashEvents, FlashOptions, Target, DIRTY_WINDOW, HEAD};
use crate::sys::AsFd;
use crate::sys::{self, Aligned, Fd};
use crate::{Error, Op, Side};
use std::io;
use std::path::PathBuf;

/// One device being written.
pub(super) struct Dev {
    /// As given, for messages.
    pub path: PathBuf,
    /// What is opened ([`Target::device`]).
    pub device: PathBuf,
    pub fd: Fd,
    /// A second, buffered descriptor for a tail shorter than `align`.
    plain: Fd,
    pub direct: bool,
    pub is_block: bool,
    align: usize,
    /// What failed, if anything: the device is left alone from then on.
    pub error: Option<Error>,
    /// The offset of the write that failed.
    pub error_at: Option<u64>,
    since_flush: u64,
    /// `--skip-identical`: a reading descriptor (around the cache) and a
    /// buffer for what is on the device now.
    check: Option<(Fd, Aligned)>,
    /// Bytes not written because the device held them already.
    pub identical: u64,
    /// The end of the furthest piece of the image written (or found
    /// there already).
    pub written_to: u64,
    /// Whether the first MiB, held back to the end, was written.
    pub head_written: bool,
}

impl Dev {
    /// Opens (exclusively) a checked target, and zeroes it first with
    /// `--zero-first`.
    pub fn open(t: &Target, opts: &FlashOptions, chunk: usize) -> Result<Dev, Error> {
        let failed = |op: Op| move |e: io::Error| Error::io(Side::Destination, &t.path, op, e);
        let open = |flags| sys::open_path_mode(&t.device, flags, 0o644).map_err(failed(Op::Open));
        let (base, excl) = if t.is_block {
            (sys::O_WRONLY, sys::O_EXCLUSIVE_DEVICE)
        } else {
            (sys::O_WRONLY | sys::O_CREAT, 0)
        };
        let (fd, direct) = match open(base | excl | sys::O_DIRECT) {
            Ok(fd) if sys::O_DIRECT != 0 => (fd, true),
            Ok(fd) => (fd, false),
            Err(e) if e.io_error().is_some_and(sys::direct_refused) => (open(base | excl)?, false),
            Err(e) => return Err(e),
        };
        // The name was resolved when it was checked; whatever it names
        // now must still be that device.
        let st = sys::fstat(fd.as_fd()).map_err(failed(Op::Stat))?;
        if t.is_block && st.rdev != t.rdev {
            let e =
                io::Error::other("another device is under this name now than when it was checked");
            return Err(failed(Op::Open)(e));
        }
        let plain = open(sys::O_WRONLY)?;
        if opts.zero_first {
            if t.is_block {
                sys::zero_out(fd.as_fd(), t.size).map_err(failed(Op::ZeroOut))?;
            } else {
                sys::ftruncate(fd.as_fd(), 0).map_err(failed(Op::Truncate))?;
            }
        }
        let check = match opts.skip_identical {
            true => Some((
                sys::open_path_uncached(&t.device).map_err(failed(Op::Open))?,
                Aligned::new(chunk + HEAD),
            )),
            false => None,
        };
        Ok(Dev {
            path: t.path.clone(),
            device: t.device.clone(),
            fd,
            plain,
            direct,
            is_block: t.is_block,
            align: t.align,
            error: None,
            error_at: None,
            since_flush: 0,
            check,
            identical: 0,
            written_to: 0,
            head_written: false,
        })
    }

    /// What the device holds at `off` now (`--skip-identical` only).
    fn current(&mut self, off: u64, n: usize) -> Option<&[u8]> {
        let (fd, buf) = self.check.as_mut()?;
        let a = sys::DIRECT_ALIGN as u64;
        let base = off / a * a;
        let len = ((off + n as u64).div_ceil(a) * a - base) as usize;
        if len > buf.len {
            return None;
        }
        let mut got = 0;
        while got < len {
            match sys::pread(fd.as_fd(), &mut buf.buf()[got..len], base + got as u64) {
                Ok(0) | Err(_) => return None,
                Ok(k) => got += k,
            }
        }
        let at = (off - base) as usize;
        Some(&buf.get()[at..at + n])
    }

    /// Writes `data` at `off`: whole aligned blocks through O_DIRECT, a
    /// shorter tail through the buffered descriptor.
    pub fn write(&mut self, data: &[u8], off: u64, events: &dyn FlashEvents) -> io::Result<()> {
        let wanted = events.block(off, data, self.current(off, data.len()));
        self.written_to = self.written_to.max(off + data.len() as u64);
        if !wanted {
            self.identical += data.len() as u64;
            return Ok(());
        }
        let body = if self.direct {
            data.len() / self.align * self.align
        } else {
            data.len()
        };
        if body > 0 {
            match sys::pwrite_all(self.fd.as_fd(), &data[..body], off) {
                // O_DIRECT refused on this target: buffered from now on.
                Err(e) if sys::direct_refused(&e) && self.direct => {
                    self.direct = false;
                    return self.write(data, off, events);
                }
                r => r?,
            }
        }
        if body < data.len() {
            sys::pwrite_all(self.plain.as_fd(), &data[body..], off + body as u64)?;
            sys::sync_file(self.plain.as_fd())?;
        }
        if !self.direct {
            self.since_flush += data.len() as u64;
            if self.since_flush >= DIRTY_WINDOW {
                sys::sync_file(self.fd.as_fd())?;
                self.since_flush = 0;
            }
        }
        Ok(())
    }

    pub fn flush(&mut self) -> io::Result<()> {
        sys::sync_file(self.fd.as_fd())
    }

    /// Records a failure of `op`: the device is dropped from the flash.
    pub fn fail(&mut self, op: Op, e: io::Error) {
        self.error = Some(Error::io(Side::Destination, &self.path, op, e));
    }

    /// Records a write at `off` that failed.
    pub fn fail_write(&mut self, off: u64, e: io::Error) {
        self.fail(Op::Write, e);
        self.error_at = Some(off);
    }
}
