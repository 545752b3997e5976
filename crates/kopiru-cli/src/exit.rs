//! Exit codes, as rsync's where they overlap.

/// Everything was copied.
pub const OK: u8 = 0;
/// Nothing could be done (every source refused or failed).
pub const FAILED: u8 = 1;
/// The command line is unusable.
pub const USAGE: u8 = 2;
/// Some files failed; the rest was copied (rsync's "partial transfer").
pub const PARTIAL: u8 = 23;

/// The exit code for a finished copy.
pub fn for_summary(s: &kopiru::Summary) -> u8 {
    match (s.errors.is_empty(), s.copied_anything()) {
        (true, _) => OK,
        (false, true) => PARTIAL,
        (false, false) => FAILED,
    }
}
