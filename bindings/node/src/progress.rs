//! Progress: the engine's events add to atomics (cheap, from any worker
//! thread); a ticker thread samples them every 100 ms and, when they
//! changed, hands a snapshot to JavaScript through a threadsafe function in
//! non-blocking mode with a queue of one. So `onProgress` runs at most ten
//! times a second, a busy event loop drops snapshots instead of queueing
//! them, and no engine thread ever waits for JavaScript. The final call
//! (the summary's totals) is made by the wrapper after the promise settles.

use napi::bindgen_prelude::Unknown;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::Status;
use serde_json::Value;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// The JavaScript callback: one argument (a plain object), its return value
/// ignored, errors handled by the wrapper (it never throws), weak (it does
/// not keep Node alive: the pending promise does), at most one call queued.
pub type ProgressFn = ThreadsafeFunction<Value, Unknown<'static>, Value, Status, false, true, 1>;

/// Between two samples.
const TICK: Duration = Duration::from_millis(100);

/// Counters the engine's reporters add to.
#[derive(Default)]
// The second count is flash's, which Windows does not have yet.
#[cfg_attr(not(unix), allow(dead_code))]
pub struct Counts {
    pub files: AtomicU64,
    pub bytes: AtomicU64,
    /// A second byte count (flash: bytes read back).
    pub bytes2: AtomicU64,
    /// A total, when one is known (flash: bytes to read back); 0 if not.
    pub total2: AtomicU64,
    /// The engine's phase, as the wrapper names it.
    pub phase: AtomicU8,
    /// A flash from a URL: bytes of the file had, its length (0: not
    /// known) and the connections resumed.
    pub downloaded: AtomicU64,
    pub download_total: AtomicU64,
    pub resumes: AtomicU64,
}

impl Counts {
    pub fn add_files(&self, n: u64) {
        self.files.fetch_add(n, Ordering::Relaxed);
    }
    pub fn add_bytes(&self, n: u64) {
        self.bytes.fetch_add(n, Ordering::Relaxed);
    }
    /// The read-back has begun (phase 2): `total` bytes to check.
    #[cfg(unix)]
    pub fn begin_check(&self, total: u64) {
        self.total2.store(total, Ordering::Relaxed);
        self.phase.store(2, Ordering::Relaxed);
    }
    /// `n` more bytes read back.
    #[cfg(unix)]
    pub fn add_checked(&self, n: u64) {
        self.bytes2.fetch_add(n, Ordering::Relaxed);
    }
    /// A download's report (flash from a URL).
    #[cfg(unix)]
    pub fn set_download(&self, received: u64, total: Option<u64>, resumes: u64) {
        self.downloaded.store(received, Ordering::Relaxed);
        self.download_total
            .store(total.unwrap_or(0), Ordering::Relaxed);
        self.resumes.store(resumes, Ordering::Relaxed);
    }
    pub fn get(&self, c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}

/// The ticker of one operation; stopped (and joined) before its promise is
/// settled, so no progress call is queued after the result.
pub struct Ticker {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Ticker {
    /// Starts sampling with `sample` and calling `f` (none: no thread).
    pub fn start<S>(f: Option<ProgressFn>, sample: S) -> Ticker
    where
        S: Fn() -> Value + Send + 'static,
    {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let thread = f.map(|f| {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("kopiru-progress".into())
                .spawn(move || run(f, sample, &stop))
                .expect("a progress thread")
        });
        Ticker { stop, thread }
    }

    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        let (flag, cv) = &*self.stop;
        *flag.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.halt();
    }
}

fn run<S: Fn() -> Value>(f: ProgressFn, sample: S, stop: &(Mutex<bool>, Condvar)) {
    let (flag, cv) = stop;
    let mut last = Value::Null;
    let mut stopped = flag.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let (guard, _) = cv
            .wait_timeout_while(stopped, TICK, |s| !*s)
            .unwrap_or_else(|e| e.into_inner());
        stopped = guard;
        if *stopped {
            return;
        }
        let now = sample();
        if now != last {
            // Queue full (JavaScript has not taken the last one yet): this
            // snapshot is dropped, the next tick sends a newer one.
            if f.call(now.clone(), ThreadsafeFunctionCallMode::NonBlocking) == Status::Ok {
                last = now;
            }
        }
    }
}
