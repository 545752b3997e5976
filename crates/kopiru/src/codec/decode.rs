//! The decoders of compressed images, each streaming into a sink (flash's
//! aligned buffers) with memory bounded by the format, never by the
//! image's size; and the same as readers (`kopiru image`'s read-back).
//!
//! xz and zstd go through the C libraries (liblzma, libzstd), built from
//! their bundled sources: faster than the pure-Rust decoders by 2.5x (xz)
//! and 3x (zstd) on a filesystem image (scripts/bench/decode.sh). liblzma
//! decodes an xz file made of several blocks (`xz -T0`) on several threads
//! when that fits in the memory given (`kopiru flash --memory`), and a
//! file of one block (plain `xz`) on one thread in its dictionary's
//! memory. Where no C compiler can build them (the macOS and Windows
//! cross-checks), the pure-Rust decoders stand in: the choice is sys/'s
//! (c_libs.rs, rust_libs.rs).

use crate::sys::{self, DecodeSink};
use std::io::{self, BufRead, Read};

/// A format's decoder (the codec table's `decode`): the whole stream `r`
/// into `sink`, on several threads within `memory` where it can.
pub(crate) type Decoder =
    fn(r: &mut dyn BufRead, sink: &mut dyn DecodeSink, memory: u64) -> io::Result<()>;

/// A format's decoding reader (the codec table's `read`): what `r` decodes
/// to, on up to `threads` threads within `memory` where it can.
pub(crate) type Reader =
    for<'a> fn(r: Box<dyn Read + 'a>, threads: u32, memory: u64) -> io::Result<Box<dyn Read + 'a>>;

/// Decoding an xz image on several threads may use this much memory, by
/// default: enough for four threads on blocks of `xz -T0 -6` (24 MiB each,
/// about 58 MiB a thread: two measured 116 MiB); blocks too large for it
/// (`xz -T0 -9` writes 192 MiB ones), or a smaller budget, mean fewer
/// threads or one, in the dictionary's memory.
pub const DEFAULT_MEMORY: u64 = 256 << 20;

/// Raw: the bytes as they are, read straight into the sink's buffers.
pub(super) fn raw(mut r: &mut dyn BufRead, sink: &mut dyn DecodeSink, _: u64) -> io::Result<()> {
    // Through `&mut &mut dyn BufRead`, which is a `Read`: no trait
    // upcasting, which needs Rust 1.86 (the crate's minimum is 1.85).
    sink.fill_from(&mut r)
}

/// Raw read back: the bytes as they are.
pub(super) fn read_raw<'a>(
    r: Box<dyn Read + 'a>,
    _: u32,
    _: u64,
) -> io::Result<Box<dyn Read + 'a>> {
    Ok(r)
}

/// xz (one stream, or several concatenated), within `memory` where the
/// decoder can (sys: liblzma on Linux).
pub(super) fn xz(r: &mut dyn BufRead, sink: &mut dyn DecodeSink, memory: u64) -> io::Result<()> {
    sys::decode_xz(r, sink, memory)
}

/// xz read back, on `threads` threads within `memory`.
pub(super) fn read_xz<'a>(
    r: Box<dyn Read + 'a>,
    threads: u32,
    memory: u64,
) -> io::Result<Box<dyn Read + 'a>> {
    sys::xz_reader(r, threads, memory)
}

/// gzip: every member, as `gzip -d` reads them.
pub(super) fn gzip(r: &mut dyn BufRead, sink: &mut dyn DecodeSink, _: u64) -> io::Result<()> {
    sink.fill_from(&mut flate2::bufread::MultiGzDecoder::new(r))
}

/// gzip read back.
pub(super) fn read_gzip<'a>(
    r: Box<dyn Read + 'a>,
    _: u32,
    _: u64,
) -> io::Result<Box<dyn Read + 'a>> {
    Ok(Box::new(flate2::read::MultiGzDecoder::new(r)))
}

/// zstd (one frame or several), in its window's memory; windows up to
/// 2 GiB (`--long=31`) are accepted.
pub(super) fn zstd(r: &mut dyn BufRead, sink: &mut dyn DecodeSink, _: u64) -> io::Result<()> {
    sys::decode_zstd(r, sink)
}

/// zstd read back.
pub(super) fn read_zstd<'a>(
    r: Box<dyn Read + 'a>,
    _: u32,
    _: u64,
) -> io::Result<Box<dyn Read + 'a>> {
    sys::zstd_reader(r)
}

/// bzip2: every stream, as `bzip2 -d` reads them.
pub(super) fn bzip2(r: &mut dyn BufRead, sink: &mut dyn DecodeSink, _: u64) -> io::Result<()> {
    sink.fill_from(&mut bzip2::bufread::MultiBzDecoder::new(r))
}

/// bzip2 read back.
pub(super) fn read_bzip2<'a>(
    r: Box<dyn Read + 'a>,
    _: u32,
    _: u64,
) -> io::Result<Box<dyn Read + 'a>> {
    Ok(Box::new(bzip2::read::MultiBzDecoder::new(r)))
}
