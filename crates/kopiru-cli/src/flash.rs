//! `kopiru flash`: checks the targets, asks on a terminal, shows progress,
//! and reports each device.

use crate::args::FlashArgs;
use crate::exit;
use crate::progress;
use crate::render;
use crate::size::human;
use kopiru::flash::{
    check_targets, flash, Bmap, DeviceResult, FlashOptions, FlashSummary, HttpOptions, Image,
    Target,
};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;

pub fn run(args: FlashArgs) -> u8 {
    let http = http_options(&args);
    let bmap = match &args.bmap {
        None => None,
        Some(p) => match Bmap::load_with(p, &args.image, &http) {
            Ok(Some(m)) => Some(m),
            Ok(None) => {
                errln!(
                    "kopiru: no block map at {}.bmap: every byte is written",
                    render::path(&args.image)
                );
                None
            }
            Err(e) => {
                errln!("kopiru: {}", render::refused(&e));
                return exit::USAGE;
            }
        },
    };
    // Until the writing starts, a signal ends the run at once: nothing has
    // been written (a Ctrl-C at the prompt must not wait for an answer).
    crate::signals::install(crate::signals::OnSignal::Exit, "stopped; nothing written");
    let mut opts = FlashOptions::new();
    opts.verify = !args.no_verify;
    opts.allow_file = args.file;
    opts.force = args.force;
    opts.bmap = bmap;
    opts.zeroed = args.zeroed;
    opts.zero_first = args.zero_first;
    opts.skip_identical = args.skip_identical;
    opts.memory = args.memory;
    opts.sha256 = args.sha256;
    // The image is known by its bytes before any device is looked at.
    let image = match Image::open_with(&args.image, args.format.0, &http) {
        Ok(i) => i,
        Err(e) => {
            errln!("kopiru: {}", render::refused(&e));
            return exit::USAGE;
        }
    };
    let targets = match check_targets(&image, &args.devices, &opts) {
        Ok(t) => t,
        Err(e) => {
            errln!("kopiru: {}", render::refused(&e));
            return exit::USAGE;
        }
    };
    // Asked on the controlling terminal, never on standard input (which
    // may be the image, or a stray "y" from a script); with no terminal
    // to ask on, nothing is written without --yes.
    if !args.yes {
        match confirm(&args.image, &targets) {
            Ok(true) => {}
            Ok(false) => {
                errln!("kopiru: nothing written");
                return exit::FAILED;
            }
            Err(e) => {
                errln!(
                    "kopiru: no terminal to ask on (/dev/tty: {}); nothing written: \
                     give --yes to write without asking",
                    kopiru::reason(&e)
                );
                return exit::USAGE;
            }
        }
    }
    opts.cancel = crate::signals::install(crate::signals::OnSignal::Cancel, STOPPED);
    let bar = device_bar(&args, &image, &opts);
    let s = flash(&image, &targets, &opts, &bar);
    if let Some(b) = &bar.bar {
        b.finish_and_clear();
    }
    let code = report(&s, args.json);
    // Where a bar was shown, one line says what it came to, with the
    // image's SHA-256 once verified (users compare it with the
    // publisher's); --json has it too.
    if bar.bar.is_some() && s.source_error.is_none() && !s.cancelled {
        errln!("kopiru: {}", summary_line(&s, opts.verify));
    }
    code
}

/// How the image is fetched when it is a URL.
fn http_options(args: &FlashArgs) -> HttpOptions {
    HttpOptions {
        stall_timeout: std::time::Duration::from_secs_f64(args.stall_timeout.max(0.05)),
        // For the tests: how long to wait before resuming, at first.
        backoff: std::env::var("KOPIRU_HTTP_BACKOFF_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(
                HttpOptions::default().backoff,
                std::time::Duration::from_millis,
            ),
        ..HttpOptions::default()
    }
}

/// The bar: the decoded size (from the block map, or where the format
/// keeps it), and for a URL the download beside it.
fn device_bar(args: &FlashArgs, image: &Image, opts: &FlashOptions) -> progress::DeviceBar {
    let bar = progress::DeviceBar::new(
        args.bar.wanted(true).then(|| {
            // The decoded size (a compressed size would fill the bar at a
            // third of an .xz image): from the block map, or where the
            // format keeps it.
            let total = opts.bmap.as_ref().map(|m| m.image_size).or(image.size);
            progress::bar(args.bar.progress, total, progress::DEVICE_BAR)
        }),
        image.is_url(),
    );
    if let Some(b) = &bar.bar {
        let total = b.length().is_some();
        b.set_style(bar.style(match (total, image.is_url()) {
            (true, false) => progress::DEVICE_BAR,
            (false, false) => progress::DEVICE_SPINNER,
            (true, true) => progress::URL_BAR,
            (false, true) => progress::URL_SPINNER,
        }));
        b.set_message("written");
        if !total || image.is_url() {
            // Turning while a slow decoder fills the next buffer (or a
            // download stalls: its rate and ETA are redrawn). Only once
            // styled: a first frame would show indicatif's own ETA.
            b.enable_steady_tick(std::time::Duration::from_millis(100));
        }
    }
    bar
}

/// The image's SHA-256 in hex, when every device was written and verified.
fn verified_sha256(s: &FlashSummary) -> Option<String> {
    let sum = s.sha256.filter(|_| s.ok())?;
    s.devices
        .iter()
        .all(|d| d.verified == Some(true))
        .then(|| sum.to_string())
}

/// "5.0 MiB written to 1 device in 1.2 s (4.1 MiB/s), verified; sha256 of the
/// written image (decompressed): ...": the sum is of the bytes written, not
/// of the file as published (a compressed file's sum is another).
fn summary_line(s: &FlashSummary, verify: bool) -> String {
    let n = s.devices.len();
    let failed = s
        .devices
        .iter()
        .filter(|d| d.error.is_some() || d.verified == Some(false))
        .count();
    let secs = s.write_time.as_secs_f64();
    let rate = if secs > 0.0 {
        human((s.image_bytes as f64 / secs) as u64)
    } else {
        "-".into()
    };
    let outcome = match (failed, verify) {
        (0, true) => "verified".to_string(),
        (0, false) => "not verified (--no-verify)".to_string(),
        (k, _) => format!("{k} of {n} failed"),
    };
    let sum = verified_sha256(s).map_or(String::new(), |h| {
        format!("; sha256 of the written image (decompressed): {h}")
    });
    format!(
        "{} written to {n} device{} in {secs:.1} s ({rate}/s), {outcome}{sum}",
        human(s.image_bytes),
        if n == 1 { "" } else { "s" },
    )
}

/// What a device holds when the image or the device failed part-way and
/// bytes of the image went to it: how far, and that its first MiB (written
/// last) was not, so it keeps its old partition table.
pub(crate) fn partly_written(d: &DeviceResult) -> Option<String> {
    let n = d.partly_written();
    (n > 0).then(|| {
        format!(
            "partly written: it holds {} of the image, from offset {} to {}; its first \
             MiB was not written and holds what it held before (so it does not boot half \
             an image): flash it again with a whole image",
            human(n),
            // Where the written part starts: after the held-back first MiB.
            d.written_to - n,
            d.written_to
        )
    })
}

/// Lists the targets and asks on the controlling terminal whether to
/// overwrite them. `Err`: there is no controlling terminal (`/dev/tty`
/// cannot be opened). An answer that cannot be read is a no.
fn confirm(image: &Path, targets: &[Target]) -> std::io::Result<bool> {
    let tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")?;
    let mut w = &tty;
    let mut question = String::new();
    for t in targets {
        let model = if t.model.is_empty() {
            "unknown model"
        } else {
            &t.model
        };
        question += &format!("  {}: {}, {model}\n", render::path(&t.path), human(t.size));
    }
    question += &format!(
        "Everything on {} will be overwritten with {}. Continue? [y/N] ",
        if targets.len() == 1 {
            "this device"
        } else {
            "these devices"
        },
        render::path(image)
    );
    if w.write_all(question.as_bytes())
        .and_then(|()| w.flush())
        .is_err()
    {
        return Ok(false);
    }
    let mut answer = String::new();
    if BufReader::new(&tty).read_line(&mut answer).is_err() {
        return Ok(false);
    }
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

/// What a cancelled flash says (after "kopiru: received SIGxxx: ").
const STOPPED: &str =
    "stopped; the devices were not completely written (their first MiB is not): flash them again";

fn report(s: &FlashSummary, json: bool) -> u8 {
    if let Some(e) = &s.source_error {
        errln!("kopiru: {}", render::refused(e));
    }
    if s.cancelled {
        // Stopped while writing: the first MiB (written last) is not there;
        // or while reading back.
        errln!("{}", crate::signals::stopped_line(STOPPED));
    }
    for d in &s.devices {
        if let Some(e) = d.error_text_with(render::refusal) {
            errln!("kopiru: {}: {e}", render::path(&d.path));
        } else if let Some(off) = d.mismatch_at {
            errln!(
                "kopiru: {}: verify: the device differs from the image at offset {off}",
                render::path(&d.path)
            );
        }
        if !s.cancelled {
            if let Some(p) = partly_written(d) {
                errln!("kopiru: {}: {p}", render::path(&d.path));
            }
        }
    }
    let code = s.outcome().code();
    if json {
        let j = render::JSON.flash(s);
        outln!("{j}");
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The last line says whose SHA-256 it gives: the image as written
    /// (decompressed), not the file as published.
    #[test]
    fn summary_line_names_the_decompressed_image() {
        let mut device = DeviceResult::default();
        device.path = "/dev/sdx".into();
        device.verified = Some(true);
        device.direct = true;
        device.written_to = 5 << 20;
        device.head_written = true;
        let mut s = FlashSummary::default();
        s.image_bytes = 5 << 20;
        s.format = "xz";
        s.devices = vec![device];
        s.write_time = std::time::Duration::from_secs(2);
        s.sha256 = Some(kopiru::Sha256([0xab; 32]));
        assert_eq!(
            summary_line(&s, true),
            format!(
                "5.0 MiB written to 1 device in 2.0 s (2.5 MiB/s), verified; sha256 of the \
                 written image (decompressed): {}",
                "ab".repeat(32)
            )
        );
    }
}
