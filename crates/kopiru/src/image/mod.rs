//! `kopiru image`: a block device (or, with `--file`, a regular file) read
//! into an image, the reverse of [`flash`](mod@crate::flash).
//!
//! A reader thread reads the device with O_DIRECT in chunks sized from its
//! topology, into a few aligned buffers allocated once and passed back and
//! forth, and hashes each chunk as it comes in (SHA-256 of the whole image,
//! and of each run of non-zero 4 KiB blocks for the block map); this thread
//! hands it to the encoder (raw: only the non-zero runs are written, the
//! rest stays holes).
//! Memory is those buffers plus the encoder's, whatever the device's size.
//!
//! OUTPUT is written under a temporary name beside it, flushed, read back
//! around the page cache, decoded and hashed (unless `verify` is off), and
//! only then renamed into place, with the block map. An error or a cancel
//! leaves nothing under the final names.
//!
//! The parts: `check` (refusals, the size to read), `parts` (the partition
//! table, for `--partitions-only`), `encode` (formats), `map` (zero blocks
//! and the block map), `run` (the reader and the writer), `verify` (the
//! read-back).

mod check;
mod encode;
mod map;
pub(crate) mod parts;
mod run;
mod verify;

use crate::codec::Format;
pub use check::{check_source, Source};
pub use run::image;

use crate::Cancel;
use std::path::PathBuf;
use std::time::Duration;

/// What the caller asks of an image. Start from [`ImageOptions::new`]
/// (what `kopiru image` does) and set fields.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ImageOptions {
    /// Read a regular file as the device (`--file`).
    pub allow_file: bool,
    /// Read even a device mounted read-write; replace an existing OUTPUT
    /// (and block map) once the new one is complete.
    pub force: bool,
    /// The output's format (see [`Format::of_output`]).
    pub format: Format,
    /// Compression level ([`Format::default_level`] if `None`).
    pub level: Option<i32>,
    /// Compression threads (zstd's and xz's workers, gzip's pool).
    pub threads: u32,
    /// Also write a block map (bmaptool's format 2.0, SHA-256) here.
    pub bmap: Option<PathBuf>,
    /// Read only up to the end of the last partition.
    pub partitions_only: bool,
    /// Read the written image back, decode it and compare its hash.
    pub verify: bool,
    /// Checked for each chunk read and read back: once set, the run stops
    /// within a chunk and nothing is left under the final names.
    pub cancel: Cancel,
}

impl Default for ImageOptions {
    fn default() -> Self {
        ImageOptions::new()
    }
}

impl ImageOptions {
    /// The command's defaults: a raw image at the format's default level,
    /// a thread per CPU, verified, block devices only.
    pub fn new() -> Self {
        ImageOptions {
            allow_file: false,
            force: false,
            format: Format::Raw,
            level: None,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
            bmap: None,
            partitions_only: false,
            verify: true,
            cancel: Cancel::new(),
        }
    }
}

pub use crate::error::ImageRefusal;

/// What an image did.
#[derive(Debug)]
#[non_exhaustive]
pub struct ImageSummary {
    /// The output's format.
    pub format: Format,
    /// The level used (0 for raw).
    pub level: i32,
    /// Bytes read from the device.
    pub image_bytes: u64,
    /// Bytes of the written file (compressed; a raw file's length).
    pub output_bytes: u64,
    /// Bytes in 4 KiB blocks that are not all zeros.
    pub mapped_bytes: u64,
    /// SHA-256 of the image's bytes (as read from the device), once all
    /// were read.
    pub sha256: Option<crate::Sha256>,
    /// Whether the image read back and decoded has that hash and length
    /// (`None`: not verified).
    pub verified: Option<bool>,
    /// What went wrong: reading the device ([`crate::Side::Source`], at
    /// [`ImageSummary::error_at`]), writing, flushing or renaming the
    /// output, reading it back.
    pub error: Option<crate::Error>,
    /// The offset of the device read that failed.
    pub error_at: Option<u64>,
    /// Whether the device was read with O_DIRECT.
    pub direct: bool,
    /// Time until the output was written and flushed.
    pub write_time: Duration,
    /// Wall time, verification included.
    pub elapsed: Duration,
    /// Stopped by [`ImageOptions::cancel`]: nothing is under the final names.
    pub cancelled: bool,
}

impl ImageSummary {
    /// Whether the image is complete, in place (and verified, if asked).
    pub fn ok(&self) -> bool {
        self.error.is_none() && !self.cancelled && self.verified != Some(false)
    }
}
