//! `kopiru copy`: renders the engine's events (errors, --explain lines, the
//! bar) and the --json summary.

use crate::args::CopyArgs;
use crate::exit;
use crate::progress::Progress;
use crate::render;
use crate::signals::{self, OnSignal};
use kopiru::{Error, FileDone, Method, Reporter, Summary};
use std::io::Write;
use std::path::Path;

struct CliReporter {
    explain: bool,
    progress: Option<Progress>,
}

impl CliReporter {
    /// Prints a line without tearing the bar.
    fn print(&self, to_stderr: bool, line: &str) {
        let write = || {
            // A closed pipe is not an error worth dying for.
            let _ = if to_stderr {
                writeln!(std::io::stderr().lock(), "{line}")
            } else {
                writeln!(std::io::stdout().lock(), "{line}")
            };
        };
        match &self.progress {
            Some(p) => p.bar.suspend(write),
            None => write(),
        }
    }
}

impl Reporter for CliReporter {
    fn file_done(&self, d: &FileDone) {
        if let Some(p) = &self.progress {
            p.file();
        }
        if self.explain {
            let src = Path::new(d.src_dir).join(d.name);
            let dst = Path::new(d.dst_dir).join(d.dst_name);
            let mut line = format!(
                "{:<8}{} -> {}",
                d.method.name(),
                render::path(&src),
                render::path(&dst)
            );
            if let Some(why) = d.why_not {
                line.push_str(&format!("  ({why})"));
            }
            self.print(false, &line);
        }
    }

    fn bytes(&self, n: u64) {
        if let Some(p) = &self.progress {
            p.bytes(n);
        }
    }

    fn error(&self, e: &Error) {
        self.print(true, &format!("kopiru: {e}"));
    }

    fn warning(&self, e: &Error) {
        self.print(true, &format!("kopiru: warning: {e}"));
    }
}

/// What a cancelled copy says (after `kopiru: received SIGxxx: `).
const STOPPED: &str = "stopped; run the same command with --resume to finish";

pub fn run(args: CopyArgs) -> u8 {
    let mut opts = match args.options() {
        Ok(o) => o,
        Err(e) => {
            errln!("kopiru: {e}");
            return exit::USAGE;
        }
    };
    opts.cancel = signals::install(
        OnSignal::Cancel,
        "stopped at once; run the same command with --resume to finish",
    );
    let (dest, sources) = args.paths.split_last().expect("clap requires two paths");
    // --explain prints a line per file: no bar on top of that unless asked.
    let mut reporter = CliReporter {
        explain: args.explain,
        progress: args
            .bar
            .wanted(!args.explain)
            .then(|| Progress::start(sources, args.bar.progress)),
    };
    let result = kopiru::copy(sources, dest, &opts, &reporter);
    if let Some(p) = &mut reporter.progress {
        p.finish();
    }
    match result {
        Err(e) => {
            errln!("kopiru: {e}");
            exit::USAGE
        }
        Ok(summary) => {
            let code = exit::for_copy(&summary);
            if summary.cancelled {
                errln!("{}", signals::stopped_line(STOPPED));
            }
            if args.json {
                outln!("{}", json_summary(&summary, code));
            }
            code
        }
    }
}

fn json_summary(s: &Summary, code: u8) -> serde_json::Value {
    let methods: serde_json::Map<String, serde_json::Value> = Method::ALL
        .iter()
        .map(|m| (m.name().to_string(), s.method_count(*m).into()))
        .collect();
    serde_json::json!({
        "files": s.files,
        "bytes": s.bytes,
        "directories": s.dirs,
        "symlinks": s.symlinks,
        "special_files": s.specials,
        "hard_links": s.hardlinks,
        "skipped": s.skipped,
        "withdrawn": s.withdrawn,
        "verified_files": s.verified_files,
        "methods": methods,
        "errors": s.errors.iter().map(render::error_json).collect::<Vec<_>>(),
        "warnings": s.warnings.iter().map(render::error_json).collect::<Vec<_>>(),
        "elapsed_seconds": s.elapsed.as_secs_f64(),
        "cancelled": s.cancelled,
        "exit_code": code,
    })
}
