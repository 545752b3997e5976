//! `kopiru verify SRC DEST`: prints each difference, exits like `diff`.

use crate::args::VerifyArgs;
use crate::signals::{self, OnSignal};
use kopiru::verify;
use kopiru::verify::VerifyOptions;
use std::io::Write;

/// What a cancelled comparison says (after "kopiru: received SIGxxx: ").
const STOPPED: &str = "stopped; nothing was changed, and the comparison is incomplete";

pub fn run(args: VerifyArgs) -> u8 {
    let mut opts = VerifyOptions::new();
    opts.jobs = args.jobs.unwrap_or(0);
    opts.extra_is_difference = !args.ignore_extra;
    opts.cancel = signals::install(OnSignal::Cancel, STOPPED);
    let report = verify(&args.source, &args.dest, &opts, &kopiru::Noop);
    if report.cancelled {
        errln!("{}", signals::stopped_line(STOPPED));
    }
    let code = report.outcome().code();
    let mut out = std::io::stdout().lock();
    if args.json {
        let j = crate::render::JSON.verify(&report, &args.dest);
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
    drop(out);
    for e in &report.errors {
        errln!("kopiru: {}", crate::render::error(e));
    }
    code
}
