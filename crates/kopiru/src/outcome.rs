//! What a command came to, decided once for every front end: the command
//! line exits with [`Outcome::code`], and the Node binding reports the same
//! number as `exitCode`. rsync's codes where they overlap (0, 1, 2, 20,
//! 23); `verify` exits like `diff` (0, 1, 2).

use crate::verify::VerifyReport;
use crate::Summary;

/// A command's result class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Everything was done (`verify`: the trees are the same). 0.
    Done,
    /// Nothing could be done: every source refused or failed, a flash whose
    /// image or every device failed, an image not made. 1.
    Failed,
    /// Refused before anything was written: an unusable command line, a
    /// flash refused before writing. 2.
    Refused,
    /// Stopped by a cancel (SIGINT, SIGTERM, SIGHUP; an AbortSignal). 20.
    Cancelled,
    /// Some failed; the rest was done (rsync's "partial transfer"). 23.
    Partial,
    /// `verify`: the trees differ. 1.
    Different,
    /// `verify`: something could not be read. 2.
    Trouble,
}

impl Outcome {
    /// The exit code.
    pub fn code(self) -> u8 {
        match self {
            Outcome::Done => 0,
            Outcome::Failed | Outcome::Different => 1,
            Outcome::Refused | Outcome::Trouble => 2,
            Outcome::Cancelled => 20,
            Outcome::Partial => 23,
        }
    }

    /// A cancel wins; otherwise done, partial or failed.
    pub(crate) fn of(cancelled: bool, failed: bool, did_something: bool) -> Outcome {
        match (cancelled, failed, did_something) {
            (true, _, _) => Outcome::Cancelled,
            (false, false, _) => Outcome::Done,
            (false, true, true) => Outcome::Partial,
            (false, true, false) => Outcome::Failed,
        }
    }
}

impl Summary {
    /// `copy`: partial when some entries failed and others were copied.
    pub fn outcome(&self) -> Outcome {
        Outcome::of(
            self.cancelled,
            !self.errors.is_empty(),
            self.copied_anything(),
        )
    }

    /// Whether the copy was refused whole: not cancelled, nothing copied,
    /// and every error one that turned a source down before anything of it
    /// was written ([`Summary::refused`]). Its [`Summary::outcome`] is
    /// [`Outcome::Failed`]; a front end that tells a refusal from a failure
    /// (Node's `KOPIRU_REFUSED`) asks this.
    pub fn refused_whole(&self) -> bool {
        !self.cancelled
            && self.refused > 0
            && self.refused as usize == self.errors.len()
            && !self.copied_anything()
    }
}

impl VerifyReport {
    /// `verify`, like `diff`: a cancel, then trouble, beats differences.
    pub fn outcome(&self) -> Outcome {
        if self.cancelled {
            Outcome::Cancelled
        } else if !self.errors.is_empty() {
            Outcome::Trouble
        } else if !self.differences.is_empty() {
            Outcome::Different
        } else {
            Outcome::Done
        }
    }
}

impl crate::dedupe::DedupeSummary {
    /// `dedupe`: a run whose files are all on filesystems that cannot
    /// share blocks failed.
    pub fn outcome(&self) -> Outcome {
        if self.cancelled {
            Outcome::Cancelled
        } else if self.errors.is_empty()
            && !self.unsupported.is_empty()
            && self.files_scanned == self.unsupported.iter().map(|u| u.files).sum::<u64>()
        {
            Outcome::Failed
        } else {
            Outcome::of(false, !self.errors.is_empty(), self.files_shared > 0)
        }
    }
}

impl crate::flash::FlashSummary {
    /// `flash`: partial when some devices are good and others failed.
    pub fn outcome(&self) -> Outcome {
        let good = self
            .devices
            .iter()
            .filter(|d| d.error.is_none() && d.mismatch_at.is_none())
            .count();
        if self.cancelled {
            Outcome::Cancelled
        } else if self.ok() {
            Outcome::Done
        } else if good > 0 && self.source_error.is_none() {
            Outcome::Partial
        } else {
            Outcome::Failed
        }
    }
}

impl crate::image::ImageSummary {
    /// `image`: failed for a failed read, write or verification (nothing
    /// is left under OUTPUT then).
    pub fn outcome(&self) -> Outcome {
        match (self.cancelled, self.ok()) {
            (true, _) => Outcome::Cancelled,
            (false, true) => Outcome::Done,
            (false, false) => Outcome::Failed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancelled_wins() {
        assert_eq!(Outcome::of(true, true, true), Outcome::Cancelled);
        assert_eq!(Outcome::of(true, false, false), Outcome::Cancelled);
        assert_eq!(Outcome::of(false, false, false), Outcome::Done);
        assert_eq!(Outcome::of(false, true, true), Outcome::Partial);
        assert_eq!(Outcome::of(false, true, false), Outcome::Failed);
    }

    #[test]
    fn verify_cancelled_is_20() {
        let mut r = VerifyReport::default();
        assert_eq!(r.outcome().code(), 0);
        r.cancelled = true;
        assert_eq!(r.outcome().code(), 20);
    }

    #[test]
    fn copy_codes() {
        let mut s = Summary::default();
        assert_eq!(s.outcome().code(), 0);
        s.cancelled = true;
        assert_eq!(s.outcome().code(), 20);
    }
}
