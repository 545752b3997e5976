//! What to write: of each stretch of image bytes, the pieces that go to
//! the devices (everything, or a block map's ranges widened to the sector
//! size, less the all-zero blocks when the devices read as zeros already).
//! The writer writes exactly these, and the read-back checks exactly these.

use super::VERIFY_BLOCK;

/// Which parts of the image are written.
#[derive(Clone, Debug, Default)]
pub(crate) struct Layout {
    /// A block map's ranges [start, end), ascending (`None`: all of it).
    pub ranges: Option<Vec<(u64, u64)>>,
    /// The largest sector size of the devices: mapped ranges are widened
    /// to it.
    pub align: u64,
    /// The devices read as zeros: all-zero 64 KiB blocks are left out.
    pub skip_zeros: bool,
}

impl Layout {
    /// The parts of `data` (image bytes at offset `off`) to write: all of
    /// it, or with a block map only what overlaps its ranges, widened to
    /// `align` (the widening writes image bytes too, so nothing foreign
    /// lands); without the all-zero blocks when asked.
    pub fn pieces<'a>(&self, off: u64, data: &'a [u8]) -> Vec<(u64, &'a [u8])> {
        let pieces = self.mapped(off, data);
        if !self.skip_zeros {
            return pieces;
        }
        // The device reads as zeros already: leave out every 64 KiB block
        // (at 64 KiB-aligned offsets) that is all zeros.
        let mut out: Vec<(u64, &[u8])> = Vec::new();
        for (o, d) in pieces {
            let mut i = 0usize;
            while i < d.len() {
                let at = o + i as u64;
                let n =
                    ((VERIFY_BLOCK as u64 - at % VERIFY_BLOCK as u64) as usize).min(d.len() - i);
                let block = &d[i..i + n];
                if block.iter().any(|&b| b != 0) {
                    match out.last_mut() {
                        Some((lo, ld)) if *lo + ld.len() as u64 == at && *lo >= o => {
                            let start = (*lo - o) as usize;
                            *ld = &d[start..i + n];
                        }
                        _ => out.push((at, block)),
                    }
                }
                i += n;
            }
        }
        out
    }

    /// [`Layout::pieces`] before zero skipping: everything, or what the
    /// block map lists.
    fn mapped<'a>(&self, off: u64, data: &'a [u8]) -> Vec<(u64, &'a [u8])> {
        let end = off + data.len() as u64;
        let align = self.align;
        let Some(ranges) = &self.ranges else {
            return if data.is_empty() {
                vec![]
            } else {
                vec![(off, data)]
            };
        };
        let mut out: Vec<(u64, &[u8])> = Vec::new();
        let first = ranges.partition_point(|&(_, b)| b <= off);
        for &(a, b) in &ranges[first..] {
            if a >= end {
                break;
            }
            let a = (a / align * align).max(off);
            let b = b.div_ceil(align).saturating_mul(align).min(end);
            // Widened neighbours can touch: join them.
            match out.last_mut() {
                Some((o, d)) if *o + d.len() as u64 >= a => {
                    let start = (*o - off) as usize;
                    *d = &data[start..(b - off) as usize];
                }
                _ => out.push((a, &data[(a - off) as usize..(b - off) as usize])),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (offset, length) of each piece.
    fn spans(p: &[(u64, &[u8])]) -> Vec<(u64, usize)> {
        p.iter().map(|&(o, d)| (o, d.len())).collect()
    }

    fn layout(ranges: Option<Vec<(u64, u64)>>, align: u64, skip_zeros: bool) -> Layout {
        Layout {
            ranges,
            align,
            skip_zeros,
        }
    }

    #[test]
    fn everything_by_default() {
        let data = vec![0u8; 100_000];
        let l = layout(None, 512, false);
        assert_eq!(spans(&l.pieces(1 << 20, &data)), vec![(1 << 20, 100_000)]);
        assert!(l.pieces(0, &[]).is_empty());
    }

    #[test]
    fn zero_blocks_are_skipped() {
        let vb = VERIFY_BLOCK;
        // Blocks: 0 zero, 1 data, 2 data, 3 zero, 4 data (short tail).
        let mut data = vec![0u8; 4 * vb + 1000];
        data[vb + 5] = 1;
        data[3 * vb - 1] = 2;
        data[4 * vb + 999] = 3;
        let l = layout(None, 512, true);
        assert_eq!(
            spans(&l.pieces(0, &data)),
            vec![(vb as u64, 2 * vb), (4 * vb as u64, 1000)]
        );
        // Blocks are counted from the image's start, not the piece's.
        let off = (vb / 2) as u64;
        let mut data = vec![0u8; vb];
        data[0] = 7; // in the block [0, vb): its second half
        let got = spans(&l.pieces(off, &data));
        assert_eq!(got, vec![(off, vb / 2)]);
        // All zeros: nothing.
        assert!(l.pieces(0, &vec![0u8; 3 * vb]).is_empty());
        // Without zero skipping, zeros are written.
        let all = layout(None, 512, false);
        assert_eq!(spans(&all.pieces(0, &vec![0u8; vb])), vec![(0, vb)]);
    }

    #[test]
    fn bmap_ranges_widened_to_sectors() {
        let data: Vec<u8> = (0..64 << 10).map(|i| (i % 253) as u8 + 1).collect();
        // Ranges in bytes, not aligned to 4096; the first three touch once
        // widened (joined), the last ends past the data.
        let l = layout(
            Some(vec![
                (100, 200),
                (5000, 6000),
                (8200, 9000),
                (20_000, 100_000),
            ]),
            4096,
            false,
        );
        let p = l.pieces(0, &data);
        assert_eq!(spans(&p), vec![(0, 3 * 4096), (16384, (64 << 10) - 16384)]);
        // The widening writes the image's own bytes.
        for (o, d) in &p {
            assert_eq!(*d, &data[*o as usize..*o as usize + d.len()]);
        }
        // A stretch starting inside a range is cut at its start.
        let p = l.pieces(8192 + 512, &data[..4096]);
        assert_eq!(spans(&p), vec![(8192 + 512, 4096 - 512)]);
        // A stretch between ranges gives nothing.
        assert!(l.pieces(12_288, &data[..4096]).is_empty());
    }

    #[test]
    fn bmap_and_zero_skipping_together() {
        let vb = VERIFY_BLOCK as u64;
        let mut data = vec![0u8; 4 * vb as usize];
        data[(2 * vb) as usize + 10] = 9;
        let l = layout(Some(vec![(0, 3 * vb), (3 * vb + 1, 3 * vb + 2)]), 512, true);
        // Only the mapped block with data is left; the zero blocks and the
        // mapped zero sector are not written.
        assert_eq!(spans(&l.pieces(0, &data)), vec![(2 * vb, vb as usize)]);
    }
}
