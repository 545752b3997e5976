//! `kopiru dedupe`: runs the engine, shows bytes hashed on a terminal, and
//! prints the summary (text or JSON).

use crate::args::DedupeArgs;
use crate::exit;
use crate::progress::{Progress, Work};
use crate::signals::{self, OnSignal};
use crate::size::{human, parse_size};
use kopiru::dedupe::{dedupe, DedupeOptions, DedupeSummary};
use kopiru::Reporter;

struct Bar(Option<Progress>);

impl Reporter for Bar {
    fn bytes(&self, n: u64) {
        if let Some(p) = &self.0 {
            p.bytes(n);
        }
    }
}

pub fn run(args: DedupeArgs) -> u8 {
    let min_size = match args.min_size.as_deref().map(parse_size).transpose() {
        Ok(m) => m,
        Err(e) => {
            errln!("kopiru: --min-size: {e}");
            return exit::USAGE;
        }
    };
    let cancel = signals::install(
        OnSignal::Cancel,
        "stopped; every file keeps its contents (some may share blocks now)",
    );
    let mut opts = DedupeOptions::new();
    opts.dry_run = args.dry_run;
    opts.min_size = min_size;
    opts.jobs = args.jobs.unwrap_or(0);
    opts.cancel = cancel;
    // The engine reports bytes hashed only: no phase, no files, no total.
    let mut bar = Bar(args.bar.wanted(true).then(|| {
        Progress::start(
            Work::Hash,
            &[],
            &kopiru::CopyOptions::default(),
            args.bar.progress,
        )
    }));
    let s = dedupe(&args.paths, &opts, &bar);
    if let Some(p) = &mut bar.0 {
        p.finish();
    }
    for e in &s.errors {
        errln!("kopiru: {}", crate::render::error(e));
    }
    for u in &s.unsupported {
        errln!("kopiru: {}", unsupported_line(u));
    }
    if s.cancelled {
        errln!(
            "{}",
            signals::stopped_line(
                "stopped; every file keeps its contents (some may share blocks now)"
            )
        );
    }
    let code = s.outcome().code();
    if args.json {
        outln!("{}", crate::render::JSON.dedupe(&s, args.dry_run));
    } else {
        out!("{}", text(&s, args.dry_run));
    }
    code
}

/// "m4/d: ext4 (mounted on /mnt/x) cannot share blocks between files: its
/// 6 files were left alone": once per filesystem, under the PATH given.
fn unsupported_line(u: &kopiru::dedupe::Unsupported) -> String {
    let fs = if u.fs_type.is_empty() {
        "this filesystem"
    } else {
        &u.fs_type
    };
    let at = match u.mount_point.as_str() {
        "" => String::new(),
        m => format!(" (mounted on {m})"),
    };
    format!(
        "{}: {fs}{at} cannot share blocks between files: its {} left alone",
        crate::render::path(&u.path),
        match u.files {
            1 => "1 file was".to_string(),
            n => format!("{n} files were"),
        }
    )
}

fn text(s: &DedupeSummary, dry_run: bool) -> String {
    let left_alone: u64 = s.unsupported.iter().map(|u| u.files).sum();
    let mut out = format!(
        "{} files scanned{}, {} hashed; {} groups of identical files\n",
        s.files_scanned,
        match left_alone {
            0 => String::new(),
            n => format!(" ({n} on filesystems that cannot share blocks: left alone)"),
        },
        human(s.bytes_hashed),
        s.groups
    );
    if dry_run {
        out.push_str(&format!(
            "would share: {} files, {} (space freed up to that much)\n",
            s.files_shared,
            human(s.bytes_shared)
        ));
    } else {
        out.push_str(&format!(
            "now sharing: {} files, {}; space freed: {}\n",
            s.files_shared,
            human(s.bytes_shared),
            human(s.space_freed.max(0) as u64)
        ));
    }
    if s.already_shared > 0 {
        out.push_str(&format!(
            "already sharing: {} files (left as they are)\n",
            s.already_shared
        ));
    }
    if s.changed > 0 {
        out.push_str(&format!(
            "changed since hashing: {} files (left as they are)\n",
            s.changed
        ));
    }
    out
}
