//! Block maps (`kopiru flash --bmap`): bmaptool's XML, from a file or a URL.
//! Each input is parsed as it is, and again sealed with its own checksum
//! (which the fuzzer cannot compute) so that the ranges are reached. A map
//! that parses has ascending ranges inside the image; its ranges then drive
//! the flash's checksum check and its choice of the pieces to write.
#![no_main]

use kopiru::fuzzing as k;
use libfuzzer_sys::fuzz_target;
use sha2::Digest;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    check(text);
    if let Some(sealed) = seal(text) {
        check(&sealed);
    }
});

/// `text` with the content of its first `<BmapFileChecksum>` replaced by
/// the file's own checksum, as bmaptool writes it.
fn seal(text: &str) -> Option<String> {
    const OPEN: &str = "<BmapFileChecksum>";
    let i = text.find(OPEN)? + OPEN.len();
    let j = text[i..].find("</BmapFileChecksum>")? + i;
    let zeroed = format!("{}{}{}", &text[..i], "0".repeat(64), &text[j..]);
    let sum: String = sha2::Sha256::digest(zeroed.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Some(format!("{}{sum}{}", &text[..i], &text[j..]))
}

fn check(text: &str) {
    let map = match k::bmap(text) {
        Ok(map) => map,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    let mut prev_end = 0;
    for &(a, b, _) in &map.ranges {
        assert!(
            prev_end <= a && a < b && b <= map.image_size,
            "{:?}",
            map.ranges
        );
        prev_end = b;
    }
    // The image's first 256 KiB, a pattern (no all-zero blocks), in at
    // most 256 pieces of a size the input chooses, as the flash reads it.
    let len = map.image_size.min(256 << 10) as usize;
    let image: Vec<u8> = (0..len).map(|i| (i % 251) as u8 | 1).collect();
    let piece = [7, 512, 4097, 65536, 256 << 10][text.len() % 5].max(len / 256);
    let pieces: Vec<(u64, &[u8])> = image
        .chunks(piece)
        .enumerate()
        .map(|(i, d)| ((i * piece) as u64, d))
        .collect();
    match k::bmap_range_sums(&map.ranges, &pieces) {
        Ok(()) => {}
        Err(k::BmapError::RangeChecksum { start, end }) => assert!(
            map.ranges
                .iter()
                .any(|&(a, b, sum)| (a, b) == (start, end) && sum.is_some()),
            "a mismatch of a range the map has not: {start}-{end}"
        ),
        Err(e) => panic!("checking ranges: {e}"),
    }
    let spans: Vec<(u64, u64)> = map.ranges.iter().map(|&(a, b, _)| (a, b)).collect();
    for align in [512u64, 4096] {
        for &(off, d) in &pieces {
            let end = off + d.len() as u64;
            let got = k::bmap_pieces(&spans, align, false, off, d);
            let mut at = off;
            for &(o, n) in &got {
                let e = o + n as u64;
                assert!(
                    at <= o && o < e && e <= end,
                    "piece {o}+{n} of {off}+{}",
                    d.len()
                );
                // Widened to the sector, never more: each byte is in a
                // sector that a range touches.
                for s in [o, e - 1] {
                    let sector = s / align * align;
                    assert!(
                        spans.iter().any(|&(a, b)| a < sector + align && sector < b),
                        "byte {s} in no mapped sector"
                    );
                }
                at = e;
            }
            // Every mapped byte is written.
            for &(a, b) in &spans {
                let (x, y) = (a.max(off), b.min(end));
                if x < y {
                    assert!(
                        got.iter().any(|&(o, n)| o <= x && y <= o + n as u64),
                        "mapped {x}-{y} not written"
                    );
                }
            }
            // Leaving out zero blocks only leaves out.
            let fewer = k::bmap_pieces(&spans, align, true, off, d);
            let total = |p: &[(u64, usize)]| p.iter().map(|&(_, n)| n).sum::<usize>();
            assert!(total(&fewer) <= total(&got));
        }
    }
}
