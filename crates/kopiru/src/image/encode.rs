//! The output: raw (all-zero blocks left as holes), or compressed on
//! several threads: zstd and xz by their C libraries' own multi-threaded
//! encoders (sys/c_libs.rs; none on other platforms yet), gzip as independent members (gz_pool.rs).
//!
//! Each reports its work done: the image bytes compressed and written,
//! not those handed over. The encoders take input well ahead of their
//! threads (xz at level 6 on two threads: 48 MiB), and a bar that counted
//! input stood still at "ETA 1s" for 12 s, then jumped (issue 26).

use crate::sys::{self, FileExt};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use super::gz_pool::GzPool;
use super::xz_out::XzOut;
use crate::Cancel;
use crate::DeviceProgress;

/// The output's format, from its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// The bytes as read; all-zero 4 KiB blocks become holes.
    Raw,
    /// zstd (`.zst`, `.zstd`).
    Zstd,
    /// xz (`.xz`).
    Xz,
    /// gzip (`.gz`).
    Gzip,
}

impl Format {
    /// By OUTPUT's extension: `.zst`/`.zstd`, `.xz`, `.gz`; anything else
    /// is raw.
    pub fn from_path(p: &Path) -> Format {
        match p.extension().and_then(|e| e.to_str()) {
            Some("zst" | "zstd") => Format::Zstd,
            Some("xz") => Format::Xz,
            Some("gz") => Format::Gzip,
            _ => Format::Raw,
        }
    }

    /// "raw", "zstd", "xz" or "gzip" (as `kopiru flash` names them).
    pub fn name(self) -> &'static str {
        match self {
            Format::Raw => "raw",
            Format::Zstd => "zstd",
            Format::Xz => "xz",
            Format::Gzip => "gzip",
        }
    }

    /// The levels the format takes (none for raw).
    pub fn levels(self) -> Option<(i32, i32)> {
        match self {
            Format::Raw => None,
            Format::Zstd => Some((1, 19)),
            Format::Xz => Some((0, 9)),
            Format::Gzip => Some((1, 9)),
        }
    }

    /// The default level, chosen by measurement (C tools on two threads,
    /// `-T2`, on the 2-core machine this was built on; docs/BENCHMARKS.md).
    /// Two samples: a 256 MiB tar of /usr/lib and /usr/share (dense
    /// files), and 256 MiB from the middle of a 1 GiB ext4 image of such
    /// files (what an image looks like: files, metadata, free space).
    /// - zstd 3 (zstd's default): tar 420 MB/s, 130.5 MB; ext4 slice 38.3
    ///   MB. Level 1 is 33 % faster for 6 % more; 9 is 4.6x slower for 5 %
    ///   (tar) to 14 % (ext4) less. zstd is the format for speed: level 3
    ///   keeps up with an NVMe drive, and `kopiru image` at 3 matches
    ///   `dd | zstd -T0 -3` (docs/BENCHMARKS.md).
    /// - xz 2: ext4 slice 35.0 MB in 7.2 s (36 MB/s), 9 % smaller than
    ///   zstd 3. Level 0 is faster (3.9 s) but 42 % larger than level 1,
    ///   and larger than zstd 3 on both samples; level 1 is zstd 3's size
    ///   (39.5 MB, 5.0 s), so .xz would buy nothing; 3 is 33.1 MB in 11 s,
    ///   6 (xz's default) 29.8 MB in 24.8 s and 260 MB of memory. Level 2
    ///   is the first that makes .xz worth choosing, and still keeps up
    ///   with an SD card being read. `--level 6` gives xz's usual trade.
    /// - gzip 6 (gzip's default): tar 30 MB/s a thread, 138.3 MB; level 1
    ///   is 54 MB/s a thread for 5 % more. Chunks are compressed in
    ///   parallel, so two threads give about 60 MB/s.
    pub fn default_level(self) -> i32 {
        match self {
            Format::Raw => 0,
            Format::Zstd => 3,
            Format::Xz => 2,
            Format::Gzip => 6,
        }
    }
}

/// Where the image's bytes go, and how much of them is done.
pub(super) struct Out<'e> {
    kind: Kind,
    events: &'e dyn DeviceProgress,
    /// Image bytes reported done to `events`.
    reported: u64,
}

enum Kind {
    /// Non-zero runs written at their offsets; holes elsewhere.
    Raw(File, u64),
    Zstd(ZstdOut),
    Xz(XzOut),
    Gzip(GzPool),
}

/// The encoder's output buffer.
const OUT_BUF: usize = 1 << 20;

/// Reports the work done to `events`, as it grows.
fn tell(events: &dyn DeviceProgress, reported: &mut u64, done: u64) {
    if done > *reported {
        events.done(done - *reported);
        *reported = done;
    }
}

impl<'e> Out<'e> {
    /// An encoder writing to `file` for an image of `size` bytes,
    /// reporting its work done to `events`.
    pub(super) fn new(
        format: Format,
        file: File,
        level: i32,
        threads: u32,
        size: u64,
        events: &'e dyn DeviceProgress,
    ) -> io::Result<Out<'e>> {
        let threads = threads.max(1);
        let w = || -> io::Result<BufWriter<File>> {
            Ok(BufWriter::with_capacity(OUT_BUF, file.try_clone()?))
        };
        let kind = match format {
            Format::Raw => Kind::Raw(file, 0),
            Format::Zstd => Kind::Zstd(ZstdOut::new(w()?, level, threads, size)?),
            Format::Xz => Kind::Xz(XzOut::new(w()?, level as u32, threads, OUT_BUF)?),
            Format::Gzip => Kind::Gzip(GzPool::new(w()?, level as u32, threads)),
        };
        Ok(Out {
            kind,
            events,
            reported: 0,
        })
    }

    /// The next image bytes, `data` at `off`, with their non-zero runs.
    /// A compressor is fed in pieces, `cancel` checked and the work done
    /// reported between them.
    pub(super) fn put(
        &mut self,
        off: u64,
        data: &[u8],
        runs: &[(usize, usize)],
        cancel: &Cancel,
    ) -> io::Result<()> {
        let (events, reported) = (self.events, &mut self.reported);
        let mut at = |done| tell(events, reported, done);
        match &mut self.kind {
            Kind::Raw(f, written) => {
                for &(a, e) in runs {
                    f.write_all_at(&data[a..e], off + a as u64)?;
                }
                *written += data.len() as u64;
                at(*written);
                Ok(())
            }
            Kind::Zstd(z) => z.write_all(data, cancel, &mut at),
            Kind::Xz(x) => x.write_all(data, cancel, &mut at),
            Kind::Gzip(p) => {
                p.put(data)?;
                at(p.done_in());
                Ok(())
            }
        }
    }

    /// Ends the stream (a raw output gets its full length, the holes at
    /// its end included), reporting the work done as it completes.
    pub(super) fn finish(self, size: u64, cancel: &Cancel) -> io::Result<()> {
        let (events, mut reported) = (self.events, self.reported);
        let mut at = |done| tell(events, &mut reported, done);
        match self.kind {
            Kind::Raw(f, _) => f.set_len(size)?,
            Kind::Zstd(z) => z.finish(cancel, &mut at)?,
            Kind::Xz(x) => x.finish(cancel, &mut at)?,
            Kind::Gzip(p) => p.finish(&mut at)?,
        }
        // The stream is complete: all of the image is done.
        at(size);
        Ok(())
    }
}

/// Bytes handed to zstd at a time, between checks of the cancel handle.
const FEED: usize = 1 << 20;

/// zstd's multi-threaded encoder (sys::ZstdEncoder): its frame
/// progression says how much input its workers have compressed.
struct ZstdOut {
    enc: sys::ZstdEncoder,
    out: BufWriter<File>,
    buf: Vec<u8>,
}

impl ZstdOut {
    fn new(out: BufWriter<File>, level: i32, threads: u32, size: u64) -> io::Result<ZstdOut> {
        // Workers even for one thread: compression then overlaps reading
        // and hashing, on another core. The frame records the image's
        // size: `kopiru flash` refuses a device too small before writing,
        // and scales its bar to it.
        Ok(ZstdOut {
            enc: sys::ZstdEncoder::new(level, threads, size)?,
            out,
            buf: vec![0; OUT_BUF],
        })
    }

    /// One call: takes what zstd takes of `input`, writes what it gives.
    fn code(&mut self, input: &[u8], finish: bool) -> io::Result<sys::Coded> {
        let c = self.enc.code(input, &mut self.buf, finish)?;
        self.out.write_all(&self.buf[..c.made])?;
        Ok(c)
    }

    fn write_all(
        &mut self,
        data: &[u8],
        cancel: &Cancel,
        at: &mut dyn FnMut(u64),
    ) -> io::Result<()> {
        for piece in data.chunks(FEED) {
            let mut rest = piece;
            while !rest.is_empty() {
                cancel.check()?;
                rest = &rest[self.code(rest, false)?.taken..];
                at(self.enc.done_in());
            }
        }
        Ok(())
    }

    fn finish(mut self, cancel: &Cancel, at: &mut dyn FnMut(u64)) -> io::Result<()> {
        loop {
            cancel.check()?;
            let ended = self.code(&[], true)?.ended;
            at(self.enc.done_in());
            if ended {
                return self.out.flush();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Every report, as the running total of image bytes done.
    struct Seen(Mutex<Vec<u64>>);
    impl DeviceProgress for Seen {
        fn done(&self, n: u64) {
            let mut v = self.0.lock().unwrap();
            let total = v.last().copied().unwrap_or(0) + n;
            v.push(total);
        }
    }

    /// Text-like bytes: compressible, but work for the encoder.
    fn words(len: usize) -> Vec<u8> {
        let dict: Vec<&[u8]> = "copy file tree durable flush rename image device block \
                                the of and to kopiru zstd xz gzip 0 1 42 1024\n"
            .split(' ')
            .map(str::as_bytes)
            .collect();
        let (mut out, mut x) = (Vec::with_capacity(len + 16), 0x2545_f491_4f6c_dd1du64);
        while out.len() < len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            out.extend_from_slice(dict[(x % dict.len() as u64) as usize]);
            out.push(b' ');
        }
        out.truncate(len);
        out
    }

    /// Issue 26: the bar stood at "48 MiB, ETA 1s" for 12 s, counting
    /// bytes the xz threads had taken, not compressed. Once all input is
    /// handed over, the work still in the encoders is not reported done;
    /// it is reported as `finish` completes it, and then all of it.
    #[test]
    fn reports_work_done_not_input_taken() {
        let size = (20 << 20) + 12_345;
        let data = words(size);
        for (format, level) in [(Format::Xz, 2), (Format::Zstd, 3), (Format::Gzip, 6)] {
            let path = std::env::temp_dir().join(format!(
                "kopiru-encode-{}-{}",
                format.name(),
                std::process::id()
            ));
            let file = File::create(&path).unwrap();
            let seen = Seen(Mutex::new(Vec::new()));
            let cancel = Cancel::new();
            let mut out = match Out::new(format, file, level, 2, size as u64, &seen) {
                // No xz or zstd encoder on this platform yet.
                Err(e) if e.kind() == io::ErrorKind::Unsupported => {
                    std::fs::remove_file(&path).unwrap();
                    continue;
                }
                r => r.unwrap(),
            };
            for (i, piece) in data.chunks(1 << 20).enumerate() {
                out.put((i << 20) as u64, piece, &[(0, piece.len())], &cancel)
                    .unwrap();
            }
            let before_finish = seen.0.lock().unwrap().last().copied().unwrap_or(0);
            out.finish(size as u64, &cancel).unwrap();
            let v = seen.0.into_inner().unwrap();
            let name = format.name();
            assert!(
                before_finish < size as u64,
                "{name}: all {size} bytes reported done before the encoder finished"
            );
            assert_eq!(
                v.last().copied(),
                Some(size as u64),
                "{name}: not all reported"
            );
            assert!(
                v.windows(2).all(|w| w[0] < w[1]),
                "{name}: reports not increasing"
            );
            let written = std::fs::metadata(&path).unwrap().len();
            assert!(
                written > 0 && written < size as u64 / 2,
                "{name}: {written} bytes written"
            );
            std::fs::remove_file(&path).unwrap();
        }
    }
}
