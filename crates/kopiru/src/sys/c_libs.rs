//! The libraries Linux uses for what has a faster C (or C-built)
//! implementation than the pure-Rust one (Cargo.toml says why each):
//! liblzma and libzstd decode `kopiru flash`'s images and encode `kopiru
//! image`'s, and rustls (with ring) gives `kopiru flash URL` its HTTPS.
//! Elsewhere rust_libs.rs stands in, with the same functions.

use super::{Coded, DecodeSink};
use std::io::{self, BufRead, Read};
use std::mem::MaybeUninit;
use std::sync::Arc;

use liblzma_sys as lz;

/// How many threads decode a multi-block xz image: one per CPU but the
/// one the writer (and the hashing) runs on. On two CPUs that is one: a
/// 192 MiB image of `xz -T2 -3` (16 blocks) took 2.1-2.6 s on two decoder
/// threads at 54-66 MiB peak RSS, and 2.3-2.4 s on one at 14 MiB.
fn threads() -> u32 {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get() as u32 - 1)
        .max(1)
}

/// Decodes an xz image (one stream, or several concatenated) into `sink`.
/// Several threads decode blocks that record their sizes (as multi-threaded
/// xz writes them) while their buffers fit in `memory`; otherwise one
/// thread, in the dictionary's memory.
pub fn decode_xz<S: DecodeSink + ?Sized>(
    mut r: impl BufRead,
    sink: &mut S,
    memory: u64,
) -> io::Result<()> {
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
pub fn decode_zstd<S: DecodeSink + ?Sized>(r: impl BufRead, sink: &mut S) -> io::Result<()> {
    let mut d = zstd::stream::read::Decoder::with_buffer(r)?;
    d.window_log_max(31)?;
    sink.fill_from(&mut d)
}

/// A reader of the xz stream in `r`, decoded on up to `threads` threads
/// within `memory`.
pub fn xz_reader<'a>(
    r: impl Read + 'a,
    threads: u32,
    memory: u64,
) -> io::Result<Box<dyn Read + 'a>> {
    let stream = liblzma::stream::MtStreamBuilder::new()
        .threads(threads.max(1))
        .memlimit_threading(memory)
        .memlimit_stop(u64::MAX)
        .decoder()
        .map_err(|e| io::Error::other(format!("xz: {e}")))?;
    Ok(Box::new(liblzma::read::XzDecoder::new_stream(r, stream)))
}

/// A reader of the zstd frames in `r` (windows up to 2 GiB).
pub fn zstd_reader<'a>(r: impl Read + 'a) -> io::Result<Box<dyn Read + 'a>> {
    let mut d = zstd::stream::read::Decoder::new(r)?;
    d.window_log_max(31)?;
    Ok(Box::new(d))
}

/// liblzma's multi-threaded xz encoder, driven through its C interface
/// because a progress bar needs `lzma_get_progress` (the input its threads
/// have compressed), which the `liblzma` crate does not expose. Dropped,
/// it stops at once.
pub struct XzEncoder {
    stream: Box<lz::lzma_stream>,
}

impl XzEncoder {
    /// Blocks that record their sizes (so that `kopiru flash` and `xz -d
    /// -T0` decode them on several threads), CRC64, at `preset`, on up to
    /// `threads` threads: fewer until liblzma's own estimate of its memory
    /// fits in `memory` (one whatever it needs). A call that waits for a
    /// busy thread returns after `timeout_ms`.
    pub fn new(preset: u32, threads: u32, memory: u64, timeout_ms: u32) -> io::Result<XzEncoder> {
        // SAFETY: lzma_mt is plain data; all-zero is its documented
        // initial state (reserved fields must be zero).
        let mut mt: lz::lzma_mt = unsafe { MaybeUninit::zeroed().assume_init() };
        mt.threads = threads.max(1);
        mt.preset = preset;
        mt.check = lz::LZMA_CHECK_CRC64;
        mt.timeout = timeout_ms;
        // SAFETY: `mt` is a valid, initialised lzma_mt with no filters.
        while mt.threads > 1 && unsafe { lz::lzma_stream_encoder_mt_memusage(&mt) } > memory {
            mt.threads -= 1;
        }
        // SAFETY: an all-zero lzma_stream is LZMA_STREAM_INIT. It is boxed
        // because liblzma keeps pointers into it while it lives.
        let mut stream: Box<lz::lzma_stream> =
            Box::new(unsafe { MaybeUninit::zeroed().assume_init() });
        // SAFETY: `stream` is initialised as above and `mt` is valid.
        let ret = unsafe { lz::lzma_stream_encoder_mt(&mut *stream, &mt) };
        if ret != lz::LZMA_OK {
            // SAFETY: lzma_end frees what a failed initialisation left, and
            // takes a stream that was never initialised too.
            unsafe { lz::lzma_end(&mut *stream) };
            return Err(io::Error::other(format!(
                "xz: cannot start the encoder (liblzma error {ret})"
            )));
        }
        Ok(XzEncoder { stream })
    }

    /// Input the encoder has compressed (not merely taken in).
    pub fn done_in(&mut self) -> u64 {
        let (mut read, mut written) = (0u64, 0u64);
        // SAFETY: `stream` is an initialised encoder; both out-pointers
        // are valid u64s.
        unsafe { lz::lzma_get_progress(&mut *self.stream, &mut read, &mut written) };
        read
    }

    /// One call to the encoder: takes what it takes of `input`, gives what
    /// it gives into `out`; `finish` ends the stream (called again until
    /// [`Coded::ended`]).
    pub fn code(&mut self, input: &[u8], out: &mut [u8], finish: bool) -> io::Result<Coded> {
        let s = &mut *self.stream;
        s.next_in = input.as_ptr();
        s.avail_in = input.len();
        s.next_out = out.as_mut_ptr();
        s.avail_out = out.len();
        let action = if finish {
            lz::LZMA_FINISH
        } else {
            lz::LZMA_RUN
        };
        // SAFETY: the in and out pointers are valid for the lengths given
        // for the duration of the call, and the stream is initialised.
        let ret = unsafe { lz::lzma_code(s, action) };
        let taken = input.len() - s.avail_in;
        let made = out.len() - s.avail_out;
        // Nothing of ours is left in the stream between calls.
        s.next_in = std::ptr::null();
        s.avail_in = 0;
        s.next_out = std::ptr::null_mut();
        s.avail_out = 0;
        match ret {
            lz::LZMA_OK | lz::LZMA_STREAM_END => Ok(Coded {
                taken,
                made,
                ended: ret == lz::LZMA_STREAM_END,
            }),
            e => Err(io::Error::other(format!("xz: liblzma error {e}"))),
        }
    }
}

impl Drop for XzEncoder {
    fn drop(&mut self) {
        // SAFETY: the stream was initialised by lzma_stream_encoder_mt and
        // is ended once; lzma_end stops and joins its threads.
        unsafe { lz::lzma_end(&mut *self.stream) };
    }
}

/// zstd's multi-threaded encoder, driven directly: its frame progression
/// says how much input its workers have compressed.
pub struct ZstdEncoder {
    cctx: zstd::zstd_safe::CCtx<'static>,
}

fn zstd_err(code: usize) -> io::Error {
    io::Error::other(format!("zstd: {}", zstd::zstd_safe::get_error_name(code)))
}

impl ZstdEncoder {
    /// A frame with a checksum at `level`, on `threads` workers (workers
    /// even for one: compression then overlaps the caller's work, on
    /// another core), recording `size` as its content's size.
    pub fn new(level: i32, threads: u32, size: u64) -> io::Result<ZstdEncoder> {
        use zstd::zstd_safe::CParameter as P;
        let mut cctx = zstd::zstd_safe::CCtx::create();
        cctx.set_parameter(P::CompressionLevel(level))
            .map_err(zstd_err)?;
        cctx.set_parameter(P::ChecksumFlag(true))
            .map_err(zstd_err)?;
        cctx.set_parameter(P::NbWorkers(threads))
            .map_err(zstd_err)?;
        cctx.set_pledged_src_size(Some(size)).map_err(zstd_err)?;
        Ok(ZstdEncoder { cctx })
    }

    /// Input the workers have compressed.
    pub fn done_in(&mut self) -> u64 {
        self.cctx.get_frame_progression().consumed
    }

    /// One call: takes what zstd takes of `input`, gives what it gives
    /// into `out`; `finish` ends the frame (called again until
    /// [`Coded::ended`]: nothing is left to flush).
    pub fn code(&mut self, input: &[u8], out: &mut [u8], finish: bool) -> io::Result<Coded> {
        use zstd::zstd_safe::zstd_sys::ZSTD_EndDirective::{ZSTD_e_continue, ZSTD_e_end};
        let mut i = zstd::zstd_safe::InBuffer::around(input);
        let mut o = zstd::zstd_safe::OutBuffer::around(out);
        let end = if finish { ZSTD_e_end } else { ZSTD_e_continue };
        let left = self
            .cctx
            .compress_stream2(&mut o, &mut i, end)
            .map_err(zstd_err)?;
        Ok(Coded {
            taken: i.pos(),
            made: o.pos(),
            ended: finish && left == 0,
        })
    }
}

/// `b` with TLS for `https://` URLs: rustls (ring) with the system's CA
/// store, or `SSL_CERT_FILE` and `SSL_CERT_DIR` where set.
/// A TLS failure in `e` or the errors behind it, in words ("certificate
/// not trusted (unknown issuer)"), not rustls's variant names; `None` when
/// there is none. (An `io::Error` hides what it wraps from `source()`: its
/// inner error is looked at too.)
pub fn tls_problem(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut at = Some(e);
    while let Some(e) = at {
        let inner = e
            .downcast_ref::<io::Error>()
            .and_then(|io| io.get_ref())
            .map(|i| i as &(dyn std::error::Error + 'static));
        for candidate in [Some(e), inner].into_iter().flatten() {
            if let Some(t) = candidate.downcast_ref::<rustls::Error>() {
                return Some(tls_words(t));
            }
        }
        at = inner.or_else(|| e.source());
    }
    None
}

/// A rustls error said for a person.
fn tls_words(e: &rustls::Error) -> String {
    use rustls::{CertificateError as C, Error as E};
    match e {
        E::InvalidCertificate(c) => match c {
            C::UnknownIssuer => "certificate not trusted (unknown issuer)".into(),
            C::Expired | C::ExpiredContext { .. } => "certificate expired".into(),
            C::NotValidYet | C::NotValidYetContext { .. } => "certificate not valid yet".into(),
            C::NotValidForName | C::NotValidForNameContext { .. } => {
                "certificate not valid for this host name".into()
            }
            C::Revoked => "certificate revoked".into(),
            C::BadSignature => "certificate with a bad signature".into(),
            C::BadEncoding => "certificate malformed".into(),
            C::InvalidPurpose | C::InvalidPurposeContext { .. } => {
                "certificate not for a server".into()
            }
            _ => "certificate refused".into(),
        },
        E::NoCertificatesPresented => "the server presented no certificate".into(),
        E::PeerIncompatible(_) => {
            "the server offers no TLS version or cipher that kopiru accepts".into()
        }
        E::AlertReceived(a) => format!("the server ended the handshake ({a:?})"),
        E::InvalidMessage(_) | E::PeerMisbehaved(_) | E::InappropriateMessage { .. } => {
            "the server's TLS messages are invalid (is it speaking TLS?)".into()
        }
        other => other.to_string(),
    }
}

pub fn with_tls(b: ureq::AgentBuilder) -> io::Result<ureq::AgentBuilder> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = rustls::RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        let why = found
            .errors
            .first()
            .map_or(String::new(), |e| format!(" ({e})"));
        return Err(io::Error::other(format!(
            "no CA certificates found in the system's store, SSL_CERT_FILE or \
             SSL_CERT_DIR{why}"
        )));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| io::Error::other(format!("TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(b.tls_config(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rustls error is found behind an `io::Error` (as ureq hands it
    /// on) and said in words; other errors are not TLS problems.
    #[test]
    fn tls_problem_in_words() {
        let cert = |c| rustls::Error::InvalidCertificate(c);
        let wrapped = io::Error::new(
            io::ErrorKind::InvalidData,
            cert(rustls::CertificateError::UnknownIssuer),
        );
        assert_eq!(
            tls_problem(&wrapped).as_deref(),
            Some("certificate not trusted (unknown issuer)")
        );
        let expired = cert(rustls::CertificateError::Expired);
        assert_eq!(
            tls_problem(&expired).as_deref(),
            Some("certificate expired")
        );
        let plain = io::Error::new(io::ErrorKind::ConnectionRefused, "refused");
        assert_eq!(tls_problem(&plain), None);
    }
}
