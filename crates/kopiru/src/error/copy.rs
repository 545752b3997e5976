//! A copy's refusal data: how a copy differs from its source, and the
//! sharded copy's refusals.

use std::fmt;

/// How a copy differs from its source (`--verify`, `kopiru verify`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mismatch {
    /// Present in the source only.
    MissingInDestination,
    /// Present in the destination only.
    OnlyInDestination,
    /// A different kind of entry on each side.
    Kind {
        /// The source's kind ("file", "directory", ...).
        source: &'static str,
        /// The destination's kind.
        dest: &'static str,
    },
    /// Regular files of different sizes.
    Size {
        /// The source's size in bytes.
        source: u64,
        /// The destination's size in bytes.
        dest: u64,
    },
    /// Regular files of one size whose bytes differ.
    Content,
    /// Symlinks to different targets.
    SymlinkTarget,
    /// Device nodes with different numbers.
    DeviceNumber,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mismatch::MissingInDestination => f.write_str("missing in destination"),
            Mismatch::OnlyInDestination => f.write_str("only in destination"),
            Mismatch::Kind { source, dest } => {
                write!(f, "{source} in source, {dest} in destination")
            }
            Mismatch::Size { source, dest } => {
                write!(f, "size differs: {source} vs {dest} bytes")
            }
            Mismatch::Content => f.write_str("content differs"),
            Mismatch::SymlinkTarget => f.write_str("symlink target differs"),
            Mismatch::DeviceNumber => f.write_str("device number differs"),
        }
    }
}

/// `ShardRefusal::ShardFailed`'s text.
fn shard_failed(f: &mut fmt::Formatter<'_>, rank: Option<usize>) -> fmt::Result {
    match rank {
        Some(r) => write!(f, "rank {r} failed, stopped or never started")?,
        None => f.write_str("another rank failed, stopped or never started")?,
    }
    f.write_str(
        ": the copy was not put in place; run the same copy again, resuming, \
         to finish it",
    )
}

/// A sharded copy's refusal (`shard`): it was not published, or its
/// ranks disagree.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShardRefusal {
    /// A sharded copy (`shard`) was not published because another rank
    /// failed or stopped; the same command with `resume` finishes it.
    ShardFailed {
        /// The rank that failed, when known.
        rank: Option<usize>,
    },
    /// This rank listed the source differently from the rank that listed it
    /// first (it changed meanwhile, or a directory could be read by one and
    /// not the other): their pieces would not match.
    ShardListDiffers,
    /// A sharded copy was put in place, but entries failed on other ranks.
    ShardErrors {
        /// How many, on the other ranks.
        errors: u64,
    },
}

impl ShardRefusal {
    /// A stable kebab-case name ([`crate::Refusal::id`]).
    pub fn id(&self) -> &'static str {
        match self {
            ShardRefusal::ShardFailed { .. } => "shard-failed",
            ShardRefusal::ShardListDiffers => "shard-list-differs",
            ShardRefusal::ShardErrors { .. } => "shard-errors",
        }
    }
}

impl fmt::Display for ShardRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShardRefusal::ShardFailed { rank } => shard_failed(f, *rank),
            ShardRefusal::ShardListDiffers => f.write_str(
                "this rank listed the source differently from another (did it change?); \
                 nothing copied by this rank, and the copy is not put in place",
            ),
            ShardRefusal::ShardErrors { errors } => write!(
                f,
                "{errors} entries failed on other ranks (see their messages); the rest is in place"
            ),
        }
    }
}

impl std::error::Error for ShardRefusal {}
