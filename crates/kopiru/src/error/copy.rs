//! A copy's refusal data: how a copy differs from its source, and the
//! sharded copy's words.

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

/// `Refusal::ShardFailed`'s text.
pub(super) fn shard_failed(f: &mut fmt::Formatter<'_>, rank: Option<usize>) -> fmt::Result {
    match rank {
        Some(r) => write!(f, "rank {r} failed, stopped or never started")?,
        None => f.write_str("another rank failed, stopped or never started")?,
    }
    f.write_str(
        ": the copy was not put in place; run the same copy again, resuming, \
         to finish it",
    )
}
