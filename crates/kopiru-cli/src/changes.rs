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
    /// rsync's `--itemize-changes`: `YXcstpoguax path`, 11 characters as
    /// rsync 3 prints them: Y is `>` (file data written), `c` (other entry
    /// made) or `h` (hard link), X the kind (`f`, `d`, `L` symlink, `D`
    /// device or special), then nine attribute columns, all `+` for a new
    /// entry; for a replaced one `s` (size), `t` (time), `p` (permissions),
    /// `o` (owner) and `g` (group) where they differed and are kept, `.`
    /// elsewhere (kopiru fills no `c`, `u`, `a` or `x`). `*deleting path`
    /// for a deletion.
    Itemize,
}

/// The line for one change.
pub fn line(style: Style, c: &Change) -> String {
    let path = render::path(c.path);
    let target = c.target.map(render::path).unwrap_or_default();
    match (style, c.change, c.kind) {
        (Style::Plain, ChangeKind::Deleted, EntryKind::Dir) => format!("deleting {path}/"),
        (Style::Plain, ChangeKind::Deleted, _) => format!("deleting {path}"),
        (Style::Plain, _, EntryKind::Dir) => format!("{path}/"),
        (Style::Plain, _, EntryKind::Symlink) => format!("{path} -> {target}"),
        (Style::Plain, _, EntryKind::HardLink) => format!("{path} => {target}"),
        (Style::Plain, _, _) => path,
        (Style::Itemize, ChangeKind::Deleted, EntryKind::Dir) => format!("*deleting {path}/"),
        (Style::Itemize, ChangeKind::Deleted, _) => format!("*deleting {path}"),
        (Style::Itemize, change, kind) => {
            let (y, x, tail) = match kind {
                EntryKind::File => ('>', 'f', String::new()),
                EntryKind::Dir => ('c', 'd', "/".into()),
                EntryKind::Symlink => ('c', 'L', format!(" -> {target}")),
                EntryKind::Special => ('c', 'D', String::new()),
                EntryKind::HardLink => ('h', 'f', format!(" => {target}")),
            };
            let attrs = match change {
                ChangeKind::Replaced {
                    size,
                    time,
                    perms,
                    owner,
                    group,
                } => {
                    let col = |on: bool, c: char| if on { c } else { '.' };
                    format!(
                        ".{}{}{}{}{}...",
                        col(size, 's'),
                        col(time, 't'),
                        col(perms, 'p'),
                        col(owner, 'o'),
                        col(group, 'g'),
                    )
                }
                _ => "+++++++++".into(),
            };
            format!("{y}{x}{attrs} {path}{tail}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn itemized(kind: EntryKind, change: ChangeKind, target: Option<&str>) -> String {
        let c = Change {
            path: Path::new("d/x"),
            source: None,
            kind,
            change,
            target: target.map(Path::new),
        };
        line(Style::Itemize, &c)
    }

    #[test]
    fn itemized_as_rsync() {
        let new = ChangeKind::Created;
        let st = ChangeKind::Replaced {
            size: true,
            time: true,
            perms: false,
            owner: false,
            group: false,
        };
        let pog = ChangeKind::Replaced {
            size: false,
            time: false,
            perms: true,
            owner: true,
            group: true,
        };
        // rsync 3's 11 characters: YXcstpoguax.
        assert_eq!(itemized(EntryKind::File, new, None), ">f+++++++++ d/x");
        assert_eq!(itemized(EntryKind::File, st, None), ">f.st...... d/x");
        assert_eq!(itemized(EntryKind::File, pog, None), ">f...pog... d/x");
        assert_eq!(itemized(EntryKind::Dir, new, None), "cd+++++++++ d/x/");
        assert_eq!(
            itemized(EntryKind::Symlink, new, Some("t")),
            "cL+++++++++ d/x -> t"
        );
        assert_eq!(
            itemized(EntryKind::HardLink, new, Some("d/a")),
            "hf+++++++++ d/x => d/a"
        );
        let gone = ChangeKind::Deleted;
        assert_eq!(itemized(EntryKind::File, gone, None), "*deleting d/x");
    }
}
