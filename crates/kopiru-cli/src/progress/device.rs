//! The bar of `kopiru flash` and `kopiru image`: a device's bytes written
//! and verified, and for an image from a URL, its download.

use super::{duration, rate, style, Window, WINDOW_SECS};
use crate::size::human;
use indicatif::{ProgressBar, ProgressStyle};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// A device bar with a known total: bytes, rate and ETA (`{rate}` and
/// `{eta}` are [`DeviceBar::style`]'s: 0 B/s and `?` while a download
/// reconnects, `?` before the first byte).
pub const DEVICE_BAR: &str = "{bar:30} {bytes}/{total_bytes} {msg} {rate} ETA {eta}";
/// Without one (a compressed image that does not record its size, or
/// standard input): no fake total, just bytes and rate.
pub const DEVICE_SPINNER: &str = "{spinner} {bytes} {msg}, {rate}";

/// A URL's device bar: as [`DEVICE_BAR`], with the download beside the
/// bytes written (`{download}`: bytes had of the file, its rate, resumes,
/// and the ETA, from the download when its length is known: with a
/// compressed image the download is the bound).
pub const URL_BAR: &str = "{bar:30} {bytes}/{total_bytes} {msg} {rate}, {download}";
/// [`DEVICE_SPINNER`] for a URL.
pub const URL_SPINNER: &str = "{spinner} {bytes} {msg}, {rate}, {download}";

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

    /// The style of `template`: `{rate}` and `{eta}` of the bytes done,
    /// and `{download}` where there is one.
    pub fn style(&self, template: &str) -> ProgressStyle {
        let reconnecting = {
            let d = self.download.clone();
            move || d.as_ref().is_some_and(|d| d.reconnecting().is_some())
        };
        let on_rate = reconnecting.clone();
        let st = style(template)
            .with_key(
                "rate",
                move |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = w.write_str(&written_rate(s.per_sec(), on_rate()));
                },
            )
            .with_key(
                "eta",
                move |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                    let eta = s.eta().as_secs_f64();
                    let _ = w.write_str(&eta_text(s.pos(), eta, reconnecting()));
                },
            );
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

/// The rate of the bytes done as the bar shows it: 0 B/s while the
/// download reconnects (the bar's own estimate decays over many seconds,
/// and would show the rate from before the drop).
pub fn written_rate(per_sec: f64, reconnecting: bool) -> String {
    match reconnecting {
        true => rate(0.0),
        false => rate(per_sec),
    }
}

/// The bar's ETA: `?` before the first byte (there is no rate yet:
/// indicatif says 0s) and while the download reconnects.
pub fn eta_text(pos: u64, eta_secs: f64, reconnecting: bool) -> String {
    match pos == 0 || reconnecting {
        true => "?".into(),
        false => duration(eta_secs),
    }
}

/// What a URL's bar shows of the download: the engine's last report, and
/// the bytes had over the last [`WINDOW_SECS`] for the rate.
struct Download {
    received: AtomicU64,
    /// 0: not known.
    total: AtomicU64,
    resumes: AtomicU64,
    /// While the connection is lost: the try to resume it (from 1) in the
    /// high half, of how many in the low half; 0 while it is up.
    reconnecting: AtomicU64,
    start: Instant,
    window: std::sync::Mutex<Window>,
}

impl Download {
    fn new() -> Download {
        Download {
            received: AtomicU64::new(0),
            total: AtomicU64::new(0),
            resumes: AtomicU64::new(0),
            reconnecting: AtomicU64::new(0),
            start: Instant::now(),
            window: std::sync::Mutex::new(Window::new(WINDOW_SECS)),
        }
    }

    /// (try, of how many) while the connection is lost.
    fn reconnecting(&self) -> Option<(u32, u32)> {
        let v = self.reconnecting.load(Ordering::Relaxed);
        (v != 0).then_some(((v >> 32) as u32, v as u32))
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
        // size at the write rate), where it has a length; none before the
        // first byte written (`?`: indicatif says 0s then).
        let fallback = s
            .len()
            .map(|_| Some(s.eta().as_secs_f64()).filter(|_| s.pos() > 0));
        download_text(
            received,
            total,
            self.resumes.load(Ordering::Relaxed),
            rate,
            fallback,
            self.reconnecting(),
        )
    }
}

/// "downloaded 12 MiB of 40 MiB at 3.0 MiB/s, 1 resume, ETA 9s": the ETA
/// from the download when `total` is known (`?` until there is a rate),
/// else `fallback` (`Some(None)`: one to come, `?` now), else none. While
/// the connection is lost (`reconnecting`: the try, of how many): "at 0
/// B/s, reconnecting (3 of 8), ..., ETA ?".
pub fn download_text(
    received: u64,
    total: Option<u64>,
    resumes: u64,
    rate: Option<f64>,
    fallback: Option<Option<f64>>,
    reconnecting: Option<(u32, u32)>,
) -> String {
    let mut t = format!("downloaded {}", human(received));
    if let Some(total) = total {
        t += &format!(" of {}", human(total));
    }
    let rate = match reconnecting {
        Some(_) => Some(0.0),
        None => rate,
    };
    if let Some(r) = rate {
        t += &format!(" at {}", self::rate(r));
    }
    if let Some((attempt, of)) = reconnecting {
        t += &format!(", reconnecting ({attempt} of {of})");
    }
    match resumes {
        0 => {}
        1 => t += ", 1 resume",
        n => t += &format!(", {n} resumes"),
    }
    let eta = match total {
        _ if reconnecting.is_some() => Some(None),
        Some(total) => match rate {
            _ if received >= total => Some(Some(0.0)),
            Some(r) if r > 0.0 => Some(Some((total - received) as f64 / r)),
            _ => Some(None),
        },
        None => fallback,
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
            b.set_style(self.style(DEVICE_BAR));
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
            // Bytes again, or a resume counted: the connection is back.
            d.reconnecting.store(0, Ordering::Relaxed);
        }
    }
    fn reconnecting(&self, attempt: u32, of: u32) {
        if let Some(d) = &self.download {
            let v = (u64::from(attempt.max(1)) << 32) | u64::from(of);
            d.reconnecting.store(v, Ordering::Relaxed);
        }
    }
}

impl kopiru::flash::FlashEvents for DeviceBar {}
