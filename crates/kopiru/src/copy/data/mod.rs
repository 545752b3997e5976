//! Moving one file's bytes: the method ladder clone → offload → stream, with
//! holes kept. A rung is left only when nothing has been written yet and the
//! error means "not supported here"; what failed is remembered per (source
//! device, destination device) so the ladder is not re-climbed for every file.

mod offload;
mod partial;
mod sparse;
mod stream;

pub(crate) use partial::{continue_data, matching_prefix};

use crate::error::Op;
use crate::events::{Method, Reporter};
use crate::options::{CopyOptions, MethodChoice, SparseMode};
use crate::sys::{self, FdRef, Stat};
use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

/// What is known about one method between two devices.
#[derive(Default)]
pub(crate) struct Capability {
    broken: AtomicU8,
    why: OnceLock<Arc<str>>,
}

impl Capability {
    fn usable(&self) -> bool {
        self.broken.load(Ordering::Relaxed) == 0
    }

    fn why(&self) -> Option<Arc<str>> {
        self.why.get().cloned()
    }

    /// Remembers that the method does not work here, when the error says so
    /// for the whole filesystem (not for this one file).
    fn note_failure(&self, err: &io::Error, why: &Arc<str>) {
        if sys::is_filesystem_wide(err) {
            let _ = self.why.set(why.clone());
            self.broken.store(1, Ordering::Relaxed);
        }
    }
}

/// Clone and offload knowledge for one (source device, destination device).
#[derive(Default)]
pub(crate) struct PairCaps {
    clone: Capability,
    offload: Capability,
}

/// Every pair seen in this run.
#[derive(Default)]
pub(crate) struct Caps {
    pairs: RwLock<HashMap<(u64, u64), Arc<PairCaps>>>,
}

impl Caps {
    pub(crate) fn get(&self, src_dev: u64, dst_dev: u64) -> Arc<PairCaps> {
        let key = (src_dev, dst_dev);
        if let Some(p) = self.pairs.read().expect("caps lock").get(&key) {
            return p.clone();
        }
        self.pairs
            .write()
            .expect("caps lock")
            .entry(key)
            .or_default()
            .clone()
    }
}

/// How a file's data was moved.
pub(crate) struct Moved {
    pub method: Method,
    pub bytes: u64,
    /// Why faster rungs were not used.
    pub why_not: Option<Arc<str>>,
    /// BLAKE3 of the source as it was read for the copy (`--verify`); `None`
    /// when the kernel moved the data without kopiru reading it.
    pub source_hash: Option<blake3::Hash>,
}

/// BLAKE3 of a file's bytes in order, fed as they are read; holes (ranges
/// never read) count as zeros, as reading them would return.
pub(crate) struct SourceDigest {
    hasher: blake3::Hasher,
    pos: u64,
}

impl SourceDigest {
    fn new() -> Self {
        SourceDigest {
            hasher: blake3::Hasher::new(),
            pos: 0,
        }
    }

    /// Adds the bytes read at `off` (at or after everything added so far).
    fn update_at(&mut self, off: u64, bytes: &[u8]) {
        self.zeros_to(off);
        self.hasher.update(bytes);
        self.pos = off + bytes.len() as u64;
    }

    fn zeros_to(&mut self, end: u64) {
        const ZEROS: [u8; 16 << 10] = [0; 16 << 10];
        while self.pos < end {
            let n = (end - self.pos).min(ZEROS.len() as u64);
            self.hasher.update(&ZEROS[..n as usize]);
            self.pos += n;
        }
    }

    /// The hash of a file of `size` bytes.
    fn finish(mut self, size: u64) -> blake3::Hash {
        self.zeros_to(size);
        self.hasher.finalize()
    }
}

/// Where a rung reports the bytes it moved, and the cancel handle it
/// checks between chunks.
pub(crate) struct Watch<'a> {
    pub reporter: &'a dyn Reporter,
    pub cancel: &'a crate::Cancel,
}

impl Watch<'_> {
    fn bytes(&self, n: u64) {
        self.reporter.bytes(n);
    }

    /// `Err((op, ECANCELED))` once cancelled.
    fn check(&self, op: crate::error::Op) -> Result<(), DataError> {
        self.cancel.check().map_err(|e| (op, e))
    }
}

/// A failed data copy: the operation and its error.
pub(crate) type DataError = (crate::error::Op, io::Error);

/// The outcome of one rung: done, or "not here" with the reason, or a failure.
pub(crate) enum Rung<T> {
    Done(T),
    NotSupported(io::Error, String),
    Failed(DataError),
}

pub(crate) fn join_why(a: Option<Arc<str>>, b: &str) -> Arc<str> {
    match (a, b) {
        (Some(a), "") => a,
        (Some(a), b) => format!("{a}; {b}").into(),
        (None, b) => b.into(),
    }
}

/// Copies the data of `src` (described by `st`) into the empty, open `dst`.
pub(crate) fn copy_data(
    src: FdRef,
    st: &Stat,
    dst: FdRef,
    pair: &PairCaps,
    opts: &CopyOptions,
    buf: &mut Vec<u8>,
    reporter: &dyn Reporter,
) -> Result<Moved, DataError> {
    let watch = Watch {
        reporter,
        cancel: &opts.cancel,
    };
    let mut why: Option<Arc<str>> = None;

    if let Some(done) = clone_rung(src, st, dst, pair, opts, &mut why) {
        return done.inspect(|m| watch.bytes(m.bytes));
    }

    // `--verify` hashes the source as it is read, so the verify pass reads
    // only the destination: the kernel's copy is skipped unless asked for.
    let mut digest = (opts.verify && opts.method != MethodChoice::Offload).then(SourceDigest::new);
    let holes = opts.sparse != SparseMode::Never && st.looks_sparse();
    let try_offload = matches!(opts.method, MethodChoice::Auto | MethodChoice::Offload)
        && sys::HAS_OFFLOAD
        && opts.sparse == SparseMode::Auto
        && digest.is_none()
        && st.size > 0; // size 0: nothing, or a pseudo-file only read() can copy

    if holes {
        match sparse::copy(
            src,
            st,
            dst,
            try_offload && pair.offload.usable(),
            buf,
            digest.as_mut(),
            &watch,
        ) {
            Rung::Done((bytes, size)) => {
                return Ok(Moved {
                    method: Method::Sparse,
                    bytes,
                    why_not: why,
                    source_hash: digest.map(|d| d.finish(size)),
                });
            }
            Rung::NotSupported(_, w) => why = Some(join_why(why, &w)),
            Rung::Failed(e) => return Err(e),
        }
    } else if try_offload {
        if pair.offload.usable() {
            match offload::copy(src, 0, st.size, dst, &watch) {
                Rung::Done(bytes) => {
                    return Ok(Moved {
                        method: Method::Offload,
                        bytes,
                        why_not: why,
                        source_hash: None,
                    });
                }
                Rung::NotSupported(e, w) => {
                    let w = join_why(None, &w);
                    pair.offload.note_failure(&e, &w);
                    why = Some(join_why(why, &w));
                }
                Rung::Failed(e) => return Err(e),
            }
        } else if let Some(w) = pair.offload.why() {
            why = Some(join_why(why, &w));
        }
    }
    if opts.method == MethodChoice::Offload && st.size > 0 {
        let msg = why
            .as_deref()
            .unwrap_or("offload: not possible with these options")
            .to_string();
        return Err((
            Op::CopyFileRange,
            io::Error::new(io::ErrorKind::Unsupported, msg),
        ));
    }

    let punch_zeros = opts.sparse == SparseMode::Always;
    let bytes = stream::copy(
        src,
        dst,
        0,
        st.size,
        punch_zeros,
        buf,
        digest.as_mut(),
        &watch,
    )?;
    Ok(Moved {
        method: Method::Stream,
        bytes,
        why_not: why,
        source_hash: digest.map(|d| d.finish(bytes)),
    })
}

/// Copies the data of `src` into `dst`, an existing FIFO, device or pipe
/// that cp would write into: read and written in order, no holes, no
/// offsets (`seekable`: a block device, written from its start).
pub(crate) fn copy_into(
    src: FdRef,
    dst: FdRef,
    seekable: bool,
    opts: &CopyOptions,
    buf: &mut Vec<u8>,
    reporter: &dyn Reporter,
) -> Result<Moved, DataError> {
    let watch = Watch {
        reporter,
        cancel: &opts.cancel,
    };
    let bytes = match seekable {
        true => stream::copy(src, dst, 0, u64::MAX, false, buf, None, &watch)?,
        false => stream::pipe(src, dst, buf, None, &watch)?,
    };
    Ok(Moved {
        method: Method::Stream,
        bytes,
        why_not: Some("written into an existing FIFO or device, in order".into()),
        source_hash: None,
    })
}

/// Whether [`copy_creating`] is tried with these options (never on Unix).
fn copy_creating_wanted(opts: &CopyOptions) -> bool {
    sys::COPY_CREATES_FILE
        && matches!(opts.method, MethodChoice::Auto | MethodChoice::Offload)
        && opts.sparse == SparseMode::Auto
        && !opts.verify
}

/// Whether [`copy_creating`] may create the files, so they must not be
/// created ahead: not where this Windows lacks CopyFile2 under `--method
/// auto` (the files of large new directories are created ahead there).
pub(crate) fn copy_creating_applies(opts: &CopyOptions) -> bool {
    copy_creating_wanted(opts) && (opts.method == MethodChoice::Offload || sys::has_copy_file2())
}

/// Windows' `CopyFile2`, the first rung there for a new file's whole data:
/// it creates the copy itself under `name` (a temporary name kopiru chose,
/// which must be free), so it runs before the file is created. Used with
/// `--method auto`/`offload` and `--sparse auto`, without `--verify` (which
/// hashes the source as kopiru reads it). Its progress feeds the reporter's
/// byte count, and the engine's cancel stops it. Returns the new file, open
/// to read and write (metadata still to apply), and how its data was moved;
/// `None`: not used here (why added to `why`), so the file is created and
/// the ladder below runs (the stream loop on Windows).
#[allow(clippy::too_many_arguments)]
pub(crate) fn copy_creating(
    src: FdRef,
    dir: FdRef,
    name: &sys::Name,
    mode: u32,
    pair: &PairCaps,
    opts: &CopyOptions,
    reporter: &dyn Reporter,
    why: &mut Option<Arc<str>>,
) -> Option<Result<(sys::Fd, Moved), DataError>> {
    if !copy_creating_wanted(opts) {
        return None;
    }
    if !pair.offload.usable() {
        *why = pair.offload.why();
        return None;
    }
    let mut reported = 0u64;
    let mut go_on = |total: u64| {
        if total > reported {
            reporter.bytes(total - reported);
            reported = total;
        }
        !opts.cancel.is_cancelled()
    };
    match sys::copy_file_new(src, dir, name, mode, &mut go_on) {
        Ok(fd) => {
            let bytes = match sys::fstat(sys::AsFd::as_fd(&fd)) {
                Ok(d) => d.size,
                Err(e) => {
                    drop(fd);
                    let _ = sys::unlink_at(dir, name, false);
                    return Some(Err((Op::Stat, e)));
                }
            };
            reporter.bytes(bytes.saturating_sub(reported));
            Some(Ok((
                fd,
                Moved {
                    method: Method::Offload,
                    bytes,
                    why_not: Some(join_why(why.take(), "CopyFile2")),
                    source_hash: None,
                },
            )))
        }
        Err(_) if opts.cancel.is_cancelled() => Some(Err((Op::CopyFile2, crate::Cancel::error()))),
        Err(e) if opts.method == MethodChoice::Offload => Some(Err((Op::CopyFile2, e))),
        Err(e) => {
            // Any other failure: this file is streamed instead (a real
            // error, of the source say, comes back there, and is reported).
            // Errors that say CopyFile2 does not work here keep the other
            // files of this pair of volumes from trying it.
            let w: Arc<str> = format!(
                "CopyFile2: {} ({})",
                crate::error::reason(&e),
                sys::errno_name(&e)
            )
            .into();
            if sys::copy_refused_here(&e) {
                let _ = pair.offload.why.set(w.clone());
                pair.offload.broken.store(1, Ordering::Relaxed);
            }
            *why = Some(join_why(why.take(), &w));
            None
        }
    }
}

/// The clone rung: `Some` when it decided the outcome (cloned, a real
/// failure, or `--method clone` refused); `None` to go on down the ladder,
/// with why it could not clone added to `why`.
fn clone_rung(
    src: FdRef,
    st: &Stat,
    dst: FdRef,
    pair: &PairCaps,
    opts: &CopyOptions,
    why: &mut Option<Arc<str>>,
) -> Option<Result<Moved, DataError>> {
    let keep_holes_by_kernel = opts.sparse != SparseMode::Never;
    // An empty file has nothing to share: a read that returns 0 costs less
    // than a clone call (Btrfs and XFS start a transaction for it).
    let nothing_to_share = st.size == 0 && opts.method == MethodChoice::Auto;
    if matches!(opts.method, MethodChoice::Auto | MethodChoice::Clone)
        && keep_holes_by_kernel
        && !sys::CLONE_CREATES_FILE
        && !nothing_to_share
    {
        if pair.clone.usable() {
            match sys::clone_fd(src, dst) {
                Ok(()) => {
                    return Some(Ok(Moved {
                        method: Method::Clone,
                        bytes: st.size,
                        why_not: None,
                        source_hash: None,
                    }));
                }
                Err(e) if sys::is_not_supported(&e) => {
                    let w: Arc<str> = format!(
                        "clone: {} ({})",
                        crate::error::reason(&e),
                        sys::errno_name(&e)
                    )
                    .into();
                    pair.clone.note_failure(&e, &w);
                    *why = Some(w);
                }
                Err(e) => return Some(Err((Op::Clone, e))),
            }
        } else {
            *why = pair.clone.why();
        }
        if opts.method == MethodChoice::Clone {
            let msg = why.as_deref().unwrap_or("clone: not supported").to_string();
            return Some(Err((
                Op::Clone,
                io::Error::new(io::ErrorKind::Unsupported, msg),
            )));
        }
    }
    if opts.method == MethodChoice::Clone {
        let msg = if sys::CLONE_CREATES_FILE {
            "clone: the file could not be cloned"
        } else {
            "clone: cannot keep --sparse=never when cloning"
        };
        return Some(Err((
            Op::Clone,
            io::Error::new(io::ErrorKind::Unsupported, msg),
        )));
    }
    None
}

/// The reused read/write buffer of one worker, grown on use to hold
/// `want` bytes (a file's size), from 64 KiB to at most 1 MiB: a file
/// that fits is read in one call as before, and a worker that meets only
/// small files holds 64 KiB, not 1 MiB (on a share a copy runs up to 256
/// workers: with 1 MiB each, node_modules into one peaked at 274 MiB).
pub(crate) fn buffer(buf: &mut Vec<u8>, want: u64) -> &mut [u8] {
    const SMALLEST: usize = 64 << 10;
    const LARGEST: usize = 1 << 20;
    let len = usize::try_from(want)
        .unwrap_or(LARGEST)
        .clamp(SMALLEST, LARGEST)
        .next_power_of_two();
    if buf.len() < len {
        buf.resize(len, 0);
    }
    &mut buf[..]
}
