//! `kopiru verify SRC DEST`: prints each difference, exits like `diff`.

use crate::args::VerifyArgs;
use kopiru::verify::{verify, VerifyOptions};
use std::io::Write;

/// The trees are the same.
const SAME: u8 = 0;
/// They differ.
const DIFFERENT: u8 = 1;
/// Something could not be read (or the arguments were wrong).
const TROUBLE: u8 = 2;

pub fn run(args: VerifyArgs) -> u8 {
    let opts = VerifyOptions {
        jobs: args.jobs.unwrap_or(0),
        extra_is_difference: !args.ignore_extra,
    };
    let report = verify(&args.source, &args.dest, opts);
    let code = if !report.errors.is_empty() {
        TROUBLE
    } else if !report.differences.is_empty() {
        DIFFERENT
    } else {
        SAME
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        let j = serde_json::json!({
            "files": report.files,
            "bytes": report.bytes,
            "differences": report.differences.iter().map(|d| serde_json::json!({
                "path": crate::render::path(&d.path),
                "what": d.what.to_string(),
            })).collect::<Vec<_>>(),
            "errors": report.errors.iter().map(crate::render::error_json).collect::<Vec<_>>(),
            "exit_code": code,
        });
        let _ = writeln!(out, "{j}");
    } else {
        for d in &report.differences {
            let path = if d.path.as_os_str().is_empty() {
                args.dest.clone()
            } else {
                args.dest.join(&d.path)
            };
            let _ = writeln!(out, "{}: {}", crate::render::path(&path), d.what);
        }
    }
    for e in &report.errors {
        eprintln!("kopiru: {e}");
    }
    code
}
