//! The decoded size that an image's format records (codec/size.rs): xz's
//! indexes read from the end, zstd's frame headers (walked frame by frame
//! for a local file, the first only over HTTP), gzip's trailer. The input
//! is a local file (zstd walked), or the tail of a file served over HTTP
//! whose length (Content-Length) the input claims. No read is larger than the file (or,
//! over HTTP, than a few MiB: each read is a buffer), and a size given is
//! the one the flash's own decoder finds.
#![no_main]

use kopiru::fuzzing::{self as k, Format};
use kopiru_fuzz::Bytes;
use libfuzzer_sys::fuzz_target;

/// The most one read may ask over HTTP (it is allocated whole).
const MAX_HTTP_READ: usize = 64 << 20;
/// Decoded bytes compared at most (a small input may decode to much).
const DECODE_LIMIT: u64 = 64 << 20;

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let choice = b.byte();
    let format = Format::ALL[usize::from(choice) % Format::ALL.len()];
    let http = choice & 0x10 != 0;
    // Over HTTP: bytes before the input's, which the server will not give.
    let before = if http { b.number(5) } else { 0 };
    let file = b.rest();
    let len = before + file.len() as u64;
    let at = |off: u64, n: usize| -> Option<Vec<u8>> {
        match http {
            true => assert!(n <= MAX_HTTP_READ, "a read of {n} bytes at {off} over HTTP"),
            // A header's few bytes may be asked of a shorter file.
            false => assert!(
                n as u64 <= len.max(64),
                "a read of {n} bytes from a file of {len}"
            ),
        }
        let from = usize::try_from(off.checked_sub(before)?).ok()?;
        file.get(from..from.checked_add(n)?).map(<[u8]>::to_vec)
    };
    // As the flash calls it: a local file is walked, a URL is not.
    let walk = !http;
    let (exact, at_least) = k::decoded_size(&at, len, format, walk);
    match format {
        Format::Raw => assert_eq!((exact, at_least), (Some(len), None)),
        Format::Bzip2 => assert_eq!((exact, at_least), (None, None)),
        Format::Gzip => assert_eq!(exact, None),
        Format::Xz => assert_eq!(at_least, None),
        Format::Zstd if walk => assert_eq!(at_least, None),
        Format::Zstd => assert_eq!(exact, None),
        // Fails the fuzz run at once: a new format needs its line here.
        other => panic!("no expectation for {other} in this target"),
    }
    if http || (exact.is_none() && at_least.is_none()) {
        return;
    }
    if let Ok(decoded) = k::decoded_len(file, format, DECODE_LIMIT) {
        if let Some(n) = exact {
            assert_eq!(
                n, decoded,
                "{format} recorded {n} bytes, decoded to {decoded}"
            );
        }
        if let Some(n) = at_least {
            assert!(
                n <= decoded,
                "{format}: at least {n} bytes, decoded to {decoded}"
            );
        }
    }
});
