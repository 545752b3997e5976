//! The decoders of compressed images, each streaming into the writer's
//! buffers with memory bounded by the format, never by the image's size.
//!
//! xz and zstd go through the C libraries (liblzma, libzstd), built from
//! their bundled sources: faster than the pure-Rust decoders by 2.5x (xz)
//! and 3x (zstd) on a filesystem image (scripts/bench-decode.sh). liblzma
//! decodes an xz file made of several blocks (`xz -T0`) on several threads
//! when that fits in [`FlashOptions::memory`](super::FlashOptions::memory),
//! and a file of one block (plain `xz`) on one thread in its dictionary's
//! memory. Where no C compiler can build them (the macOS cross-check), the
//! pure-Rust decoders stand in.

use super::source::Sink;
use std::io::{self, BufRead};

/// Decoding an xz image on several threads may use this much memory, by
/// default: enough for four threads on blocks of `xz -T0 -6` (24 MiB each,
/// about 58 MiB a thread: two measured 116 MiB); blocks too large for it
/// (`xz -T0 -9` writes 192 MiB ones), or a smaller budget, mean fewer
/// threads or one, in the dictionary's memory.
pub const DEFAULT_MEMORY: u64 = 256 << 20;

/// How many threads decode a multi-block xz image: one per CPU but the
/// one the writer (and the hashing) runs on. On two CPUs that is one: a
/// 192 MiB image of `xz -T2 -3` (16 blocks) took 2.1-2.6 s on two decoder
/// threads at 54-66 MiB peak RSS, and 2.3-2.4 s on one at 14 MiB.
#[cfg(not(target_os = "macos"))]
fn threads() -> u32 {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get() as u32 - 1)
        .max(1)
}

/// Decodes an xz image (one stream, or several concatenated) into `sink`.
/// Several threads decode blocks that record their sizes (as multi-threaded
/// xz writes them) while their buffers fit in `memory`; otherwise one
/// thread, in the dictionary's memory.
#[cfg(not(target_os = "macos"))]
pub(super) fn xz(mut r: impl BufRead, sink: &mut Sink, memory: u64) -> io::Result<()> {
    use liblzma::stream::{MtStreamBuilder, Stream};
    const MAGIC: &[u8] = &[0xFD, b'7', b'z', b'X', b'Z', 0];
    let threads = threads();
    // The multi-threaded decoder takes no flag for concatenated streams:
    // each stream gets its own decoder, as `xz -d` reads them one by one.
    loop {
        // Several threads only where a budget leaves room for a block's
        // buffers beside the dictionary (16 MiB, which one thread needs
        // anyway).
        let stream = if threads > 1 && memory > 16 << 20 {
            MtStreamBuilder::new()
                .threads(threads)
                // Over the budget: fewer threads, or one in direct mode.
                .memlimit_threading(memory)
                // The dictionary is needed whatever the budget: never refuse.
                .memlimit_stop(u64::MAX)
                .decoder()
        } else {
            Stream::new_stream_decoder(u64::MAX, 0)
        }
        .map_err(|e| io::Error::other(format!("xz: {e}")))?;
        let mut d = liblzma::bufread::XzDecoder::new_stream(r, stream);
        sink.fill_from(&mut d)?;
        r = d.into_inner();
        // Stream padding (null bytes), then another stream or the end.
        loop {
            let buf = r.fill_buf()?;
            if buf.is_empty() {
                return Ok(());
            }
            let zeros = buf.iter().take_while(|&&b| b == 0).count();
            let next = &buf[zeros..];
            if !next.is_empty() && !MAGIC.starts_with(&next[..next.len().min(MAGIC.len())]) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "xz: data after the last stream that is not xz",
                ));
            }
            let more = !next.is_empty();
            r.consume(zeros);
            if more {
                break;
            }
        }
    }
}

/// Decodes a zstd image (one frame or several) into `sink`, in its window's
/// memory; windows up to 2 GiB (`--long=31`) are accepted.
#[cfg(not(target_os = "macos"))]
pub(super) fn zstd(r: impl BufRead, sink: &mut Sink) -> io::Result<()> {
    let mut d = zstd::stream::read::Decoder::with_buffer(r)?;
    d.window_log_max(31)?;
    sink.fill_from(&mut d)
}

/// The pure-Rust xz decoder (one thread; it holds each block in memory, so
/// the budget is not honoured: a single-block image costs its size).
#[cfg(target_os = "macos")]
pub(super) fn xz(mut r: impl BufRead, sink: &mut Sink, _memory: u64) -> io::Result<()> {
    use io::Write;
    lzma_rs::xz_decompress(&mut r, sink).map_err(|e| io::Error::other(format!("xz: {e}")))?;
    sink.flush()
}

/// The pure-Rust zstd decoder.
#[cfg(target_os = "macos")]
pub(super) fn zstd(r: impl BufRead, sink: &mut Sink) -> io::Result<()> {
    let mut d = ruzstd::decoding::StreamingDecoder::new(r)
        .map_err(|e| io::Error::other(format!("zstd: {e}")))?;
    io::copy(&mut d, sink)?;
    Ok(())
}
