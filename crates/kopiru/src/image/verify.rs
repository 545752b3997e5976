//! The read-back: the written image read from its device (not the page
//! cache), decoded, hashed (SHA-256) and compared with what was read from
//! the device.

use super::Format;
use crate::sys::AsFd;
use crate::sys::{self, Aligned, FdRef};
use crate::Cancel;
use crate::DeviceProgress;
use sha2::Digest;
use std::ffi::CStr;
use std::io::{self, Read};

/// Bytes per uncached read, and per decoded piece.
const PIECE: usize = 1 << 20;

/// Reads `name` (in `dir`) back around the cache, decodes it as `format`,
/// and says whether it is `size` bytes whose SHA-256 is `want`.
#[allow(clippy::too_many_arguments)]
pub(super) fn read_back(
    dir: FdRef,
    name: &CStr,
    format: Format,
    size: u64,
    want: &crate::Sha256,
    threads: u32,
    cancel: &Cancel,
    events: &dyn DeviceProgress,
) -> io::Result<bool> {
    let file = Uncached {
        fd: sys::open_uncached(dir, name)?,
        buf: Aligned::new(PIECE),
        pos: 0,
        len: 0,
        off: 0,
        eof: false,
    };
    let mut r = (format.codec().read)(Box::new(file), threads, crate::codec::DEFAULT_MEMORY)?;
    let mut sha = sha2::Sha256::new();
    let mut buf = vec![0u8; PIECE];
    let mut total = 0u64;
    loop {
        cancel.check()?;
        let n = match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        sha.update(&buf[..n]);
        total += n as u64;
        events.verified(n as u64);
    }
    let got = crate::Sha256::of_hasher(sha);
    Ok(total == size && got == *want)
}

/// A file read with O_DIRECT (where it was allowed) in aligned pieces.
struct Uncached {
    fd: sys::Fd,
    buf: Aligned,
    pos: usize,
    len: usize,
    off: u64,
    eof: bool,
}

impl Read for Uncached {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.pos == self.len {
            if self.eof {
                return Ok(0);
            }
            let n = sys::pread(self.fd.as_fd(), self.buf.buf(), self.off)?;
            // A read that ends off an aligned offset reached the end.
            if n == 0 || n % sys::DIRECT_ALIGN != 0 {
                self.eof = true;
            }
            self.off += n as u64;
            self.pos = 0;
            self.len = n;
            if n == 0 {
                return Ok(0);
            }
        }
        let n = out.len().min(self.len - self.pos);
        out[..n].copy_from_slice(&self.buf.get()[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}
