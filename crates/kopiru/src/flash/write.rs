//! The write: a reader thread decodes the image into two aligned buffers
//! (or hands over ranges of the mapped image); this thread writes each to
//! every device, several in parallel, holding back the first MiB, which
//! goes out last, after everything else is flushed.

use super::bmap::RangeSums;
use super::device::Dev;
use super::input::Image;
use super::pieces::Layout;
use super::readback::Written;
use super::source::{read_image, Piece, Sink};
use super::{FlashEvents, FlashOptions, HEAD};
use crate::sys::AsFd;
use crate::sys::{self, Aligned};
use crate::{Error, Op, Side};
use std::io;
use std::sync::mpsc;

/// The buffers' size for a decoded (or raw but unmapped) image, at most:
/// a whole number of any sector size.
const DECODED_CHUNK: usize = 2 << 20;

/// What the streaming part of a flash did.
pub(super) struct Streamed {
    /// Image bytes read (and written, but for the held-back head).
    pub total: u64,
    /// The first MiB, held back.
    pub head: Aligned,
    pub head_len: usize,
    /// What was written where, for the read-back.
    pub written: Written,
    /// Reading or decoding the image failed (or it does not match its
    /// block map).
    pub read_error: Result<(), Error>,
    /// The SHA-256 of the whole image, read to its end (when verifying).
    pub sha256: Option<crate::Sha256>,
}

/// Streams the image to every device (but its first MiB): a reader thread
/// fills buffers, this thread writes them.
pub(super) fn stream(
    image: &Image,
    devs: &mut [Dev],
    mapping: Option<&sys::Mapping>,
    layout: &Layout,
    opts: &FlashOptions,
    chunk: usize,
    events: &dyn FlashEvents,
) -> Streamed {
    let (full_tx, full_rx) = mpsc::sync_channel::<Piece>(2);
    let (empty_tx, empty_rx) = mpsc::channel::<Aligned>();
    // A decoded image fills smaller buffers: the decoder is slower than the
    // device, so larger writes gain nothing, and the two buffers are most
    // of kopiru's own memory beside the decoder's dictionary.
    let buf = match mapping {
        Some(_) => chunk,
        None => chunk.min(DECODED_CHUNK),
    };
    for _ in 0..2 {
        let _ = empty_tx.send(Aligned::new(buf));
    }
    let mut head = Aligned::new(HEAD);
    let mut head_len = 0usize;
    // A mapped image is compared with itself at the read-back: no hashing.
    let mut written = Written {
        unhashed: mapping.is_some(),
        ..Written::default()
    };
    let mut total = 0u64;
    let read = std::thread::scope(|sc| {
        let reader = sc.spawn(|| {
            let mut sink = new_sink(full_tx, empty_rx, layout, opts, &mut written);
            // The budget counts kopiru's own buffers (the two above, the
            // held-back head); the decoder's threads get the rest.
            let own = (2 * buf + HEAD) as u64;
            let memory = opts.memory.saturating_sub(own);
            let r = read_image(
                image,
                mapping,
                chunk,
                memory,
                opts.sha256,
                &mut sink,
                events,
            );
            let sum = sink.sha256.take().map(crate::Sha256::of_hasher);
            drop(sink);
            r.map(|()| sum)
        });
        for piece in full_rx.iter() {
            if opts.cancel.is_cancelled() {
                break;
            }
            let data = piece_data(&piece, mapping);
            let len = data.len();
            // The first MiB waits; the rest goes out now.
            let held = (HEAD.saturating_sub(total as usize)).min(len);
            if held > 0 {
                head.buf()[head_len..head_len + held].copy_from_slice(&data[..held]);
                head_len += held;
            }
            let from = total + held as u64;
            write_to_all(devs, &layout.pieces(from, &data[held..]), events);
            total += len as u64;
            events.done(len as u64);
            give_back(piece, mapping, &empty_tx);
        }
        // Cancelled: the reader, waiting for a free buffer or for room in
        // the queue, or finishing its chunk, stops now.
        drop(full_rx);
        drop(empty_tx);
        reader.join().unwrap_or_else(|_| {
            let e = io::Error::other("reader panicked");
            Err(Error::io(Side::Source, &image.path, Op::Read, e))
        })
    });
    let (read_error, sha256) = match read {
        Ok(sum) => (Ok(()), sum),
        Err(e) => (Err(e), None),
    };
    Streamed {
        sha256,
        total,
        head,
        head_len,
        written,
        read_error,
    }
}

/// The reader's end of the queue, with the sums it takes on the way.
fn new_sink<'a>(
    full: mpsc::SyncSender<Piece>,
    empty: mpsc::Receiver<Aligned>,
    layout: &'a Layout,
    opts: &'a FlashOptions,
    written: &'a mut Written,
) -> Sink<'a> {
    Sink {
        full,
        empty,
        cur: None,
        len: 0,
        total: 0,
        written: opts.verify.then_some(written),
        sums: opts.bmap.as_ref().map(|m| RangeSums::new(&m.ranges)),
        bmap_error: None,
        layout,
        cancel: &opts.cancel,
        sha256: opts.verify.then(<sha2::Sha256 as sha2::Digest>::new),
    }
}

/// The image bytes a piece holds: its buffer's, or its range of the mapping.
fn piece_data<'a>(piece: &'a Piece, mapping: Option<&'a sys::Mapping>) -> &'a [u8] {
    match piece {
        Piece::Owned(b, len) => &b.get()[..*len],
        Piece::Mapped(off, len) => {
            let m = mapping.expect("mapped");
            &m.bytes()[*off..*off + *len]
        }
    }
}

/// A written piece back: its buffer to the reader, or its range of the
/// mapping to the kernel.
fn give_back(piece: Piece, mapping: Option<&sys::Mapping>, empty: &mpsc::Sender<Aligned>) {
    match piece {
        // The reader may be done already; what it queued is still read.
        Piece::Owned(b, _) => {
            let _ = empty.send(b);
        }
        Piece::Mapped(off, len) => {
            if let Some(m) = mapping {
                m.release(off, len);
            }
        }
    }
}

/// Writes `pieces` to every device that has not failed; one that fails
/// keeps its error and is left out from then on.
fn write_to_all(devs: &mut [Dev], pieces: &[(u64, &[u8])], events: &dyn FlashEvents) {
    let write_all = |d: &mut Dev| {
        for &(off, piece) in pieces {
            if let Err(e) = d.write(piece, off, events) {
                d.fail_write(off, e);
                return;
            }
        }
    };
    let mut live: Vec<&mut Dev> = devs.iter_mut().filter(|d| d.error.is_none()).collect();
    if live.len() > 1 {
        // Each device on its own thread for this buffer: the slowest sets
        // the pace, none waits for another's write.
        std::thread::scope(|w| {
            for d in live {
                w.spawn(|| write_all(d));
            }
        });
    } else if let Some(d) = live.pop() {
        write_all(d);
    }
}

/// Everything but the first MiB is on the devices: flushes, then writes
/// the head and flushes again. (Not after a failed read, `complete` false:
/// the device keeps its old first MiB, so it does not look like a complete
/// image.) A regular file is cut where the image ends, as with dd.
pub(super) fn finish(
    devs: &mut [Dev],
    head: &[u8],
    total: u64,
    layout: &Layout,
    complete: bool,
    events: &dyn FlashEvents,
) {
    for d in devs.iter_mut().filter(|d| d.error.is_none()) {
        if let Err(e) = d.flush() {
            d.fail(Op::Flush, e);
            continue;
        }
        if !complete {
            continue;
        }
        for (off, p) in layout.pieces(0, head) {
            if let Err(e) = d.write(p, off, events) {
                d.fail_write(off, e);
                break;
            }
        }
        if d.error.is_some() {
            continue;
        }
        d.head_written = true;
        if !d.is_block {
            if let Err(e) = sys::ftruncate(d.fd.as_fd(), total) {
                d.fail(Op::Truncate, e);
                continue;
            }
        }
        if let Err(e) = d.flush() {
            d.fail(Op::Flush, e);
        }
    }
}
