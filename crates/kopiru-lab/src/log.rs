//! The dm-log-writes log format, as documented in the kernel's
//! `Documentation/admin-guide/device-mapper/log-writes.rst`.
//!
//! The log device starts with a super block (magic, version, entry count,
//! sector size), in the first `sectorsize` block. Each entry then takes one
//! `sectorsize` block for its header (sector, sector count, flags, data
//! length, all little-endian u64), followed by its data. Sector numbers and
//! counts in entries are in 512-byte units. A mark entry carries its name
//! inline, in the header block after the header. A discard carries no data.
//! An entry with `data_len` set that is not a mark carries `data_len` bytes of
//! inline data in the following blocks (metadata/DAX); otherwise a write
//! carries `nr_sectors * 512` bytes.

use std::io;
use std::os::unix::fs::FileExt;

pub const MAGIC: u64 = 0x006a_7366_7773_6872;
pub const VERSION: u64 = 1;
pub const FLUSH: u64 = 1 << 0;
pub const FUA: u64 = 1 << 1;
pub const DISCARD: u64 = 1 << 2;
pub const MARK: u64 = 1 << 3;
pub const METADATA: u64 = 1 << 4;

const HEADER_LEN: usize = 32;

/// The log's super block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Super {
    pub nr_entries: u64,
    pub sectorsize: u64,
}

/// One entry's header and where its payload lies in the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub index: u64,
    /// Byte offset of the header block in the log.
    pub offset: u64,
    /// Target sector, in 512-byte units.
    pub sector: u64,
    /// Number of 512-byte sectors written (or discarded).
    pub nr_sectors: u64,
    pub flags: u64,
    /// Byte offset of the data in the log, and its length (0: none).
    pub data_offset: u64,
    pub data_len: u64,
    /// The mark's name, for a mark entry.
    pub mark: Option<String>,
}

impl Entry {
    pub fn is_flush_point(&self) -> bool {
        self.flags & (FLUSH | FUA) != 0
    }

    pub fn kind(&self) -> String {
        let mut parts = Vec::new();
        for (bit, name) in [
            (FLUSH, "flush"),
            (FUA, "fua"),
            (DISCARD, "discard"),
            (MARK, "mark"),
            (METADATA, "metadata"),
        ] {
            if self.flags & bit != 0 {
                parts.push(name);
            }
        }
        if parts.is_empty() {
            "write".to_string()
        } else {
            parts.join("+")
        }
    }
}

fn le64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

fn bad(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// Reads the super block.
pub fn read_super(log: &impl FileExt) -> io::Result<Super> {
    let mut b = [0u8; 28];
    log.read_exact_at(&mut b, 0)?;
    let magic = le64(&b, 0);
    if magic != MAGIC {
        return Err(bad(format!("not a log-writes log: magic {magic:#x}")));
    }
    let version = le64(&b, 8);
    if version != VERSION {
        return Err(bad(format!("log version {version}, expected {VERSION}")));
    }
    let nr_entries = le64(&b, 16);
    let sectorsize = u64::from(u32::from_le_bytes([b[24], b[25], b[26], b[27]]));
    if sectorsize < 512 || !sectorsize.is_power_of_two() {
        return Err(bad(format!("bad sector size {sectorsize}")));
    }
    Ok(Super {
        nr_entries,
        sectorsize,
    })
}

/// Iterates the entries' headers in order, without reading their data.
pub struct Entries<'a, F: FileExt> {
    log: &'a F,
    sup: Super,
    next: u64,
    offset: u64,
}

impl<'a, F: FileExt> Entries<'a, F> {
    pub fn new(log: &'a F) -> io::Result<Self> {
        let sup = read_super(log)?;
        Ok(Entries {
            log,
            sup,
            next: 0,
            offset: sup.sectorsize,
        })
    }

    pub fn sup(&self) -> Super {
        self.sup
    }

    fn read_one(&mut self) -> io::Result<Entry> {
        let ss = self.sup.sectorsize;
        let mut block = vec![0u8; ss as usize];
        self.log.read_exact_at(&mut block, self.offset)?;
        let sector = le64(&block, 0);
        let nr_sectors = le64(&block, 8);
        let flags = le64(&block, 16);
        let inline_len = le64(&block, 24);
        let mut e = Entry {
            index: self.next,
            offset: self.offset,
            sector,
            nr_sectors,
            flags,
            data_offset: self.offset + ss,
            data_len: 0,
            mark: None,
        };
        let mut next = self.offset + ss;
        if flags & MARK != 0 {
            let end = HEADER_LEN + inline_len as usize;
            if end > block.len() {
                return Err(bad(format!("entry {}: mark too long", self.next)));
            }
            let name = &block[HEADER_LEN..end];
            let name = name.split(|&c| c == 0).next().unwrap_or(&[]);
            e.mark = Some(String::from_utf8_lossy(name).into_owned());
        } else if inline_len != 0 {
            e.data_len = inline_len;
            next += inline_len.div_ceil(ss) * ss;
        } else if flags & DISCARD == 0 {
            e.data_len = nr_sectors * 512;
            next += e.data_len.div_ceil(ss) * ss;
        }
        self.offset = next;
        self.next += 1;
        Ok(e)
    }
}

impl<F: FileExt> Iterator for Entries<'_, F> {
    type Item = io::Result<Entry>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.sup.nr_entries {
            return None;
        }
        let r = self.read_one();
        if r.is_err() {
            self.next = self.sup.nr_entries;
        }
        Some(r)
    }
}

/// Applies one entry to `dev`: writes its data at its sector, zeroes a
/// discarded range (a discarded range may read back as zeros; zeros are the
/// harsher choice for a checker), and does nothing for flushes and marks.
pub fn apply(log: &impl FileExt, dev: &impl FileExt, e: &Entry) -> io::Result<()> {
    const CHUNK: u64 = 1 << 20;
    let at = e.sector * 512;
    if e.flags & MARK != 0 {
        return Ok(());
    }
    if e.flags & DISCARD != 0 {
        let zeros = vec![0u8; CHUNK as usize];
        let len = e.nr_sectors * 512;
        let mut done = 0;
        while done < len {
            let n = (len - done).min(CHUNK);
            dev.write_all_at(&zeros[..n as usize], at + done)?;
            done += n;
        }
        return Ok(());
    }
    let mut buf = vec![0u8; e.data_len.min(CHUNK) as usize];
    let mut done = 0;
    while done < e.data_len {
        let n = (e.data_len - done).min(CHUNK) as usize;
        log.read_exact_at(&mut buf[..n], e.data_offset + done)?;
        dev.write_all_at(&buf[..n], at + done)?;
        done += n as u64;
    }
    Ok(())
}
