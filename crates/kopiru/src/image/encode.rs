//! The output: raw (all-zero blocks left as holes), or compressed on
//! several threads: zstd and xz by their C libraries' own multi-threaded
//! encoders, gzip as independent members (one per chunk, compressed on a
//! pool of threads and written in order; `gzip -d` and `kopiru flash` read
//! the members as one stream).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{mpsc, Arc, Mutex};

use crate::Cancel;

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

/// Where the image's bytes go.
pub(super) enum Out {
    /// Non-zero runs written at their offsets; holes elsewhere.
    Raw(File),
    Zstd(zstd::stream::write::Encoder<'static, BufWriter<File>>),
    Xz(XzOut),
    Gzip(GzPool),
}

/// The encoder's output buffer.
const OUT_BUF: usize = 1 << 20;

/// Most memory the xz encoder may take (liblzma's own estimate): its
/// threads are cut until it fits; one thread is used whatever it needs.
/// `xz -T2 -6` peaked at 310 MB here, so about six threads of level 6
/// fit; level 9 needs over 674 MiB a thread (xz's manual), so one; level
/// 2, the default, needs about 30 MiB a thread.
const XZ_MEMORY: u64 = 1 << 30;

impl Out {
    /// An encoder writing to `file` for an image of `size` bytes.
    pub(super) fn new(
        format: Format,
        file: File,
        level: i32,
        threads: u32,
        size: u64,
    ) -> io::Result<Out> {
        let threads = threads.max(1);
        let w = || -> io::Result<BufWriter<File>> {
            Ok(BufWriter::with_capacity(OUT_BUF, file.try_clone()?))
        };
        Ok(match format {
            Format::Raw => Out::Raw(file),
            Format::Zstd => {
                let mut e = zstd::stream::write::Encoder::new(w()?, level)?;
                e.include_checksum(true)?;
                // The frame records the image's size: `kopiru flash` shows
                // a bar scaled to it.
                e.set_pledged_src_size(Some(size))?;
                // Workers even for one thread: compression then overlaps
                // reading and hashing, on another core.
                e.multithread(threads)?;
                Out::Zstd(e)
            }
            Format::Xz => {
                // Blocks that record their sizes, so that `kopiru flash` and
                // `xz -d -T0` decode them on several threads.
                let mut b = liblzma::stream::MtStreamBuilder::new();
                b.threads(threads)
                    .preset(level as u32)
                    .check(liblzma::stream::Check::Crc64)
                    // A call that waits for a busy thread returns after
                    // this long, so that a cancel is seen within it.
                    .timeout_ms(100);
                // Fewer threads where that many would not fit the budget.
                let mut t = threads;
                while t > 1 && b.memusage() > XZ_MEMORY {
                    t -= 1;
                    b.threads(t);
                }
                let stream = b
                    .encoder()
                    .map_err(|e| io::Error::other(format!("xz: {e}")))?;
                Out::Xz(XzOut {
                    stream,
                    out: w()?,
                    buf: Vec::with_capacity(OUT_BUF),
                })
            }
            Format::Gzip => Out::Gzip(GzPool::new(w()?, level as u32, threads)),
        })
    }

    /// The next image bytes, `data` at `off`, with their non-zero runs.
    /// A compressor is fed in pieces, `cancel` checked between them.
    pub(super) fn put(
        &mut self,
        off: u64,
        data: &[u8],
        runs: &[(usize, usize)],
        cancel: &Cancel,
    ) -> io::Result<()> {
        match self {
            Out::Raw(f) => {
                for &(a, e) in runs {
                    f.write_all_at(&data[a..e], off + a as u64)?;
                }
                Ok(())
            }
            Out::Zstd(e) => data.chunks(FEED).try_for_each(|p| {
                cancel.check()?;
                e.write_all(p)
            }),
            Out::Xz(x) => x.write_all(data, cancel),
            Out::Gzip(p) => p.put(data),
        }
    }

    /// Ends the stream (a raw output gets its full length, the holes at
    /// its end included).
    pub(super) fn finish(self, size: u64) -> io::Result<()> {
        match self {
            Out::Raw(f) => f.set_len(size),
            Out::Zstd(e) => e.finish()?.flush(),
            Out::Xz(x) => x.finish(),
            Out::Gzip(p) => p.finish(),
        }
    }
}

/// Bytes handed to zstd at a time, between checks of the cancel handle.
const FEED: usize = 1 << 20;

/// The xz encoder driven directly: dropped (an error, a cancel), it stops
/// at once, where liblzma's `XzEncoder` would finish the stream first.
pub(super) struct XzOut {
    stream: liblzma::stream::Stream,
    out: BufWriter<File>,
    buf: Vec<u8>,
}

impl XzOut {
    fn code(&mut self, input: &[u8], action: liblzma::stream::Action) -> io::Result<(usize, bool)> {
        self.buf.clear();
        let before = self.stream.total_in();
        let st = self
            .stream
            .process_vec(input, &mut self.buf, action)
            .map_err(|e| io::Error::other(format!("xz: {e}")))?;
        self.out.write_all(&self.buf)?;
        let used = (self.stream.total_in() - before) as usize;
        Ok((used, st == liblzma::stream::Status::StreamEnd))
    }

    fn write_all(&mut self, mut data: &[u8], cancel: &Cancel) -> io::Result<()> {
        while !data.is_empty() {
            cancel.check()?;
            let (used, _) = self.code(data, liblzma::stream::Action::Run)?;
            data = &data[used..];
        }
        Ok(())
    }

    fn finish(mut self) -> io::Result<()> {
        while !self.code(&[], liblzma::stream::Action::Finish)?.1 {}
        self.out.flush()
    }
}

/// A chunk to compress: its sequence number and bytes.
type Job = (u64, Vec<u8>);
/// A compressed chunk: its number, the member, and the input buffer back.
type Done = (u64, io::Result<Vec<u8>>, Vec<u8>);

/// gzip on several threads: each chunk becomes a gzip member of its own,
/// compressed on a worker, written in order.
pub(super) struct GzPool {
    out: BufWriter<File>,
    jobs: Option<mpsc::SyncSender<Job>>,
    done: mpsc::Receiver<Done>,
    workers: Vec<std::thread::JoinHandle<()>>,
    /// Members finished out of order, waiting for their turn.
    waiting: BTreeMap<u64, Vec<u8>>,
    next_in: u64,
    next_out: u64,
    /// Input buffers back from the workers, reused.
    spare: Vec<Vec<u8>>,
    /// Most chunks in flight: memory stays at this many chunks and members.
    limit: u64,
}

impl GzPool {
    fn new(out: BufWriter<File>, level: u32, threads: u32) -> GzPool {
        let (jobs, rx) = mpsc::sync_channel::<Job>(threads as usize);
        let rx = Arc::new(Mutex::new(rx));
        let (done_tx, done) = mpsc::channel::<Done>();
        let workers = (0..threads)
            .map(|_| {
                let rx = Arc::clone(&rx);
                let done_tx = done_tx.clone();
                std::thread::spawn(move || loop {
                    let job = rx.lock().map(|r| r.recv());
                    let Ok(Ok((seq, input))) = job else { return };
                    let level = flate2::Compression::new(level);
                    let mut e =
                        flate2::write::GzEncoder::new(Vec::with_capacity(input.len() / 2), level);
                    let member = e.write_all(&input).and_then(|()| e.finish());
                    if done_tx.send((seq, member, input)).is_err() {
                        return;
                    }
                })
            })
            .collect();
        GzPool {
            out,
            jobs: Some(jobs),
            done,
            workers,
            waiting: BTreeMap::new(),
            next_in: 0,
            next_out: 0,
            spare: Vec::new(),
            limit: 2 * u64::from(threads),
        }
    }

    fn put(&mut self, data: &[u8]) -> io::Result<()> {
        while self.next_in - self.next_out >= self.limit {
            self.collect_one()?;
        }
        let mut input = self.spare.pop().unwrap_or_default();
        input.clear();
        input.extend_from_slice(data);
        let jobs = self.jobs.as_ref().expect("open");
        jobs.send((self.next_in, input))
            .map_err(|_| io::Error::other("gzip worker stopped"))?;
        self.next_in += 1;
        Ok(())
    }

    /// Waits for one member, then writes every member whose turn it is.
    fn collect_one(&mut self) -> io::Result<()> {
        let (seq, member, input) = self
            .done
            .recv()
            .map_err(|_| io::Error::other("gzip worker stopped"))?;
        self.spare.push(input);
        self.waiting.insert(seq, member?);
        while let Some(m) = self.waiting.remove(&self.next_out) {
            self.out.write_all(&m)?;
            self.next_out += 1;
        }
        Ok(())
    }

    fn finish(mut self) -> io::Result<()> {
        while self.next_out < self.next_in {
            self.collect_one()?;
        }
        self.jobs = None;
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
        self.out.flush()
    }
}

impl Drop for GzPool {
    /// Abandoned (an error, a cancel): the workers see the closed queue
    /// and stop.
    fn drop(&mut self) {
        self.jobs = None;
        while self.done.try_recv().is_ok() {}
    }
}
