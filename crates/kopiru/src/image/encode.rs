//! The output: raw (all-zero blocks left as holes), or compressed by the
//! format's encoder from the codec table (crate::codec), on several
//! threads, which reports its work done: the image bytes compressed and
//! written, not those handed over (issue 26).

use crate::codec::{Encode, Format, OUT_BUF};
use crate::sys::FileExt;
use std::fs::File;
use std::io::{self, BufWriter};

use crate::Cancel;
use crate::DeviceProgress;

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
    /// A compressed stream.
    Encoded(Box<dyn Encode>),
}

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
        let kind = match &format.codec().encoder {
            None if format == Format::Raw => Kind::Raw(file, 0),
            None => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("kopiru image does not write {format}"),
                ))
            }
            Some(e) => {
                let w = BufWriter::with_capacity(OUT_BUF, file);
                Kind::Encoded((e.new)(w, level, threads, size)?)
            }
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
            Kind::Encoded(e) => e.put(data, cancel, &mut at),
        }
    }

    /// Ends the stream (a raw output gets its full length, the holes at
    /// its end included), reporting the work done as it completes.
    pub(super) fn finish(self, size: u64, cancel: &Cancel) -> io::Result<()> {
        let (events, mut reported) = (self.events, self.reported);
        let mut at = |done| tell(events, &mut reported, done);
        match self.kind {
            Kind::Raw(f, _) => f.set_len(size)?,
            Kind::Encoded(e) => e.finish(cancel, &mut at)?,
        }
        // The stream is complete: all of the image is done.
        at(size);
        Ok(())
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
