//! Every exit code of every command, chosen here. As rsync's where they
//! overlap (0, 1, 2, 20, 23); `verify` exits like `diff` (0, 1, 2).

#[cfg(unix)]
use kopiru::dedupe::DedupeSummary;
#[cfg(unix)]
use kopiru::flash::FlashSummary;
use kopiru::verify::VerifyReport;
use kopiru::Summary;

/// Everything was done.
pub const OK: u8 = 0;
/// Nothing could be done (every source refused or failed).
pub const FAILED: u8 = 1;
/// The command line is unusable (clap exits 2 as well), or a flash refused
/// before anything was written. (A copy's refusals exit 1: nothing copied.)
pub const USAGE: u8 = 2;
/// Stopped by SIGINT, SIGTERM or SIGHUP (rsync's "received SIGINT, SIGTERM,
/// or SIGHUP").
pub const CANCELLED: u8 = 20;
/// Some files failed; the rest was done (rsync's "partial transfer").
pub const PARTIAL: u8 = 23;

/// `kopiru verify`: the trees are the same.
pub const SAME: u8 = 0;
/// `kopiru verify`: they differ.
pub const DIFFERENT: u8 = 1;
/// `kopiru verify`: something could not be read.
pub const TROUBLE: u8 = 2;

/// What a run came to, before it is a number.
fn outcome(cancelled: bool, failed: bool, did_something: bool) -> u8 {
    match (cancelled, failed, did_something) {
        (true, _, _) => CANCELLED,
        (false, false, _) => OK,
        (false, true, true) => PARTIAL,
        (false, true, false) => FAILED,
    }
}

/// `kopiru copy`.
pub fn for_copy(s: &Summary) -> u8 {
    outcome(s.cancelled, !s.errors.is_empty(), s.copied_anything())
}

/// `kopiru verify`, like `diff`: trouble beats differences.
pub fn for_verify(r: &VerifyReport) -> u8 {
    if r.cancelled {
        CANCELLED
    } else if !r.errors.is_empty() {
        TROUBLE
    } else if !r.differences.is_empty() {
        DIFFERENT
    } else {
        SAME
    }
}

/// `kopiru dedupe`: a run on filesystems that cannot share blocks (and
/// nothing else) failed.
#[cfg(unix)]
pub fn for_dedupe(s: &DedupeSummary) -> u8 {
    if s.cancelled {
        return CANCELLED;
    }
    if s.errors.is_empty() && s.files_scanned == 0 && !s.unsupported.is_empty() {
        return FAILED;
    }
    outcome(false, !s.errors.is_empty(), s.files_shared > 0)
}

/// `kopiru flash`: 23 when some devices are good and others failed.
#[cfg(unix)]
pub fn for_flash(s: &FlashSummary) -> u8 {
    if s.cancelled {
        return CANCELLED;
    }
    let good = s
        .devices
        .iter()
        .filter(|d| d.error.is_none() && d.mismatch_at.is_none())
        .count();
    if s.ok() {
        OK
    } else if good > 0 && s.source_error.is_none() {
        PARTIAL
    } else {
        FAILED
    }
}

/// `kopiru image`: 1 for a failed read, write or verification (nothing is
/// left under OUTPUT then).
#[cfg(target_os = "linux")]
pub fn for_image(s: &kopiru::image::ImageSummary) -> u8 {
    match (s.cancelled, s.ok()) {
        (true, _) => CANCELLED,
        (false, true) => OK,
        (false, false) => FAILED,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancelled_wins() {
        assert_eq!(outcome(true, true, true), CANCELLED);
        assert_eq!(outcome(true, false, false), CANCELLED);
        assert_eq!(outcome(false, false, false), OK);
        assert_eq!(outcome(false, true, true), PARTIAL);
        assert_eq!(outcome(false, true, false), FAILED);
    }

    #[test]
    fn copy_codes() {
        let mut s = Summary::default();
        assert_eq!(for_copy(&s), OK);
        s.cancelled = true;
        assert_eq!(for_copy(&s), CANCELLED);
    }
}
