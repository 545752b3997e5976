//! The parsers of bytes that come from outside, for the fuzz targets in
//! `fuzz/` only: built with the `fuzzing` feature, hidden from the docs,
//! and no part of the crate's API. Each function calls the engine's own
//! code as it is, with plain types in and out.

use crate::sys::DecodeSink;
use std::io;
use std::path::{Path, PathBuf};

pub use crate::flash::{Bmap, BmapError, NotAnImage};
pub use crate::Format;

/// Whether `path` is an `http://` or `https://` URL (the flash's test).
pub fn is_url(path: &Path) -> bool {
    crate::flash::is_url(path)
}

/// Bytes read from an image's start to recognise it.
pub const SNIFF: usize = crate::flash::sniff::SNIFF;

/// A block map file's text (`--bmap`), as [`Bmap::parse`].
pub fn bmap(text: &str) -> Result<Bmap, BmapError> {
    Bmap::parse(text)
}

/// A block map's ranges checked against image bytes fed in pieces (`data`
/// at each offset, in order), as the flash's writer does: the first
/// mismatch.
pub fn bmap_range_sums(
    ranges: &[(u64, u64, Option<[u8; 32]>)],
    pieces: &[(u64, &[u8])],
) -> Result<(), BmapError> {
    let mut sums = crate::flash::bmap::RangeSums::new(ranges);
    pieces
        .iter()
        .try_for_each(|&(off, data)| sums.feed(off, data))
}

/// What the flash writes of `data` (image bytes at `off`) with a block
/// map's `ranges` on devices of sectors of `align` bytes (`skip_zeros`:
/// the devices read as zeros): (offset, length) of each piece.
pub fn bmap_pieces(
    ranges: &[(u64, u64)],
    align: u64,
    skip_zeros: bool,
    off: u64,
    data: &[u8],
) -> Vec<(u64, usize)> {
    let layout = crate::flash::pieces::Layout {
        ranges: Some(ranges.to_vec()),
        align,
        skip_zeros,
    };
    layout
        .pieces(off, data)
        .iter()
        .map(|&(o, d)| (o, d.len()))
        .collect()
}

/// The compressed format whose magic number `head` starts with.
pub fn magic(head: &[u8]) -> Option<Format> {
    Format::of_magic(head)
}

/// An image's format from its first bytes, its name's claim and
/// `--format`.
pub fn sniff(
    head: &[u8],
    name: Option<&Path>,
    wanted: Option<Format>,
) -> Result<Format, NotAnImage> {
    crate::flash::sniff::recognise(head, name, wanted)
}

/// The decoded size an image of `len` bytes in `format` records, read
/// through `at(offset, n)` (`walk`: a zstd file may be walked frame by
/// frame, as for a local file): (exact, at least).
pub fn decoded_size(
    at: &dyn Fn(u64, usize) -> Option<Vec<u8>>,
    len: u64,
    format: Format,
    walk: bool,
) -> (Option<u64>, Option<u64>) {
    let s = crate::codec::size::decoded_by(at, len, format, walk);
    (s.exact, s.at_least)
}

/// An HTTP `Content-Range` value: (start, total).
pub fn content_range(value: &str) -> Option<(u64, Option<u64>)> {
    crate::flash::http::content_range(value)
}

/// A URL's host, for `NO_PROXY`.
pub fn host_of(url: &str) -> &str {
    crate::flash::http::host_of(url)
}

/// The file name a URL gives an image.
pub fn url_file_name(url: &str) -> &str {
    crate::flash::http::file_name(url)
}

/// The copies record's line for a copy `dst` at `dst_path` of `src`.
pub fn record_line(src: &[u8], dst: &[u8], dst_path: &Path) -> String {
    crate::copy::record::line(src, dst, dst_path)
}

/// Whether the copies record's `text` says that `dst` at `dst_path` is a
/// copy of `src`.
pub fn record_says_copy(text: &str, src: &[u8], dst: &[u8], dst_path: &Path) -> bool {
    crate::copy::record::says_copy(text, src, dst, dst_path)
}

/// A `--files-from` path as a path inside the source directory `src`
/// (canonical), or `None` outside it.
pub fn listed_inside(p: &Path, src: &Path) -> Option<PathBuf> {
    crate::copy::listed::inside(p, src)
}

/// Whether a listed entry's name can be a file name here (no NUL).
pub fn file_name_ok(name: &std::ffi::OsStr) -> bool {
    crate::sys::cstring(name).is_ok()
}

/// The last partition of a disk read through `read_at(offset, buf)`, with
/// `sector` bytes per logical block (`--partitions-only`): (its number,
/// the byte past it, the table's kind).
pub fn last_partition(
    read_at: &mut dyn FnMut(u64, &mut [u8]) -> io::Result<()>,
    sector: u64,
) -> io::Result<Option<(u32, u64, &'static str)>> {
    let last = crate::image::parts::last_partition(read_at, sector)?;
    Ok(last.map(|l| (l.number, l.end, l.table)))
}

/// The process id in a temporary's name (`.kopiru-tmp.<pid>.<n>`), read
/// from directory entries that another program may have made.
pub fn leftover_pid(name: &crate::sys::Name) -> Option<u32> {
    crate::copy::place::names::leftover_pid(name)
}

/// The bytes that `image` decodes to in `format` with the flash's own
/// decoders, counted, up to `limit` (more is an error: a small input may
/// decode to a great deal).
pub fn decoded_len(image: &[u8], format: Format, limit: u64) -> io::Result<u64> {
    let mut sink = Counted { n: 0, limit };
    let mut r = io::BufReader::new(image);
    (format.codec().decode)(&mut r, &mut sink, 0)?;
    Ok(sink.n)
}

/// Counts what a decoder gives, up to a limit.
struct Counted {
    n: u64,
    limit: u64,
}

impl io::Write for Counted {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.n += buf.len() as u64;
        match self.n > self.limit {
            true => Err(io::Error::other("over the limit")),
            false => Ok(buf.len()),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl DecodeSink for Counted {
    fn fill_from(&mut self, r: &mut dyn io::Read) -> io::Result<()> {
        io::copy(r, self).map(drop)
    }
}
