//! The lines `--dry-run` and `--itemize-changes` print for each entry
//! created, replaced or deleted (rsync's `-n -v` and `-i` output).

use crate::render;
use kopiru::{Change, ChangeKind, EntryKind};

/// How changes are shown.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// The path, as `rsync --dry-run -v`: `dir/`, `file`, `link -> target`,
    /// `name => first name`, `deleting path`.
    Plain,
}

/// The line for one change.
pub fn line(style: Style, c: &Change) -> String {
    let path = render::path(c.path);
    let target = c.target.map(render::path).unwrap_or_default();
    match (style, c.change, c.kind) {
        (Style::Plain, ChangeKind::Deleted, _) => format!("deleting {path}"),
        (Style::Plain, _, EntryKind::Dir) => format!("{path}/"),
        (Style::Plain, _, EntryKind::Symlink) => format!("{path} -> {target}"),
        (Style::Plain, _, EntryKind::HardLink) => format!("{path} => {target}"),
        (Style::Plain, _, _) => path,
    }
}
