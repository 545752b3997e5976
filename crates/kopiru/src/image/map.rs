//! The image's block map, made as it is read: which 4 KiB blocks hold
//! anything but zeros, runs of them with their SHA-256, written as a
//! bmaptool file (version 2.0) that `kopiru flash --bmap` and
//! `bmaptool copy` take.

use sha2::Digest;

/// The map's block size (bmaptool's, and the hole granularity of a raw
/// output).
pub(super) const BLOCK: usize = 4096;

/// Whether `b` is all zeros (a fold the compiler turns into wide ORs).
pub(super) fn is_zero(b: &[u8]) -> bool {
    b.chunks(64)
        .all(|c| c.iter().fold(0u8, |acc, &x| acc | x) == 0)
}

/// The runs of non-zero [`BLOCK`]s in `data`, as byte ranges of it (the
/// last block may be shorter).
pub(super) fn data_runs(data: &[u8]) -> Vec<(usize, usize)> {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for (i, b) in data.chunks(BLOCK).enumerate() {
        if is_zero(b) {
            continue;
        }
        let (a, e) = (i * BLOCK, i * BLOCK + b.len());
        match runs.last_mut() {
            Some(last) if last.1 == a => last.1 = e,
            _ => runs.push((a, e)),
        }
    }
    runs
}

/// Runs of mapped blocks and their checksums, fed in order.
pub(super) struct MapBuilder {
    /// Finished ranges: first and last block (inclusive), SHA-256.
    ranges: Vec<(u64, u64, [u8; 32])>,
    /// The open range: its first block, one past its last, its hash so far.
    open: Option<(u64, u64, sha2::Sha256)>,
}

impl MapBuilder {
    pub(super) fn new() -> MapBuilder {
        MapBuilder {
            ranges: Vec::new(),
            open: None,
        }
    }

    /// The next image bytes, `data` at `off` (a multiple of [`BLOCK`]),
    /// with their runs of non-zero blocks (from [`data_runs`]).
    pub(super) fn feed(&mut self, off: u64, data: &[u8], runs: &[(usize, usize)]) {
        for &(a, e) in runs {
            let first = (off + a as u64) / BLOCK as u64;
            let end = (off + e as u64).div_ceil(BLOCK as u64);
            match &mut self.open {
                Some((_, stop, h)) if *stop == first => {
                    h.update(&data[a..e]);
                    *stop = end;
                }
                _ => {
                    self.close();
                    let mut h = sha2::Sha256::new();
                    h.update(&data[a..e]);
                    self.open = Some((first, end, h));
                }
            }
        }
    }

    fn close(&mut self) {
        if let Some((first, end, h)) = self.open.take() {
            self.ranges.push((first, end - 1, h.finalize().into()));
        }
    }

    /// Bytes in mapped blocks (the last one counted whole).
    pub(super) fn mapped_blocks(&self) -> u64 {
        self.ranges.iter().map(|&(a, b, _)| b - a + 1).sum::<u64>()
            + self.open.as_ref().map_or(0, |(a, e, _)| e - a)
    }

    /// The bmap file for an image of `size` bytes.
    pub(super) fn finish(mut self, size: u64) -> String {
        self.close();
        let blocks = size.div_ceil(BLOCK as u64);
        let mapped = self.mapped_blocks();
        let percent = if blocks == 0 {
            0.0
        } else {
            mapped as f64 * 100.0 / blocks as f64
        };
        let mut body = String::new();
        for (a, b, sum) in &self.ranges {
            let span = match a == b {
                true => a.to_string(),
                false => format!("{a}-{b}"),
            };
            body += &format!(
                "        <Range chksum=\"{}\"> {span} </Range>\n",
                crate::Sha256(*sum)
            );
        }
        let text = format!(
            "<?xml version=\"1.0\" ?>\n\
             <!-- The block map of a disk image, written by kopiru image: the\n     \
             blocks that hold anything but zeros, in ranges, each with the\n     \
             SHA-256 of its bytes. Only they need to be written to a device\n     \
             that reads as zeros elsewhere: kopiru flash and bmaptool copy\n     \
             take this file. (No two dashes in a row in here: XML forbids them\n     \
             in comments.) -->\n\n\
             <bmap version=\"2.0\">\n    \
             <!-- Image size in bytes -->\n    \
             <ImageSize> {size} </ImageSize>\n\n    \
             <!-- Size of a block in bytes -->\n    \
             <BlockSize> {BLOCK} </BlockSize>\n\n    \
             <!-- Count of blocks in the image -->\n    \
             <BlocksCount> {blocks} </BlocksCount>\n\n    \
             <!-- Count of mapped blocks: {percent:.1}% -->\n    \
             <MappedBlocksCount> {mapped} </MappedBlocksCount>\n\n    \
             <!-- Type of checksum used in this file -->\n    \
             <ChecksumType> sha256 </ChecksumType>\n\n    \
             <!-- The checksum of this file, taken with this value as 64 zeros -->\n    \
             <BmapFileChecksum> {zeros} </BmapFileChecksum>\n\n    \
             <!-- The mapped ranges of blocks (first-last, inclusive) -->\n    \
             <BlockMap>\n{body}    </BlockMap>\n</bmap>\n",
            zeros = "0".repeat(64),
        );
        let own = crate::Sha256::of(text.as_bytes()).to_string();
        text.replacen(&"0".repeat(64), &own, 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flash::Bmap;

    #[test]
    fn runs_and_zero_blocks() {
        let mut d = vec![0u8; 5 * BLOCK + 100];
        d[10] = 1;
        d[BLOCK + 5] = 2;
        d[4 * BLOCK] = 3;
        d[5 * BLOCK + 99] = 4;
        assert_eq!(
            data_runs(&d),
            vec![(0, 2 * BLOCK), (4 * BLOCK, 5 * BLOCK + 100)]
        );
        assert!(is_zero(&d[2 * BLOCK..4 * BLOCK]));
        assert!(!is_zero(&d[..BLOCK]));
    }

    /// The file parses with flash's reader, its own checksum holds, and
    /// each range's checksum covers exactly its bytes, across pieces fed
    /// separately; the last block is cut where the image ends.
    #[test]
    fn writes_what_flash_reads() {
        let size = 10 * BLOCK as u64 + 1000;
        let mut img = vec![0u8; size as usize];
        for (i, b) in img.iter_mut().enumerate() {
            let blk = i / BLOCK;
            if blk == 1 || blk == 2 || blk == 3 || blk == 7 || blk == 10 {
                *b = (i % 251) as u8 | 1;
            }
        }
        let mut m = MapBuilder::new();
        // Pieces of 2 blocks, then the rest.
        let mut off = 0usize;
        for len in [2 * BLOCK, 2 * BLOCK, 6 * BLOCK + 1000] {
            let piece = &img[off..off + len];
            m.feed(off as u64, piece, &data_runs(piece));
            off += len;
        }
        assert_eq!(m.mapped_blocks(), 5);
        let text = m.finish(size);
        let b = Bmap::parse(&text).expect("parses");
        assert_eq!(b.image_size, size);
        let sum = |a: u64, e: u64| -> [u8; 32] {
            sha2::Sha256::digest(&img[a as usize..e as usize]).into()
        };
        let k = BLOCK as u64;
        let want = vec![
            (k, 4 * k, Some(sum(k, 4 * k))),
            (7 * k, 8 * k, Some(sum(7 * k, 8 * k))),
            (10 * k, size, Some(sum(10 * k, size))),
        ];
        assert_eq!(b.ranges, want);
        assert!(text.contains("> 1-3 <") && text.contains("> 7 <"), "{text}");
        // XML comments may not hold "--" (bmaptool's parser refuses them).
        for c in text.split("<!--").skip(1) {
            let body = c.split("-->").next().unwrap_or_default();
            assert!(!body.contains("--"), "{body}");
        }
    }
}
