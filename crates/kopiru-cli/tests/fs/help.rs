//! Golden `--help` of every command: each is compared with its checked-in
//! copy under tests/help/. After a deliberate change, regenerate them with
//!
//!     KOPIRU_BLESS=1 cargo test -p kopiru-cli --test fs -- help::
//!
//! and review the diff. Needs no root.

use crate::{Add, R};
use std::path::PathBuf;
use std::process::Command;

/// Each page: its file name under tests/help/ (without .txt), and the
/// arguments that print it.
pub const PAGES: &[(&str, &[&str])] = &[
    ("kopiru", &["--help"]),
    ("copy", &["copy", "--help"]),
    ("verify", &["verify", "--help"]),
    ("dedupe", &["dedupe", "--help"]),
    ("flash", &["flash", "--help"]),
    ("image", &["image", "--help"]),
    ("gui", &["gui", "--help"]),
    ("probe", &["probe", "--help"]),
    ("bench", &["bench", "--help"]),
    ("bench-sweep", &["bench", "sweep", "--help"]),
    ("bench-fsync", &["bench", "fsync", "--help"]),
    ("completions", &["completions", "--help"]),
    ("man", &["man", "--help"]),
];

fn golden(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/help")
        .join(format!("{name}.txt"))
}

/// `kopiru ARGS` prints exactly tests/help/NAME.txt, at a fixed width of
/// 100 columns and without colour, whatever the terminal.
pub fn check(name: &str, args: &[&str]) -> R {
    let o = Command::new(env!("CARGO_BIN_EXE_kopiru"))
        .args(args)
        .env("COLUMNS", "100")
        .env("NO_COLOR", "1")
        .env_remove("CLICOLOR_FORCE")
        .env_remove("CLICOLOR")
        .output()?;
    if !o.status.success() {
        return Err(format!("kopiru {args:?}: {}", crate::show(&o)).into());
    }
    let got = String::from_utf8(o.stdout)?;
    let path = golden(name);
    if std::env::var_os("KOPIRU_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &got)?;
        return Ok(());
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    if got == want {
        return Ok(());
    }
    Err(format!(
        "`kopiru {}` differs from {} (- checked in, + now):\n{}\n\
         If the change is intended, regenerate with\n  \
         KOPIRU_BLESS=1 cargo test -p kopiru-cli --test fs -- help::\n\
         and commit tests/help/.",
        args.join(" "),
        path.display(),
        diff(&want, &got)
    )
    .into())
}

/// A line diff (longest common subsequence): `-` lines only in `a`, `+`
/// lines only in `b`, with two lines of context around each change.
fn diff(a: &str, b: &str) -> String {
    let a: Vec<&str> = a.lines().collect();
    let b: Vec<&str> = b.lines().collect();
    // lcs[i][j]: length of the LCS of a[i..] and b[j..].
    let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut lines: Vec<(char, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            lines.push((' ', a[i]));
            i += 1;
            j += 1;
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] >= lcs[i + 1][j]) {
            lines.push(('+', b[j]));
            j += 1;
        } else {
            lines.push(('-', a[i]));
            i += 1;
        }
    }
    let near = |k: usize| {
        lines[k.saturating_sub(2)..(k + 3).min(lines.len())]
            .iter()
            .any(|(c, _)| *c != ' ')
    };
    let mut out = String::new();
    let mut skipped = false;
    for (k, (c, l)) in lines.iter().enumerate() {
        if near(k) {
            out.push_str(&format!("{c} {l}\n"));
            skipped = false;
        } else if !skipped {
            out.push_str("  ...\n");
            skipped = true;
        }
    }
    out
}

/// Registers this module's trials.
pub fn trials(add: Add) {
    for (name, args) in PAGES {
        add(
            format!("help::{name}"),
            None,
            Box::new(move || check(name, args)),
        );
    }
}
