//! The exit codes the command line chooses itself. What a finished
//! command came to is the engine's `Outcome` (the Node binding reports the
//! same): `summary.outcome().code()`. As rsync's where they overlap (0, 1,
//! 2, 20, 23); `verify` exits like `diff` (0, 1, 2).

/// Everything was done.
pub const OK: u8 = 0;
/// Nothing could be done (every source refused or failed).
pub const FAILED: u8 = 1;
/// The command line is unusable (clap exits 2 as well), or a flash or an
/// image refused before anything was written (a device mounted, in use or
/// named twice, ...). (A copy's refusals exit 1: nothing copied.)
pub const USAGE: u8 = 2;
/// Stopped by SIGINT, SIGTERM or SIGHUP (rsync's "received SIGINT, SIGTERM,
/// or SIGHUP").
pub const CANCELLED: u8 = 20;
/// Some files failed; the rest was done (rsync's "partial transfer").
pub const PARTIAL: u8 = 23;
