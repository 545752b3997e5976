//! Partition tables (`kopiru image --partitions-only`): an MBR's four
//! entries or a GPT, read from the device being imaged, whose bytes may be
//! anything. No read is larger than a GPT's largest table, and the last
//! partition found is one of the table's entries, ending on a sector.
#![no_main]

use kopiru::fuzzing as k;
use libfuzzer_sys::fuzz_target;
use std::io;

/// 4096 entries of 4096 bytes: the most the reader allows.
const MAX_READ: usize = 16 << 20;

fuzz_target!(|data: &[u8]| {
    let Some((&choice, disk)) = data.split_first() else {
        return;
    };
    let sector: u64 = if choice & 1 == 1 { 4096 } else { 512 };
    let mut read_at = |off: u64, buf: &mut [u8]| -> io::Result<()> {
        assert!(buf.len() <= MAX_READ, "a read of {} bytes", buf.len());
        let eof = || io::Error::from(io::ErrorKind::UnexpectedEof);
        let off = usize::try_from(off).map_err(|_| eof())?;
        let end = off.checked_add(buf.len()).ok_or_else(eof)?;
        buf.copy_from_slice(disk.get(off..end).ok_or_else(eof)?);
        Ok(())
    };
    match k::last_partition(&mut read_at, sector) {
        Ok(Some((number, end, table))) => {
            match table {
                "MBR" => assert!((1..=4).contains(&number)),
                "GPT" => assert!((1..=4096).contains(&number)),
                other => panic!("table {other:?}"),
            }
            assert!(
                end > 0 && end % sector == 0,
                "{table} {number} ends at {end}"
            );
        }
        Ok(None) => {}
        Err(e) => assert!(!e.to_string().is_empty()),
    }
});
