//! `kopiru bench`'s subcommands and their arguments.

use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// The file-count experiment: the same total bytes as 1, 16, 256, ...
    /// files, copied like with like: kopiru --sync none, `cp -r` and `rsync
    /// -a` (not durable at exit), then kopiru's default and `cp -r && sync
    /// -f` (durable at exit). Prints a table of median seconds; draws a
    /// log-log chart with --plot. A full disk ends the sweep, keeping the
    /// rows measured.
    Sweep(SweepArgs),
    /// What durability costs here: N writes of 1 byte and of 100 kB
    /// (buffered, flushed each, fsynced each), then the time until a
    /// small-file tree is on disk with each --sync mode. Prints tables.
    Fsync(FsyncArgs),
}

#[derive(Args)]
pub struct FsyncArgs {
    /// Where to write (removed afterwards). Use the filesystem you care
    /// about [default: the system's temporary directory].
    #[arg(long, value_name = "PATH")]
    pub dir: Option<PathBuf>,

    /// Writes per row of the buffering table.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub writes: usize,

    /// Files in the tree copied with each --sync mode.
    #[arg(long, value_name = "N", default_value_t = 4096)]
    pub files: usize,

    /// Size of each of those files (K, M suffixes).
    #[arg(long, value_name = "SIZE", default_value = "16K")]
    pub file_size: String,

    /// Timed runs per measurement (the median is reported).
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub runs: usize,
}

#[derive(Args)]
pub struct SweepArgs {
    /// Where to make the corpora (removed afterwards). Use a dedicated
    /// filesystem for numbers that mean something [default: the system's
    /// temporary directory].
    #[arg(long, value_name = "PATH")]
    pub dir: Option<PathBuf>,

    /// Total bytes of every corpus (K, M, G suffixes).
    #[arg(long, value_name = "SIZE", default_value = "256M")]
    pub total: String,

    /// File counts to try.
    #[arg(
        long,
        value_name = "N,N,...",
        value_delimiter = ',',
        default_value = "1,16,256,4096,65536,262144"
    )]
    pub counts: Vec<u64>,

    /// Timed runs per tool and count (the median is reported).
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub runs: usize,

    /// Write a log-log chart (files vs seconds, one line per tool) as SVG.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
}
