//! The image's size once decoded, where the format records it, so that a
//! device too small is refused before writing and progress is shown
//! against the bytes written: a raw file's length, the sum of an xz file's
//! indexes (read from its end), the Frame_Content_Size of every zstd frame.
//! Gzip's trailer keeps the size modulo 4 GiB (of the last member only),
//! which is still a size the image has at least; bzip2 keeps none.

use super::Format;
use crate::sys::FileExt;
use std::fs::File;

/// What an image's format says of its size once decoded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct DecodedSize {
    /// The size, where the format records it.
    pub exact: Option<u64>,
    /// Else a size it has at least, where known.
    pub at_least: Option<u64>,
}

impl DecodedSize {
    fn exact(n: Option<u64>) -> Self {
        DecodedSize {
            exact: n,
            at_least: None,
        }
    }

    fn at_least(n: Option<u64>) -> Self {
        DecodedSize {
            exact: None,
            at_least: n,
        }
    }
}

/// Reads `n` bytes at an offset of the image file (`None`: not had).
pub(crate) type ReadAt<'a> = &'a dyn Fn(u64, usize) -> Option<Vec<u8>>;

/// A format's decoded-size reader (the codec table's `size`): from a file
/// of `len` bytes read by `at`; `walk`: whether the file may be walked
/// piece by piece (one read each: not over HTTP, where each is a request).
pub(crate) type SizeReader = fn(at: ReadAt, len: u64, walk: bool) -> DecodedSize;

/// The decoded size of the image file `f` of `len` bytes in `format`. The
/// decoder still checks the image: a damaged index only loses the size.
pub(crate) fn decoded(f: &File, len: u64, format: Format) -> DecodedSize {
    decoded_by(&|off, n| read_at(f, off, n), len, format, true)
}

/// The same from a file of `len` bytes read by `at(offset, n)`; `walk`:
/// whether a zstd file may be walked frame by frame and block by block
/// (one read each: not over HTTP, where each is a request).
pub(crate) fn decoded_by(at: ReadAt, len: u64, format: Format, walk: bool) -> DecodedSize {
    (format.codec().size)(at, len, walk)
}

/// Raw: the file's length.
pub(super) fn raw(_: ReadAt, len: u64, _: bool) -> DecodedSize {
    DecodedSize::exact(Some(len))
}

/// A format that records no size (bzip2).
pub(super) fn unrecorded(_: ReadAt, _: u64, _: bool) -> DecodedSize {
    DecodedSize::default()
}

/// xz: the sum of its indexes.
pub(super) fn xz(at: ReadAt, len: u64, _: bool) -> DecodedSize {
    DecodedSize::exact(xz_size(at, len))
}

/// zstd: every frame's recorded size; over HTTP (no walk), the first
/// frame's, which the image has at least (zstd writes one frame for a
/// file, so this is all of it).
pub(super) fn zstd(at: ReadAt, len: u64, walk: bool) -> DecodedSize {
    match walk {
        true => DecodedSize::exact(zstd_size(at, len)),
        false => DecodedSize::at_least(zstd_first_frame(at, len)),
    }
}

/// gzip: ISIZE, the last member's size modulo 2^32, so the whole image
/// has at least that many bytes.
pub(super) fn gzip(at: ReadAt, len: u64, _: bool) -> DecodedSize {
    DecodedSize::at_least(
        len.checked_sub(4)
            .and_then(|off| at(off, 4))
            .map(|b| u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))),
    )
}

/// `n` bytes at `off`.
fn read_at(f: &File, off: u64, n: usize) -> Option<Vec<u8>> {
    let mut v = vec![0u8; n];
    f.read_exact_at(&mut v, off).ok()?;
    Some(v)
}

/// xz's multibyte integer at `*i`, advancing it.
fn varint(b: &[u8], i: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for k in 0..9 {
        let byte = *b.get(*i)?;
        *i += 1;
        v |= u64::from(byte & 0x7F) << (7 * k);
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// The most xz stream padding read between two streams: the format pads
/// to a multiple of 4 bytes (or to a tape's block); a file that ends in
/// more zeros (a preallocated download cut short) has no size to read,
/// and was read 4 bytes a call to its start.
const MAX_PADDING: u64 = 64 << 10;

/// The largest xz index read: 8 bytes or so a block, so some millions of
/// blocks (`xz -T0` makes blocks of 3 MiB and more).
const MAX_INDEX: u64 = 64 << 20;

/// The sum of the uncompressed sizes in the indexes of every stream of an
/// xz file of `len` bytes, read from the end: stream padding, the footer
/// (which gives the index's size), the index (each block's unpadded and
/// uncompressed size), and so back to the stream's header.
fn xz_size(at: ReadAt, len: u64) -> Option<u64> {
    const HEADER_MAGIC: [u8; 6] = [0xFD, b'7', b'z', b'X', b'Z', 0];
    let mut pos = len;
    let mut total = 0u64;
    let mut padding = 0;
    while pos > 0 {
        // Stream padding: null bytes, in fours.
        if pos >= 4 && at(pos - 4, 4)? == [0; 4] {
            pos -= 4;
            padding += 4;
            if padding > MAX_PADDING {
                return None;
            }
            continue;
        }
        padding = 0;
        let footer = at(pos.checked_sub(12)?, 12)?;
        if footer[10..] != *b"YZ" {
            return None;
        }
        let backward = u32::from_le_bytes(footer[4..8].try_into().ok()?);
        let index_size = (u64::from(backward) + 1) * 4;
        // The footer may say up to 16 GiB, and the index is read whole
        // (over HTTP, into a buffer of that size, from a length the server
        // claims): past MAX_INDEX the size is left unknown.
        if index_size > MAX_INDEX {
            return None;
        }
        let index_at = pos.checked_sub(12 + index_size)?;
        let index = at(index_at, usize::try_from(index_size).ok()?)?;
        if index[0] != 0 {
            return None;
        }
        let mut i = 1;
        let records = varint(&index, &mut i)?;
        let mut blocks = 0u64;
        for _ in 0..records {
            let unpadded = varint(&index, &mut i)?;
            let uncompressed = varint(&index, &mut i)?;
            blocks = blocks.checked_add(unpadded.checked_add(3)? / 4 * 4)?;
            total = total.checked_add(uncompressed)?;
        }
        let start = index_at.checked_sub(blocks)?.checked_sub(12)?;
        if at(start, 6)? != HEADER_MAGIC {
            return None;
        }
        pos = start;
    }
    Some(total)
}

/// The sum of the Frame_Content_Size of every frame of a zstd file of
/// `len` bytes (skippable frames skipped), walking the frames by their
/// block headers; `None` if a frame does not record its size.
fn zstd_size(at: ReadAt, len: u64) -> Option<u64> {
    let mut pos = 0u64;
    let mut total = 0u64;
    while pos < len {
        let magic = u32::from_le_bytes(at(pos, 4)?.try_into().ok()?);
        if magic & 0xFFFF_FFF0 == 0x184D_2A50 {
            let size = u32::from_le_bytes(at(pos + 4, 4)?.try_into().ok()?);
            pos += 8 + u64::from(size);
            continue;
        }
        if magic != 0xFD2F_B528 {
            return None;
        }
        let (content, header) = zstd_frame_header(&at(pos + 4, 14.min(len - pos - 4) as usize)?)?;
        total = total.checked_add(content?)?;
        let checksum = at(pos + 4, 1)?[0] & 0x04 != 0;
        pos += 4 + header;
        // The blocks: a 3-byte header each, then its bytes (one for RLE).
        loop {
            let h = at(pos, 3)?;
            let h = u32::from(h[0]) | u32::from(h[1]) << 8 | u32::from(h[2]) << 16;
            let (last, kind, size) = (h & 1 == 1, (h >> 1) & 3, u64::from(h >> 3));
            // An empty raw block that is not the last: zstd writes none,
            // but zeros read so (a preallocated download cut short), and
            // the walk went on 3 bytes a call to the file's end.
            if kind == 0 && size == 0 && !last {
                return None;
            }
            pos += 3 + match kind {
                1 => 1,
                3 => return None,
                _ => size,
            };
            if last {
                break;
            }
        }
        if checksum {
            pos += 4;
        }
    }
    (pos == len).then_some(total)
}

/// The Frame_Content_Size of a zstd file's first frame, when it starts
/// the file and records it.
fn zstd_first_frame(at: ReadAt, len: u64) -> Option<u64> {
    let magic = u32::from_le_bytes(at(0, 4)?.try_into().ok()?);
    if magic != 0xFD2F_B528 {
        return None;
    }
    zstd_frame_header(&at(4, 14.min(len.checked_sub(4)?) as usize)?)?.0
}

/// A zstd frame header (after the magic): its content size, if recorded,
/// and its length.
fn zstd_frame_header(h: &[u8]) -> Option<(Option<u64>, u64)> {
    let fhd = *h.first()?;
    let single = fhd & 0x20 != 0;
    let dict = [0usize, 1, 2, 4][usize::from(fhd & 3)];
    let fcs = match fhd >> 6 {
        0 if single => 1,
        0 => 0,
        1 => 2,
        2 => 4,
        _ => 8,
    };
    let at = 1 + usize::from(!single) + dict;
    let field = h.get(at..at + fcs)?;
    let mut v = 0u64;
    for (i, b) in field.iter().enumerate() {
        v |= u64::from(*b) << (8 * i);
    }
    let content = match fcs {
        0 => None,
        2 => Some(v + 256),
        _ => Some(v),
    };
    Some((content, (at + fcs) as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The decoded size and lower bound of `bytes` as an image file.
    fn sizes(name: &str, bytes: &[u8]) -> (Option<u64>, Option<u64>) {
        let p = std::env::temp_dir().join(format!("kopiru-size-{name}-{}", std::process::id()));
        std::fs::write(&p, bytes).expect("write");
        let format = Format::of_magic(bytes).unwrap_or(Format::Raw);
        let f = File::open(&p).expect("open");
        let s = decoded(&f, bytes.len() as u64, format);
        let _ = std::fs::remove_file(p);
        (s.exact, s.at_least)
    }

    fn uncompressed_size(name: &str, bytes: &[u8]) -> Option<u64> {
        sizes(name, bytes).0
    }

    #[test]
    fn raw_and_gzip() {
        assert_eq!(sizes("raw", &[7u8; 1000]), (Some(1000), None));
        // gzip: no size, but at least its trailer's.
        let mut gz = vec![0x1F, 0x8B, 8, 0, 0, 0, 0, 0];
        gz.extend_from_slice(&[0, 0, 0, 0, 0x10, 0x27, 0, 0]);
        assert_eq!(sizes("gz", &gz), (None, Some(10_000)));
    }

    #[test]
    fn xz_from_its_index() {
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 7) as u8).collect();
        let mut one = Vec::new();
        lzma_rs::xz_compress(&mut &data[..], &mut one).expect("xz");
        // Two streams, with stream padding between and after.
        let mut two = one.clone();
        two.extend_from_slice(&[0; 8]);
        two.extend_from_slice(&one);
        two.extend_from_slice(&[0; 4]);
        assert_eq!(uncompressed_size("xz", &two), Some(2 * data.len() as u64));
        // Damaged: no size, rather than a wrong one.
        assert_eq!(uncompressed_size("xz-cut", &one[..one.len() - 5]), None);
    }

    /// Found by fuzz/fuzz_targets/decoded_size.rs: a footer that says an
    /// index of 16 GiB was read whole, over HTTP into a buffer of that
    /// size, in a file whose length the server claims.
    #[test]
    fn xz_index_size_is_bounded() {
        let mut xz = Vec::new();
        lzma_rs::xz_compress(&mut &[7u8; 1000][..], &mut xz).expect("xz");
        let n = xz.len();
        // The footer: CRC32, backward size, stream flags, "YZ".
        xz[n - 8..n - 4].copy_from_slice(&u32::MAX.to_le_bytes());
        // The file's tail as a server gives it: 32 GiB claimed before it.
        let before = 32u64 << 30;
        let most = std::cell::Cell::new(0);
        let at = |off: u64, k: usize| {
            most.set(most.get().max(k));
            let from = usize::try_from(off.checked_sub(before)?).ok()?;
            xz.get(from..from + k).map(<[u8]>::to_vec)
        };
        let got = decoded_by(&at, before + n as u64, Format::Xz, false);
        assert_eq!(got, DecodedSize::default());
        assert!(
            most.get() <= MAX_INDEX as usize,
            "read {} bytes",
            most.get()
        );
    }

    /// Found writing fuzz/fuzz_targets/decoded_size.rs: a file that ends in zeros
    /// (a download preallocated and cut short) was read 4 bytes (xz) or 3
    /// bytes (zstd) a call to its end: 38 s for 64 MiB of zeros after an
    /// xz stream, 12 s for 16 MiB after a zstd block.
    #[test]
    fn zeros_at_the_end_are_not_read_word_by_word() {
        let mut xz = Vec::new();
        lzma_rs::xz_compress(&mut &[7u8; 1000][..], &mut xz).expect("xz");
        let mut zst = zstd_frame(&[5u8; 2500], true);
        zst.truncate(zst.len() - 1500); // cut in its second block
        for (format, mut file) in [(Format::Xz, xz), (Format::Zstd, zst)] {
            file.resize(file.len() + (4 << 20), 0);
            let reads = std::cell::Cell::new(0);
            let at = |off: u64, n: usize| {
                reads.set(reads.get() + 1);
                let off = usize::try_from(off).ok()?;
                file.get(off..off + n).map(<[u8]>::to_vec)
            };
            let got = decoded_by(&at, file.len() as u64, format, true);
            assert_eq!(got, DecodedSize::default(), "{format}");
            assert!(reads.get() < 20_000, "{format}: {} reads", reads.get());
        }
        // Padding within the limit is still padding.
        let mut xz = Vec::new();
        lzma_rs::xz_compress(&mut &[7u8; 1000][..], &mut xz).expect("xz");
        xz.resize(xz.len() + 4096, 0);
        assert_eq!(uncompressed_size("xz-pad", &xz), Some(1000));
    }

    /// A zstd frame of raw blocks (`fcs`: whether the header records the
    /// content size), with a content checksum.
    fn zstd_frame(content: &[u8], fcs: bool) -> Vec<u8> {
        let mut v = vec![0x28, 0xB5, 0x2F, 0xFD];
        if fcs {
            // 4-byte Frame_Content_Size, a window descriptor, checksum.
            v.extend_from_slice(&[0x80 | 0x04, 0x50]);
            v.extend_from_slice(&(content.len() as u32).to_le_bytes());
        } else {
            v.extend_from_slice(&[0x04, 0x50]);
        }
        let blocks: Vec<&[u8]> = content.chunks(1000).collect();
        for (i, b) in blocks.iter().enumerate() {
            let last = u32::from(i + 1 == blocks.len());
            let h = last | (b.len() as u32) << 3;
            v.extend_from_slice(&h.to_le_bytes()[..3]);
            v.extend_from_slice(b);
        }
        v.extend_from_slice(&[1, 2, 3, 4]);
        v
    }

    #[test]
    fn zstd_from_frame_headers() {
        let mut two = zstd_frame(&[5u8; 2500], true);
        // A skippable frame between.
        two.extend_from_slice(&[0x5A, 0x2A, 0x4D, 0x18, 3, 0, 0, 0, 9, 9, 9]);
        two.extend_from_slice(&zstd_frame(&[6u8; 700], true));
        assert_eq!(uncompressed_size("zst", &two), Some(3200));
        let mut unknown = zstd_frame(&[5u8; 2500], true);
        unknown.extend_from_slice(&zstd_frame(&[6u8; 700], false));
        assert_eq!(uncompressed_size("zst-unknown", &unknown), None);
    }

    /// Over HTTP (no walk): no size, but at least the first frame's.
    #[test]
    fn zstd_first_frame_without_walking() {
        let mut two = zstd_frame(&[5u8; 2500], true);
        two.extend_from_slice(&zstd_frame(&[6u8; 700], true));
        let at = |off: u64, n: usize| two.get(off as usize..off as usize + n).map(<[u8]>::to_vec);
        let len = two.len() as u64;
        assert_eq!(
            decoded_by(&at, len, Format::Zstd, false),
            DecodedSize::at_least(Some(2500))
        );
        let none = zstd_frame(&[5u8; 2500], false);
        let at = |off: u64, n: usize| none.get(off as usize..off as usize + n).map(<[u8]>::to_vec);
        let len = none.len() as u64;
        assert_eq!(
            decoded_by(&at, len, Format::Zstd, false),
            DecodedSize::default()
        );
    }
}
