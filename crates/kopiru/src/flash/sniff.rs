//! What an image is, told by its bytes. A compressed format is known by
//! its magic number; a raw disk image by a partition table or filesystem
//! signature near its start, or else by the name the user gave it (`.img`,
//! `.iso`, ...) or `--format raw`. A name is only a claim to check: one
//! that says a compressed format the bytes are not, bytes that read as a
//! web page or as text, and bytes of no known format under no raw name are
//! refused before anything is written. (A failed download saved under the
//! image's name is the common case: an HTML page named `.img.xz`.)

use crate::codec::Format;
use std::path::Path;

pub use crate::error::{Found, NotAnImage};

/// Bytes read from the start of an image to recognise it.
pub(crate) const SNIFF: usize = 128 << 10;

/// The image's format from its first bytes `head` (at most [`SNIFF`], all
/// of it if shorter), checked against the claim of its name (`None` for
/// standard input) or of `wanted` (`--format`; `raw` takes any bytes as
/// they are).
pub(crate) fn recognise(
    head: &[u8],
    name: Option<&Path>,
    wanted: Option<Format>,
) -> Result<Format, NotAnImage> {
    let magic = Format::of_magic(head);
    if let Some(want) = wanted {
        return match (want, magic) {
            (Format::Raw, _) => Ok(Format::Raw),
            (w, Some(m)) if w == m => Ok(m),
            (claimed, _) => Err(NotAnImage::Mismatch {
                claimed: claimed.name(),
                by_name: false,
                found: found(head),
            }),
        };
    }
    let claim = name.and_then(Format::claimed_by);
    match (claim, magic) {
        (Some(c), m) if c != Format::Raw && m != Some(c) => Err(NotAnImage::Mismatch {
            claimed: c.name(),
            by_name: true,
            found: found(head),
        }),
        // The bytes decide, whatever a raw name says.
        (_, Some(m)) => Ok(m),
        (claim, None) => match found(head) {
            Found::Unknown if claim == Some(Format::Raw) || disk_signature(head) => Ok(Format::Raw),
            other => Err(NotAnImage::Unrecognised(other)),
        },
    }
}

/// What `head` looks like, for a message.
fn found(head: &[u8]) -> Found {
    if head.is_empty() {
        return Found::Empty;
    }
    if let Some(f) = Format::of_magic(head) {
        return Found::Format(f.name());
    }
    let sample = &head[..head.len().min(4096)];
    if !is_text(sample) {
        return Found::Unknown;
    }
    let start: Vec<u8> = sample
        .strip_prefix(b"\xEF\xBB\xBF")
        .unwrap_or(sample)
        .iter()
        .skip_while(|b| b.is_ascii_whitespace())
        .map(u8::to_ascii_lowercase)
        .collect();
    let html = [
        &b"<!doctype html"[..],
        b"<html",
        b"<head",
        b"<body",
        b"<?xml",
    ]
    .iter()
    .any(|t| start.starts_with(t))
        || contains(&start, b"<html")
        || contains(&start, b"<title");
    if html {
        Found::Html
    } else {
        Found::Text
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// UTF-8 without NUL or other control bytes than whitespace: no disk
/// image starts so (their first sectors hold binary structures or zeros).
fn is_text(sample: &[u8]) -> bool {
    let valid = match std::str::from_utf8(sample) {
        Ok(_) => sample.len(),
        // A character cut at the sample's end.
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        Err(_) => return false,
    };
    sample[..valid]
        .iter()
        .all(|&b| b >= 0x20 || matches!(b, b'\n' | b'\r' | b'\t' | 0x0C))
}

/// Whether `head` starts as a disk image does: an MBR or GPT partition
/// table, an ISO 9660 or El Torito image, or a filesystem (ext2/3/4, XFS,
/// Btrfs, F2FS, squashfs, LUKS; FAT and NTFS carry the boot signature).
fn disk_signature(head: &[u8]) -> bool {
    let at = |off: usize, magic: &[u8]| head.get(off..off + magic.len()) == Some(magic);
    at(510, &[0x55, 0xAA])
        || at(512, b"EFI PART")
        || at(4096, b"EFI PART")
        || at(0x8001, b"CD001")
        || at(0x438, &[0x53, 0xEF])
        || at(0, b"XFSB")
        || at(0x10040, b"_BHRfS_M")
        || at(0x400, &[0x10, 0x20, 0xF5, 0xF2])
        || at(0, b"hsqs")
        || at(0, b"LUKS\xBA\xBE")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(head: &[u8], name: &str) -> Result<Format, NotAnImage> {
        recognise(head, Some(Path::new(name)), None)
    }

    #[test]
    fn html_under_a_compressed_name_is_refused() {
        let page = b"<!DOCTYPE html><html><body>404 Not Found</body></html>";
        for (name, claimed) in [
            ("dl.img.xz", Format::Xz),
            ("dl.img.gz", Format::Gzip),
            ("dl.img.zst", Format::Zstd),
        ] {
            assert_eq!(
                named(page, name),
                Err(NotAnImage::Mismatch {
                    claimed: claimed.name(),
                    by_name: true,
                    found: Found::Html
                })
            );
        }
        // Not even under a raw name, nor from standard input.
        assert_eq!(
            named(b"  <html>", "dl.img"),
            Err(NotAnImage::Unrecognised(Found::Html))
        );
        assert_eq!(
            recognise(b"error: not found\n", None, None),
            Err(NotAnImage::Unrecognised(Found::Text))
        );
        // Unless the user says raw.
        assert_eq!(recognise(page, None, Some(Format::Raw)), Ok(Format::Raw));
    }

    #[test]
    fn bytes_decide_the_format() {
        let xz = [0xFD, b'7', b'z', b'X', b'Z', 0, 0, 4];
        assert_eq!(named(&xz, "a.img.xz"), Ok(Format::Xz));
        // A raw name over compressed bytes: decoded.
        assert_eq!(named(&xz, "a.img"), Ok(Format::Xz));
        // Another compressed format than the name says: refused.
        assert_eq!(
            named(&xz, "a.img.gz"),
            Err(NotAnImage::Mismatch {
                claimed: "gzip",
                by_name: true,
                found: Found::Format("xz")
            })
        );
        assert!(recognise(&xz, None, Some(Format::Zstd)).is_err());
        assert_eq!(recognise(&xz, None, Some(Format::Xz)), Ok(Format::Xz));
    }

    #[test]
    fn raw_needs_a_signature_or_a_raw_name() {
        let random: Vec<u8> = (0..8192u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        assert_eq!(named(&random, "disk.img"), Ok(Format::Raw));
        assert_eq!(
            named(&random, "disk.img.xz"),
            Err(NotAnImage::Mismatch {
                claimed: "xz",
                by_name: true,
                found: Found::Unknown
            })
        );
        assert_eq!(
            recognise(&random, None, None),
            Err(NotAnImage::Unrecognised(Found::Unknown))
        );
        let mut mbr = vec![0u8; 4096];
        mbr[510] = 0x55;
        mbr[511] = 0xAA;
        assert_eq!(recognise(&mbr, None, None), Ok(Format::Raw));
        assert_eq!(named(&mbr, "download"), Ok(Format::Raw));
        assert_eq!(
            named(b"", "empty.img.xz"),
            Err(NotAnImage::Mismatch {
                claimed: "xz",
                by_name: true,
                found: Found::Empty
            })
        );
    }
}
