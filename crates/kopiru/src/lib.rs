//! kopiru: the copy engine. This file is only its facade: the modules
//! below hold the work, and what other programs use is re-exported here.
//!
//! [`copy`] copies files and trees with the fastest correct method per file
//! (clone → in-kernel offload → read/write through a reused buffer), keeps
//! metadata, and reports what happened through a [`Reporter`]. Nothing here
//! prints: the command line renders the events.
//!
//! # Copying a tree
//!
//! The principal types: [`CopyOptions`] (start from [`CopyOptions::new`],
//! the command's defaults, and chain setters), [`copy`], and the
//! [`Summary`] it returns. Errors of single entries do not stop a copy:
//! they are in [`Summary::errors`]; a request refused whole before
//! anything is written is the `Err` ([`PlanError`]).
//!
//! ```
//! use kopiru::{CopyOptions, Noop};
//! # let dir = std::env::temp_dir().join(format!("kopiru-doc-{}", std::process::id()));
//! # std::fs::create_dir_all(dir.join("project/target"))?;
//! # std::fs::write(dir.join("project/main.rs"), "fn main() {}")?;
//! # std::fs::write(dir.join("project/target/app"), "binary")?;
//! # let (project, backup) = (dir.join("project"), dir.join("backup"));
//! let options = CopyOptions::new()
//!     .exclude("/target")?          // rsync's patterns, as --exclude
//!     .exclude("*.tmp")?
//!     .jobs(4);
//! # // Not the user's record of copies, in a doctest.
//! # let mut options = options;
//! # options.copies_record = None;
//! let summary = kopiru::copy(&[project], &backup, &options, &Noop)
//!     .expect("not refused");
//! assert!(summary.errors.is_empty());
//! assert_eq!(summary.files, 1);
//! assert!(backup.join("main.rs").exists() && !backup.join("target").exists());
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Progress, and stopping a copy
//!
//! [`progress::CopyProgress`] is a [`Reporter`] that also counts the
//! totals (a walk of the sources beside the copy, through the same
//! filters), so a display can show a percentage and an ETA; a [`Cancel`]
//! handle (cloned into the options with [`CopyOptions::cancel`]) stops the
//! copy from any thread or a signal handler, leaving nothing half-written
//! under a final name. `examples/copy_tree.rs` puts both together: a
//! progress line, filters, and a cancel on Ctrl-C or after a time limit.
//!
//! # The other operations
//!
//! One verb per operation, at the root, each taking its paths, its options
//! by reference (`XOptions::new()` is what the command does) and an
//! observer: [`copy()`] and [`dedupe()`] report to a [`Reporter`],
//! [`verify()`] its bytes compared to one too, [`probe()`] takes one for
//! the same shape; [`flash()`] reports to a [`flash::FlashEvents`] and
//! [`image()`] to a [`DeviceProgress`]. Every observer method does nothing
//! by default, and [`Noop`] implements them all. Their modules hold each
//! one's options and summary: [`flash`](mod@flash) writes disk images to
//! devices, [`image`](mod@image) reads a device into an image,
//! [`dedupe`](mod@dedupe) shares the blocks of identical files,
//! [`verify`](mod@verify) compares trees, [`probe`](mod@probe) tells what
//! a filesystem can do; [`json`] writes every summary as `--json` and the
//! Node binding give it.
//!
//! A request refused whole is a [`PlanError`]; an entry's refusal is a
//! [`Refusal`] inside an [`Error`]. Both have a stable [`PlanError::id`] /
//! [`Refusal::id`] for programs, and their text names settings by neutral
//! names ([`Setting`]): each front end spells them its own way.
#![deny(missing_docs)]
#![warn(missing_debug_implementations)]

mod cancel;
mod codec;
mod copy;
pub mod dedupe;
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
mod options;
mod outcome;
mod par;
pub mod paths;
pub mod probe;
pub mod progress;
mod sha256;
pub(crate) mod sys;
pub mod verify;

pub use cancel::Cancel;
pub use codec::Format;
pub use copy::plan::{PlanError, Setting};
pub use copy::record::default_path as default_copies_record;
pub use copy::shard::Shard;
pub use error::{
    reason, Cause, DeviceRefusal, Error, LeastSize, Mismatch, Op, Refusal, ShardRefusal, Side,
};
pub use events::{
    Change, ChangeKind, DeviceProgress, EntryKind, FileDone, Method, Noop, Phase, Reporter,
    Summary, WorkerStep,
};
pub use filter::{Filter, PatternError, Rule, RuleKind};
pub use options::{
    Backup, Basis, BasisKind, Choice, CopyOptions, Follow, LinkFiles, MethodChoice, Preserve,
    SparseMode, SyncMode,
};
pub use outcome::Outcome;
pub use sha256::{NotSha256, Sha256};

pub use copy::copy;
pub use dedupe::dedupe;
pub use flash::flash;
pub use image::image;
pub use probe::probe;
pub use verify::verify;

// The README's Rust example is compiled as a doctest (`no_run`: it names
// paths of the reader's), so it cannot drift from the API.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
