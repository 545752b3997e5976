//! The run: a reader thread fills aligned buffers from the device, hashes
//! each and maps its zero blocks; this thread hands it to the encoder.
//! Then the output is flushed, read back, and renamed into place.

use super::encode::Out;
use super::map::{data_runs, MapBuilder};
use super::{verify, ImageOptions, ImageSummary, Source};
use crate::sys::AsFd;
use crate::sys::{self, Aligned, Fd};
use crate::DeviceProgress;
use crate::{Cancel, Error, Op, Side};
use sha2::Digest;
use std::ffi::CString;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Instant;

/// Buffers passed between the reader and this thread: one being read, one
/// being hashed and encoded, one ready.
const BUFFERS: usize = 3;

/// A file being written under a temporary name beside its final one;
/// removed when dropped unless it was put in place.
struct Temp {
    /// As given: for messages.
    path: PathBuf,
    dir: Fd,
    name: CString,
    temp: CString,
    file: Option<File>,
    placed: bool,
}

impl Temp {
    /// `.NAME.kopiru-image.PID` beside `path`, created exclusively.
    fn create(path: &Path) -> io::Result<Temp> {
        let (dir, name) = sys::open_parent(path)?;
        let mut temp = b".".to_vec();
        temp.extend_from_slice(name.as_bytes());
        temp.extend_from_slice(format!(".kopiru-image.{}", std::process::id()).as_bytes());
        let temp = CString::new(temp).map_err(io::Error::other)?;
        let fd = sys::create_new(dir.as_fd(), &temp, 0o666)?;
        Ok(Temp {
            path: path.to_path_buf(),
            dir,
            name,
            temp,
            file: Some(File::from(fd)),
            placed: false,
        })
    }

    fn file(&self) -> &File {
        self.file.as_ref().expect("open")
    }

    /// Flushes the file to its device and closes it.
    fn sync(&mut self) -> io::Result<()> {
        let f = self.file.take().expect("open");
        f.sync_all()
    }

    /// Moves the file to its final name (replacing only when `replace`).
    fn place(&mut self, replace: bool) -> io::Result<()> {
        let (d, t, n) = (self.dir.as_fd(), &self.temp, &self.name);
        match replace {
            true => sys::rename_at(d, t, d, n)?,
            false => sys::rename_noreplace(d, t, d, n)?,
        }
        self.placed = true;
        Ok(())
    }

    /// Takes a placed file off its final name again.
    fn unplace(&mut self) {
        if self.placed && sys::unlink_at(self.dir.as_fd(), &self.name, false).is_ok() {
            self.placed = false;
        }
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        if !self.placed {
            let _ = sys::unlink_at(self.dir.as_fd(), &self.temp, false);
        }
    }
}

/// A chunk read (offset, buffer, bytes, its runs of non-zero blocks), or a
/// read that failed (offset).
type Read = Result<(u64, Aligned, usize, Vec<(usize, usize)>), (u64, io::Error)>;

/// What the reader works out of the bytes as it reads them, off the
/// encoder's thread: the image's SHA-256, its zero blocks, the block map.
struct Hashed {
    sha: sha2::Sha256,
    map: Option<MapBuilder>,
    /// Bytes in blocks that are not all zeros.
    mapped: u64,
}

/// Reads `src` into an image at `output` (see the module's doc). Stops
/// within a chunk once [`ImageOptions::cancel`] is set; on an error or a
/// cancel nothing is left under `output` (or the block map's name).
pub fn image(
    src: &Source,
    output: &Path,
    opts: &ImageOptions,
    events: &dyn DeviceProgress,
) -> ImageSummary {
    let start = Instant::now();
    let level = opts.level.unwrap_or(opts.format.default_level());
    let mut s = ImageSummary {
        format: opts.format,
        level: if opts.format.levels().is_some() {
            level
        } else {
            0
        },
        image_bytes: 0,
        output_bytes: 0,
        mapped_bytes: 0,
        sha256: None,
        verified: None,
        error: None,
        error_at: None,
        direct: false,
        write_time: Default::default(),
        elapsed: Default::default(),
        cancelled: false,
    };
    if let Err(e) = run(src, output, opts, level, events, &mut s) {
        s.error = Some(e);
    }
    s.cancelled = opts.cancel.is_cancelled()
        && s.error
            .as_ref()
            .is_none_or(|e| e.io_error().is_some_and(sys::is_cancelled));
    if s.cancelled {
        s.error = None;
    }
    s.elapsed = start.elapsed();
    s
}

fn run(
    src: &Source,
    output: &Path,
    opts: &ImageOptions,
    level: i32,
    events: &dyn DeviceProgress,
    s: &mut ImageSummary,
) -> Result<(), Error> {
    let start = Instant::now();
    fn out_err(p: &Path, op: Op) -> impl Fn(io::Error) -> Error + '_ {
        move |e| Error::io(Side::Destination, p, op, e)
    }
    let mut out = Temp::create(output).map_err(out_err(output, Op::Create))?;
    let mut map_out = match &opts.bmap {
        Some(p) => Some(Temp::create(p).map_err(out_err(p, Op::Create))?),
        None => None,
    };
    let (fd, direct) = open_source(&src.path)?;
    s.direct = direct;
    let file = out.file().try_clone().map_err(out_err(output, Op::Open))?;
    let threads = opts.threads;
    let mut enc = Out::new(opts.format, file, level, threads, src.size, events)
        .map_err(out_err(output, Op::Create))?;
    let hashed = Hashed {
        sha: sha2::Sha256::new(),
        map: opts.bmap.as_ref().map(|_| MapBuilder::new()),
        mapped: 0,
    };
    let (result, total, hashed) = pump(src, &fd, opts, &mut enc, output, s, hashed);
    s.image_bytes = total;
    result?;
    opts.cancel.check().map_err(out_err(output, Op::Write))?;
    if total != src.size {
        let e = io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("the device ended at byte {total}"),
        );
        s.error_at = Some(total);
        return Err(Error::io(Side::Source, &src.path, Op::Read, e));
    }
    let hashed = hashed.ok_or_else(|| {
        let e = io::Error::other("the reader panicked");
        Error::io(Side::Source, &src.path, Op::Read, e)
    })?;
    let sum = crate::Sha256::of_hasher(hashed.sha);
    s.sha256 = Some(sum);
    s.mapped_bytes = hashed.mapped;
    let map = hashed.map;
    enc.finish(total, &opts.cancel)
        .map_err(out_err(output, Op::Write))?;
    s.output_bytes = out
        .file()
        .metadata()
        .map_err(out_err(output, Op::Stat))?
        .len();
    out.sync().map_err(out_err(output, Op::Sync))?;
    if let (Some(m), Some(t)) = (map, &mut map_out) {
        let text = m.finish(total);
        let p = t.path.clone();
        let mut f = t.file();
        f.write_all(text.as_bytes())
            .map_err(out_err(&p, Op::Write))?;
        t.sync().map_err(out_err(&p, Op::Sync))?;
    }
    s.write_time = start.elapsed();
    if opts.verify {
        events.verifying(total);
        let same = verify::read_back(
            out.dir.as_fd(),
            &out.temp,
            opts.format,
            total,
            &sum,
            threads,
            &opts.cancel,
            events,
        )
        .map_err(out_err(output, Op::Verify))?;
        s.verified = Some(same);
        if !same {
            return Ok(()); // nothing placed: the temporary files go
        }
    }
    place(&mut out, map_out.as_mut(), opts.force)
}

/// The device's bytes through the encoder: a reader thread fills the
/// buffers, this thread encodes them. Returns how it ended, the bytes
/// encoded, and the reader's hashes (`None` if it panicked).
fn pump(
    src: &Source,
    fd: &Fd,
    opts: &ImageOptions,
    enc: &mut Out<'_>,
    output: &Path,
    s: &mut ImageSummary,
    hashed: Hashed,
) -> (Result<(), Error>, u64, Option<Hashed>) {
    let out_err = |op: Op| move |e: io::Error| Error::io(Side::Destination, output, op, e);
    let (full_tx, full_rx) = mpsc::sync_channel::<Read>(BUFFERS);
    let (empty_tx, empty_rx) = mpsc::channel::<Aligned>();
    for _ in 0..BUFFERS {
        let _ = empty_tx.send(Aligned::new(src.chunk));
    }
    let mut total = 0u64;
    let (result, hashed) = std::thread::scope(|sc| {
        let cancel = &opts.cancel;
        let reader =
            sc.spawn(move || read_all(fd, src.size, src.chunk, full_tx, empty_rx, cancel, hashed));
        let r = (|| {
            for got in full_rx.iter() {
                opts.cancel.check().map_err(out_err(Op::Write))?;
                let (off, buf, len, runs) = got.map_err(|(off, e)| {
                    s.error_at = Some(off);
                    Error::io(Side::Source, &src.path, Op::Read, e)
                })?;
                let data = &buf.get()[..len];
                enc.put(off, data, &runs, &opts.cancel)
                    .map_err(out_err(Op::Write))?;
                total += len as u64;
                // The reader may be done already.
                let _ = empty_tx.send(buf);
            }
            Ok(())
        })();
        // Stopped early: the reader, waiting for a buffer or for room in
        // the queue, stops now.
        drop(full_rx);
        drop(empty_tx);
        (r, reader.join().ok())
    });
    (result, total, hashed)
}

/// Moves the block map, then the image, to their final names, and flushes
/// their directories. If the image cannot be placed, the map is taken off
/// again: no map without its image.
fn place(out: &mut Temp, map: Option<&mut Temp>, replace: bool) -> Result<(), Error> {
    let fail = |t: &Temp, op: Op| {
        let p = t.path.clone();
        move |e| Error::io(Side::Destination, p, op, e)
    };
    let mut map = map;
    if let Some(m) = map.as_deref_mut() {
        m.place(replace).map_err(fail(m, Op::Rename))?;
    }
    if let Err(e) = out.place(replace) {
        if let Some(m) = map.as_deref_mut() {
            m.unplace();
        }
        return Err(fail(out, Op::Rename)(e));
    }
    for t in std::iter::once(&*out).chain(map.as_deref()) {
        sys::sync_file(t.dir.as_fd()).map_err(fail(t, Op::Sync))?;
    }
    Ok(())
}

/// Opens the device for reading around the page cache (O_DIRECT), or
/// buffered where that is refused.
fn open_source(path: &Path) -> Result<(Fd, bool), Error> {
    let failed = |e| Error::io(Side::Source, path, Op::Open, e);
    let open = |flags| sys::open_path_mode(path, flags, 0);
    let flags = sys::O_RDONLY;
    match open(flags | sys::O_DIRECT) {
        Ok(fd) => Ok((fd, true)),
        Err(e) if sys::direct_refused(&e) => open(flags).map(|fd| (fd, false)).map_err(failed),
        Err(e) => Err(failed(e)),
    }
}

/// The reader: `size` bytes of `fd` in chunks of `chunk`, each into a free
/// buffer, hashed and mapped, handed over in order; stops at the first
/// error (sent with its offset), when cancelled, or when this side stops
/// listening.
fn read_all(
    fd: &Fd,
    size: u64,
    chunk: usize,
    full: mpsc::SyncSender<Read>,
    empty: mpsc::Receiver<Aligned>,
    cancel: &Cancel,
    mut h: Hashed,
) -> Hashed {
    let mut off = 0u64;
    while off < size && !cancel.is_cancelled() {
        let Ok(mut buf) = empty.recv() else { return h };
        let want = chunk.min((size - off) as usize);
        // O_DIRECT reads whole aligned blocks; a file's tail comes short.
        let ask = want.div_ceil(sys::DIRECT_ALIGN) * sys::DIRECT_ALIGN;
        let mut got = 0;
        let r = loop {
            if got >= want {
                break Ok(());
            }
            let at = off + got as u64;
            match sys::pread(fd.as_fd(), &mut buf.buf()[got..ask], at) {
                Ok(0) => break Ok(()), // the end: checked by the caller
                Ok(n) => got += n,
                Err(e) => break Err((at, e)),
            }
        };
        let len = got.min(want);
        let item = r.map(|()| {
            let data = &buf.get()[..len];
            h.sha.update(data);
            let runs = data_runs(data);
            h.mapped += runs.iter().map(|&(a, e)| (e - a) as u64).sum::<u64>();
            if let Some(m) = &mut h.map {
                m.feed(off, data, &runs);
            }
            (off, buf, len, runs)
        });
        let stop = item.is_err() || got < want;
        if full.send(item).is_err() || stop {
            return h;
        }
        off += want as u64;
    }
    h
}
