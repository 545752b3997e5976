//! `--exclude` and `--include`: rsync's filter rules, matched against each
//! entry's path relative to the copied source directory.
//!
//! - A pattern that starts with `/` is anchored: it is matched against the
//!   whole relative path (`/build` is only the top-level `build`).
//! - Another pattern with a `/` in it (not counting a trailing one) is
//!   matched against the tail of the path: `src/*.rs` matches `src/a.rs` and
//!   `x/src/a.rs`, not `xsrc/a.rs`.
//! - A pattern without a `/` is matched against the entry's name alone.
//! - A trailing `/` matches directories only.
//! - `*` and `?` do not match `/`; `**` does (as a whole path component:
//!   `a/**/b`, `**/b`, `a/**`); `[...]` is a class (`[!...]` negated); `\`
//!   escapes. (Globs by the `globset` crate, which also accepts `{a,b}`.)
//! - Rules are tried in the order given; the first that matches decides. An
//!   entry no rule matches is copied.
//!
//! An excluded directory is not descended into, so nothing below it is
//! copied, whatever the later rules say.

use globset::{GlobBuilder, GlobMatcher};
use std::fmt;
use std::path::Path;

/// Whether a rule copies or leaves out what it matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleKind {
    /// `--include`: copied (and, for a directory, descended into).
    Include,
    /// `--exclude`: left out.
    Exclude,
}

/// One `--include` or `--exclude` rule.
#[derive(Clone, Debug)]
pub struct Rule {
    kind: RuleKind,
    pattern: String,
    /// Matches directories only (the pattern ended in `/`).
    dir_only: bool,
    /// Matched against the entry's name rather than its path.
    name_only: bool,
    glob: GlobMatcher,
}

/// A pattern that is not a valid glob.
#[derive(Debug)]
pub struct PatternError {
    /// The pattern as given.
    pub pattern: String,
    /// What is wrong with it.
    pub reason: String,
}

impl fmt::Display for PatternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad pattern '{}': {}", self.pattern, self.reason)
    }
}

impl std::error::Error for PatternError {}

impl Rule {
    /// Parses `pattern` with rsync's meaning (see the module's rules).
    ///
    /// # Errors
    /// The pattern is not a valid glob (an unclosed `[`, an empty one).
    pub fn new(kind: RuleKind, pattern: &str) -> Result<Rule, PatternError> {
        let bad = |reason: String| PatternError {
            pattern: pattern.to_string(),
            reason,
        };
        let dir_only = pattern.len() > 1 && pattern.ends_with('/');
        let body = match dir_only {
            true => pattern.trim_end_matches('/'),
            false => pattern,
        };
        if body.is_empty() {
            return Err(bad("empty".into()));
        }
        let (glob, name_only) = if let Some(anchored) = body.strip_prefix('/') {
            (anchored.trim_start_matches('/').to_string(), false)
        } else if body.contains('/') {
            (format!("**/{body}"), false)
        } else {
            (body.to_string(), true)
        };
        let glob = GlobBuilder::new(&glob)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| bad(e.kind().to_string()))?
            .compile_matcher();
        Ok(Rule {
            kind,
            pattern: pattern.to_string(),
            dir_only,
            name_only,
            glob,
        })
    }

    /// A rule as rsync reads one: `+ PATTERN` is an include and
    /// `- PATTERN` an exclude whatever `kind` says; anything else is a
    /// rule of `kind` (the command's `--exclude`/`--include`, and the Node
    /// binding's `exclude`/`include`).
    ///
    /// # Errors
    /// As [`Rule::new`].
    pub fn parse(kind: RuleKind, pattern: &str) -> Result<Rule, PatternError> {
        let (kind, pattern) = match pattern.split_at_checked(2) {
            Some(("+ ", rest)) => (RuleKind::Include, rest),
            Some(("- ", rest)) => (RuleKind::Exclude, rest),
            _ => (kind, pattern),
        };
        Rule::new(kind, pattern)
    }

    /// The rule's kind.
    pub fn kind(&self) -> RuleKind {
        self.kind
    }

    /// The pattern as given.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    fn matches(&self, rel: &Path, is_dir: &mut impl FnMut() -> bool) -> bool {
        let subject = match self.name_only {
            true => match rel.file_name() {
                Some(n) => Path::new(n),
                None => return false,
            },
            false => rel,
        };
        self.glob.is_match(subject) && (!self.dir_only || is_dir())
    }
}

/// The filter rules of one copy, in order; empty copies everything.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    rules: Vec<Rule>,
}

impl Filter {
    /// A filter with no rules.
    pub fn new() -> Filter {
        Filter::default()
    }

    /// Adds a rule after the others.
    pub fn push(&mut self, rule: Rule) {
        self.rules.push(rule);
    }

    /// Whether there is no rule.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Whether the entry at `rel` (relative to the copied source directory)
    /// is left out. `is_dir` is asked only when a directory-only rule's
    /// pattern matches, and at most once.
    pub fn excludes(&self, rel: &Path, is_dir: impl FnOnce() -> bool) -> bool {
        let mut is_dir = Some(is_dir);
        let mut known = None;
        let mut ask = || *known.get_or_insert_with(|| is_dir.take().is_some_and(|f| f()));
        for r in &self.rules {
            if r.matches(rel, &mut ask) {
                return r.kind == RuleKind::Exclude;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(rules: &[(RuleKind, &str)]) -> Filter {
        let mut f = Filter::new();
        for (k, p) in rules {
            f.push(Rule::new(*k, p).unwrap());
        }
        f
    }

    fn out(f: &Filter, rel: &str, dir: bool) -> bool {
        f.excludes(Path::new(rel), || dir)
    }

    use RuleKind::{Exclude as X, Include as I};

    #[test]
    fn name_patterns_match_at_any_depth() {
        let f = filter(&[(X, "*.o")]);
        assert!(out(&f, "a.o", false));
        assert!(out(&f, "src/deep/b.o", false));
        assert!(!out(&f, "a.c", false));
        assert!(!out(&f, "x.o/y", false), "only the name is matched");
    }

    #[test]
    fn anchored_and_tail_patterns() {
        let f = filter(&[(X, "/build"), (X, "doc/*.tmp")]);
        assert!(out(&f, "build", true));
        assert!(!out(&f, "src/build", true));
        assert!(out(&f, "doc/a.tmp", false));
        assert!(out(&f, "x/doc/a.tmp", false));
        assert!(!out(&f, "xdoc/a.tmp", false));
        assert!(!out(&f, "doc/sub/a.tmp", false), "* does not cross /");
    }

    #[test]
    fn double_star_crosses_slashes() {
        let f = filter(&[(X, "/doc/**/*.tmp")]);
        assert!(out(&f, "doc/a.tmp", false));
        assert!(out(&f, "doc/x/y/a.tmp", false));
        assert!(!out(&f, "src/doc/a.tmp", false));
    }

    #[test]
    fn trailing_slash_is_directories_only() {
        let f = filter(&[(X, "cache/")]);
        assert!(out(&f, "a/cache", true));
        assert!(!out(&f, "a/cache", false));
        // The kind is asked only when the pattern matches.
        assert!(!f.excludes(Path::new("other"), || panic!("asked")));
    }

    #[test]
    fn first_match_wins() {
        let f = filter(&[(I, "*.rs"), (I, "*/"), (X, "*")]);
        assert!(!out(&f, "main.rs", false));
        assert!(!out(&f, "src", true));
        assert!(out(&f, "README", false));
        let f = filter(&[(X, "*"), (I, "*.rs")]);
        assert!(out(&f, "main.rs", false));
    }

    #[test]
    fn classes_question_marks_and_escapes() {
        let f = filter(&[(X, "[ab]?.txt"), (X, "\\*")]);
        assert!(out(&f, "a1.txt", false));
        assert!(!out(&f, "c1.txt", false));
        assert!(!out(&f, "a/.txt", false));
        assert!(out(&f, "*", false));
        assert!(!out(&f, "x", false));
        assert!(Rule::new(X, "[ab").is_err());
        assert!(Rule::new(X, "").is_err());
    }
}
