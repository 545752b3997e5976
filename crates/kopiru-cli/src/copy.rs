//! `kopiru copy`: renders the engine's events (errors, --explain lines, the
//! bar) and the --json summary.

use crate::args::CopyArgs;
use crate::changes;
use crate::exit;
use crate::progress::{self, Progress, Work};
use crate::render;
use crate::signals::{self, OnSignal};
use crate::size::human;
use kopiru::{Change, EntryKind, Error, FileDone, Phase, Reporter, Summary};
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;

struct CliReporter {
    explain: bool,
    verbose: bool,
    /// How --dry-run and --itemize-changes show each change.
    changes: Option<changes::Style>,
    progress: Option<Progress>,
    /// One -i question at a time (workers ask concurrently).
    asking: std::sync::Mutex<()>,
    /// `--report`: a JSON line per entry.
    report: Option<crate::scale::Report>,
    /// Bytes written so far, finished files or not: what a stopped copy
    /// says it wrote (its unfinished file's part is kept for --resume).
    written: std::sync::atomic::AtomicU64,
    /// Owners not kept (chown refused), counted rather than printed one by
    /// one unless -v: a user who is not root copying with -a would get a
    /// line per entry. Said once at the end ([`owners_not_kept`]).
    owners: std::sync::Mutex<OwnersNotKept>,
}

/// Chown warnings held back, by what was kept and why it failed.
#[derive(Default)]
struct OwnersNotKept {
    /// (the group was kept, the reason, not permitted) → how many entries, and the
    /// first one's warning as it would have been printed.
    groups: std::collections::BTreeMap<(bool, String, bool), (u64, String)>,
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
        // Joining paths is most of kopiru's own CPU on a tree of small
        // files (callgrind): only when something shows them.
        if self.report.is_none() && !self.verbose && !self.explain {
            return;
        }
        let (src, dst) = (d.source_path(), d.dest_path());
        if let Some(r) = &self.report {
            r.file_done(&src, &dst, d);
        }
        if self.verbose {
            self.print(false, &format!("{} -> {}", quoted(&src), quoted(&dst)));
        }
        if self.explain {
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
        self.written
            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        if let Some(p) = &self.progress {
            p.bytes(n);
        }
    }

    fn error(&self, e: &Error) {
        if let Some(r) = &self.report {
            r.error(e);
        }
        self.print(true, &format!("kopiru: {}", crate::render::error(e)));
    }

    fn kept(&self, path: &Path) {
        if let Some(r) = &self.report {
            r.kept(path);
        }
    }

    fn warning(&self, e: &Error) {
        let line = format!("kopiru: warning: {}", crate::render::error(e));
        let group_kept = match e.op {
            kopiru::Op::Chown => false,
            kopiru::Op::ChownGroupOnly => true,
            _ => return self.print(true, &line),
        };
        if self.verbose {
            return self.print(true, &line);
        }
        // EPERM (and EACCES): not the owner's to give away, root's.
        let eperm = e
            .io_error()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::PermissionDenied);
        let mut owners = self.owners.lock().unwrap_or_else(|e| e.into_inner());
        let n = owners
            .groups
            .entry((group_kept, crate::render::reason(e), eperm))
            .or_insert((0, line));
        n.0 += 1;
    }

    fn change(&self, c: &Change) {
        if let Some(r) = &self.report {
            r.change(c);
        }
        if let (true, None, Some(src)) = (self.verbose, self.changes, c.source) {
            if c.kind != EntryKind::File {
                self.print(false, &format!("{} -> {}", quoted(src), quoted(c.path)));
            }
        }
        if let Some(style) = self.changes {
            self.print(false, &changes::line(style, c));
        }
    }

    fn confirm_replace(&self, path: &Path) -> bool {
        let _one = self.asking.lock().unwrap_or_else(|e| e.into_inner());
        let ask = || {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "kopiru: overwrite {}? ", quoted(path));
            let _ = err.flush();
            let mut answer = String::new();
            // As cp: the end of the input is "no".
            match std::io::stdin().lock().read_line(&mut answer) {
                Ok(n) if n > 0 => answer.trim_start().starts_with(['y', 'Y']),
                _ => false,
            }
        };
        match &self.progress {
            Some(p) => p.bar.suspend(ask),
            None => ask(),
        }
    }

    fn phase(&self, phase: Phase) {
        if let Some(p) = &self.progress {
            p.phase(phase);
        }
    }
}

/// What a cancelled copy says (after `kopiru: received SIGxxx: `).
const STOPPED: &str = "stopped; run the same command with --resume to finish";

pub fn run(args: CopyArgs) -> u8 {
    if let Some(note) = crate::compat::rsync_p_note(std::env::args_os()) {
        errln!("{note}");
    }
    let mut opts = match args.options() {
        Ok(o) => o,
        Err(e) => {
            errln!("kopiru: {e}");
            return exit::USAGE;
        }
    };
    // cp -v lists directories, symlinks and hard links too: they come as
    // changes (regular files as file_done).
    opts.report_changes |= args.verbose;
    opts.cancel = signals::install(
        OnSignal::Cancel,
        "stopped at once; run the same command with --resume to finish",
    );
    let (sources, dest) = match args.sources_and_dest() {
        Ok(p) => p,
        Err(e) => {
            errln!("kopiru: {e}");
            return exit::USAGE;
        }
    };
    let dest = dest.as_path();
    let report = match &args.scale.report {
        Some(path) => match crate::scale::Report::open(path) {
            Ok(r) => Some(r),
            Err(e) => {
                errln!("kopiru: {e}");
                return exit::USAGE;
            }
        },
        None => None,
    };
    let mut reporter = new_reporter(&args, sources, &opts, report);
    // The one-line summary at the end goes where the bar would be: on a
    // terminal (or with --progress), never into a pipe unasked.
    let summary_wanted = args.bar.wanted(true);
    let result = kopiru::copy(sources, dest, &opts, &reporter);
    if let Some(p) = &mut reporter.progress {
        p.finish();
    }
    match result {
        Err(e) => {
            errln!("kopiru: {}", crate::render::plan_error(&e));
            exit::USAGE
        }
        Ok(summary) => finished(&summary, &reporter, &args, &opts, summary_wanted),
    }
}

/// The reporter for these arguments: how changes are shown, and the bar.
fn new_reporter(
    args: &CopyArgs,
    sources: &[std::path::PathBuf],
    opts: &kopiru::CopyOptions,
    report: Option<crate::scale::Report>,
) -> CliReporter {
    // A listed or sharded copy has no total to show (the sources' walk
    // would count the whole tree).
    let listed = args.scale.files_from.is_some() || args.scale.shard.is_some();
    // --explain prints a line per file: no bar on top of that unless asked.
    CliReporter {
        explain: args.explain,
        verbose: args.verbose,
        changes: match (args.select.itemize_changes, args.select.dry_run) {
            (true, _) => Some(changes::Style::Itemize),
            (false, true) => Some(changes::Style::Plain),
            (false, false) => None,
        },
        progress: args
            .bar
            .wanted(!args.explain && !args.select.dry_run && !args.select.itemize_changes)
            .then(|| match listed {
                false => Progress::start(Work::Copy, sources, opts, args.bar.progress),
                true => Progress::start(Work::Listed, sources, opts, args.bar.progress),
            }),
        asking: std::sync::Mutex::new(()),
        report,
        written: Default::default(),
        owners: Default::default(),
    }
}

/// The owners not kept, one line for each reason: "owner and group not kept
/// for 1234 entries: chown: Operation not permitted (run as root to keep
/// them; -v lists them)"; a single entry as its own warning.
fn owners_not_kept(o: &OwnersNotKept) -> Vec<String> {
    o.groups
        .iter()
        .map(|((group_kept, reason, eperm), (n, first))| match n {
            1 => first.clone(),
            n => {
                format!(
                "kopiru: warning: {} not kept for {n} entries: chown: {reason} ({}-v lists them)",
                match group_kept {
                    false => "owner and group",
                    true => "owner (the group was kept)",
                },
                if *eperm { "run as root to keep them; " } else { "" }
            )
            }
        })
        .collect()
}

/// After a copy that ran: the record's end, the stop line, the one-line
/// summary and `--json`; returns the exit code.
fn finished(
    summary: &Summary,
    reporter: &CliReporter,
    args: &CopyArgs,
    opts: &kopiru::CopyOptions,
    summary_wanted: bool,
) -> u8 {
    let mut code = summary.outcome().code();
    if let Some(Err(e)) = reporter.report.as_ref().map(|r| r.finish()) {
        // The copy is there, but its record is not whole.
        errln!("kopiru: {e}");
        code = code.max(exit::PARTIAL);
    }
    for line in owners_not_kept(&reporter.owners.lock().unwrap_or_else(|e| e.into_inner())) {
        errln!("{line}");
    }
    if summary.cancelled {
        errln!("{}", signals::stopped_line(STOPPED));
    }
    if let (true, Some(fs)) = (args.explain, &summary.round_trips) {
        outln!(
            "up to {} workers ran: on {fs}, where each operation is a round trip, the default is more workers than CPUs",
            summary.workers
        );
        if !summary.worker_steps.is_empty() {
            let steps: Vec<String> = summary
                .worker_steps
                .iter()
                .map(|s| {
                    format!(
                        "{} workers {:.0} entries/s",
                        s.workers, s.entries_per_second
                    )
                })
                .collect();
            outln!(
                "workers doubled while the rate of finished entries rose by 15% or more: {}",
                steps.join(", ")
            );
        }
        if summary.server_side_files > 0 {
            outln!(
                "server-side on {fs}: {} files cloned or copied by the server (NFS CLONE or \
                 COPY, SMB copychunk; COPY only where the server has it): their data did not \
                 cross the network",
                summary.server_side_files
            );
        }
    }
    if summary_wanted {
        // A bar forced into a file or pipe leaves its last frame
        // without a newline.
        let forced = reporter.progress.is_some() && !std::io::stderr().is_terminal();
        errln!(
            "{}{}",
            if forced { "\n" } else { "" },
            summary_line(
                summary,
                args.select.dry_run,
                Unfinished {
                    written: reporter.written.load(std::sync::atomic::Ordering::Relaxed),
                    kept: opts.partial,
                }
            )
        );
    }
    if summary.dirs_not_made > 0 {
        errln!(
            "kopiru: {} not copied under {} that could not be made",
            count(summary.not_copied, "entry", "entries"),
            count(summary.dirs_not_made, "directory", "directories")
        );
    }
    if args.compat.wants_stats() {
        outln!("{}", stats(summary));
    }
    if args.json {
        outln!("{}", json_summary(summary, code, args.select.dry_run));
    }
    code
}

/// `--stats`: rsync's statistics, the lines that map onto a local copy.
fn stats(s: &Summary) -> String {
    let created = s.files + s.dirs - s.dirs_merged + s.symlinks + s.specials + s.hardlinks;
    [
        format!(
            "Number of files: {} (reg: {}, dir: {}, link: {}, special: {})",
            created + s.skipped,
            s.files,
            s.dirs,
            s.symlinks,
            s.specials
        ),
        format!("Number of created files: {created}"),
        format!("Number of deleted files: {}", s.deleted),
        format!("Number of regular files transferred: {}", s.files),
        format!("Number of entries left as they were: {}", s.skipped),
        format!("Total transferred file size: {} bytes", s.bytes),
        format!("Number of failures: {}", s.errors.len()),
        format!("Time: {:.3} seconds", s.elapsed.as_secs_f64()),
    ]
    .join("\n")
}

/// A path as cp -v shows it (GNU's shell-escape quoting): in single
/// quotes; a name with a single quote (and nothing a shell expands in
/// double quotes) in double quotes; otherwise a single quote as '\''. A
/// control character or a byte that is not UTF-8 leaves the quotes for a
/// `$'...'` escape, as in `'new'$'\n''line'`, so the line stays one line
/// and pastes back into a shell as the same name.
fn quoted(p: &Path) -> String {
    #[cfg(unix)]
    let bytes = std::os::unix::ffi::OsStrExt::as_bytes(p.as_os_str()).to_vec();
    #[cfg(not(unix))]
    let bytes = render::path(p).into_bytes();
    let plain = std::str::from_utf8(&bytes)
        .ok()
        .filter(|s| !s.chars().any(char::is_control));
    match plain {
        Some(s) if !s.contains('\'') => format!("'{s}'"),
        Some(s) if !s.contains(['"', '$', '`', '\\', '!']) => format!("\"{s}\""),
        _ => shell_escaped(&bytes),
    }
}

/// `bytes` in single quotes, a single quote as '\'', and each run of
/// control characters and stray bytes as `$'\n'` or `$'\377'` between
/// closed quotes.
fn shell_escaped(bytes: &[u8]) -> String {
    let mut out = String::from("'");
    let mut escaping = false;
    let escape = |out: &mut String, esc: &str, escaping: &mut bool| {
        if !*escaping {
            out.push_str("'$'");
            *escaping = true;
        }
        out.push_str(esc);
    };
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            let esc = match c {
                '\x07' => Some("\\a".to_string()),
                '\x08' => Some("\\b".to_string()),
                '\t' => Some("\\t".to_string()),
                '\n' => Some("\\n".to_string()),
                '\x0b' => Some("\\v".to_string()),
                '\x0c' => Some("\\f".to_string()),
                '\r' => Some("\\r".to_string()),
                c if c.is_control() => Some(
                    c.to_string()
                        .bytes()
                        .map(|b| format!("\\{b:03o}"))
                        .collect(),
                ),
                _ => None,
            };
            match esc {
                Some(e) => escape(&mut out, &e, &mut escaping),
                None => {
                    if escaping {
                        out.push_str("''");
                        escaping = false;
                    }
                    match c {
                        '\'' => out.push_str("'\\''"),
                        c => out.push(c),
                    }
                }
            }
        }
        for b in chunk.invalid() {
            escape(&mut out, &format!("\\{b:03o}"), &mut escaping);
        }
    }
    // Closes the quotes, or the $'...' escape.
    out.push('\'');
    out
}

/// What a stopped copy wrote of files it did not finish.
struct Unfinished {
    /// Bytes written in all, finished files' (`Summary::bytes`) included.
    written: u64,
    /// Kept for the next run (`--partial`), not removed.
    kept: bool,
}

/// The short summary on a terminal, as rsync --stats's last lines:
/// `kopiru: copied 812 files, 1.2 GiB in 9s (130.4 MiB/s)`, then what a
/// stopped copy wrote of unfinished files, and what was skipped, failed or
/// withdrawn, when anything was.
fn summary_line(s: &Summary, dry_run: bool, unfinished: Unfinished) -> String {
    let secs = s.elapsed.as_secs_f64();
    let mut line = format!(
        "kopiru: {} {}, {} in {}",
        if s.cancelled {
            "stopped after"
        } else if dry_run {
            "dry run, nothing written: would copy"
        } else {
            "copied"
        },
        count(s.files, "file", "files"),
        human(s.bytes),
        if secs < 10.0 {
            format!("{secs:.2}s")
        } else {
            progress::duration(secs)
        }
    );
    if secs > 0.0 && s.bytes > 0 {
        line.push_str(&format!(" ({})", progress::rate(s.bytes as f64 / secs)));
    }
    let part = unfinished.written.saturating_sub(s.bytes);
    if s.cancelled && part > 0 {
        line.push_str(&format!(
            ", {} of unfinished files {}",
            human(part),
            match unfinished.kept {
                true => "kept for --partial or --resume",
                false => "removed (--partial keeps them)",
            }
        ));
    }
    for (n, what) in [
        (s.skipped, "left as they were"),
        (s.verified_files, "verified"),
        (s.withdrawn, "withdrawn (flush failed)"),
        (s.deleted, "deleted"),
        (s.errors.len() as u64, "failed"),
        (s.warnings.len() as u64, "warnings"),
    ] {
        if n == 1 && what == "warnings" {
            line.push_str(", 1 warning");
        } else if n > 0 {
            line.push_str(&format!(", {n} {what}"));
        }
    }
    line
}

/// "1 file", "2 files", "0 files".
fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The summary as `--json` prints it, with the exit code the command
/// chose (a report file that could not be finished makes it partial).
fn json_summary(s: &Summary, code: u8, dry_run: bool) -> serde_json::Value {
    let mut j = crate::render::JSON.copy(s, dry_run);
    j["exit_code"] = code.into();
    j
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Chown warnings: many said once per reason, one as itself.
    #[test]
    fn owners_not_kept_one_line_per_reason() {
        let mut o = OwnersNotKept::default();
        o.groups.insert(
            (false, "Operation not permitted".into(), true),
            (
                1234,
                "kopiru: warning: d/a: chown: Operation not permitted".into(),
            ),
        );
        o.groups.insert(
            (true, "Invalid argument".into(), false),
            (
                1,
                "kopiru: warning: d/b: chown (owner kept as yours): Invalid argument".into(),
            ),
        );
        assert_eq!(
            owners_not_kept(&o),
            [
                "kopiru: warning: owner and group not kept for 1234 entries: chown: Operation \
                 not permitted (run as root to keep them; -v lists them)",
                "kopiru: warning: d/b: chown (owner kept as yours): Invalid argument",
            ]
        );
    }
    use std::time::Duration;

    #[test]
    fn quoted_as_cp() {
        assert_eq!(quoted(Path::new("a b")), "'a b'");
        assert_eq!(quoted(Path::new("it's")), "\"it's\"");
        assert_eq!(quoted(Path::new("it's $x")), "'it'\\''s $x'");
        // As GNU cp 9 prints them.
        assert_eq!(quoted(Path::new("new\nline")), "'new'$'\\n''line'");
        assert_eq!(quoted(Path::new("\nx")), "''$'\\n''x'");
        assert_eq!(quoted(Path::new("x\n")), "'x'$'\\n'");
        assert_eq!(quoted(Path::new("a\t\x01b")), "'a'$'\\t\\001''b'");
        assert_eq!(quoted(Path::new("it's\n")), "'it'\\''s'$'\\n'");
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            let latin1 = Path::new(std::ffi::OsStr::from_bytes(b"caf\xe9"));
            assert_eq!(quoted(latin1), "'caf'$'\\351'");
        }
    }

    fn none() -> Unfinished {
        Unfinished {
            written: 0,
            kept: false,
        }
    }

    #[test]
    fn summary_line_reads_like_rsync_stats() {
        let mut s = Summary::default();
        (s.files, s.bytes, s.elapsed) = (812, 3 << 30, Duration::from_secs(12));
        assert_eq!(
            summary_line(&s, false, none()),
            "kopiru: copied 812 files, 3.0 GiB in 12s (256.0 MiB/s)"
        );
        s.skipped = 4;
        s.cancelled = true;
        s.elapsed = Duration::from_millis(1500);
        assert_eq!(
            summary_line(&s, false, none()),
            "kopiru: stopped after 812 files, 3.0 GiB in 1.50s (2.0 GiB/s), 4 left as they were"
        );
        let mut one = Summary::default();
        (one.files, one.bytes, one.elapsed) = (1, 10, Duration::from_secs(1));
        one.warnings = vec![kopiru::Error::io(
            kopiru::Side::Destination,
            "x",
            kopiru::Op::Write,
            std::io::Error::other("w"),
        )];
        assert_eq!(
            summary_line(&one, false, none()),
            "kopiru: copied 1 file, 10 B in 1.00s (10 B/s), 1 warning"
        );
        // Stopped in the middle of the first file: what it wrote of it.
        let mut s = Summary::default();
        (s.cancelled, s.elapsed) = (true, Duration::from_secs(2));
        assert_eq!(
            summary_line(
                &s,
                false,
                Unfinished {
                    written: 1 << 30,
                    kept: false
                }
            ),
            "kopiru: stopped after 0 files, 0 B in 2.00s, \
             1.0 GiB of unfinished files removed (--partial keeps them)"
        );
    }
}
