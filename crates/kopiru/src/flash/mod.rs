//! `kopiru flash`: a disk image (raw, or xz/gzip/zstd/bzip2 decompressed as
//! a stream) written to one or more block devices.
//!
//! A reader thread decodes the image into two aligned buffers, allocated
//! once and passed back and forth; the writer writes each filled buffer to
//! every device (several devices in parallel) with O_DIRECT, so a byte
//! counts as written only when the device has acknowledged it. The first
//! MiB is held back and written last, after everything else is flushed, so
//! an interrupted flash leaves no partition table pointing at half an
//! image. Then each device is read back around every cache and compared,
//! 64 KiB block by block.
//!
//! The parts: `input` (the image, opened and recognised before anything is
//! written), `drives` (the disks to choose from, for a program that
//! offers them), `sniff` (its format from its bytes, never from its name
//! alone, by the codec table: crate::codec, which also holds the decoders
//! and the decoded-size readers), `bmap` (block maps and their
//! checksums), `targets` (the checks and refusals before anything is
//! written), `source` (decoding into the buffers), `pieces` (which bytes
//! are written), `device` (one device being written), `write` (the reader
//! and writer threads, the first MiB last), `readback` (verification).

pub(crate) mod bmap;
mod device;
mod drives;
pub(crate) mod http;
mod input;
pub(crate) mod pieces;
mod readback;
pub(crate) mod sniff;
mod source;
pub(crate) mod targets;
#[cfg(test)]
mod tests;
mod write;

pub(crate) use crate::codec::DEFAULT_MEMORY;
pub use bmap::{Bmap, BmapError};
pub use drives::{drives, Drive, DrivePartition};
pub(crate) use http::is_url;
pub use http::{get_text, HttpOptions};
pub use input::Image;
pub use sniff::{Found, NotAnImage};
pub use targets::{check_targets, Target};

use crate::sys;
use crate::{Cancel, DeviceProgress, Error, Op, Refusal, Side};
use device::Dev;
use pieces::Layout;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Held back and written last.
const HEAD: usize = 1 << 20;
/// Verification granularity: the first mismatch is reported to this.
const VERIFY_BLOCK: usize = 64 << 10;
/// Buffered writes (O_DIRECT refused) are flushed every this many bytes, so
/// the page cache never holds more than that of the device's data.
const DIRTY_WINDOW: u64 = 32 << 20;

/// What the caller asks of a flash. Start from [`FlashOptions::new`] (what
/// `kopiru flash` does) and set fields.
#[derive(Clone, Debug)]
#[non_exhaustive]
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
    /// Memory that decoding an xz image on several threads may take (its
    /// blocks' buffers, per thread). An image of one block, or whose blocks
    /// do not fit, is decoded on one thread, in its dictionary's memory,
    /// whatever this says. Default 256 MiB.
    pub memory: u64,
    /// The SHA-256 of the image file as published (compressed, as a
    /// `SHA256SUMS` lists it), checked as it is read: a mismatch fails
    /// the image, and the first MiB is not written. A raw image file is
    /// then read, not mapped.
    pub sha256: Option<crate::Sha256>,
    /// Checked before each device is opened, for each chunk read, decoded
    /// and written, and for each chunk read back: once set, the flash stops
    /// within a chunk and the held-back first MiB is not written.
    pub cancel: Cancel,
}

impl Default for FlashOptions {
    fn default() -> Self {
        FlashOptions::new()
    }
}

impl FlashOptions {
    /// The command's defaults: verify, devices only, refuse mounted ones,
    /// no block map, every block written.
    pub fn new() -> Self {
        FlashOptions {
            verify: true,
            allow_file: false,
            force: false,
            bmap: None,
            zeroed: false,
            zero_first: false,
            skip_identical: false,
            memory: DEFAULT_MEMORY,
            sha256: None,
            cancel: Cancel::new(),
        }
    }
}

/// Progress of a flash ([`DeviceProgress`]: `done` is bytes acknowledged
/// by every remaining device), and its per-block hook.
pub trait FlashEvents: DeviceProgress {
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

impl FlashEvents for crate::Noop {}

/// How one device fared.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct DeviceResult {
    /// As given.
    pub path: PathBuf,
    /// What failed, if anything (on [`Side::Destination`]): opening,
    /// zeroing, a write ([`Op::Write`], at [`DeviceResult::error_at`]), a
    /// flush, the read-back. ENOSPC on a write means the device is too
    /// small; ENODEV or ENXIO that it disappeared.
    pub error: Option<Error>,
    /// The offset of the write that failed.
    pub error_at: Option<u64>,
    /// Whether the read-back matched (`None`: not verified).
    pub verified: Option<bool>,
    /// Offset of the first 64 KiB block that differed.
    pub mismatch_at: Option<u64>,
    /// Whether O_DIRECT was used (else buffered writes, flushed often).
    pub direct: bool,
    /// Bytes left unwritten because the device held them already
    /// (`--skip-identical`).
    pub identical_bytes: u64,
    /// The end of the furthest piece of the image written to the device
    /// (0: nothing was).
    pub written_to: u64,
    /// Whether its first MiB was written: when the image or the device
    /// failed part-way it was not, and the device keeps its old first MiB
    /// (its old partition table), so it does not boot half an image.
    pub head_written: bool,
}

impl DeviceResult {
    /// What went wrong, without the device's path: a failed write by its
    /// offset (`write at offset N: reason`, `too small: ...`, `the device
    /// disappeared ...`), anything else as `operation: reason`.
    pub fn error_text(&self) -> Option<String> {
        self.error_text_with(Refusal::to_string)
    }

    /// [`DeviceResult::error_text`] with a refusal in a front end's words
    /// ([`crate::Error::reason_with`]).
    pub fn error_text_with(&self, words: impl Fn(&Refusal) -> String) -> Option<String> {
        let e = self.error.as_ref()?;
        Some(match (e.op, self.error_at) {
            (Op::Write, Some(off)) => match e.io_error() {
                Some(io) if sys::device_gone(io) => {
                    format!("the device disappeared (write at offset {off})")
                }
                Some(io) if sys::no_space(io) => {
                    format!("too small: the image goes on past offset {off}")
                }
                _ => format!("write at offset {off}: {}", e.reason_with(&words)),
            },
            _ => format!("{}: {}", e.op, e.reason_with(&words)),
        })
    }

    /// Bytes of the image written past the first MiB on a device whose
    /// first MiB was not written (the image or the device failed
    /// part-way): what the device now holds of a half image; 0 if nothing.
    pub fn partly_written(&self) -> u64 {
        match self.head_written {
            true => 0,
            false => self.written_to.saturating_sub(HEAD as u64),
        }
    }
}

/// What a flash did.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct FlashSummary {
    /// Bytes of (decompressed) image written to each device.
    pub image_bytes: u64,
    /// The image's format ("raw", "xz", ...).
    pub format: &'static str,
    /// Per device.
    pub devices: Vec<DeviceResult>,
    /// An error reading or decoding the image, or an image that does not
    /// match its block map ([`Side::Source`]; nothing is complete then).
    pub source_error: Option<Error>,
    /// Time until every device was written and flushed.
    pub write_time: Duration,
    /// Wall time, verification included.
    pub elapsed: Duration,
    /// The SHA-256 of the whole (decompressed) image, when it was read to
    /// its end with verification on: users compare it with the one the
    /// image's publisher gives.
    pub sha256: Option<crate::Sha256>,
    /// Stopped by [`FlashOptions::cancel`]: the devices hold part of the
    /// image, without its first MiB (if the writing was stopped), or were
    /// not all read back (if the verification was).
    pub cancelled: bool,
    /// For an image from a URL: bytes of the file as published had, each
    /// counted once (its length, once it was all read). `None`: not a URL.
    pub downloaded: Option<u64>,
    /// For an image from a URL: connections resumed (tries after a drop
    /// or a stall). `None`: not a URL.
    pub resumes: Option<u64>,
}

impl FlashSummary {
    /// Whether every device was written (and verified, if asked) cleanly.
    pub fn ok(&self) -> bool {
        self.source_error.is_none()
            && !self.cancelled
            && self
                .devices
                .iter()
                .all(|d| d.error.is_none() && d.verified != Some(false))
    }
}

/// Writes `image` to every target, then verifies each (unless told not to).
/// Stops within a chunk once [`FlashOptions::cancel`] is set
/// ([`FlashSummary::cancelled`]).
pub fn flash(
    image: &Image,
    targets: &[Target],
    opts: &FlashOptions,
    events: &dyn FlashEvents,
) -> FlashSummary {
    let start = Instant::now();
    let mut s = FlashSummary {
        format: image.format.name(),
        ..Default::default()
    };
    let chunk = targets.iter().map(|t| t.chunk).min().unwrap_or(4 << 20);
    let mut devs = open_all(targets, opts, chunk, &mut s.devices);
    // A raw image file is mapped and written from the page cache directly:
    // no copy into buffers (that copy was most of kopiru's CPU time).
    let mapping = match opts.sha256 {
        None => source::map_raw(image),
        Some(_) => None,
    };
    let layout = Layout {
        ranges: opts
            .bmap
            .as_ref()
            .map(|m| m.ranges.iter().map(|&(a, b, _)| (a, b)).collect()),
        align: targets
            .iter()
            .map(|t| t.align)
            .max()
            .unwrap_or(crate::sys::DIRECT_ALIGN) as u64,
        skip_zeros: opts.zeroed || opts.zero_first,
    };
    let mut out = write::stream(
        image,
        &mut devs,
        mapping.as_ref(),
        &layout,
        opts,
        chunk,
        events,
    );
    let total = out.total;
    s.image_bytes = total;
    // Cancelled while writing: the reader's "cancelled" or "writer
    // stopped" is not the image's fault.
    s.cancelled = opts.cancel.is_cancelled();
    let read_error = std::mem::replace(&mut out.read_error, Ok(()));
    s.source_error = source_error(&image.path, read_error, opts, total, s.cancelled);
    if s.source_error.is_none() && !s.cancelled {
        s.sha256 = out.sha256;
    }
    if !s.cancelled {
        // Not after a source error either: the device keeps its old first
        // MiB, so it does not look like a complete image.
        let head = &out.head.get()[..out.head_len];
        let complete = s.source_error.is_none();
        write::finish(&mut devs, head, total, &layout, complete, events);
    }
    s.write_time = start.elapsed();
    let verify = opts.verify && s.source_error.is_none() && !s.cancelled;
    if verify {
        let n = devs.iter().filter(|d| d.error.is_none()).count() as u64;
        events.verifying(total * n);
    }
    out.written.pieces.sort_unstable_by_key(|p| p.0);
    let (results, cancelled) = readback::verify_all(
        &mut devs,
        verify.then_some(&out.written),
        mapping.as_ref(),
        chunk,
        &opts.cancel,
        events,
    );
    s.devices.extend(results);
    s.cancelled |= cancelled;
    if let Some(d) = &image.download_stats {
        s.downloaded = Some(d.had.load(Ordering::Relaxed));
        s.resumes = Some(d.resumed.load(Ordering::Relaxed));
    }
    s.elapsed = start.elapsed();
    s
}

/// Opens every target (zeroing it first with `--zero-first`); one that
/// fails, or is not reached because the flash was cancelled, gets its
/// result in `results` now.
fn open_all(
    targets: &[Target],
    opts: &FlashOptions,
    chunk: usize,
    results: &mut Vec<DeviceResult>,
) -> Vec<Dev> {
    let mut devs = Vec::new();
    for t in targets {
        let mut r = DeviceResult {
            path: t.path.clone(),
            error: None,
            error_at: None,
            verified: None,
            mismatch_at: None,
            direct: false,
            identical_bytes: 0,
            written_to: 0,
            head_written: false,
        };
        if opts.cancel.is_cancelled() {
            results.push(r);
            continue;
        }
        match Dev::open(t, opts, chunk) {
            Ok(d) => devs.push(d),
            Err(e) => {
                r.error = Some(e);
                results.push(r);
            }
        }
    }
    devs
}

/// What is wrong with the image, if anything: reading or decoding it
/// failed (unless that was only the flash being cancelled), or its size is
/// not its block map's.
fn source_error(
    image: &Path,
    read: Result<(), Error>,
    opts: &FlashOptions,
    total: u64,
    cancelled: bool,
) -> Option<Error> {
    match read {
        Err(e) if cancelled => {
            let stopped = e.io_error().is_some_and(|e| {
                crate::sys::is_cancelled(e) || e.kind() == std::io::ErrorKind::BrokenPipe
            });
            (!stopped).then_some(e)
        }
        Err(e) => Some(e),
        Ok(()) if cancelled => None,
        Ok(()) => opts
            .bmap
            .as_ref()
            .filter(|m| m.image_size != total)
            .map(|m| {
                let why = BmapError::SizeDiffers {
                    image: total,
                    bmap: m.image_size,
                };
                Error::refused(Side::Source, image, Op::Read, Refusal::Bmap(why))
            }),
    }
}
