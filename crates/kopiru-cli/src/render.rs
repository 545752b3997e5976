//! Text made from the engine's values: paths with kopiru's lossless escape
//! (`\xHH` for bytes that are not UTF-8, `\\` for a backslash; see
//! docs/copy.md, "Refusals"). Errors as JSON: `kopiru::json`.

use kopiru::paths::Escaped;
use std::path::Path;

/// A path as text, losslessly.
pub fn path(p: &Path) -> String {
    Escaped(p.as_os_str()).to_string()
}
