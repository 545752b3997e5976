//! The image, decoded as a stream into the aligned buffers (or, raw in a
//! regular file, memory-mapped), hashed and checked against the block map
//! on the reader's thread.

use super::bmap::{BmapError, RangeSums};
use super::http::{self, DownloadStats};
use super::input::Image;
use super::pieces::Layout;
use super::readback::Written;
use crate::sys::{self, Aligned};
use crate::Format;
use crate::{Cancel, Error, Op, Refusal, Sha256, Side};
use std::io::{self, Read, Write};
use std::sync::atomic::Ordering;
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
    pub fn fill_from(&mut self, r: &mut dyn Read) -> io::Result<()> {
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

impl sys::DecodeSink for Sink<'_> {
    fn fill_from(&mut self, r: &mut dyn Read) -> io::Result<()> {
        Sink::fill_from(self, r)
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
    sys::Mapping::new(f, usize::try_from(size).ok()?).ok()
}

/// Reads the whole image into `sink`: the mapped image when there is one,
/// else decoded from the file, standard input or a URL (a multi-threaded
/// decoder within `memory`; a download's progress told to `events`).
pub(super) fn read_image(
    image: &Image,
    mapping: Option<&sys::Mapping>,
    chunk: usize,
    memory: u64,
    sha256: Option<Sha256>,
    sink: &mut Sink,
    events: &dyn super::FlashEvents,
) -> Result<(), Error> {
    let r = match mapping {
        Some(m) => sink.send_mapped(m, chunk),
        None => decode(image, sink, memory, sha256, events),
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
    let decoder_error = e.raw_os_error().is_none()
        && e.kind() != io::ErrorKind::BrokenPipe
        && !http::is_failure(&e);
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
/// With `sha256`, the file as read (compressed, as published) must have
/// that SHA-256: it is read to its end, and a mismatch is an error before
/// the last buffer goes out (the first MiB is not written then).
fn decode(
    image: &Image,
    sink: &mut Sink,
    memory: u64,
    sha256: Option<Sha256>,
    events: &dyn super::FlashEvents,
) -> io::Result<()> {
    // What was read to recognise it (standard input, a URL), then the rest.
    let head = || io::Cursor::new(image.stdin_head.clone());
    let download = image.download.lock().map(|mut d| d.take()).unwrap_or(None);
    let file: Box<dyn Read + Send + '_> = match (&image.file, download) {
        (Some(f), _) => Box::new(f.try_clone()?),
        (None, Some(mut d)) => {
            // A stalled or dropped connection's pauses end on Ctrl-C.
            d.cancel = Some(sink.cancel.clone());
            let stats = d.stats.clone();
            let told = Told::new(d, stats, events);
            Box::new(head().chain(told))
        }
        (None, None) => Box::new(head().chain(io::stdin())),
    };
    let mut hashed = Hashed {
        inner: file,
        hash: sha256.map(|_| <sha2::Sha256 as sha2::Digest>::new()),
    };
    let mut r = io::BufReader::with_capacity(256 << 10, &mut hashed);
    // Raw is read straight into the aligned buffers, no copy.
    (image.format.codec().decode)(&mut r, sink, memory)?;
    if let Some(want) = sha256 {
        // The sum is of the whole file: whatever follows the image is read.
        io::copy(&mut r, &mut io::sink())?;
        drop(r);
        let got = Sha256::of_hasher(hashed.hash.take().unwrap_or_default());
        if got != want {
            return Err(io::Error::other(http::Failed(format!(
                "its SHA-256 is {}, not {} as given (--sha256): this is not the file \
                 published, so the devices' first MiB was not written",
                got, want
            ))));
        }
    }
    sink.flush()
}

/// A download that tells `events` how far it is: once per [`TELL_EVERY`]
/// bytes, at each resume, and at its end (not at each small read); and
/// when its connection is lost, before each pause.
struct Told<'e> {
    inner: http::Download,
    stats: std::sync::Arc<DownloadStats>,
    events: &'e dyn super::FlashEvents,
    /// `(had, resumed)` as last told.
    told: (u64, u64),
}

/// Bytes of the download between two reports.
const TELL_EVERY: u64 = 1 << 20;

impl<'e> Told<'e> {
    /// Tells what was had before (the bytes read to recognise the image).
    fn new(
        inner: http::Download,
        stats: std::sync::Arc<DownloadStats>,
        events: &'e dyn super::FlashEvents,
    ) -> Self {
        let mut t = Told {
            inner,
            stats,
            events,
            told: (0, 0),
        };
        t.tell(true);
        t
    }

    /// Reports the counters, if `always` or they moved enough.
    fn tell(&mut self, always: bool) {
        let s = &self.stats;
        let had = s.had.load(Ordering::Relaxed);
        let resumed = s.resumed.load(Ordering::Relaxed);
        let total = Some(s.length.load(Ordering::Relaxed)).filter(|&l| l > 0);
        let moved = had >= self.told.0 + TELL_EVERY
            || resumed != self.told.1
            || total.is_some_and(|t| had >= t && had != self.told.0);
        if always || moved {
            self.told = (had, resumed);
            self.events.downloaded(had, total, resumed);
        }
    }
}

impl Read for Told<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let events = self.events;
        let r = self
            .inner
            .read_telling(buf, &|attempt, of| events.reconnecting(attempt, of));
        self.tell(matches!(r, Ok(0)) && self.told.0 != self.stats.had.load(Ordering::Relaxed));
        r
    }
}

/// A reader that hashes what it reads (the file as published).
struct Hashed<R> {
    inner: R,
    hash: Option<sha2::Sha256>,
}

impl<R: Read> Read for Hashed<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(h) = &mut self.hash {
            sha2::Digest::update(h, &buf[..n]);
        }
        Ok(n)
    }
}
