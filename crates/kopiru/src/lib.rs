//! kopiru: the copy engine. This file is only its facade: the modules
//! below hold the work, and what other programs use is re-exported here.
//!
//! [`copy`] copies files and trees with the fastest correct method per file
//! (clone → in-kernel offload → read/write through a reused buffer), keeps
//! metadata, and reports what happened through a [`Reporter`]. Nothing here
//! prints: the command line renders the events.
#![deny(missing_docs)]

mod cancel;
mod copy;
mod data;
pub mod dedupe;
mod delete;
mod error;
mod events;
mod filter;
pub mod flash;
// The parsers of outside bytes, for the fuzz targets (fuzz/) only.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod image;
pub mod json;
mod listed;
mod meta;
mod options;
mod outcome;
mod par;
pub mod paths;
mod place;
mod plan;
mod precheck;
mod preview;
pub mod probe;
mod record;
mod shard;
pub(crate) mod sys;
mod tree;
pub mod verify;

pub use cancel::Cancel;
pub use error::{reason, Cause, Error, LeastSize, Mismatch, Op, Refusal, Side};
pub use events::{
    Change, ChangeKind, DeviceProgress, EntryKind, FileDone, Method, NoopReporter, Phase, Reporter,
    Summary, WorkerStep,
};
pub use filter::{Filter, PatternError, Rule, RuleKind};
pub use options::{
    Backup, Basis, BasisKind, Choice, CopyOptions, Follow, LinkFiles, MethodChoice, Preserve,
    SparseMode, SyncMode,
};
pub use outcome::Outcome;
pub use plan::PlanError;
pub use record::default_path as default_copies_record;
pub use shard::Shard;

pub use copy::copy;

/// Flushes the whole filesystem that holds `fd` to its device (`syncfs` on
/// Linux), reporting write-back errors of any file on it. Nothing on
/// Windows (it needs administrator rights there).
///
/// # Errors
/// The flush's error.
pub fn sync_filesystem(fd: sys::FdRef) -> std::io::Result<()> {
    sys::sync_fs(fd)
}

/// Free bytes on the filesystem that holds `fd`.
///
/// # Errors
/// `fstatfs`'s error; on Windows, not available yet (`Unsupported`).
pub fn free_space(fd: sys::FdRef) -> std::io::Result<u64> {
    sys::fs_space(fd).map(|s| s.free)
}
