//! kopiru: the copy engine.
//!
//! [`copy`] copies files and trees with the fastest correct method per file
//! (clone → in-kernel offload → read/write through a reused buffer), keeps
//! metadata, and reports what happened through a [`Reporter`]. Nothing here
//! prints: the command line renders the events.
#![deny(missing_docs)]

mod data;
mod error;
mod events;
mod meta;
mod options;
mod plan;
pub mod probe;
pub mod sys;
mod tree;

pub use error::CopyError;
pub use events::{FileDone, Method, NoopReporter, Reporter, Summary};
pub use options::{CopyOptions, Follow, MethodChoice, Preserve, SparseMode, SyncMode};
pub use plan::PlanError;

use std::path::{Path, PathBuf};
use std::time::Instant;

/// Copies `sources` to `dest` with cp's destination rules: one source to a new
/// name or into an existing directory; several sources into an existing
/// directory. Per-file failures are collected in the returned [`Summary`] and
/// reported as they happen; the rest of the tree is still copied.
///
/// # Errors
/// [`PlanError`] when the request itself is unusable (several sources and a
/// destination that is not a directory); nothing is copied then.
pub fn copy(
    sources: &[PathBuf],
    dest: &Path,
    opts: &CopyOptions,
    reporter: &dyn Reporter,
) -> Result<Summary, PlanError> {
    let start = Instant::now();
    let (jobs, refused) = plan::plan(sources, dest, opts)?;
    let mut summary = tree::run(jobs, opts, reporter, refused);
    summary.elapsed = start.elapsed();
    Ok(summary)
}
