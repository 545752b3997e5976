//! Where the last partition ends (`--partitions-only`): an MBR's four
//! entries (an extended partition covers its logical ones), or a GPT's
//! entries when the MBR is the protective one.

use std::io;

/// The partition that ends last: its number (1-based, as in `sda1`) and
/// the byte just past it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LastPartition {
    /// Its number in the table (1-based).
    pub number: u32,
    /// One past its last byte.
    pub end: u64,
    /// "GPT" or "MBR".
    pub table: &'static str,
}

/// Most GPT entries read (the usual table has 128 of 128 bytes).
const MAX_GPT_ENTRIES: u32 = 4096;

/// Reads the partition table through `read_at(offset, buf)` (fills `buf`
/// exactly), with `sector` bytes per logical block. `Ok(None)`: no MBR
/// signature, or a table with no partition in it.
pub(crate) fn last_partition(
    read_at: &mut dyn FnMut(u64, &mut [u8]) -> io::Result<()>,
    sector: u64,
) -> io::Result<Option<LastPartition>> {
    let mut mbr = [0u8; 512];
    read_at(0, &mut mbr)?;
    if mbr[510..512] != [0x55, 0xAA] {
        return Ok(None);
    }
    let entries: Vec<(u8, u64, u64)> = (0..4)
        .map(|i| {
            let e = &mbr[446 + 16 * i..446 + 16 * (i + 1)];
            let kind = e[4];
            let start = u64::from(u32::from_le_bytes(e[8..12].try_into().expect("4")));
            let count = u64::from(u32::from_le_bytes(e[12..16].try_into().expect("4")));
            (kind, start, count)
        })
        .collect();
    if entries.iter().any(|&(kind, _, _)| kind == 0xEE) {
        return gpt(read_at, sector);
    }
    let mut last: Option<LastPartition> = None;
    for (i, &(kind, start, count)) in entries.iter().enumerate() {
        if kind == 0 || count == 0 {
            continue;
        }
        let end = (start + count) * sector;
        if last.is_none_or(|l| end > l.end) {
            last = Some(LastPartition {
                number: i as u32 + 1,
                end,
                table: "MBR",
            });
        }
    }
    Ok(last)
}

/// The GPT header at LBA 1 and its entries.
fn gpt(
    read_at: &mut dyn FnMut(u64, &mut [u8]) -> io::Result<()>,
    sector: u64,
) -> io::Result<Option<LastPartition>> {
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("GPT: {what}"));
    let mut head = vec![0u8; sector as usize];
    read_at(sector, &mut head)?;
    if &head[..8] != b"EFI PART" {
        return Err(bad(&format!(
            "a protective MBR but no GPT header at byte {sector} (logical sectors of {sector} bytes)"
        )));
    }
    let u32_at = |o: usize| u32::from_le_bytes(head[o..o + 4].try_into().expect("4"));
    let entries_lba = u64::from_le_bytes(head[72..80].try_into().expect("8"));
    let (count, size) = (u32_at(80), u32_at(84));
    if !(128..=4096).contains(&size) || count > MAX_GPT_ENTRIES {
        return Err(bad(&format!("{count} entries of {size} bytes")));
    }
    let mut table = vec![0u8; (count * size) as usize];
    // Checked: the fields are the disk's bytes, and a product that wraps
    // would read (or end a partition) somewhere else.
    let entries_at = entries_lba
        .checked_mul(sector)
        .ok_or_else(|| bad(&format!("entries at LBA {entries_lba}, past any disk")))?;
    read_at(entries_at, &mut table)?;
    let mut last: Option<LastPartition> = None;
    for (i, e) in table.chunks_exact(size as usize).enumerate() {
        if e[..16].iter().all(|&b| b == 0) {
            continue; // an unused entry: no type
        }
        let last_lba = u64::from_le_bytes(e[40..48].try_into().expect("8"));
        let end = last_lba
            .checked_add(1)
            .and_then(|n| n.checked_mul(sector))
            .ok_or_else(|| {
                bad(&format!(
                    "partition {} ends at LBA {last_lba}, past any disk",
                    i + 1
                ))
            })?;
        if last.is_none_or(|l| end > l.end) {
            last = Some(LastPartition {
                number: i as u32 + 1,
                end,
                table: "GPT",
            });
        }
    }
    Ok(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(disk: &[u8]) -> impl FnMut(u64, &mut [u8]) -> io::Result<()> + '_ {
        move |off, buf| {
            let off = off as usize;
            buf.copy_from_slice(&disk[off..off + buf.len()]);
            Ok(())
        }
    }

    fn mbr_entry(disk: &mut [u8], i: usize, kind: u8, start: u32, count: u32) {
        let e = &mut disk[446 + 16 * i..446 + 16 * (i + 1)];
        e[4] = kind;
        e[8..12].copy_from_slice(&start.to_le_bytes());
        e[12..16].copy_from_slice(&count.to_le_bytes());
    }

    #[test]
    fn mbr_last_end_wins() {
        let mut disk = vec![0u8; 4096];
        disk[510] = 0x55;
        disk[511] = 0xAA;
        mbr_entry(&mut disk, 0, 0x83, 2048, 10_000);
        mbr_entry(&mut disk, 1, 0x05, 20_000, 5000); // extended: covers logicals
        mbr_entry(&mut disk, 2, 0x0c, 12_048, 100);
        let got = last_partition(&mut reader(&disk), 512).unwrap();
        assert_eq!(
            got,
            Some(LastPartition {
                number: 2,
                end: 25_000 * 512,
                table: "MBR"
            })
        );
        // No signature: no table.
        disk[510] = 0;
        assert_eq!(last_partition(&mut reader(&disk), 512).unwrap(), None);
    }

    fn gpt_disk(sector: usize, parts: &[(usize, u64, u64)]) -> Vec<u8> {
        let mut disk = vec![0u8; sector * 40];
        disk[510] = 0x55;
        disk[511] = 0xAA;
        mbr_entry(&mut disk, 0, 0xEE, 1, u32::MAX);
        let h = &mut disk[sector..2 * sector];
        h[..8].copy_from_slice(b"EFI PART");
        h[72..80].copy_from_slice(&2u64.to_le_bytes());
        h[80..84].copy_from_slice(&128u32.to_le_bytes());
        h[84..88].copy_from_slice(&128u32.to_le_bytes());
        for &(i, first, last) in parts {
            let e = &mut disk[2 * sector + 128 * i..2 * sector + 128 * (i + 1)];
            e[0] = 0xAF; // any type GUID
            e[32..40].copy_from_slice(&first.to_le_bytes());
            e[40..48].copy_from_slice(&last.to_le_bytes());
        }
        disk
    }

    #[test]
    fn gpt_in_both_sector_sizes() {
        for sector in [512usize, 4096] {
            let disk = gpt_disk(sector, &[(0, 34, 99), (3, 200, 299), (1, 100, 199)]);
            let got = last_partition(&mut reader(&disk), sector as u64).unwrap();
            assert_eq!(
                got,
                Some(LastPartition {
                    number: 4,
                    end: 300 * sector as u64,
                    table: "GPT"
                })
            );
        }
        let empty = gpt_disk(512, &[]);
        // Found by fuzz/fuzz_targets/partitions.rs: a last LBA or an
        // entries LBA whose byte offset does not fit in 64 bits wrapped
        // (a partition "ending" at byte 0, or entries read elsewhere).
        for last in [u64::MAX, 1 << 55, u64::MAX / 512] {
            let disk = gpt_disk(512, &[(0, 34, 99), (2, 100, last)]);
            let e = last_partition(&mut reader(&disk), 512).unwrap_err();
            assert!(e.to_string().contains("past any disk"), "{e}");
        }
        let mut far = gpt_disk(512, &[(0, 34, 99)]);
        far[512 + 72..512 + 80].copy_from_slice(&(1u64 << 56).to_le_bytes());
        let e = last_partition(&mut reader(&far), 512).unwrap_err();
        assert!(e.to_string().contains("past any disk"), "{e}");
        assert_eq!(last_partition(&mut reader(&empty), 512).unwrap(), None);
        // A protective MBR read with the wrong sector size finds no header.
        let disk = gpt_disk(4096, &[(0, 34, 99)]);
        let e = last_partition(&mut reader(&disk), 512).unwrap_err();
        assert!(e.to_string().contains("no GPT header"), "{e}");
    }
}
