//! The native half of the `kopiru` npm package: the engine's copy, verify,
//! flash, dedupe and probe, each run on a thread of its own (never on the
//! JavaScript thread, nor in libuv's small thread pool, which Node's own
//! `fs` calls share), settling a promise when done.
//!
//! This layer only converts: it resolves every promise with a plain object
//! (the engine's summary in camelCase, plus what the JavaScript wrapper
//! needs to choose between resolving and rejecting). `index.js` shapes the
//! errors (`KOPIRU_PARTIAL`, `KOPIRU_FAILED`, `KOPIRU_REFUSED`,
//! `AbortError`), wires `AbortSignal` to [`CancelToken::cancel`] and calls
//! `onProgress`.

// napi-derive leaves the exported functions out of a test build (clippy
// --all-targets makes one), so the code they call looks unused there.
#![cfg_attr(test, allow(dead_code))]

mod json;
mod ops;
mod progress;

use napi::bindgen_prelude::*;
use napi_derive::napi;

/// A handle on the engine's cancel flag: the wrapper makes one per call and
/// calls `cancel()` when the call's `AbortSignal` fires. Setting it is one
/// atomic store; the engine checks it between entries and between chunks
/// of a large file.
#[napi]
pub struct CancelToken {
    inner: kopiru::Cancel,
}

#[napi]
impl CancelToken {
    /// A token that is not cancelled.
    #[napi(constructor)]
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        CancelToken {
            inner: kopiru::Cancel::new(),
        }
    }

    /// Asks the operation holding this token to stop.
    #[napi]
    pub fn cancel(&self) {
        self.inner.cancel();
    }

    /// Whether `cancel()` was called.
    #[napi(getter)]
    pub fn cancelled(&self) -> bool {
        self.inner.is_cancelled()
    }
}

/// The names each option takes, from the engine's tables (the command
/// line parses the same): copy's `{ method, sync, sparse, follow,
/// preserve }` and flash's `format` (`auto`, then the codec table's).
/// `index.js` checks options against them before calling in.
#[napi(
    ts_return_type = "Record<'method' | 'sync' | 'sparse' | 'follow' | 'preserve' | 'format', string[]>"
)]
pub fn choices() -> serde_json::Value {
    use kopiru::Choice;
    fn names<T: Choice>() -> Vec<&'static str> {
        T::CHOICES.iter().map(|&(_, n, _)| n).collect()
    }
    // flash's `format`: `auto` (known by its bytes), then the codecs.
    let formats: Vec<&str> = std::iter::once("auto")
        .chain(names::<kopiru::Format>())
        .collect();
    serde_json::json!({
        "method": names::<kopiru::MethodChoice>(),
        "sync": names::<kopiru::SyncMode>(),
        "sparse": names::<kopiru::SparseMode>(),
        "follow": names::<kopiru::Follow>(),
        "preserve": kopiru::Preserve::NAMES,
        "format": formats,
    })
}

/// Runs `work` on a thread of its own and returns a promise of its result.
/// A panic in `work` rejects the promise instead of taking Node down.
fn off_thread<'e, F>(env: &'e Env, name: &str, work: F) -> Result<Object<'e>>
where
    F: FnOnce() -> serde_json::Value + Send + 'static,
{
    let (deferred, promise) = env.create_deferred()?;
    std::thread::Builder::new()
        .name(format!("kopiru-{name}"))
        .spawn(
            move || match std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)) {
                Ok(v) => deferred.resolve(move |_| Ok(v)),
                Err(p) => {
                    let what = p
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| p.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "unknown panic".into());
                    deferred.reject(Error::from_reason(format!(
                        "kopiru: internal error (panic): {what}"
                    )))
                }
            },
        )
        .map_err(|e| Error::from_reason(format!("kopiru: cannot start a thread: {e}")))?;
    Ok(promise)
}
