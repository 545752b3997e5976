//! The decoders of compressed images, each streaming into the writer's
//! buffers with memory bounded by the format, never by the image's size.
//!
//! xz and zstd go through the C libraries (liblzma, libzstd), built from
//! their bundled sources: faster than the pure-Rust decoders by 2.5x (xz)
//! and 3x (zstd) on a filesystem image (scripts/bench-decode.sh). liblzma
//! decodes an xz file made of several blocks (`xz -T0`) on several threads
//! when that fits in [`FlashOptions::memory`](super::FlashOptions::memory),
//! and a file of one block (plain `xz`) on one thread in its dictionary's
//! memory. Where no C compiler can build them (the macOS and Windows
//! cross-checks), the pure-Rust decoders stand in: the choice is sys/'s
//! (c_libs.rs, rust_libs.rs).

use super::source::Sink;
use crate::sys;
use std::io::{self, BufRead};

/// Decoding an xz image on several threads may use this much memory, by
/// default: enough for four threads on blocks of `xz -T0 -6` (24 MiB each,
/// about 58 MiB a thread: two measured 116 MiB); blocks too large for it
/// (`xz -T0 -9` writes 192 MiB ones), or a smaller budget, mean fewer
/// threads or one, in the dictionary's memory.
pub(crate) const DEFAULT_MEMORY: u64 = 256 << 20;

/// Decodes an xz image (one stream, or several concatenated) into `sink`,
/// within `memory` where the decoder can (sys: liblzma on Linux).
pub(super) fn xz(r: impl BufRead, sink: &mut Sink, memory: u64) -> io::Result<()> {
    sys::decode_xz(r, sink, memory)
}

/// Decodes a zstd image (one frame or several) into `sink`, in its window's
/// memory; windows up to 2 GiB (`--long=31`) are accepted.
pub(super) fn zstd(r: impl BufRead, sink: &mut Sink) -> io::Result<()> {
    sys::decode_zstd(r, sink)
}
