//! c_libs.rs's functions where kopiru is not yet built with a C compiler
//! for the target (macOS and Windows are compile-checked from Linux): the
//! pure-Rust decoders (lzma-rs, ruzstd), no image encoders (`kopiru image`
//! is Linux-only), and plain `http://` only (ring, for TLS, is C).

use super::{Coded, DecodeSink};
use std::convert::Infallible;
use std::io::{self, BufRead, Read};

/// The error of an encoder this build does not have.
fn no_encoder(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!("{what} compression is not available on this platform yet"),
    )
}

/// The pure-Rust xz decoder (one thread; it holds each block in memory, so
/// the budget is not honoured: a single-block image costs its size; it
/// reads one stream).
pub fn decode_xz<S: DecodeSink + ?Sized>(
    mut r: impl BufRead,
    sink: &mut S,
    _memory: u64,
) -> io::Result<()> {
    lzma_rs::xz_decompress(&mut r, &mut &mut *sink)
        .map_err(|e| io::Error::other(format!("xz: {e}")))?;
    sink.flush()
}

/// The pure-Rust zstd decoder.
pub fn decode_zstd<S: DecodeSink + ?Sized>(r: impl BufRead, sink: &mut S) -> io::Result<()> {
    let mut d = ruzstd::decoding::StreamingDecoder::new(r)
        .map_err(|e| io::Error::other(format!("zstd: {e}")))?;
    sink.fill_from(&mut d)
}

/// No streaming xz reader in pure Rust (lzma-rs decodes into a writer).
pub fn xz_reader<'a>(
    _r: impl Read + 'a,
    _threads: u32,
    _memory: u64,
) -> io::Result<Box<dyn Read + 'a>> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "reading xz back is not available on this platform yet",
    ))
}

/// A reader of the zstd frames in `r` (ruzstd).
pub fn zstd_reader<'a>(r: impl Read + 'a) -> io::Result<Box<dyn Read + 'a>> {
    let d = ruzstd::decoding::StreamingDecoder::new(r)
        .map_err(|e| io::Error::other(format!("zstd: {e}")))?;
    Ok(Box::new(d))
}

/// No xz encoder here: [`XzEncoder::new`] says so.
pub struct XzEncoder(Infallible);

impl XzEncoder {
    /// Unsupported.
    pub fn new(_preset: u32, _threads: u32, _memory: u64, _timeout: u32) -> io::Result<Self> {
        Err(no_encoder("xz"))
    }

    /// Never called: there is no encoder.
    pub fn done_in(&mut self) -> u64 {
        match self.0 {}
    }

    /// Never called: there is no encoder.
    pub fn code(&mut self, _input: &[u8], _out: &mut [u8], _finish: bool) -> io::Result<Coded> {
        match self.0 {}
    }
}

/// No zstd encoder here: [`ZstdEncoder::new`] says so.
pub struct ZstdEncoder(Infallible);

impl ZstdEncoder {
    /// Unsupported.
    pub fn new(_level: i32, _threads: u32, _size: u64) -> io::Result<Self> {
        Err(no_encoder("zstd"))
    }

    /// Never called: there is no encoder.
    pub fn done_in(&mut self) -> u64 {
        match self.0 {}
    }

    /// Never called: there is no encoder.
    pub fn code(&mut self, _input: &[u8], _out: &mut [u8], _finish: bool) -> io::Result<Coded> {
        match self.0 {}
    }
}

/// Never: no TLS in this build.
pub fn tls_problem(_e: &(dyn std::error::Error + 'static)) -> Option<String> {
    None
}

/// `b` as it is: no TLS in this build, so an `https://` URL fails in ureq
/// ("TLS is not enabled"); `http://` works.
pub fn with_tls(b: ureq::AgentBuilder) -> io::Result<ureq::AgentBuilder> {
    Ok(b)
}
