//! The bar of `kopiru flash` and `kopiru image`: a device's bytes written
//! and verified, and for an image from a URL, its download.

use super::{duration, rate, style, Window, WINDOW_SECS};
use crate::bench::human;
use indicatif::{ProgressBar, ProgressStyle};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// A device bar with a known total: bytes, rate and ETA.
pub const DEVICE_BAR: &str =
    "{bar:30} {bytes}/{total_bytes} {msg} {binary_bytes_per_sec} ETA {eta}";
/// Without one (a compressed image that does not record its size, or
/// standard input): no fake total, just bytes and rate.
pub const DEVICE_SPINNER: &str = "{spinner} {bytes} {msg}, {binary_bytes_per_sec}";

/// A URL's device bar: as [`DEVICE_BAR`], with the download beside the
/// bytes written (`{download}`: bytes had of the file, its rate, resumes,
/// and the ETA, from the download when its length is known: with a
/// compressed image the download is the bound).
pub const URL_BAR: &str = "{bar:30} {bytes}/{total_bytes} {msg} {binary_bytes_per_sec}, {download}";
/// [`DEVICE_SPINNER`] for a URL.
pub const URL_SPINNER: &str = "{spinner} {bytes} {msg}, {binary_bytes_per_sec}, {download}";

/// The one progress adapter of `flash` and `image` (the engine's
/// `DeviceProgress`): bytes done, then the read-back on the same bar; for
/// an image from a URL, the download beside them.
pub struct DeviceBar {
    pub bar: Option<ProgressBar>,
    /// The download's counters (`None`: not a URL).
    download: Option<Arc<Download>>,
}

impl DeviceBar {
    /// `bar` (none: nothing shown) drawn with `template`; with `url`, a
    /// [`URL_BAR`] or [`URL_SPINNER`] gets the download's counters.
    pub fn new(bar: Option<ProgressBar>, url: bool) -> DeviceBar {
        let download = (url && bar.is_some()).then(|| Arc::new(Download::new()));
        DeviceBar { bar, download }
    }

    /// The style of `template`, with `{download}` where there is one.
    pub fn style(&self, template: &str) -> ProgressStyle {
        let st = style(template);
        match &self.download {
            Some(d) => {
                let d = d.clone();
                st.with_key(
                    "download",
                    move |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                        let _ = w.write_str(&d.text(s));
                    },
                )
            }
            None => st,
        }
    }
}

/// What a URL's bar shows of the download: the engine's last report, and
/// the bytes had over the last [`WINDOW_SECS`] for the rate.
struct Download {
    received: AtomicU64,
    /// 0: not known.
    total: AtomicU64,
    resumes: AtomicU64,
    start: Instant,
    window: std::sync::Mutex<Window>,
}

impl Download {
    fn new() -> Download {
        Download {
            received: AtomicU64::new(0),
            total: AtomicU64::new(0),
            resumes: AtomicU64::new(0),
            start: Instant::now(),
            window: std::sync::Mutex::new(Window::new(WINDOW_SECS)),
        }
    }

    /// The text, as drawn now: the rate is over the last seconds, so a
    /// stall or a resume's pause slows it and lengthens the ETA.
    fn text(&self, s: &indicatif::ProgressState) -> String {
        let received = self.received.load(Ordering::Relaxed);
        let total = Some(self.total.load(Ordering::Relaxed)).filter(|&t| t > 0);
        let rate = {
            let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
            w.push(self.start.elapsed().as_secs_f64(), received, 0);
            w.rates().map(|r| r.bytes)
        };
        // Without the download's length, the bar's own ETA (the decoded
        // size at the write rate), where it has a length.
        let fallback = s.len().map(|_| s.eta().as_secs_f64());
        download_text(
            received,
            total,
            self.resumes.load(Ordering::Relaxed),
            rate,
            fallback,
        )
    }
}

/// "downloaded 12 MiB of 40 MiB at 3.0 MiB/s, 1 resume, ETA 9s": the ETA
/// from the download when `total` is known (`?` until there is a rate),
/// else `fallback`, else none.
pub fn download_text(
    received: u64,
    total: Option<u64>,
    resumes: u64,
    rate: Option<f64>,
    fallback: Option<f64>,
) -> String {
    let mut t = format!("downloaded {}", human(received));
    if let Some(total) = total {
        t += &format!(" of {}", human(total));
    }
    if let Some(r) = rate {
        t += &format!(" at {}", self::rate(r));
    }
    match resumes {
        0 => {}
        1 => t += ", 1 resume",
        n => t += &format!(", {n} resumes"),
    }
    let eta = match total {
        Some(total) => match rate {
            _ if received >= total => Some(Some(0.0)),
            Some(r) if r > 0.0 => Some(Some((total - received) as f64 / r)),
            _ => Some(None),
        },
        None => fallback.map(Some),
    };
    match eta {
        Some(Some(e)) => t += &format!(", ETA {}", duration(e)),
        Some(None) => t += ", ETA ?",
        None => {}
    }
    t
}

impl kopiru::DeviceProgress for DeviceBar {
    fn done(&self, n: u64) {
        if let Some(b) = &self.bar {
            b.inc(n);
        }
    }
    fn verifying(&self, total: u64) {
        if let Some(b) = &self.bar {
            // The total is known now, whatever the image was.
            b.set_style(style(DEVICE_BAR));
            b.set_position(0);
            b.set_length(total);
            b.set_message("verified");
            b.reset_eta();
        }
    }
    fn verified(&self, n: u64) {
        if let Some(b) = &self.bar {
            b.inc(n);
        }
    }
    fn downloaded(&self, received: u64, total: Option<u64>, resumes: u64) {
        if let Some(d) = &self.download {
            d.received.store(received, Ordering::Relaxed);
            d.total.store(total.unwrap_or(0), Ordering::Relaxed);
            d.resumes.store(resumes, Ordering::Relaxed);
        }
    }
}

impl kopiru::flash::FlashEvents for DeviceBar {}
