//! An image read from an `http://` or `https://` URL, as a stream: decoded
//! as it arrives, never stored. A connection that drops or stalls is
//! resumed where it stopped, with `Range` and `If-Range` (the ETag, else
//! Last-Modified), a bounded number of times with a growing pause between
//! tries. A server that ignores Range sends the whole file again: the
//! bytes already had are read and dropped. A file that changed on the
//! server mid-way (another ETag or Last-Modified, or another length) ends
//! the download with an error: its bytes are never mixed with the old
//! ones, and since the image then fails as a source, the devices keep
//! their old first MiB.
//!
//! TLS (sys::with_tls) is rustls (ring) on Linux, with the system's CA store, or `SSL_CERT_FILE`
//! and `SSL_CERT_DIR` where set (rustls-native-certs reads them). The
//! proxy comes from `HTTPS_PROXY`, `HTTP_PROXY` or `ALL_PROXY` (either
//! case), unless `NO_PROXY` names the host.

use crate::sys;
use crate::Cancel;
use std::io::{self, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How a URL is fetched.
#[derive(Clone, Debug)]
pub struct HttpOptions {
    /// Connecting (and the TLS handshake) may take this long.
    pub connect_timeout: Duration,
    /// A connection that brings no byte for this long is dropped and
    /// resumed.
    pub stall_timeout: Duration,
    /// Tries to resume after a drop or a stall, in a row, without a byte
    /// got between them; the count starts again once bytes come.
    pub retries: u32,
    /// The first pause before resuming; it doubles at each try, up to 15 s.
    pub backoff: Duration,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            connect_timeout: Duration::from_secs(30),
            stall_timeout: Duration::from_secs(30),
            retries: 8,
            backoff: Duration::from_millis(500),
        }
    }
}

/// Whether `path` is an `http://` or `https://` URL.
pub fn is_url(path: &Path) -> bool {
    let s = path.to_string_lossy();
    let lower = s.get(..8).unwrap_or(&s).to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://")
}

/// A download that failed for good (an HTTP status, the file changed on
/// the server, too many tries): said as it is, never as a damaged image.
#[derive(Debug)]
pub(super) struct Failed(pub String);

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for Failed {}

fn failed(msg: impl Into<String>) -> io::Error {
    io::Error::other(Failed(msg.into()))
}

/// Whether `e` is a download's own failure ([`Failed`]).
pub(super) fn is_failure(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|i| i.is::<Failed>())
}

/// What a download has done, for progress and the summary.
#[derive(Debug, Default)]
pub(crate) struct DownloadStats {
    /// Bytes received, counting those received twice (a server that
    /// ignores Range sends again what was had).
    pub received: AtomicU64,
    /// Bytes of the file had so far, each counted once (the position in
    /// it): what a download's progress shows.
    pub had: AtomicU64,
    /// Connections resumed after a drop or a stall (each try).
    pub resumed: AtomicU64,
    /// The file's length, as the server gave it (0: not given).
    pub length: AtomicU64,
}

/// An image being downloaded: a [`Read`] of the file's bytes, from the
/// first, that resumes dropped connections.
pub(super) struct Download {
    agent: ureq::Agent,
    /// As given.
    url: String,
    /// Where the first request ended, after redirects: resumes go there, to
    /// the same mirror.
    at: String,
    /// ("ETag", value) or ("Last-Modified", value): what If-Range sends.
    validator: Option<(&'static str, String)>,
    /// The file's length (Content-Length of the first answer).
    pub len: Option<u64>,
    /// Bytes of the file read so far.
    pos: u64,
    body: Option<Box<dyn Read + Send + Sync>>,
    /// Tries in a row that brought nothing.
    failures: u32,
    opts: HttpOptions,
    pub cancel: Option<Cancel>,
    pub stats: Arc<DownloadStats>,
    /// A Range request was answered with the whole file: no more are
    /// sent for sizes.
    no_ranges: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Download {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Download")
            .field("url", &self.url)
            .field("len", &self.len)
            .field("pos", &self.pos)
            .finish_non_exhaustive()
    }
}

/// The proxy for `url` from the environment, unless `NO_PROXY` names its
/// host.
fn proxy_for(url: &str) -> Option<String> {
    let env = |name: &str| {
        std::env::var(name.to_ascii_lowercase())
            .ok()
            .or_else(|| std::env::var(name).ok())
            .filter(|v| !v.is_empty())
    };
    let https = url
        .get(..8)
        .is_some_and(|s| s.eq_ignore_ascii_case("https://"));
    let proxy = match https {
        true => env("HTTPS_PROXY"),
        false => env("HTTP_PROXY"),
    }
    .or_else(|| env("ALL_PROXY"))?;
    let host = host_of(url).to_ascii_lowercase();
    let bypass = env("NO_PROXY").is_some_and(|list| {
        list.split(',').map(str::trim).any(|e| {
            let e = e.split(':').next().unwrap_or(e).trim_start_matches('.');
            e == "*" || (!e.is_empty() && (host == e || host.ends_with(&format!(".{e}"))))
        })
    });
    (!bypass).then_some(proxy)
}

/// The host of a URL, without user, port or brackets.
pub(crate) fn host_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let auth = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    let auth = auth.rsplit_once('@').map_or(auth, |(_, h)| h);
    if let Some(v6) = auth.strip_prefix('[') {
        return v6.split(']').next().unwrap_or(v6);
    }
    auth.split(':').next().unwrap_or(auth)
}

/// The name the URL gives the file (its path's last part, without query),
/// for recognising the format by name as for a local file.
pub(crate) fn file_name(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let path = rest.split(['?', '#']).next().unwrap_or(rest);
    path.rsplit('/').next().unwrap_or(path)
}

/// An agent for `url`: timeouts, proxy, CA store.
fn agent(url: &str, o: &HttpOptions) -> io::Result<ureq::Agent> {
    let mut b = ureq::AgentBuilder::new()
        .timeout_connect(o.connect_timeout)
        .timeout_read(o.stall_timeout)
        .timeout_write(o.stall_timeout)
        .redirects(8)
        .user_agent(concat!("kopiru/", env!("CARGO_PKG_VERSION")));
    if let Some(p) = proxy_for(url) {
        let proxy = ureq::Proxy::new(&p).map_err(|e| failed(format!("proxy {p}: {e}")))?;
        b = b.proxy(proxy);
    }
    if url
        .get(..8)
        .is_some_and(|s| s.eq_ignore_ascii_case("https://"))
    {
        b = sys::with_tls(b).map_err(|e| failed(e.to_string()))?;
    }
    Ok(b.build())
}

/// A ureq error as one line: `HTTP 404 Not Found`, or the transport's,
/// without the URL (the message names it already).
fn say(e: ureq::Error) -> (Option<u16>, String) {
    match e {
        ureq::Error::Status(code, r) => (Some(code), format!("HTTP {code} {}", r.status_text())),
        ureq::Error::Transport(t) => (None, transport_text(&t)),
    }
}

/// A transport failure in words: `TLS: certificate not trusted (unknown
/// issuer)`, `cannot resolve the host name: ...`, `cannot connect:
/// Connection refused`.
fn transport_text(t: &ureq::Transport) -> String {
    use std::error::Error as _;
    if let Some(tls) = t.source().and_then(sys::tls_problem) {
        return format!("TLS: {tls}");
    }
    let what = match t.kind() {
        ureq::ErrorKind::Dns => "cannot resolve the host name".to_string(),
        ureq::ErrorKind::ConnectionFailed => "cannot connect".to_string(),
        ureq::ErrorKind::Io => "network error".to_string(),
        ureq::ErrorKind::ProxyConnect => "cannot connect through the proxy".to_string(),
        ureq::ErrorKind::TooManyRedirects => "too many redirects".to_string(),
        kind => kind.to_string(),
    };
    let detail = t
        .source()
        .map(|s| s.to_string())
        .or_else(|| t.message().map(str::to_string));
    match detail {
        Some(d) => format!("{what}: {d}"),
        None => what,
    }
}

/// GETs a small text file (a block map, a `SHA256SUMS`, an OS list; at
/// most 64 MiB) with the flash's TLS and proxies: `Ok(None)` on 404 or
/// 410.
///
/// # Errors
/// Any other HTTP status, or the connection's error, in words.
pub fn get_text(url: &str, o: &HttpOptions) -> io::Result<Option<String>> {
    match agent(url, o)?.get(url).call() {
        Ok(r) => {
            let mut s = String::new();
            r.into_reader().take(64 << 20).read_to_string(&mut s)?;
            Ok(Some(s))
        }
        Err(e) => match say(e) {
            (Some(404 | 410), _) => Ok(None),
            (_, msg) => Err(failed(msg)),
        },
    }
}

impl Download {
    /// Sends the first request: the status must be 200 (after redirects).
    pub fn open(url: &str, opts: &HttpOptions) -> io::Result<Download> {
        let agent = agent(url, opts)?;
        let r = agent.get(url).call().map_err(|e| failed(say(e).1))?;
        if r.status() != 200 {
            return Err(failed(format!(
                "HTTP {} {}: not the file",
                r.status(),
                r.status_text()
            )));
        }
        let validator = validator(&r);
        let len = r.header("Content-Length").and_then(|v| v.parse().ok());
        let at = r.get_url().to_string();
        let stats = Arc::new(DownloadStats::default());
        stats.length.store(len.unwrap_or(0), Ordering::Relaxed);
        Ok(Download {
            agent,
            url: url.to_string(),
            at,
            validator,
            len,
            pos: 0,
            body: Some(Box::new(r.into_reader())),
            failures: 0,
            opts: opts.clone(),
            cancel: None,
            stats,
            no_ranges: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// `n` bytes at `off`, by a request of their own (for the sizes that
    /// formats record at the end of the file); `None` if the server will
    /// not give exactly them, or the file is no longer the one opened.
    pub fn range(&self, off: u64, n: usize) -> Option<Vec<u8>> {
        if self.no_ranges.load(Ordering::Relaxed) {
            return None;
        }
        let end = off.checked_add(n as u64)?.checked_sub(1)?;
        let mut req = self
            .agent
            .get(&self.at)
            .set("Range", &format!("bytes={off}-{end}"));
        if let Some((_, v)) = &self.validator {
            req = req.set("If-Range", v);
        }
        let r = req.call().ok()?;
        if r.status() != 206 || validator(&r) != self.validator {
            self.no_ranges.store(true, Ordering::Relaxed);
            return None;
        }
        let mut v = Vec::with_capacity(n);
        r.into_reader().take(n as u64).read_to_end(&mut v).ok()?;
        (v.len() == n).then_some(v)
    }

    /// The connection was lost (`e`): counts the try, gives up after too
    /// many in a row, else tells `lost` (try, of how many) and waits
    /// before the next.
    fn lost(&mut self, e: &io::Error, lost: &dyn Fn(u32, u32)) -> io::Result<()> {
        self.body = None;
        self.failures += 1;
        if self.failures > self.opts.retries {
            return Err(failed(format!(
                "the download stopped at byte {} of {} and could not be resumed \
                 ({} tries): {e}",
                self.pos,
                self.len.map_or("?".to_string(), |l| l.to_string()),
                self.opts.retries
            )));
        }
        lost(self.failures, self.opts.retries);
        let shift = (self.failures - 1).min(5);
        let pause = (self.opts.backoff * (1 << shift)).min(Duration::from_secs(15));
        let until = std::time::Instant::now() + pause;
        while std::time::Instant::now() < until {
            if let Some(c) = &self.cancel {
                c.check()?;
            }
            std::thread::sleep(Duration::from_millis(50).min(pause));
        }
        Ok(())
    }

    /// A new connection from `pos`. `Err` with [`Failed`] ends the
    /// download; a transport error or a server error (5xx) is one more try.
    fn resume(&mut self) -> io::Result<Result<(), io::Error>> {
        self.stats.resumed.fetch_add(1, Ordering::Relaxed);
        let mut req = self
            .agent
            .get(&self.at)
            .set("Range", &format!("bytes={}-", self.pos));
        if let Some((_, v)) = &self.validator {
            req = req.set("If-Range", v);
        }
        let r = match req.call() {
            Ok(r) => r,
            Err(e) => {
                return match say(e) {
                    (Some(c), msg) if c < 500 => Err(failed(format!("resuming: {msg}"))),
                    (_, msg) => Ok(Err(io::Error::other(msg))),
                }
            }
        };
        let changed = || {
            failed(format!(
                "the file changed on the server during the download (at byte {}): \
                 nothing of the new one was written; flash again",
                self.pos
            ))
        };
        let now = validator(&r);
        if self.validator.is_some() && now.is_some() && now != self.validator {
            return Err(changed());
        }
        match r.status() {
            206 => {
                let range = r.header("Content-Range").unwrap_or("");
                let (start, total) = content_range(range)
                    .ok_or_else(|| failed(format!("resuming: a Content-Range of '{range}'")))?;
                if start != self.pos || (self.len.is_some() && total != self.len) {
                    return Err(changed());
                }
                self.body = Some(Box::new(r.into_reader()));
                Ok(Ok(()))
            }
            200 => {
                // Range ignored, or (with no validator to tell) changed.
                let len = r.header("Content-Length").and_then(|v| v.parse().ok());
                if self.validator.is_none() && len != self.len {
                    return Err(changed());
                }
                let mut body: Box<dyn Read + Send + Sync> = Box::new(r.into_reader());
                // The whole file again: what was had is read and dropped.
                let mut skip = (&mut body).take(self.pos);
                let got = io::copy(&mut skip, &mut io::sink());
                self.stats
                    .received
                    .fetch_add(got.as_ref().map_or(0, |n| *n), Ordering::Relaxed);
                match got {
                    Ok(n) if n == self.pos => {
                        self.body = Some(body);
                        Ok(Ok(()))
                    }
                    Ok(_) => Ok(Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the connection closed while re-reading",
                    ))),
                    Err(e) => Ok(Err(e)),
                }
            }
            s => Err(failed(format!("resuming: HTTP {s} {}", r.status_text()))),
        }
    }
}

/// The strong validator of a response: its ETag unless weak, else its
/// Last-Modified.
fn validator(r: &ureq::Response) -> Option<(&'static str, String)> {
    match r.header("ETag") {
        Some(e) if !e.starts_with("W/") => Some(("ETag", e.to_string())),
        _ => r
            .header("Last-Modified")
            .map(|v| ("Last-Modified", v.to_string())),
    }
}

/// `bytes START-END/TOTAL`: START, and TOTAL unless `*`.
pub(crate) fn content_range(v: &str) -> Option<(u64, Option<u64>)> {
    let v = v.trim().strip_prefix("bytes ")?;
    let (range, total) = v.split_once('/')?;
    let start = range.split('-').next()?.trim().parse().ok()?;
    Some((start, total.trim().parse().ok()))
}

impl Read for Download {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_telling(buf, &|_, _| {})
    }
}

impl Download {
    /// [`Read::read`], telling `lost` (try, of how many) each time the
    /// connection is lost and is to be resumed.
    pub(super) fn read_telling(
        &mut self,
        buf: &mut [u8],
        lost: &dyn Fn(u32, u32),
    ) -> io::Result<usize> {
        loop {
            if let Some(c) = &self.cancel {
                c.check()?;
            }
            let Some(body) = self.body.as_mut() else {
                match self.resume()? {
                    Ok(()) => continue,
                    Err(e) => {
                        self.lost(&e, lost)?;
                        continue;
                    }
                }
            };
            match body.read(buf) {
                Ok(0) if self.len.is_none_or(|l| self.pos >= l) => return Ok(0),
                Ok(0) => {
                    let e = io::Error::new(io::ErrorKind::UnexpectedEof, "the connection closed");
                    self.lost(&e, lost)?;
                }
                Ok(n) => {
                    self.pos += n as u64;
                    self.failures = 0;
                    self.stats.had.store(self.pos, Ordering::Relaxed);
                    self.stats.received.fetch_add(n as u64, Ordering::Relaxed);
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => self.lost(&e, lost)?,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_parts() {
        assert!(is_url(Path::new("https://x.org/a.img.xz")));
        assert!(is_url(Path::new("HTTP://x.org/a")));
        assert!(!is_url(Path::new("/tmp/http://x")));
        assert_eq!(host_of("https://u:p@Example.org:8443/a?b"), "Example.org");
        assert_eq!(host_of("http://[::1]:80/a"), "::1");
        assert_eq!(file_name("https://x.org/d/os.img.xz?sig=1"), "os.img.xz");
        assert_eq!(content_range("bytes 100-199/1000"), Some((100, Some(1000))));
        assert_eq!(content_range("bytes 5-9/*"), Some((5, None)));
        assert_eq!(content_range("items 1-2/3"), None);
    }
}
