//! Text made from the engine's values: paths with kopiru's lossless escape
//! (`\xHH` for bytes that are not UTF-8, `\\` for a backslash; see
//! docs/copy.md, "Refusals"), and errors as JSON.

use kopiru::paths::Escaped;
use std::path::Path;

/// A path as text, losslessly.
pub fn path(p: &Path) -> String {
    Escaped(p.as_os_str()).to_string()
}

/// One error as `--json` writes it.
pub fn error_json(e: &kopiru::Error) -> serde_json::Value {
    serde_json::json!({
        "path": path(&e.path),
        "side": e.side.name(),
        "operation": e.op.name(),
        "reason": e.reason(),
        "errno": e.errno(),
    })
}
