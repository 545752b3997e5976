//! `kopiru gui-helper`: the one operation the page asked for, run as root
//! (through pkexec, run0, sudo or doas, or as a plain child when the
//! server is root). It trusts nothing the page said: the image is opened
//! and recognised, and the devices checked, exactly as `kopiru flash` and
//! `kopiru image` do (mounted, in use, the system's disk, too small, named
//! twice...), then the engine runs.
//!
//! The pipe protocol, one JSON object per line on stdout:
//! `{"event":"started"}`, then `refused` (with a `message`: nothing was
//! written) or `checked` (what was found), `progress` lines (at most four
//! a second, from a ticker thread: the engine's callbacks only store
//! counters, so the write path gains nothing), and `result` (the command's
//! `--json` summary, the messages it would print, its exit code, and the
//! helper's peak RSS). A line `cancel` on stdin, or the end of stdin (the
//! server is gone), cancels, as Ctrl-C does the command: the first MiB of
//! a device is then not written.

use crate::args::{GuiHelperArgs, HelperFlashArgs, HelperImageArgs, HelperOp};
use crate::exit;
use kopiru::flash::{check_targets, flash, FlashOptions, HttpOptions, Image};
use kopiru::Cancel;
use serde_json::{json, Value};
use std::io::{BufRead, Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// One line of the protocol on stdout, flushed at once. A closed stdout
/// (the server is gone) cancels nothing by itself: stdin's end does.
fn emit(v: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{v}");
    let _ = out.flush();
}

pub fn run(args: GuiHelperArgs) -> u8 {
    // Ctrl-C on the server's terminal reaches this process too: it
    // cancels, as in the command; a second signal exits at once.
    let cancel = crate::signals::install(crate::signals::OnSignal::Cancel, "stopped");
    watch_stdin(cancel.clone());
    emit(&json!({"event": "started", "pid": std::process::id()}));
    match args.op {
        HelperOp::Flash(a) => run_flash(a, cancel),
        HelperOp::Image(a) => run_image(a, cancel),
    }
}

/// Cancels on a line `cancel`, or when stdin ends (the server went away).
fn watch_stdin(cancel: Cancel) {
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        for line in stdin.lock().lines() {
            match line {
                Ok(l) if l.trim() == "cancel" => break,
                Ok(_) => {}
                Err(_) => break,
            }
        }
        cancel.cancel();
    });
}

fn refused(message: String, code: u8) -> u8 {
    emit(&json!({"event": "refused", "message": message}));
    code
}

/// The phases a progress line names.
const WRITE: u8 = 0;
const VERIFY: u8 = 1;
const HASH: u8 = 2;

/// The engine's progress, kept in counters; [`Ticker`] sends it.
#[derive(Default)]
struct Progress {
    phase: AtomicU8,
    done: AtomicU64,
    /// 0: not known.
    total: AtomicU64,
    verified: AtomicU64,
    verify_total: AtomicU64,
    received: AtomicU64,
    /// 0: not known.
    download_total: AtomicU64,
    resumes: AtomicU64,
    /// The try (high half) of how many (low half) while reconnecting.
    reconnecting: AtomicU64,
    url: AtomicBool,
}

impl Progress {
    fn line(&self) -> Value {
        let opt = |v: u64| (v > 0).then_some(v);
        let phase = match self.phase.load(Ordering::Relaxed) {
            WRITE => "write",
            VERIFY => "verify",
            _ => "hash",
        };
        let download = self.url.load(Ordering::Relaxed).then(|| {
            let r = self.reconnecting.load(Ordering::Relaxed);
            json!({
                "received": self.received.load(Ordering::Relaxed),
                "total": opt(self.download_total.load(Ordering::Relaxed)),
                "resumes": self.resumes.load(Ordering::Relaxed),
                "reconnecting": (r != 0).then_some([r >> 32, r & 0xffff_ffff]),
            })
        });
        json!({
            "event": "progress",
            "phase": phase,
            "done": self.done.load(Ordering::Relaxed),
            "total": opt(self.total.load(Ordering::Relaxed)),
            "verified": self.verified.load(Ordering::Relaxed),
            "verify_total": self.verify_total.load(Ordering::Relaxed),
            "download": download,
        })
    }
}

impl kopiru::DeviceProgress for Progress {
    fn done(&self, n: u64) {
        self.done.fetch_add(n, Ordering::Relaxed);
    }
    fn verifying(&self, total: u64) {
        self.verify_total.store(total, Ordering::Relaxed);
        self.phase.store(VERIFY, Ordering::Relaxed);
    }
    fn verified(&self, n: u64) {
        self.verified.fetch_add(n, Ordering::Relaxed);
    }
    fn downloaded(&self, received: u64, total: Option<u64>, resumes: u64) {
        self.received.store(received, Ordering::Relaxed);
        self.download_total
            .store(total.unwrap_or(0), Ordering::Relaxed);
        self.resumes.store(resumes, Ordering::Relaxed);
        self.reconnecting.store(0, Ordering::Relaxed);
    }
    fn reconnecting(&self, attempt: u32, of: u32) {
        let v = (u64::from(attempt.max(1)) << 32) | u64::from(of);
        self.reconnecting.store(v, Ordering::Relaxed);
    }
}

impl kopiru::flash::FlashEvents for Progress {}

/// Sends a progress line four times a second, off the engine's threads,
/// until dropped (then once more: the last counts).
struct Ticker {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    progress: Arc<Progress>,
}

impl Ticker {
    fn start(progress: Arc<Progress>) -> Ticker {
        let stop = Arc::new(AtomicBool::new(false));
        let (s, p) = (stop.clone(), progress.clone());
        let thread = std::thread::spawn(move || {
            let mut last = Value::Null;
            while !s.load(Ordering::Relaxed) {
                let line = p.line();
                if line != last {
                    emit(&line);
                    last = line;
                }
                std::thread::sleep(Duration::from_millis(250));
            }
        });
        Ticker {
            stop,
            thread: Some(thread),
            progress,
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        emit(&self.progress.line());
    }
}

/// The helper's own peak resident memory, KiB (Linux: VmHWM).
fn peak_rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn run_flash(a: HelperFlashArgs, cancel: Cancel) -> u8 {
    if a.image == Path::new("-") {
        // Standard input is this helper's control pipe.
        return refused("-: the image is a file or a URL here".into(), exit::USAGE);
    }
    let http = HttpOptions::default();
    let image = match Image::open_with(&a.image, None, &http) {
        Ok(i) => i,
        Err(e) => return refused(crate::render::refused(&e), exit::USAGE),
    };
    let mut opts = FlashOptions::new();
    opts.sha256 = a.sha256;
    opts.cancel = cancel.clone();
    let targets = match check_targets(&image, &a.devices, &opts) {
        Ok(t) => t,
        Err(e) => return refused(crate::render::refused(&e), exit::USAGE),
    };
    emit(&json!({
        "event": "checked",
        "image": {"format": image.format.name(), "size": image.size, "url": image.is_url()},
        "targets": targets.iter().map(|t| json!({
            "path": t.path.to_string_lossy(),
            "size": t.size,
            "model": t.model,
        })).collect::<Vec<_>>(),
    }));
    let progress = Arc::new(Progress::default());
    progress.url.store(image.is_url(), Ordering::Relaxed);
    // A local file with a SHA-256 is checked before anything is written:
    // a wrong sum (a typo, a file changed) then writes nothing at all. The
    // engine hashes it again as it streams. (A URL is checked as it
    // streams only: it is never stored; the first MiB then stays.)
    // (Only a regular file: a FIFO or a device would be read twice.)
    let regular = std::fs::metadata(&a.image).is_ok_and(|m| m.is_file());
    if let (Some(want), false, true) = (a.sha256, image.is_url(), regular) {
        progress.phase.store(HASH, Ordering::Relaxed);
        let ticker = Ticker::start(progress.clone());
        let got = sha256_of(&a.image, &progress, &cancel);
        drop(ticker);
        match got {
            Ok(sum) if sum == want => {}
            Ok(sum) => {
                return refused(
                    format!(
                        "{}: its SHA-256 is {}, not the {} given; nothing written",
                        a.image.display(),
                        sum,
                        want
                    ),
                    exit::FAILED,
                )
            }
            Err(_) if cancel.is_cancelled() => {
                return refused("cancelled; nothing written".into(), exit::CANCELLED)
            }
            Err(e) => {
                return refused(
                    format!("{}: read: {}", a.image.display(), kopiru::reason(&e)),
                    exit::FAILED,
                )
            }
        }
        progress.done.store(0, Ordering::Relaxed);
    }
    progress.phase.store(WRITE, Ordering::Relaxed);
    progress
        .total
        .store(image.size.unwrap_or(0), Ordering::Relaxed);
    let ticker = Ticker::start(progress.clone());
    let s = flash(&image, &targets, &opts, &*progress);
    drop(ticker);
    let mut messages = Vec::new();
    if let Some(e) = &s.source_error {
        messages.push(crate::render::refused(e));
    }
    let mut devices = Vec::new();
    for d in &s.devices {
        let message = match (d.error_text_with(crate::render::refusal), d.mismatch_at) {
            (Some(e), _) => Some(e),
            (None, Some(off)) => Some(format!(
                "verify: the device differs from the image at offset {off}"
            )),
            _ => None,
        };
        let partly = (!s.cancelled)
            .then(|| crate::flash::partly_written(d))
            .flatten();
        devices.push(json!({
            "path": d.path.to_string_lossy(),
            "message": message,
            "partly_written": partly,
        }));
    }
    let code = s.outcome().code();
    emit(&json!({
        "event": "result",
        "summary": crate::render::JSON.flash(&s),
        "messages": messages,
        "devices": devices,
        "exit_code": code,
        "peak_rss_kib": peak_rss_kib(),
    }));
    code
}

/// The SHA-256 of the file at `path`, counted into `progress.done`.
fn sha256_of(path: &Path, progress: &Progress, cancel: &Cancel) -> std::io::Result<kopiru::Sha256> {
    use sha2::Digest;
    let mut f = std::fs::File::open(path)?;
    progress.total.store(f.metadata()?.len(), Ordering::Relaxed);
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        cancel.check()?;
        let n = match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        h.update(&buf[..n]);
        progress.done.fetch_add(n as u64, Ordering::Relaxed);
    }
    Ok(kopiru::Sha256(h.finalize().into()))
}

#[cfg(target_os = "linux")]
fn run_image(a: HelperImageArgs, cancel: Cancel) -> u8 {
    use kopiru::image::{check_source, image, ImageOptions};
    use kopiru::Format;
    let bmap = bmap_path(&a.output);
    // Elevated for a user, the image goes only into a folder of theirs, and
    // becomes theirs.
    let owner = invoker();
    if let Some((uid, _)) = owner {
        if let Err(why) = check_folder(&a.output, uid) {
            return refused(why, exit::USAGE);
        }
    }
    let mut opts = ImageOptions::new();
    opts.format = Format::of_output(&a.output);
    opts.bmap = Some(bmap.clone());
    opts.cancel = cancel;
    let src = match check_source(&a.device, &a.output, &opts) {
        Ok(s) => s,
        Err(e) => return refused(crate::render::refused(&e), exit::USAGE),
    };
    emit(&json!({
        "event": "checked",
        "targets": [{"path": a.device.to_string_lossy(), "size": src.size, "model": src.model}],
        "output": a.output.to_string_lossy(),
        "bmap": bmap.to_string_lossy(),
    }));
    let progress = Arc::new(Progress::default());
    progress.total.store(src.size, Ordering::Relaxed);
    let ticker = Ticker::start(progress.clone());
    let s = image(&src, &a.output, &opts, &*progress);
    drop(ticker);
    let mut messages = Vec::new();
    if let Some(e) = &s.error {
        let at = match (e.side, s.error_at) {
            (kopiru::Side::Source, Some(off)) => format!(" at offset {off}"),
            _ => String::new(),
        };
        messages.push(format!(
            "{}: {}{at}: {}; no image written",
            e.path.display(),
            e.op,
            crate::render::reason(e)
        ));
    }
    if s.verified == Some(false) {
        messages.push(format!(
            "{}: verify: the image read back differs from what was read; no image written",
            a.output.display()
        ));
    }
    if let (true, Some((uid, gid))) = (s.ok(), owner) {
        for p in [&a.output, &bmap] {
            if let Err(e) = std::os::unix::fs::lchown(p, Some(uid), Some(gid)) {
                messages.push(format!("{}: chown: {}", p.display(), kopiru::reason(&e)));
            }
        }
    }
    let code = s.outcome().code();
    emit(&json!({
        "event": "result",
        "summary": crate::render::JSON.image(&s, &src, &a.device, &a.output, Some(&bmap)),
        "messages": messages,
        "exit_code": code,
        "peak_rss_kib": peak_rss_kib(),
    }));
    code
}

#[cfg(not(target_os = "linux"))]
fn run_image(_a: HelperImageArgs, _cancel: Cancel) -> u8 {
    refused(
        "kopiru image is not available on this system yet".into(),
        exit::USAGE,
    )
}

/// OUTPUT's block map: OUTPUT.bmap (as `flash --bmap auto` looks for it).
#[cfg(target_os = "linux")]
fn bmap_path(output: &Path) -> std::path::PathBuf {
    let mut s = output.as_os_str().to_owned();
    s.push(".bmap");
    std::path::PathBuf::from(s)
}

/// The user this helper was elevated for (uid, gid), from what pkexec,
/// sudo, run0 and doas leave in the environment; `None` when not elevated
/// (not root, or root itself ran it).
#[cfg(target_os = "linux")]
fn invoker() -> Option<(u32, u32)> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let num = |k: &str| std::env::var(k).ok()?.parse::<u32>().ok();
    if let Some(uid) = num("PKEXEC_UID") {
        return passwd(Some(uid), None).map(|(_, g)| (uid, g));
    }
    if let (Some(uid), Some(gid)) = (num("SUDO_UID"), num("SUDO_GID")) {
        return (uid != 0).then_some((uid, gid));
    }
    let name = std::env::var("DOAS_USER").ok()?;
    passwd(None, Some(&name))
}

/// (uid, gid) of a user, by number or by name.
#[cfg(target_os = "linux")]
fn passwd(uid: Option<u32>, name: Option<&str>) -> Option<(u32, u32)> {
    let mut pw: libc::passwd = unsafe_zeroed();
    let mut buf = vec![0 as libc::c_char; 16 << 10];
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    let cname = name.and_then(|n| std::ffi::CString::new(n).ok());
    // SAFETY: every pointer is to a live local of the type the call wants;
    // `buf`'s length is passed with it.
    let r = unsafe {
        match (uid, &cname) {
            (Some(u), _) => libc::getpwuid_r(u, &mut pw, buf.as_mut_ptr(), buf.len(), &mut found),
            (None, Some(n)) => {
                libc::getpwnam_r(n.as_ptr(), &mut pw, buf.as_mut_ptr(), buf.len(), &mut found)
            }
            (None, None) => return None,
        }
    };
    (r == 0 && !found.is_null()).then_some((pw.pw_uid, pw.pw_gid))
}

#[cfg(target_os = "linux")]
fn unsafe_zeroed() -> libc::passwd {
    // SAFETY: passwd is plain C data (integers and pointers): all zeros is
    // a valid value, filled in by getpw*_r.
    unsafe { std::mem::zeroed() }
}

/// The backup's folder must be `uid`'s own (a root helper writes there,
/// then gives the files to `uid`).
#[cfg(target_os = "linux")]
fn check_folder(output: &Path, uid: u32) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let parent = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    match std::fs::metadata(parent) {
        Ok(m) if m.is_dir() && m.uid() == uid => Ok(()),
        Ok(_) => Err(format!(
            "{}: the backup goes into a folder of your own (this one is not yours)",
            parent.display()
        )),
        Err(e) => Err(format!("{}: {}", parent.display(), kopiru::reason(&e))),
    }
}
