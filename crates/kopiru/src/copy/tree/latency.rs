//! How many workers the copy keeps in flight, and how finely directories
//! are shared among them, by how long the filesystems' operations take.
//!
//! A share is told first by its type (`statfs`: [`sys::backing`]). A
//! filesystem whose type is a local one, or that has a local device behind
//! it (a block device on Linux, MNT_LOCAL on macOS, a disk on Windows), is
//! local however slow its creates are: an SD card, a USB hard disk or a
//! busy machine gains nothing from a share's workers. Only where neither
//! type nor device says (a network filesystem not in the list, overlayfs,
//! whose layers may be anywhere) are the first creates timed: on a share
//! each is a round trip to the server, at least a millisecond on a busy
//! LAN, where a local create takes microseconds. Either way a share gets
//! the round-trip defaults: more workers than CPUs (not `-j N`'s count)
//! and small slices of shared directories.
//!
//! How many more is then found as TCP finds its window in slow start: the
//! count starts at [`WINDOW_START`] and doubles while each doubling raises
//! the rate of finished entries by [`RISE`], up to [`WINDOW_MAX`]. A rate
//! is judged only over a stretch when nearly every allowed worker was busy
//! (a copy short of work is not told anything by more workers: RFC 7661's
//! "cwnd-limited"). The server or the client's slot table, not kopiru,
//! then sets where it stops.

use super::{ROUND_TRIP_SHARE_ABOVE, ROUND_TRIP_SLICE, SHARE_ABOVE, SLICE};
use crate::events::WorkerStep;
use crate::options::CopyOptions;
use crate::sys;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Workers at first, by default, where operations are round trips: each
/// waits on the network, not on a CPU. On the simulated share
/// (kopiru-slowfs, docs/BENCHMARKS.md) a fixed -j 32 was within noise of
/// -j 64 at 1 ms, and 0.77 of it at 5 ms.
pub(crate) const WINDOW_START: usize = 32;

/// Workers at most: each holds a few descriptors and a buffer as large as
/// the largest file it streamed, up to 1 MiB (`data::buffer`).
pub(crate) const WINDOW_MAX: usize = 256;

/// A doubling pays if the rate of finished entries rises by this much (two
/// times as many in flight give up to twice the rate; less than 15% more
/// is the server, the client's slots or the CPU at their limit, or noise).
const RISE: f64 = 1.15;

/// A rate is taken over at least this long, and at least two entries per
/// worker: some hundreds of entries, so that one stretch's rate is within
/// a few percent of the next one's at the same count.
const EPOCH: Duration = Duration::from_millis(200);

/// While fewer workers are busy than this share of the count, the window
/// is not being used: the stretch is not judged, and is looked at again
/// this soon.
const BUSY: f64 = 0.75;
const RECHECK: Duration = Duration::from_millis(10);

/// Creates timed before deciding.
const SAMPLES: usize = 8;

/// The fastest of the timed creates taking this long means round trips.
/// A share with a shorter round trip (a quiet 10 GbE link) is not caught,
/// which costs little: its round trips are short.
const ROUND_TRIP: Duration = Duration::from_micros(750);

pub(crate) struct Latency {
    max_workers: AtomicUsize,
    share_above: AtomicUsize,
    slice: AtomicUsize,
    /// Why the round-trip defaults apply: the filesystem's type, and for a
    /// timed one how long its creates took.
    round_trips: OnceLock<String>,
    /// A destination is on a share known by its type (not timed), and the
    /// devices of those destinations: a clone or an in-kernel copy into
    /// one of them is the server's.
    by_type: AtomicBool,
    share_devs: Mutex<Vec<u64>>,
    /// Destination devices looked at already (a `statfs` is a round trip
    /// on a share: once per device, not once per directory), each with
    /// whether creates there are timed (neither type nor device says).
    dst_devs: Mutex<Vec<(u64, bool)>>,
    /// The last destination device found not to be timed: creates there
    /// (on a local disk, all of them) pass without the lock.
    untimed_dev: AtomicU64,
    /// Shares are looked for (not with `-i` or `--shard`).
    follows: bool,
    /// The count may be raised (no `-j N`).
    may_raise: bool,
    /// Creates timed (that made a file), and the fastest of them (ns).
    timed: AtomicUsize,
    fastest_ns: AtomicU64,
    /// The count is being raised while the rate rises (see the module).
    adapting: AtomicBool,
    /// Entries finished since raising began.
    finished: AtomicU64,
    /// When the current stretch is next looked at, in ns since `born`.
    next_look_ns: AtomicU64,
    born: Instant,
    window: Mutex<Window>,
}

/// The stretch being measured, and the rates of those before it.
struct Window {
    start: Instant,
    finished_at_start: u64,
    steps: Vec<WorkerStep>,
}

impl Latency {
    /// Not with `-i` or `--shard` (whose ranks divide the CPUs): there the
    /// count stays the options' and nothing is timed.
    pub(crate) fn new(opts: &CopyOptions) -> Latency {
        let follows = !opts.interactive && opts.shard.is_none();
        Latency {
            max_workers: AtomicUsize::new(opts.worker_count()),
            share_above: AtomicUsize::new(SHARE_ABOVE),
            slice: AtomicUsize::new(SLICE),
            round_trips: OnceLock::new(),
            by_type: AtomicBool::new(false),
            share_devs: Mutex::new(Vec::new()),
            dst_devs: Mutex::new(Vec::new()),
            untimed_dev: AtomicU64::new(u64::MAX),
            follows,
            may_raise: opts.jobs == 0,
            timed: AtomicUsize::new(if follows { 0 } else { SAMPLES }),
            fastest_ns: AtomicU64::new(u64::MAX),
            adapting: AtomicBool::new(false),
            finished: AtomicU64::new(0),
            next_look_ns: AtomicU64::new(0),
            born: Instant::now(),
            window: Mutex::new(Window {
                start: Instant::now(),
                finished_at_start: 0,
                steps: Vec::new(),
            }),
        }
    }

    pub(crate) fn max_workers(&self) -> usize {
        self.max_workers.load(Ordering::Relaxed)
    }

    /// A directory with more entries than this is shared among workers.
    pub(crate) fn share_above(&self) -> usize {
        self.share_above.load(Ordering::Relaxed)
    }

    /// Entries claimed at a time from a shared directory.
    pub(crate) fn slice(&self) -> usize {
        self.slice.load(Ordering::Relaxed)
    }

    pub(crate) fn round_trips(&self) -> bool {
        self.round_trips.get().is_some()
    }

    /// Whether a file cloned or copied in the kernel into a directory on
    /// device `dst_dev` was copied by the server: the destination is on a
    /// share known by its type (a clone or copy_file_range stays within
    /// one filesystem, so the source is on it too).
    pub(crate) fn server_side(&self, dst_dev: u64) -> bool {
        self.by_type.load(Ordering::Relaxed)
            && self
                .share_devs
                .lock()
                .expect("share devs lock")
                .contains(&dst_dev)
    }

    /// Why the round-trip defaults applied, and the counts tried with the
    /// rate each gave.
    pub(crate) fn into_report(self) -> (Option<String>, Vec<WorkerStep>) {
        let steps = self.window.into_inner().expect("window lock").steps;
        (self.round_trips.into_inner(), steps)
    }

    /// An entry is finished; `busy` counts the workers not waiting for
    /// work. Costs one load unless the count is being raised.
    pub(crate) fn entry_finished(&self, busy: impl FnOnce() -> usize) {
        if !self.adapting.load(Ordering::Relaxed) {
            return;
        }
        self.finished.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let since = u64::try_from((now - self.born).as_nanos()).unwrap_or(u64::MAX);
        if since < self.next_look_ns.load(Ordering::Relaxed) {
            return;
        }
        // One worker looks; the others go on.
        if let Ok(mut w) = self.window.try_lock() {
            let next = self.look(&mut w, now, busy());
            let at = u64::try_from((now + next - self.born).as_nanos()).unwrap_or(u64::MAX);
            self.next_look_ns.store(at, Ordering::Relaxed);
        }
    }

    /// Judges the stretch ending `now`, with `busy` workers at work;
    /// returns how soon to look again.
    fn look(&self, w: &mut Window, now: Instant, busy: usize) -> Duration {
        let count = self.max_workers();
        let finished = self.finished.load(Ordering::Relaxed);
        if (busy as f64) < count as f64 * BUSY {
            // Short of work, or workers not yet started: begin again.
            w.start = now;
            w.finished_at_start = finished;
            return RECHECK;
        }
        let done = finished - w.finished_at_start;
        // `now` was read before the lock: another look may have begun
        // a later stretch since.
        let took = now.saturating_duration_since(w.start);
        if took < EPOCH || done < 2 * count as u64 {
            return RECHECK;
        }
        let rate = done as f64 / took.as_secs_f64();
        let before = w.steps.last().copied();
        w.steps.push(WorkerStep {
            workers: count as u64,
            entries_per_second: rate,
        });
        match before {
            Some(b) if rate < b.entries_per_second * RISE => {
                // Settled; where the last doubling lost, back to the count
                // before it (the surplus workers leave between tasks).
                if rate < b.entries_per_second {
                    self.max_workers
                        .store(b.workers as usize, Ordering::Relaxed);
                }
                self.adapting.store(false, Ordering::Relaxed);
            }
            _ if count >= WINDOW_MAX => self.adapting.store(false, Ordering::Relaxed),
            // (A start above 32, the CPU count, is not a power of two.)
            _ => self
                .max_workers
                .store((count * 2).min(WINDOW_MAX), Ordering::Relaxed),
        }
        w.start = now;
        w.finished_at_start = finished;
        RECHECK
    }

    /// Where a source directory `src` or its destination directory `dst`
    /// (on device `dst_dev`) is on a share by its type. Each destination
    /// device is looked at once; a source only until a share is found. Not
    /// with `-i` or `--shard`.
    pub(crate) fn follow_type(&self, src: sys::FdRef, dst: sys::FdRef, dst_dev: u64) {
        if !self.follows {
            return;
        }
        self.look_at_dst(dst, dst_dev);
        if let Some(t) = (!self.round_trips())
            .then(|| sys::round_trip_fs(src))
            .flatten()
        {
            self.raise(t);
        }
    }

    /// Looks once at destination device `dev` (the filesystem of `dst`):
    /// a share by its type raises the count. Returns whether creates there
    /// are timed.
    fn look_at_dst(&self, dst: sys::FdRef, dev: u64) -> bool {
        let mut devs = self.dst_devs.lock().expect("dst devs lock");
        if let Some(&(_, timed)) = devs.iter().find(|(d, _)| *d == dev) {
            return timed;
        }
        let backing = sys::backing(dst);
        let timed = backing == sys::Backing::Unknown;
        devs.push((dev, timed));
        drop(devs);
        if !timed {
            self.untimed_dev.store(dev, Ordering::Relaxed);
        }
        if let sys::Backing::RoundTrip(t) = backing {
            self.share_devs.lock().expect("share devs lock").push(dev);
            self.by_type.store(true, Ordering::Relaxed);
            self.raise(t);
        }
        timed
    }

    /// The start of a create to time in directory `dst` (on device
    /// `dst_dev`): until the first few have made a file (a create that
    /// fails, or finds O_TMPFILE unsupported, does not count), on a
    /// filesystem whose type and device say nothing, unless a share was
    /// found already.
    pub(crate) fn time_create(&self, dst: sys::FdRef, dst_dev: u64) -> Option<Instant> {
        let wanted = self.timed.load(Ordering::Relaxed) < SAMPLES
            && !self.round_trips()
            && dst_dev != self.untimed_dev.load(Ordering::Relaxed)
            && self.look_at_dst(dst, dst_dev);
        wanted.then(Instant::now)
    }

    /// A timed create, begun at `start`, made a file in `dir`; the
    /// SAMPLES-th decides (creates timed at once may make a few more).
    pub(crate) fn created(&self, start: Instant, dir: sys::FdRef) {
        let took = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.fastest_ns.fetch_min(took, Ordering::Relaxed);
        if self.timed.fetch_add(1, Ordering::AcqRel) + 1 != SAMPLES {
            return;
        }
        let fastest = Duration::from_nanos(self.fastest_ns.load(Ordering::Relaxed));
        if fastest >= ROUND_TRIP {
            let t = sys::fs_type(dir).unwrap_or_else(|_| "unknown".into());
            let ms = fastest.as_secs_f64() * 1e3;
            self.raise(format!("{t} (timed: each create took {ms:.1} ms or more)"));
        }
    }

    fn raise(&self, why: String) {
        if self.round_trips.set(why).is_err() {
            return;
        }
        if self.may_raise {
            self.max_workers.fetch_max(WINDOW_START, Ordering::Relaxed);
            let mut w = self.window.lock().expect("window lock");
            w.start = Instant::now();
            w.finished_at_start = self.finished.load(Ordering::Relaxed);
            self.adapting.store(true, Ordering::Relaxed);
        }
        self.share_above
            .store(ROUND_TRIP_SHARE_ABOVE, Ordering::Relaxed);
        self.slice.store(ROUND_TRIP_SLICE, Ordering::Relaxed);
    }
}
