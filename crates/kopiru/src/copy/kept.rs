//! The sources a plan left alone with a word rather than an error: a copy
//! an earlier run completed, a source named twice, an entry `-n`/`-u`
//! keeps. Both the walk (mod.rs) and the listed copy (listed.rs) report
//! them the same way.

use crate::error::{Error, Refusal};
use crate::events::{Reporter, Summary};

/// Splits off, from a plan's refusals, the sources left alone with a
/// warning: a copy an earlier run completed, a source named twice.
pub(crate) fn left_alone(refused: Vec<Error>) -> (Vec<Error>, Vec<Error>) {
    refused.into_iter().partition(|e| {
        matches!(
            e.refusal(),
            Some(
                Refusal::AlreadyCopied { .. } | Refusal::NamedTwice { .. } | Refusal::KeptExisting
            )
        )
    })
}

/// Copies an earlier run made and completed, left as they are: a warning
/// each, counted as skipped.
pub(crate) fn already_copied(done: Vec<Error>, reporter: &dyn Reporter, summary: &mut Summary) {
    for w in done {
        reporter.kept(&w.path);
        summary.skipped += 1;
        // -n and -u keep what is there silently, as cp does.
        if !matches!(w.refusal(), Some(Refusal::KeptExisting)) {
            reporter.warning(&w);
            summary.warnings.push(w);
        }
    }
}
