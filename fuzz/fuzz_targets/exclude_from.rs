//! `--exclude-from` files: each line a rule (rsync's meaning: `+ `/`- `
//! prefixes, `#` and `;` comments, a trailing `/` for directories), then
//! paths matched against them. A pattern either is refused or keeps what
//! was given; `is_dir` is asked at most once; and a rule placed first that
//! names the entry exactly (by name, by its whole path anchored, or by a
//! tail) decides, whatever the other rules say.
#![no_main]

use kopiru::{Filter, Rule, RuleKind};
use libfuzzer_sys::fuzz_target;
use std::cell::Cell;
use std::path::{Component, Path, PathBuf};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // Rules, then after a NUL the paths to match, one a line.
    let (rules_text, paths) = text.split_once('\0').unwrap_or((text, "a/b/c"));
    let mut rules = Vec::new();
    for line in rules_text.lines() {
        // As the command reads the file (kopiru-cli's select.rs).
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        let (kind, pattern) = match line.split_at_checked(2) {
            Some(("+ ", rest)) => (RuleKind::Include, rest),
            Some(("- ", rest)) => (RuleKind::Exclude, rest),
            _ => (RuleKind::Exclude, line),
        };
        match Rule::new(kind, pattern) {
            Ok(r) => {
                assert_eq!((r.kind(), r.pattern()), (kind, pattern));
                rules.push(r);
            }
            Err(e) => assert!(e.to_string().contains("bad pattern")),
        }
    }
    let filter = |first: Option<Rule>| {
        let mut f = Filter::new();
        if let Some(r) = first {
            f.push(r);
        }
        for r in &rules {
            f.push(r.clone());
        }
        f
    };
    let plain = |s: &str| !s.is_empty() && !s.contains(['*', '?', '[', ']', '{', '}', '\\']);
    let all = filter(None);
    for p in paths.lines().filter(|p| !p.is_empty()).take(4) {
        // As the walk gives them: relative, normal components only.
        let rel: PathBuf = Path::new(p)
            .components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .collect();
        let rel = rel.as_path();
        let asked = Cell::new(0);
        all.excludes(rel, || {
            asked.set(asked.get() + 1);
            p.ends_with('/')
        });
        assert!(asked.get() <= 1, "is_dir asked {} times", asked.get());
        let Some(name) = rel.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let whole = rel.to_str().unwrap_or("");
        let mut exact = vec![name.to_string()];
        if plain(whole) && !whole.contains("//") {
            exact.push(format!("/{whole}"));
        }
        if let Some(parent) = rel.parent().and_then(|d| d.file_name()?.to_str()) {
            exact.push(format!("{parent}/{name}"));
        }
        // One of them, of one kind (each is compiled to a regex: slow).
        let pick = p.len() % exact.len();
        let pattern = &exact[pick];
        if !plain(pattern) || pattern == "/" {
            continue;
        }
        let kind = [RuleKind::Exclude, RuleKind::Include][p.len() / exact.len() % 2];
        let first = Rule::new(kind, pattern).expect("a plain pattern");
        let out = filter(Some(first)).excludes(rel, || false);
        assert_eq!(
            out,
            kind == RuleKind::Exclude,
            "{pattern:?} first, for {rel:?}"
        );
    }
});
