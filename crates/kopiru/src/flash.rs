//! `kopiru flash`: a disk image (raw, or xz/gzip/zstd/bzip2 decompressed as
//! a stream) written to one or more block devices.
//!
//! A reader thread decodes the image into two aligned buffers, allocated
//! once and passed back and forth; the writer writes each filled buffer to
//! every device (several devices in parallel) with O_DIRECT, so a byte counts as written only when the
//! device has acknowledged it. The first MiB is held back and written last,
//! after everything else is flushed, so an interrupted flash leaves no
//! partition table pointing at half an image. Then each device is read back
//! around every cache and compared, 64 KiB block by block.

use crate::sys::{self, Aligned, Fd, FileKind};
use std::ffi::CString;
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Held back and written last.
const HEAD: usize = 1 << 20;
/// Verification granularity: the first mismatch is reported to this.
const VERIFY_BLOCK: usize = 64 << 10;
/// Buffered writes (O_DIRECT refused) are flushed every this many bytes, so
/// the page cache never holds more than that of the device's data.
const DIRTY_WINDOW: u64 = 32 << 20;

/// What the caller asks of a flash.
#[derive(Clone, Debug)]
pub struct FlashOptions {
    /// Read every device back and compare (default).
    pub verify: bool,
    /// Allow regular files as targets (`--file`).
    pub allow_file: bool,
    /// Write even to a mounted device, or the one holding the root
    /// filesystem or the image.
    pub force: bool,
    /// Write only the ranges this block map lists (bmaptool's format).
    pub bmap: Option<Bmap>,
    /// The devices already read as zeros: all-zero blocks are not written.
    pub zeroed: bool,
    /// Zero each device first (`BLKZEROOUT`), then skip all-zero blocks.
    pub zero_first: bool,
    /// Read each block before writing it and skip it if it already holds
    /// the image's bytes (for re-flashing).
    pub skip_identical: bool,
}

impl Default for FlashOptions {
    fn default() -> Self {
        FlashOptions {
            verify: true,
            allow_file: false,
            force: false,
            bmap: None,
            zeroed: false,
            zero_first: false,
            skip_identical: false,
        }
    }
}

/// A block map (bmaptool's XML format, version 2): the image's size and
/// the byte ranges that hold data, each with its SHA-256.
#[derive(Clone, Debug)]
pub struct Bmap {
    /// Bytes in the (uncompressed) image.
    pub image_size: u64,
    /// Mapped ranges, ascending, as byte offsets [start, end), with the
    /// SHA-256 of their bytes when the file gives one.
    pub ranges: Vec<(u64, u64, Option<[u8; 32]>)>,
}

impl Bmap {
    /// Parses a bmap file and checks its own checksum.
    pub fn parse(text: &str) -> Result<Bmap, String> {
        let tag = |name: &str| -> Option<&str> {
            let open = format!("<{name}>");
            let i = text.find(&open)? + open.len();
            let j = text[i..].find(&format!("</{name}>"))? + i;
            Some(text[i..j].trim())
        };
        let num = |name: &str| -> Result<u64, String> {
            tag(name)
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("no <{name}>"))
        };
        let version = text
            .find("<bmap version=\"")
            .map(|i| &text[i + 15..])
            .and_then(|v| v.split('"').next())
            .ok_or("not a bmap file")?;
        if !version.starts_with("2.") {
            return Err(format!("bmap version {version} is not supported (2.x is)"));
        }
        if tag("ChecksumType") != Some("sha256") {
            return Err("only sha256 bmap checksums are supported".into());
        }
        let image_size = num("ImageSize")?;
        let block = num("BlockSize")?;
        let file_sum = tag("BmapFileChecksum").ok_or("no <BmapFileChecksum>")?;
        // The file's checksum is taken with its own value replaced by zeros.
        let zeroed = text.replacen(file_sum, &"0".repeat(file_sum.len()), 1);
        if hex(&sha256(zeroed.as_bytes())) != file_sum {
            return Err("the bmap file's own checksum does not match: damaged or edited".into());
        }
        let mut ranges = Vec::new();
        let mut rest = text;
        while let Some(i) = rest.find("<Range") {
            rest = &rest[i..];
            let end = rest.find("</Range>").ok_or("unterminated <Range>")?;
            let item = &rest[..end];
            rest = &rest[end..];
            let sum = item
                .find("chksum=\"")
                .map(|i| &item[i + 8..])
                .and_then(|v| v.split('"').next())
                .map(unhex)
                .transpose()?;
            let span = item[item.find('>').ok_or("bad <Range>")? + 1..].trim();
            let (a, b) = match span.split_once('-') {
                Some((a, b)) => (a.trim(), b.trim()),
                None => (span, span),
            };
            let (a, b): (u64, u64) = (
                a.parse().map_err(|_| format!("bad range '{span}'"))?,
                b.parse().map_err(|_| format!("bad range '{span}'"))?,
            );
            let start = a * block;
            let stop = ((b + 1) * block).min(image_size);
            if start >= stop || ranges.last().is_some_and(|&(_, e, _)| start < e) {
                return Err(format!("range '{span}' is out of order or past the image"));
            }
            ranges.push((start, stop, sum));
        }
        Ok(Bmap { image_size, ranges })
    }
}

fn sha256(data: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(data).into()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Result<[u8; 32], String> {
    let mut out = [0u8; 32];
    if s.len() != 64 {
        return Err(format!("bad checksum '{s}'"));
    }
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16)
            .map_err(|_| format!("bad checksum '{s}'"))?;
    }
    Ok(out)
}

/// A target, checked and described, ready to be written.
#[derive(Clone, Debug)]
pub struct Target {
    /// As given.
    pub path: PathBuf,
    /// A block device (else a regular file, with `--file`).
    pub is_block: bool,
    /// Bytes it holds (0 for a new file).
    pub size: u64,
    /// Vendor and model, or what backs a loop device.
    pub model: String,
    /// O_DIRECT alignment.
    pub align: usize,
    /// Bytes per write, from the device's topology.
    pub chunk: usize,
}

/// A refusal before anything is written.
#[derive(Debug)]
pub struct Refusal {
    /// The target (or image) concerned.
    pub path: PathBuf,
    /// Why.
    pub reason: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.reason)
    }
}

/// Progress of a flash, for the command line.
pub trait FlashEvents: Sync {
    /// `n` more bytes acknowledged by every remaining device.
    fn written(&self, _n: u64) {}
    /// Verification has begun (`total` bytes, all devices together).
    fn verifying(&self, _total: u64) {}
    /// `n` more bytes read back.
    fn verified(&self, _n: u64) {}
    /// The per-block hook, called before each piece is written: `image` is
    /// what is about to be written at `offset`; `on_device` is what the
    /// device holds there now, when it was read first
    /// ([`FlashOptions::skip_identical`]). Return false to leave the device
    /// as it is there. The default writes unless the device already holds
    /// the same bytes.
    fn block(&self, _offset: u64, image: &[u8], on_device: Option<&[u8]>) -> bool {
        on_device != Some(image)
    }
}

/// No progress wanted.
pub struct NoEvents;
impl FlashEvents for NoEvents {}

/// How one device fared.
#[derive(Debug, Clone)]
pub struct DeviceResult {
    /// As given.
    pub path: PathBuf,
    /// What failed, if anything ("write at offset N: ...").
    pub error: Option<String>,
    /// Whether the read-back matched (`None`: not verified).
    pub verified: Option<bool>,
    /// Offset of the first 64 KiB block that differed.
    pub mismatch_at: Option<u64>,
    /// Whether O_DIRECT was used (else buffered writes, flushed often).
    pub direct: bool,
    /// Bytes left unwritten because the device held them already
    /// (`--skip-identical`).
    pub identical_bytes: u64,
}

/// What a flash did.
#[derive(Debug, Default)]
pub struct FlashSummary {
    /// Bytes of (decompressed) image written to each device.
    pub image_bytes: u64,
    /// The image's format ("raw", "xz", ...).
    pub format: &'static str,
    /// Per device.
    pub devices: Vec<DeviceResult>,
    /// An error reading or decoding the image (nothing is complete then).
    pub source_error: Option<String>,
    /// Time until every device was written and flushed.
    pub write_time: Duration,
    /// Wall time, verification included.
    pub elapsed: Duration,
}

impl FlashSummary {
    /// Whether every device was written (and verified, if asked) cleanly.
    pub fn ok(&self) -> bool {
        self.source_error.is_none()
            && self
                .devices
                .iter()
                .all(|d| d.error.is_none() && d.verified != Some(false))
    }
}

/// Checks each target: a whole block device (or, with `--file`, a regular
/// file) that is not mounted, does not hold the root filesystem or the
/// image, and is big enough for an image of `image_size` (when known).
pub fn check_targets(
    image: &Path,
    devices: &[PathBuf],
    opts: &FlashOptions,
) -> Result<Vec<Target>, Refusal> {
    let refuse = |p: &Path, r: String| Refusal {
        path: p.to_path_buf(),
        reason: r,
    };
    let image_st = if image == Path::new("-") {
        None
    } else {
        Some(sys::stat_path(image, true).map_err(|e| refuse(image, crate::error::reason(&e)))?)
    };
    // The size is known before writing only for a raw image file (or from
    // a block map).
    let image_size = opts
        .bmap
        .as_ref()
        .map(|m| m.image_size)
        .or_else(|| raw_image(image).map(|(_, size)| size));
    let root_dev = sys::stat_path(Path::new("/"), true).map(|s| s.dev).ok();
    let mounts = sys::mounts();
    let mut out = Vec::new();
    for dev in devices {
        let st = match sys::stat_path(dev, true) {
            Ok(st) => st,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) && opts.allow_file => {
                if dev.starts_with("/dev") {
                    return Err(refuse(
                        dev,
                        "no such device (kopiru never creates files under /dev)".into(),
                    ));
                }
                out.push(Target {
                    path: dev.clone(),
                    is_block: false,
                    size: 0,
                    model: "new file".into(),
                    align: sys::DIRECT_ALIGN,
                    chunk: 4 << 20,
                });
                continue;
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                return Err(refuse(dev, "no such device".into()))
            }
            Err(e) => return Err(refuse(dev, crate::error::reason(&e))),
        };
        match st.kind() {
            FileKind::BlockDevice => {}
            FileKind::File if opts.allow_file => {
                if image_st.is_some_and(|i| (i.dev, i.ino) == (st.dev, st.ino)) {
                    return Err(refuse(dev, "is the image itself".into()));
                }
                out.push(Target {
                    path: dev.clone(),
                    is_block: false,
                    size: st.size,
                    model: "regular file".into(),
                    align: sys::DIRECT_ALIGN,
                    chunk: 4 << 20,
                });
                continue;
            }
            FileKind::File => {
                return Err(refuse(
                    dev,
                    "not a block device (give --file to write a regular file)".into(),
                ))
            }
            _ => return Err(refuse(dev, "not a block device".into())),
        }
        let mut ours = vec![st.rdev];
        ours.extend(sys::partitions(st.rdev));
        if !opts.force {
            if sys::is_partition(st.rdev) {
                return Err(refuse(
                    dev,
                    "is a partition, not a whole device (--force to write it anyway)".into(),
                ));
            }
            if root_dev.is_some_and(|r| ours.contains(&r)) {
                return Err(refuse(
                    dev,
                    "holds the root filesystem (--force to write it anyway)".into(),
                ));
            }
            if image_st.is_some_and(|i| ours.contains(&i.dev)) {
                return Err(refuse(
                    dev,
                    "holds the image being written (--force to write it anyway)".into(),
                ));
            }
            if let Some((_, at)) = mounts.iter().find(|(d, _)| ours.contains(d)) {
                return Err(refuse(
                    dev,
                    format!("is mounted (at {at}); unmount it first, or --force"),
                ));
            }
        }
        let fd = sys::open_path(dev, libc::O_RDONLY)
            .map_err(|e| refuse(dev, crate::error::reason(&e)))?;
        let info = sys::block_info(fd.as_fd(), st.rdev)
            .map_err(|e| refuse(dev, crate::error::reason(&e)))?;
        if let Some(n) = image_size {
            if n > info.size {
                return Err(refuse(
                    dev,
                    format!(
                        "too small: the image is {n} bytes, the device {} bytes",
                        info.size
                    ),
                ));
            }
        }
        let align = (info.logical.max(512) as usize).max(sys::DIRECT_ALIGN);
        let unit = (info.physical as usize).max(align).max(VERIFY_BLOCK);
        // Four of the largest requests the device takes, 1 to 4 MiB, in
        // whole physical blocks; the optimal I/O size when it says one.
        let want = if info.optimal as usize >= HEAD {
            info.optimal as usize
        } else {
            (info.max_request as usize).saturating_mul(4)
        };
        let chunk = want.clamp(HEAD, 4 << 20) / unit * unit;
        out.push(Target {
            path: dev.clone(),
            is_block: true,
            size: info.size,
            model: info.model,
            align,
            chunk: chunk.max(unit),
        });
    }
    Ok(out)
}

/// The image's format, from its first bytes.
fn detect(head: &[u8]) -> &'static str {
    match head {
        [0xFD, b'7', b'z', b'X', b'Z', 0, ..] => "xz",
        [0x1F, 0x8B, ..] => "gzip",
        [0x28, 0xB5, 0x2F, 0xFD, ..] => "zstd",
        [b'B', b'Z', b'h', ..] => "bzip2",
        _ => "raw",
    }
}

/// A part of the image for the writer: a filled buffer, or a range of the
/// mapped image file.
enum Piece {
    Owned(Aligned, usize),
    Mapped(usize, usize),
}

/// Fills buffers from the decoded image and hands them to the writer.
struct Sink<'a> {
    full: mpsc::SyncSender<Piece>,
    empty: mpsc::Receiver<Aligned>,
    cur: Option<Aligned>,
    len: usize,
    /// Image bytes handed over so far.
    total: u64,
    /// Hashes of what will be written, for the read-back (None: no verify).
    /// Taken here, on the reader's thread, off the writer's path.
    written: Option<&'a mut Written>,
    /// Block-map checksums, checked as the image streams past.
    sums: Option<RangeSums>,
    ranges: Option<&'a [(u64, u64)]>,
    align: u64,
    skip_zeros: bool,
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
            sums.feed(self.total, data).map_err(io::Error::other)?;
        }
        if let Some(w) = self.written.as_deref_mut() {
            for (off, piece) in
                pieces_to_write(self.total, data, self.ranges, self.align, self.skip_zeros)
            {
                w.record(off, piece);
            }
        }
        self.total += data.len() as u64;
        Ok(())
    }

    fn send(&mut self, p: Piece) -> io::Result<()> {
        self.full
            .send(p)
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "writer stopped"))
    }

    /// A raw image file, mapped: its chunks go to the writer as they are,
    /// never copied.
    fn send_mapped(&mut self, m: &sys::Mapping, chunk: usize) -> io::Result<()> {
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
    fn fill_from(&mut self, r: &mut impl Read) -> io::Result<()> {
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

/// The image, opened, and its size, when it is a non-empty raw image in a
/// regular file (not compressed, not standard input).
fn raw_image(image: &Path) -> Option<(std::fs::File, u64)> {
    if image == Path::new("-") {
        return None;
    }
    let f = std::fs::File::open(image).ok()?;
    let meta = f.metadata().ok()?;
    let mut head = [0u8; 8];
    let n = (&f).read(&mut head).ok()?;
    (meta.is_file() && meta.len() > 0 && detect(&head[..n]) == "raw").then_some((f, meta.len()))
}

/// A raw image in a regular file, mapped; `None` for anything else (then
/// it is read through buffers).
fn map_raw(image: &Path) -> Option<sys::Mapping> {
    let (f, size) = raw_image(image)?;
    sys::Mapping::new(f.as_fd(), usize::try_from(size).ok()?).ok()
}

/// Decodes the whole image into `sink`.
fn decode(image: &Path, sink: &mut Sink, format: &mut &'static str) -> io::Result<()> {
    let file: Box<dyn Read + Send> = if image == Path::new("-") {
        Box::new(io::stdin())
    } else {
        Box::new(std::fs::File::open(image)?)
    };
    let mut r = io::BufReader::with_capacity(256 << 10, file);
    *format = detect(io::BufRead::fill_buf(&mut r)?);
    match *format {
        "xz" => lzma_rs::xz_decompress(&mut r, sink)
            .map_err(|e| io::Error::other(format!("xz: {e}")))?,
        "gzip" => {
            io::copy(&mut flate2::read::MultiGzDecoder::new(r), sink)?;
        }
        "zstd" => {
            let mut d = ruzstd::decoding::StreamingDecoder::new(r)
                .map_err(|e| io::Error::other(format!("zstd: {e}")))?;
            io::copy(&mut d, sink)?;
        }
        "bzip2" => {
            io::copy(&mut bzip2::read::MultiBzDecoder::new(r), sink)?;
        }
        // Raw: read straight into the aligned buffers, no copy.
        _ => sink.fill_from(&mut r)?,
    }
    sink.flush()
}

/// One device being written.
struct Dev {
    path: PathBuf,
    fd: Fd,
    /// A second, buffered descriptor for a tail shorter than `align`.
    plain: Fd,
    direct: bool,
    is_block: bool,
    align: usize,
    error: Option<String>,
    since_flush: u64,
    /// `--skip-identical`: a reading descriptor (around the cache) and a
    /// buffer for what is on the device now.
    check: Option<(Fd, Aligned)>,
    /// Bytes not written because the device held them already.
    identical: u64,
}

impl Dev {
    fn open(t: &Target, opts: &FlashOptions, chunk: usize) -> io::Result<Dev> {
        let c = sys::cstring(t.path.as_os_str())?;
        let open = |flags| sys::open_raw(sys::cwd(), &c, flags, 0o644);
        let (base, excl) = if t.is_block {
            (libc::O_WRONLY, sys::O_EXCLUSIVE_DEVICE)
        } else {
            (libc::O_WRONLY | libc::O_CREAT, 0)
        };
        let (fd, direct) = match open(base | excl | sys::O_DIRECT) {
            Ok(fd) if sys::O_DIRECT != 0 => (fd, true),
            Ok(fd) => (fd, false),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => (open(base | excl)?, false),
            Err(e) => return Err(e),
        };
        let plain = open(libc::O_WRONLY)?;
        if opts.zero_first {
            if t.is_block {
                sys::zero_out(fd.as_fd(), t.size)?;
            } else {
                sys::ftruncate(fd.as_fd(), 0)?;
            }
        }
        let check = match opts.skip_identical {
            true => Some((
                sys::open_uncached(sys::cwd(), &c)?,
                Aligned::new(chunk + HEAD),
            )),
            false => None,
        };
        Ok(Dev {
            path: t.path.clone(),
            fd,
            plain,
            direct,
            is_block: t.is_block,
            align: t.align,
            error: None,
            since_flush: 0,
            check,
            identical: 0,
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
    fn write(&mut self, data: &[u8], off: u64, events: &dyn FlashEvents) -> io::Result<()> {
        let wanted = events.block(off, data, self.current(off, data.len()));
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
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) && self.direct => {
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

    fn flush(&mut self) -> io::Result<()> {
        sys::sync_file(self.fd.as_fd())
    }
}

/// Writes `image` to every target, then verifies each (unless told not to).
pub fn flash(
    image: &Path,
    targets: &[Target],
    opts: &FlashOptions,
    events: &dyn FlashEvents,
) -> FlashSummary {
    let start = Instant::now();
    let mut s = FlashSummary {
        format: "raw",
        ..Default::default()
    };
    let chunk = targets.iter().map(|t| t.chunk).min().unwrap_or(4 << 20);
    let mut devs: Vec<Dev> = Vec::new();
    for t in targets {
        match Dev::open(t, opts, chunk) {
            Ok(d) => devs.push(d),
            Err(e) => s.devices.push(DeviceResult {
                path: t.path.clone(),
                error: Some(format!("open: {}", crate::error::reason(&e))),
                verified: None,
                mismatch_at: None,
                direct: false,
                identical_bytes: 0,
            }),
        }
    }
    let (full_tx, full_rx) = mpsc::sync_channel::<Piece>(2);
    // A raw image file is mapped and written from the page cache directly:
    // no copy into buffers (that copy was most of kopiru's CPU time).
    let mapping = map_raw(image);
    let (empty_tx, empty_rx) = mpsc::channel::<Aligned>();
    for _ in 0..2 {
        let _ = empty_tx.send(Aligned::new(chunk));
    }
    let mut head = Aligned::new(HEAD);
    let mut head_len = 0usize;
    // A mapped image is compared with itself at the read-back: no hashing.
    let mut written = Written {
        unhashed: mapping.is_some(),
        ..Written::default()
    };
    let ranges: Option<Vec<(u64, u64)>> = opts
        .bmap
        .as_ref()
        .map(|m| m.ranges.iter().map(|&(a, b, _)| (a, b)).collect());
    let align = targets
        .iter()
        .map(|t| t.align)
        .max()
        .unwrap_or(sys::DIRECT_ALIGN) as u64;
    let skip_zeros = opts.zeroed || opts.zero_first;
    let mut total = 0u64;
    let mut format = "raw";
    let read_error = std::thread::scope(|sc| {
        let reader = sc.spawn(|| {
            let mut sink = Sink {
                full: full_tx,
                empty: empty_rx,
                cur: None,
                len: 0,
                total: 0,
                written: opts.verify.then_some(&mut written),
                sums: opts.bmap.as_ref().map(|m| RangeSums::new(&m.ranges)),
                ranges: ranges.as_deref(),
                align,
                skip_zeros,
            };
            let r = match &mapping {
                Some(m) => sink.send_mapped(m, chunk),
                None => decode(image, &mut sink, &mut format),
            };
            drop(sink);
            r
        });
        for piece in full_rx.iter() {
            let (data, len) = match &piece {
                Piece::Owned(b, len) => (&b.get()[..*len], *len),
                Piece::Mapped(off, len) => {
                    let m = mapping.as_ref().expect("mapped");
                    (&m.bytes()[*off..*off + *len], *len)
                }
            };
            // The first MiB waits; the rest goes out now.
            let held = (HEAD.saturating_sub(total as usize)).min(len);
            if held > 0 {
                head.buf()[head_len..head_len + held].copy_from_slice(&data[..held]);
                head_len += held;
            }
            let from = total + held as u64;
            let pieces = pieces_to_write(from, &data[held..], ranges.as_deref(), align, skip_zeros);
            let write_all = |d: &mut Dev| {
                for &(off, piece) in &pieces {
                    if let Err(e) = d.write(piece, off, events) {
                        d.error = Some(write_error(off, &e));
                        return;
                    }
                }
            };
            let mut live: Vec<&mut Dev> = devs.iter_mut().filter(|d| d.error.is_none()).collect();
            if live.len() > 1 {
                // Each device on its own thread for this buffer: the slowest
                // sets the pace, none waits for another's write.
                std::thread::scope(|w| {
                    for d in live {
                        w.spawn(|| write_all(d));
                    }
                });
            } else if let Some(d) = live.pop() {
                write_all(d);
            }
            total += len as u64;
            events.written(len as u64);
            match piece {
                // The reader may be done already; what it queued is still read.
                Piece::Owned(b, _) => {
                    let _ = empty_tx.send(b);
                }
                Piece::Mapped(off, len) => {
                    if let Some(m) = &mapping {
                        m.release(off, len);
                    }
                }
            }
        }
        reader
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("reader panicked")))
    });
    s.format = format;
    s.image_bytes = total;
    if let Err(e) = read_error {
        s.source_error = Some(format!("{}: {}", image.display(), crate::error::reason(&e)));
    } else if let Some(m) = &opts.bmap {
        if m.image_size != total {
            let e = format!(
                "the image has {total} bytes, its bmap says {}",
                m.image_size
            );
            s.source_error = Some(format!("{}: {e}", image.display()));
        }
    }
    // Everything but the first MiB is on the devices; flush, then write the
    // head and flush again. (Not after a failed read: the device keeps its
    // old first MiB, so it does not look like a complete image.)
    for d in devs.iter_mut().filter(|d| d.error.is_none()) {
        if let Err(e) = d.flush() {
            d.error = Some(format!("flush: {}", crate::error::reason(&e)));
            continue;
        }
        if s.source_error.is_some() {
            continue;
        }
        let head = &head.get()[..head_len];
        let head_pieces = pieces_to_write(0, head, ranges.as_deref(), align, skip_zeros);
        let done = head_pieces
            .iter()
            .try_for_each(|&(off, p)| d.write(p, off, events))
            .and_then(|()| {
                // A regular file ends where the image ends, as with dd.
                if !d.is_block {
                    sys::ftruncate(d.fd.as_fd(), total)?;
                }
                d.flush()
            });
        if let Err(e) = done {
            d.error = Some(write_error(0, &e));
        }
    }
    s.write_time = start.elapsed();
    let verify = opts.verify && s.source_error.is_none();
    if verify {
        let n = devs.iter().filter(|d| d.error.is_none()).count() as u64;
        events.verifying(total * n);
    }
    written.pieces.sort_unstable_by_key(|p| p.0);
    let written = &written;
    let mapping = mapping.as_ref();
    // Devices are read back in parallel, each on its own thread.
    let results: Vec<DeviceResult> = std::thread::scope(|sc| {
        let handles: Vec<_> = devs
            .iter()
            .map(|d| {
                sc.spawn(move || {
                    let mut r = DeviceResult {
                        path: d.path.clone(),
                        error: d.error.clone(),
                        verified: None,
                        mismatch_at: None,
                        direct: d.direct,
                        identical_bytes: d.identical,
                    };
                    if verify && r.error.is_none() {
                        match read_back(&d.path, written, mapping, chunk, events) {
                            Ok(None) => r.verified = Some(true),
                            Ok(Some(off)) => {
                                r.verified = Some(false);
                                r.mismatch_at = Some(off);
                            }
                            Err(e) => {
                                r.error = Some(format!("verify: {}", crate::error::reason(&e)))
                            }
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
    s.devices.extend(results);
    s.elapsed = start.elapsed();
    s
}

fn block_hash(h: &blake3::Hasher) -> u64 {
    let b = h.finalize();
    u64::from_le_bytes(b.as_bytes()[..8].try_into().expect("8 bytes"))
}

fn write_error(off: u64, e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ENODEV) | Some(libc::ENXIO) => {
            format!("the device disappeared (write at offset {off})")
        }
        Some(libc::ENOSPC) => format!("too small: the image goes on past offset {off}"),
        _ => format!("write at offset {off}: {}", crate::error::reason(e)),
    }
}

/// What was written where: (offset, length, hash) of pieces of at most
/// 64 KiB, for the read-back.
#[derive(Default)]
struct Written {
    pieces: Vec<(u64, u32, u64)>,
    /// No hashes: the read-back compares with the mapped image itself.
    unhashed: bool,
}

impl Written {
    fn record(&mut self, off: u64, data: &[u8]) {
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

/// The parts of `data` (image bytes at offset `off`) to write: all of it,
/// or with a block map only what overlaps its ranges, widened to `align`
/// (the widening writes image bytes too, so nothing foreign lands).
fn pieces_to_write<'a>(
    off: u64,
    data: &'a [u8],
    ranges: Option<&[(u64, u64)]>,
    align: u64,
    skip_zeros: bool,
) -> Vec<(u64, &'a [u8])> {
    let pieces = mapped_pieces(off, data, ranges, align);
    if !skip_zeros {
        return pieces;
    }
    // The device reads as zeros already: leave out every 64 KiB block (at
    // 64 KiB-aligned offsets) that is all zeros.
    let mut out: Vec<(u64, &[u8])> = Vec::new();
    for (o, d) in pieces {
        let mut i = 0usize;
        while i < d.len() {
            let at = o + i as u64;
            let n = ((VERIFY_BLOCK as u64 - at % VERIFY_BLOCK as u64) as usize).min(d.len() - i);
            let block = &d[i..i + n];
            if block.iter().any(|&b| b != 0) {
                match out.last_mut() {
                    Some((lo, ld)) if *lo + ld.len() as u64 == at && *lo >= o => {
                        let start = (*lo - o) as usize;
                        *ld = &d[start..i + n];
                    }
                    _ => out.push((at, block)),
                }
            }
            i += n;
        }
    }
    out
}

/// [`pieces_to_write`] before zero skipping: everything, or what the block
/// map lists.
fn mapped_pieces<'a>(
    off: u64,
    data: &'a [u8],
    ranges: Option<&[(u64, u64)]>,
    align: u64,
) -> Vec<(u64, &'a [u8])> {
    let end = off + data.len() as u64;
    let Some(ranges) = ranges else {
        return if data.is_empty() {
            vec![]
        } else {
            vec![(off, data)]
        };
    };
    let mut out: Vec<(u64, &[u8])> = Vec::new();
    let first = ranges.partition_point(|&(_, b)| b <= off);
    for &(a, b) in &ranges[first..] {
        if a >= end {
            break;
        }
        let a = (a / align * align).max(off);
        let b = b.div_ceil(align).saturating_mul(align).min(end);
        // Widened neighbours can touch: join them.
        match out.last_mut() {
            Some((o, d)) if *o + d.len() as u64 >= a => {
                let start = (*o - off) as usize;
                *d = &data[start..(b - off) as usize];
            }
            _ => out.push((a, &data[(a - off) as usize..(b - off) as usize])),
        }
    }
    out
}

/// Checks each block-map range's SHA-256 as the image streams past.
struct RangeSums {
    ranges: Vec<(u64, u64, Option<[u8; 32]>)>,
    next: usize,
    hasher: sha2::Sha256,
}

impl RangeSums {
    fn new(ranges: &[(u64, u64, Option<[u8; 32]>)]) -> RangeSums {
        use sha2::Digest;
        RangeSums {
            ranges: ranges.to_vec(),
            next: 0,
            hasher: sha2::Sha256::new(),
        }
    }

    fn feed(&mut self, off: u64, data: &[u8]) -> Result<(), String> {
        use sha2::Digest;
        let end = off + data.len() as u64;
        while let Some(&(a, b, sum)) = self.ranges.get(self.next) {
            if a >= end {
                return Ok(());
            }
            let (x, y) = (a.max(off), b.min(end));
            self.hasher
                .update(&data[(x - off) as usize..(y - off) as usize]);
            if b > end {
                return Ok(());
            }
            let got: [u8; 32] = std::mem::take(&mut self.hasher).finalize().into();
            if sum.is_some_and(|s| s != got) {
                return Err(format!(
                    "bytes {a}-{b} do not match the checksum in the bmap file"
                ));
            }
            self.next += 1;
        }
        Ok(())
    }
}

/// Reads back every written piece of `path` (sorted by offset) around the
/// page cache, in order, and compares: with the mapped image when there is
/// one, else with the hashes taken as it was read. `Some(offset)`: where the first piece that differs
/// starts.
fn read_back(
    path: &Path,
    written: &Written,
    image: Option<&sys::Mapping>,
    chunk: usize,
    events: &dyn FlashEvents,
) -> io::Result<Option<u64>> {
    let c: CString = sys::cstring(path.as_os_str())?;
    let fd = sys::open_uncached(sys::cwd(), &c)?;
    let mut buf = Aligned::new(chunk);
    let pieces = &written.pieces;
    let mut i = 0;
    while i < pieces.len() {
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
