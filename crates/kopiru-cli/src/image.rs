//! `kopiru image`: checks the device and OUTPUT, shows progress, and
//! reports the image with its SHA-256.

use crate::args::ImageArgs;
use crate::exit;
use crate::progress;
use crate::render;
use crate::size::human;
use kopiru::image::{check_source, image, ImageOptions, ImageSummary};
use kopiru::Format;

/// What a cancelled image says (after "kopiru: received SIGxxx: ").
const STOPPED: &str = "stopped; no image written";

pub fn run(args: ImageArgs) -> u8 {
    if is_standard_output(&args.output) {
        errln!(
            "kopiru: image: {}: OUTPUT is standard output: an image is written to a file (under \
             a temporary name, verified, then renamed into place), never to a stream; give a \
             file name",
            render::path(&args.output)
        );
        return exit::USAGE;
    }
    let format = Format::of_output(&args.output);
    if let Err(code) = check_numbers(&args, format) {
        return code;
    }
    let mut opts = ImageOptions::new();
    opts.allow_file = args.file;
    opts.force = args.force;
    opts.format = format;
    opts.level = args.level;
    opts.bmap = args.bmap.clone();
    opts.partitions_only = args.partitions_only;
    opts.verify = !args.no_verify;
    if let Some(j) = args.jobs {
        opts.threads = j;
    }
    let src = match check_source(&args.device, &args.output, &opts) {
        Ok(s) => s,
        Err(e) => {
            errln!("kopiru: {}", render::refused(&e));
            return exit::USAGE;
        }
    };
    opts.cancel = crate::signals::install(crate::signals::OnSignal::Cancel, STOPPED);
    let bar = progress::DeviceBar::new(
        args.bar
            .wanted(true)
            .then(|| progress::bar(args.bar.progress, Some(src.size), progress::DEVICE_BAR)),
        false,
    );
    if let Some(b) = &bar.bar {
        b.set_style(bar.style(progress::DEVICE_BAR));
        // Counted as the encoder completes it, not as it is read ahead.
        b.set_message(if format == Format::Raw {
            "read"
        } else {
            "compressed"
        });
    }
    let s = image(&src, &args.output, &opts, &bar);
    if let Some(b) = &bar.bar {
        b.finish_and_clear();
    }
    let code = s.outcome().code();
    report_failure(&s, &args);
    if args.json {
        let j = render::JSON.image(&s, &src, &args.device, &args.output, args.bmap.as_deref());
        outln!("{j}");
    }
    // As flash: where a bar was shown, one line says what it came to (in a
    // pipe, --json has the same).
    if bar.bar.is_some() && s.ok() {
        errln!("kopiru: {}", summary_line(&s, &args));
    }
    code
}

/// Whether `out` names standard output: `-`, a name that leads to it
/// (`/dev/stdout`, `/dev/fd/1`, `/proc/self/fd/1`, through links), or the
/// very file standard output is (`kopiru image DEV out.img > out.img`).
fn is_standard_output(out: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    use std::path::Path;
    if out.as_os_str() == "-" {
        return true;
    }
    let names = [
        Path::new("/dev/stdout"),
        Path::new("/dev/fd/1"),
        Path::new("/proc/self/fd/1"),
    ];
    let mut at = out.to_path_buf();
    for _ in 0..8 {
        if names.contains(&at.as_path()) {
            return true;
        }
        match std::fs::read_link(&at) {
            Ok(next) => at = at.parent().unwrap_or(Path::new("/")).join(next),
            Err(_) => break,
        }
    }
    // /proc/self/fd/1 is standard output's own entry: the same file.
    match (std::fs::metadata(out), std::fs::metadata("/proc/self/fd/1")) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}

/// Refuses a `--level` that OUTPUT's format does not take, and `-j 0`.
fn check_numbers(args: &ImageArgs, format: Format) -> Result<(), u8> {
    if let Some(level) = args.level {
        if let Err(why) = format.check_level(level) {
            errln!("kopiru: --level {level}: {why}");
            return Err(exit::USAGE);
        }
    }
    if args.jobs == Some(0) {
        errln!("kopiru: -j 0: at least one thread");
        return Err(exit::USAGE);
    }
    Ok(())
}

/// What went wrong, on standard error: the failed operation, a cancel, a
/// read-back that differs.
fn report_failure(s: &ImageSummary, args: &ImageArgs) {
    if let Some(e) = &s.error {
        let at = match (e.side, s.error_at) {
            (kopiru::Side::Source, Some(off)) => format!(" at offset {off}"),
            _ => String::new(),
        };
        errln!(
            "kopiru: {}: {}{at}: {}; no image written",
            render::path(&e.path),
            e.op,
            render::reason(e)
        );
    }
    if s.cancelled {
        errln!("{}", crate::signals::stopped_line(STOPPED));
    }
    if s.verified == Some(false) {
        errln!(
            "kopiru: {}: verify: the image read back differs from what was read from {}; \
             no image written",
            render::path(&args.output),
            render::path(&args.device)
        );
    }
}

/// "64.0 MiB read from /dev/sdb in 1.2 s (53.3 MiB/s) into sd.img.zst
/// (12.1 MiB, zstd -3), verified; SHA-256 ab12...".
fn summary_line(s: &ImageSummary, args: &ImageArgs) -> String {
    let secs = s.write_time.as_secs_f64();
    let rate = match secs > 0.0 {
        true => human((s.image_bytes as f64 / secs) as u64),
        false => "-".into(),
    };
    let how = match s.format {
        Format::Raw => format!("raw, {} of data", human(s.mapped_bytes)),
        f => format!("{} -{}", f.name(), s.level),
    };
    let verified = match s.verified {
        Some(true) => "verified",
        _ => "not verified (--no-verify)",
    };
    format!(
        "{} read from {} in {secs:.1} s ({rate}/s) into {} ({}, {how}), {verified}; SHA-256 {}",
        human(s.image_bytes),
        render::path(&args.device),
        render::path(&args.output),
        human(s.output_bytes),
        s.sha256.map(|sum| sum.to_string()).unwrap_or_default(),
    )
}
