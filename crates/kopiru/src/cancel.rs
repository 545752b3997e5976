//! A cancel handle: set from anywhere (a signal handler, a Node
//! AbortSignal, another thread), checked by the engine between entries and
//! inside every long loop. Setting it is one atomic store, so it is safe in
//! a signal handler.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Cloned handles share one flag.
#[derive(Clone, Debug, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// A handle that is not cancelled.
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Asks every operation holding this handle to stop.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether the operation should stop now.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// An `io::Error` meaning "stopped because cancelled" (ECANCELED), for
    /// loops that report through `io::Result`.
    pub fn error() -> std::io::Error {
        crate::sys::cancelled()
    }

    /// `Err(ECANCELED)` once cancelled.
    pub fn check(&self) -> std::io::Result<()> {
        match self.is_cancelled() {
            true => Err(Cancel::error()),
            false => Ok(()),
        }
    }
}
