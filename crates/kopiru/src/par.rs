//! Work spread over the worker threads (dedupe and verify hash in parallel
//! the same way).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Threads to use: `jobs`, or one per CPU when it is 0.
pub(crate) fn workers(jobs: usize) -> usize {
    if jobs > 0 {
        return jobs;
    }
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// Runs `f` on every item on `workers(jobs)` threads, each with state of
/// its own (a reusable buffer); results in no particular order.
pub(crate) fn par_map<S: Default, T: Send>(
    items: &[usize],
    jobs: usize,
    f: impl Fn(usize, &mut S) -> T + Sync,
) -> Vec<(usize, T)> {
    let next = AtomicUsize::new(0);
    let out = Mutex::new(Vec::with_capacity(items.len()));
    std::thread::scope(|sc| {
        for _ in 0..workers(jobs).min(items.len()) {
            sc.spawn(|| {
                let mut state = S::default();
                let mut mine = Vec::new();
                loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&i) = items.get(k) else { break };
                    mine.push((i, f(i, &mut state)));
                }
                out.lock().expect("results lock").append(&mut mine);
            });
        }
    });
    out.into_inner().expect("results lock")
}
