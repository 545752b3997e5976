//! A failure of one file, with where and why.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// One file or directory that could not be copied (or whose metadata could not
/// be kept): `path: operation: reason`.
#[derive(Debug)]
pub struct CopyError {
    /// The path concerned (source or destination, whichever failed).
    pub path: PathBuf,
    /// What was being done ("open", "copy", "mkdir", ...).
    pub op: &'static str,
    /// Why it failed.
    pub reason: String,
    /// The OS error number, when there is one.
    pub errno: Option<i32>,
}

impl CopyError {
    pub(crate) fn io(path: impl Into<PathBuf>, op: &'static str, err: &io::Error) -> CopyError {
        CopyError {
            path: path.into(),
            op,
            reason: reason(err),
            errno: err.raw_os_error(),
        }
    }

    pub(crate) fn refusal(
        path: impl Into<PathBuf>,
        op: &'static str,
        reason: impl Into<String>,
    ) -> CopyError {
        CopyError {
            path: path.into(),
            op,
            reason: reason.into(),
            errno: None,
        }
    }
}

/// The OS's text for an error, without Rust's " (os error N)" suffix.
pub(crate) fn reason(err: &io::Error) -> String {
    let s = err.to_string();
    match s.rfind(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

impl fmt::Display for CopyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.path.display(), self.op, self.reason)
    }
}

impl std::error::Error for CopyError {}
