//! The image, decoded as a stream into the aligned buffers (or, raw in a
//! regular file, memory-mapped), hashed and checked against the block map
//! on the reader's thread.

use super::bmap::{BmapError, RangeSums};
use super::decode;
use super::input::Image;
use super::pieces::Layout;
use super::readback::Written;
use super::sniff::Format;
use crate::sys::AsFd;
use crate::sys::{self, Aligned};
use crate::{Cancel, Error, Op, Refusal, Side};
use std::io::{self, Read, Write};
use std::sync::mpsc;

/// A part of the image for the writer: a filled buffer, or a range of the
/// mapped image file.
pub(super) enum Piece {
    Owned(Aligned, usize),
    Mapped(usize, usize),
}

/// Fills buffers from the decoded image and hands them to the writer.
pub(super) struct Sink<'a> {
    pub full: mpsc::SyncSender<Piece>,
    pub empty: mpsc::Receiver<Aligned>,
    pub cur: Option<Aligned>,
    pub len: usize,
    /// Image bytes handed over so far.
    pub total: u64,
    /// Hashes of what will be written, for the read-back (None: no verify).
    /// Taken here, on the reader's thread, off the writer's path.
    pub written: Option<&'a mut Written>,
    /// Block-map checksums, checked as the image streams past.
    pub sums: Option<RangeSums>,
    /// Set when the image does not match the block map (the decoder then
    /// gets an `io::Error` that says less).
    pub bmap_error: Option<BmapError>,
    /// What of the image is written.
    pub layout: &'a Layout,
    /// Checked for each chunk.
    pub cancel: &'a Cancel,
    /// The SHA-256 of every image byte (when verifying), printed at the end
    /// for comparison with the publisher's.
    pub sha256: Option<sha2::Sha256>,
}

impl Sink<'_> {
    /// Hands a filled buffer to the writer, after hashing what of it will
    /// be written and checking the block map's checksums.
    fn ship(&mut self, b: Aligned, len: usize) -> io::Result<()> {
        self.check(&b.get()[..len])?;
        self.send(Piece::Owned(b, len))
    }

    /// Hashes what of `data` (the next image bytes) will be written, and
    /// checks the block map's checksums.
    fn check(&mut self, data: &[u8]) -> io::Result<()> {
        if let Some(sums) = &mut self.sums {
            if let Err(e) = sums.feed(self.total, data) {
                self.bmap_error = Some(e.clone());
                return Err(io::Error::other(e));
            }
        }
        if let Some(h) = &mut self.sha256 {
            sha2::Digest::update(h, data);
        }
        if let Some(w) = self.written.as_deref_mut() {
            for (off, piece) in self.layout.pieces(self.total, data) {
                w.record(off, piece);
            }
        }
        self.total += data.len() as u64;
        Ok(())
    }

    /// Hands a chunk to the writer (unless the flash was cancelled).
    fn send(&mut self, p: Piece) -> io::Result<()> {
        self.cancel.check()?;
        self.full
            .send(p)
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "writer stopped"))
    }

    /// A raw image file, mapped: its chunks go to the writer as they are,
    /// never copied.
    pub fn send_mapped(&mut self, m: &sys::Mapping, chunk: usize) -> io::Result<()> {
        let map = m.bytes();
        let mut off = 0;
        while off < map.len() {
            let n = chunk.min(map.len() - off);
            self.check(&map[off..off + n])?;
            // Hashed: let go until the writer needs the pages, so at most
            // two chunks of the image count as this process's memory.
            m.release(off, n);
            self.send(Piece::Mapped(off, n))?;
            off += n;
        }
        Ok(())
    }

    /// The unfilled rest of the current buffer, taking a free one from the
    /// writer when there is none.
    fn space(&mut self) -> io::Result<&mut [u8]> {
        if self.cur.is_none() {
            let b = self
                .empty
                .recv()
                .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "writer stopped"))?;
            self.cur = Some(b);
            self.len = 0;
        }
        let len = self.len;
        Ok(&mut self.cur.as_mut().expect("a buffer").buf()[len..])
    }

    /// `n` more bytes are in the current buffer; a full one goes out.
    fn filled(&mut self, n: usize) -> io::Result<()> {
        self.len += n;
        match self.cur.take() {
            Some(b) if self.len == b.len => self.ship(b, self.len),
            cur => {
                self.cur = cur;
                Ok(())
            }
        }
    }

    /// Reads `r` to its end straight into the buffers.
    pub fn fill_from(&mut self, r: &mut impl Read) -> io::Result<()> {
        loop {
            let n = match r.read(self.space()?) {
                Ok(0) => return Ok(()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            self.filled(n)?;
        }
    }
}

impl Write for Sink<'_> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let space = self.space()?;
        let n = data.len().min(space.len());
        space[..n].copy_from_slice(&data[..n]);
        self.filled(n)?;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        if let Some(b) = self.cur.take() {
            if self.len > 0 {
                self.ship(b, self.len)?;
            }
        }
        Ok(())
    }
}

/// A raw image in a regular file, mapped; `None` for anything else (then
/// it is read through buffers).
pub(super) fn map_raw(image: &Image) -> Option<sys::Mapping> {
    let (f, size) = image.raw_file()?;
    sys::Mapping::new(f.as_fd(), usize::try_from(size).ok()?).ok()
}

/// Reads the whole image into `sink`: the mapped image when there is one,
/// else decoded from the file or standard input (a multi-threaded decoder
/// within `memory`).
pub(super) fn read_image(
    image: &Image,
    mapping: Option<&sys::Mapping>,
    chunk: usize,
    memory: u64,
    sink: &mut Sink,
) -> Result<(), Error> {
    let r = match mapping {
        Some(m) => sink.send_mapped(m, chunk),
        None => decode(image, sink, memory),
    };
    let path = &image.path;
    match (sink.bmap_error.take(), r) {
        (Some(e), _) => Err(Error::refused(
            Side::Source,
            path,
            Op::Read,
            Refusal::Bmap(e),
        )),
        (None, Ok(())) => Ok(()),
        (None, Err(e)) => Err(Error::io(
            Side::Source,
            path,
            Op::Read,
            damaged(image, sink, e),
        )),
    }
}

/// A decoder's own error ("premature eof", "corrupt header") said as what
/// it means to the user: the compressed data stops or is broken at a known
/// point of the image. OS errors, cancellation and raw images keep theirs.
fn damaged(image: &Image, sink: &Sink, e: io::Error) -> io::Error {
    let decoder_error = e.raw_os_error().is_none() && e.kind() != io::ErrorKind::BrokenPipe;
    if image.format == Format::Raw || !decoder_error {
        return e;
    }
    io::Error::new(
        e.kind(),
        format!(
            "the {} data ends early or is damaged, after {} bytes of image ({e}); is the \
             download complete? `{} -t` checks the file",
            image.format,
            sink.total + sink.len as u64,
            image.format
        ),
    )
}

/// Decodes the whole image into `sink`, streaming: the memory it takes is
/// the format's (a dictionary or window), never the image's size.
fn decode(image: &Image, sink: &mut Sink, memory: u64) -> io::Result<()> {
    let file: Box<dyn Read + Send> = match &image.file {
        Some(f) => Box::new(f.try_clone()?),
        // What was read to recognise it, then the rest.
        None => Box::new(io::Cursor::new(image.stdin_head.clone()).chain(io::stdin())),
    };
    let mut r = io::BufReader::with_capacity(256 << 10, file);
    match image.format {
        Format::Xz => decode::xz(r, sink, memory)?,
        Format::Gzip => sink.fill_from(&mut flate2::read::MultiGzDecoder::new(r))?,
        Format::Zstd => decode::zstd(r, sink)?,
        Format::Bzip2 => sink.fill_from(&mut bzip2::read::MultiBzDecoder::new(r))?,
        // Raw: read straight into the aligned buffers, no copy.
        Format::Raw => sink.fill_from(&mut r)?,
    }
    sink.flush()
}
