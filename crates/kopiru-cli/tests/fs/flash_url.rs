//! `kopiru flash URL`: images streamed from a local server on 127.0.0.1
//! (http_server.py) that serves Range, ETag and Last-Modified and injects
//! faults: a connection dropped at 40% (resumed with Range, the device
//! byte-exact), a stall, Range ignored, the file changed mid-way (the
//! first MiB not written), HTTP errors, an HTML body, a redirect, a wrong
//! `--sha256`, HTTPS with a CA given by SSL_CERT_FILE, two devices from
//! one download, a block map by URL, proxies (plain and CONNECT), and
//! SIGINT during a stall.

use crate::flash::{device_bytes, image, Loop};
use crate::{code, fails_with, fixture, json, show, Add, R};
use libtest_mimic::Failed;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// The test server, stopped on drop.
struct Server {
    child: Child,
    port: u16,
    log: PathBuf,
    scheme: &'static str,
}

impl Server {
    /// Serves `dir` (over TLS with `tls`: certificate and key).
    fn start(dir: &Path, tls: Option<(&Path, &Path)>) -> Result<Server, Failed> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fs/http_server.py");
        let log = dir.join("requests.log");
        let _ = std::fs::remove_file(&log);
        let mut c = Command::new("python3");
        c.arg(script).arg(dir).arg(&log);
        if let Some((cert, key)) = tls {
            c.arg("--tls").arg(cert).arg(key);
        }
        let mut child = c.stdout(Stdio::piped()).stderr(Stdio::null()).spawn()?;
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line)?;
        let port = line.trim().parse().map_err(|e| {
            let _ = child.kill();
            format!("http_server.py said {line:?}: {e}")
        })?;
        Ok(Server {
            child,
            port,
            log,
            scheme: if tls.is_some() { "https" } else { "http" },
        })
    }

    fn url(&self, path: &str) -> String {
        format!("{}://127.0.0.1:{}/{path}", self.scheme, self.port)
    }

    /// The requests served so far, one a line.
    fn requests(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `kopiru flash --json --yes URL DEVICES... ARGS...`, resuming fast (a
/// 50 ms first pause). The stall timeout is kopiru's (30 s) unless ARGS
/// give one: a short one would cut a download whose server a busy machine
/// holds up for a moment.
fn flash_url(url: &str, devs: &[&Path], args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kopiru"));
    c.args(["flash", "--json", "--yes", "--no-progress"])
        .args(args)
        .arg(url)
        .args(devs)
        .env("KOPIRU_HTTP_BACKOFF_MS", "50");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run kopiru")
}

/// The test's directory, with `image.raw` (5 MiB + 1234 bytes, an MBR's
/// signature) and `image.raw.xz`, `image.raw.zst`.
fn served(tag: &str) -> Result<(PathBuf, Vec<u8>), Failed> {
    let dir = fixture::run_root().join(format!("flash-url-{tag}"));
    std::fs::create_dir_all(&dir)?;
    let (raw, data) = image(&dir)?;
    fixture::sh(Command::new("xz").args(["-k", "-f", "-q", "-T1", "-0"]).arg(&raw))?;
    fixture::sh(Command::new("zstd").args(["-k", "-f", "-q"]).arg(&raw))?;
    Ok((dir, data))
}

/// Exit 0, verified, and the device holds exactly `data`.
fn exact(o: &Output, lo: &Loop, data: &[u8], what: &str) -> R {
    ensure!(code(o) == 0, "{what}: {}", show(o));
    let j = json(o)?;
    ensure!(
        j["devices"][0]["verified"] == true && j["image_bytes"] == data.len() as u64,
        "{what}: {j}"
    );
    ensure!(
        device_bytes(&lo.dev, data.len())? == data,
        "{what}: the device differs from the image"
    );
    Ok(())
}

/// The requests for `path` that resumed from a byte past 0 and got `status`.
fn resumed(log: &str, path: &str, status: u16) -> usize {
    log.lines()
        .filter(|l| l.starts_with(&format!("GET /{path} ")))
        .filter(|l| l.ends_with(&format!("-> {status}")))
        .filter(|l| {
            // "range=bytes=N- ": from N to the end (not a size's tail).
            let range = l.split("range=bytes=").nth(1).and_then(|r| r.split(' ').next());
            range
                .and_then(|r| r.strip_suffix('-'))
                .and_then(|n| n.parse::<u64>().ok())
                .is_some_and(|from| from > 0)
        })
        .count()
}

/// A connection dropped at 40% is resumed with Range + If-Range and the
/// device ends byte-exact; so is one that stalls past --stall-timeout;
/// and a redirect is followed.
pub fn resumes() -> R {
    let (dir, data) = served("resume")?;
    let srv = Server::start(&dir, None)?;
    let lo = Loop::new("url-resume", 16, 512, true)?;
    for (fault, what) in [("drop40", "dropped at 40%"), ("stall40", "stalled at 40%")] {
        lo.fill("/dev/urandom", 8)?;
        let path = format!("image.raw.xz?fault={fault}");
        let o = flash_url(&srv.url(&path), &[&lo.dev], &["--stall-timeout", "1"], &[]);
        exact(&o, &lo, &data, what)?;
        let log = srv.requests();
        ensure!(
            resumed(&log, &path, 206) >= 1,
            "{what}: no resumed Range request answered 206:\n{log}"
        );
        // The download's counters: every byte of the .xz file had once,
        // the resume counted.
        let j = json(&o)?;
        let size = std::fs::metadata(dir.join("image.raw.xz"))?.len();
        ensure!(
            j["downloaded_bytes"] == size && j["resumes"].as_u64().is_some_and(|n| n >= 1),
            "{what}: want downloaded_bytes {size} and resumes >= 1: {j}"
        );
        // The stall is 30 s long; with a 1 s timeout the resume comes
        // before it ends (the server's log says which came first).
        let resumed_at = log.find(&format!("GET /{path} range=bytes="));
        let stall_end = log.find(&format!("STALL-END /{path}"));
        ensure!(
            resumed_at.is_some() && stall_end.is_none_or(|end| resumed_at < Some(end)),
            "{what}: the resume did not come before the stall ended:\n{log}"
        );
    }
    lo.fill("/dev/urandom", 8)?;
    let o = flash_url(&srv.url("image.raw.xz?fault=redirect"), &[&lo.dev], &[], &[]);
    exact(&o, &lo, &data, "redirected")?;
    let j = json(&o)?;
    ensure!(j["resumes"] == 0, "redirected: no resume wanted: {j}");
    ensure!(
        srv.requests().contains("GET /image.raw.xz range=- if-range=- -> 200"),
        "the redirect was not followed:\n{}",
        srv.requests()
    );
    Ok(())
}

/// A server that ignores Range sends the whole file again on resuming:
/// what was had is read and dropped, and the device ends byte-exact.
pub fn range_ignored() -> R {
    let (dir, data) = served("norange")?;
    let srv = Server::start(&dir, None)?;
    let lo = Loop::new("url-norange", 16, 512, true)?;
    lo.fill("/dev/urandom", 8)?;
    let path = "image.raw.xz?fault=drop40,norange";
    let o = flash_url(&srv.url(path), &[&lo.dev], &[], &[]);
    exact(&o, &lo, &data, "Range ignored")?;
    let log = srv.requests();
    ensure!(
        resumed(&log, path, 200) >= 1,
        "no resume answered with the whole file:\n{log}"
    );
    Ok(())
}

/// The file changes on the server (another ETag) while it is downloaded:
/// the flash fails (exit 1) and the device keeps its old first MiB.
pub fn etag_changed() -> R {
    let (dir, _) = served("etag")?;
    let srv = Server::start(&dir, None)?;
    let lo = Loop::new("url-etag", 16, 512, true)?;
    lo.fill("/dev/urandom", 8)?;
    let head = device_bytes(&lo.dev, 1 << 20)?;
    let o = flash_url(
        &srv.url("image.raw.xz?fault=drop40,etagchange"),
        &[&lo.dev],
        &[],
        &[],
    );
    fails_with(&o, 1, "the file changed on the server")?;
    ensure!(
        device_bytes(&lo.dev, 1 << 20)? == head,
        "the first MiB was written"
    );
    Ok(())
}

/// The bar (forced with --progress into a file) while a dropped
/// connection waits to be resumed: "reconnecting (1 of 8)", the download
/// at 0 B/s and its ETA "?"; and the device byte-exact after.
pub fn reconnecting_bar() -> R {
    let (dir, data) = served("reconnecting")?;
    let srv = Server::start(&dir, None)?;
    let lo = Loop::new("url-reconnecting", 16, 512, true)?;
    lo.fill("/dev/urandom", 8)?;
    let o = Command::new(env!("CARGO_BIN_EXE_kopiru"))
        .args(["flash", "--json", "--yes", "--progress", "--stall-timeout", "1"])
        .arg(srv.url("image.raw.xz?fault=drop40"))
        .arg(&lo.dev)
        // A pause long enough for a few frames of the bar (10 a second).
        .env("KOPIRU_HTTP_BACKOFF_MS", "1500")
        .output()?;
    exact(&o, &lo, &data, "reconnected")?;
    let err = String::from_utf8_lossy(&o.stderr);
    ensure!(
        err.contains("at 0 B/s, reconnecting (1 of 8), ETA ?"),
        "the bar did not say it was reconnecting: {}",
        show(&o)
    );
    Ok(())
}

/// HTTP 404 and 500 exit 2 with the status, an HTML page under an image's
/// name is refused, and an image larger than the device (known from the
/// xz index, fetched with a Range request, the first zstd frame's header,
/// or a raw file's Content-Length) is refused: the device untouched each
/// time.
pub fn refusals() -> R {
    let (dir, _) = served("refusals")?;
    std::fs::write(
        dir.join("page.img.xz"),
        b"<!DOCTYPE html>\n<html><head><title>Download</title></head><body>mirror list</body></html>\n"
            .repeat(20),
    )?;
    // 24 MiB of compressible bytes, for a 16 MiB device.
    let big = dir.join("big.img");
    let mut bytes = b"kopiru ".repeat((24 << 20) / 7);
    // An MBR, as a disk image starts (text is refused under any name).
    bytes[..512].fill(0);
    bytes[510..512].copy_from_slice(&[0x55, 0xAA]);
    std::fs::write(&big, bytes)?;
    fixture::sh(Command::new("xz").args(["-k", "-f", "-q", "-T1", "-0"]).arg(&big))?;
    fixture::sh(Command::new("zstd").args(["-k", "-f", "-q"]).arg(&big))?;
    let srv = Server::start(&dir, None)?;
    let lo = Loop::new("url-refusals", 16, 512, true)?;
    lo.fill("/dev/urandom", 16)?;
    let before = device_bytes(&lo.dev, 16 << 20)?;
    for (path, want) in [
        ("image.raw.xz?fault=status=404", "HTTP 404 Not Found"),
        ("image.raw.xz?fault=status=500", "HTTP 500"),
        ("page.img.xz", "it looks like HTML"),
        ("big.img.xz", "too small"),
        // The size came from the zstd frame header, not a gzip trailer.
        ("big.img.zst", "the zstd frame header says the image is at least"),
        ("big.img", "too small"),
    ] {
        let o = flash_url(&srv.url(path), &[&lo.dev], &[], &[]);
        fails_with(&o, 2, want).map_err(|e| format!("{path}: {e:?}"))?;
        ensure!(
            path.ends_with(".gz") || !String::from_utf8_lossy(&o.stderr).contains("gzip"),
            "{path}: a gzip trailer named for another format: {}",
            show(&o)
        );
        ensure!(
            device_bytes(&lo.dev, 16 << 20)? == before,
            "{path}: the device was written"
        );
    }
    Ok(())
}

/// `--sha256` is the download's (the .xz file's): a wrong one fails after
/// the download, and the device's first MiB is unchanged; the right one
/// flashes.
pub fn sha256() -> R {
    let (dir, data) = served("sha256")?;
    let srv = Server::start(&dir, None)?;
    let lo = Loop::new("url-sha256", 16, 512, true)?;
    lo.fill("/dev/urandom", 8)?;
    let head = device_bytes(&lo.dev, 1 << 20)?;
    let wrong = "ab".repeat(32);
    let o = flash_url(&srv.url("image.raw.xz"), &[&lo.dev], &["--sha256", &wrong], &[]);
    fails_with(&o, 1, "as given (--sha256)")?;
    ensure!(
        device_bytes(&lo.dev, 1 << 20)? == head,
        "the first MiB was written despite a wrong --sha256"
    );
    let sum = fixture::sh(Command::new("sha256sum").arg(dir.join("image.raw.xz")))?;
    let right = sum.split_whitespace().next().unwrap_or("");
    let o = flash_url(&srv.url("image.raw.xz"), &[&lo.dev], &["--sha256", right], &[]);
    exact(&o, &lo, &data, "the right --sha256")
}

/// A CA of the test's own (`ca.pem`) and a server certificate for
/// 127.0.0.1 signed by it (`srv.pem`, `srv.key`), made in `dir`.
fn https_certs(dir: &Path) -> R {
    let d = dir.display();
    fixture::sh(Command::new("sh").arg("-c").arg(format!(
        "set -e; cd '{d}'; \
         openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 \
           -subj /CN=kopiru-test-ca -addext basicConstraints=critical,CA:TRUE \
           -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null; \
         openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr \
           -subj /CN=127.0.0.1 2>/dev/null; \
         printf 'subjectAltName=IP:127.0.0.1\\nbasicConstraints=CA:FALSE\\n\
extendedKeyUsage=serverAuth\\n' > srv.ext; \
         openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
           -out srv.pem -days 2 -extfile srv.ext 2>/dev/null"
    )))?;
    Ok(())
}

/// HTTPS with a certificate from a CA of the test's own: flashed with the
/// CA in SSL_CERT_FILE, refused (nothing written) without it.
pub fn https() -> R {
    let (dir, data) = served("https")?;
    https_certs(&dir)?;
    let srv = Server::start(&dir, Some((&dir.join("srv.pem"), &dir.join("srv.key"))))?;
    let lo = Loop::new("url-https", 16, 512, true)?;
    lo.fill("/dev/urandom", 8)?;
    let before = device_bytes(&lo.dev, 8 << 20)?;
    let url = srv.url("image.raw.xz");
    let o = flash_url(&url, &[&lo.dev], &[], &[]);
    // One clean line: the URL once, the reason in words (not rustls's
    // debug names such as "UnknownIssuer").
    fails_with(&o, 2, "TLS: certificate not trusted (unknown issuer)")?;
    let err = String::from_utf8_lossy(&o.stderr);
    ensure!(
        err.lines().count() == 1 && err.matches(url.as_str()).count() == 1 && !err.contains("UnknownIssuer"),
        "want one line naming the URL once: {}",
        show(&o)
    );
    ensure!(
        device_bytes(&lo.dev, 8 << 20)? == before,
        "written with an unknown CA"
    );
    let ca = dir.join("ca.pem");
    let ca = ca.to_string_lossy();
    let o = flash_url(&url, &[&lo.dev], &[], &[("SSL_CERT_FILE", &ca)]);
    exact(&o, &lo, &data, "HTTPS with SSL_CERT_FILE")
}

/// Two devices from one URL, one download: the smaller device (8 MiB, for
/// a zstd image of unknown size and 10 MiB) fails at its end with its
/// reason; the other is written and verified. Exit 23.
pub fn two_devices() -> R {
    let dir = fixture::run_root().join("flash-url-two");
    std::fs::create_dir_all(&dir)?;
    let data = crate::trees::bytes(10 << 20, 17);
    let raw = dir.join("ten.img");
    std::fs::write(&raw, &data)?;
    // From a pipe, zstd records no size: the small device is found late.
    fixture::sh(Command::new("sh").arg("-c").arg(format!(
        "zstd -q -c < '{}' > '{}.zst'",
        raw.display(),
        raw.display()
    )))?;
    let srv = Server::start(&dir, None)?;
    let big = Loop::new("url-two-big", 16, 512, true)?;
    let small = Loop::new("url-two-small", 8, 512, true)?;
    let o = flash_url(&srv.url("ten.img.zst"), &[&big.dev, &small.dev], &[], &[]);
    ensure!(code(&o) == 23, "want exit 23: {}", show(&o));
    let j = json(&o)?;
    ensure!(
        j["devices"][0]["verified"] == true
            && j["devices"][1]["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("too small")),
        "{j}"
    );
    ensure!(
        device_bytes(&big.dev, data.len())? == data,
        "the big device differs"
    );
    let gets = srv.requests().lines().filter(|l| l.starts_with("GET /ten.img.zst ")).count();
    ensure!(gets == 1, "{gets} requests for one download:\n{}", srv.requests());
    Ok(())
}

/// `--bmap auto` with no .bmap beside the URL says so and writes every
/// byte.
pub fn bmap_auto_missing() -> R {
    let (dir, data) = served("bmap-auto")?;
    let srv = Server::start(&dir, None)?;
    let lo = Loop::new("url-bmap-auto", 16, 512, true)?;
    lo.fill("/dev/urandom", 8)?;
    let o = flash_url(&srv.url("image.raw.xz"), &[&lo.dev], &["--bmap", "auto"], &[]);
    exact(&o, &lo, &data, "--bmap auto, none there")?;
    ensure!(
        String::from_utf8_lossy(&o.stderr).contains("no block map at"),
        "{}",
        show(&o)
    );
    ensure!(
        srv.requests().contains("GET /image.raw.xz.bmap "),
        "the .bmap was not asked for:\n{}",
        srv.requests()
    );
    Ok(())
}

/// SIGINT while the download stalls (sent once the server's log says the
/// stall began): exit 20 before the stall ends (the server's log says
/// which came first; its stall is far longer than the 2 s stall timeout),
/// the device's first MiB unchanged.
pub fn interrupted() -> R {
    let (dir, _) = served("sigint")?;
    let srv = Server::start(&dir, None)?;
    let lo = Loop::new("url-sigint", 16, 512, true)?;
    lo.fill("/dev/urandom", 8)?;
    let head = device_bytes(&lo.dev, 1 << 20)?;
    let path = "image.raw.xz?fault=stall40";
    let mut child = Command::new(env!("CARGO_BIN_EXE_kopiru"))
        .args(["flash", "--json", "--yes", "--no-progress", "--stall-timeout", "2"])
        .arg(srv.url(path))
        .arg(&lo.dev)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    // The server says when it has sent 40% and begins to stall.
    let stalled = format!("STALL-BEGIN /{path}");
    let started = std::time::Instant::now();
    while !srv.requests().contains(&stalled) {
        if started.elapsed() > std::time::Duration::from_secs(120) {
            let _ = child.kill();
            let o = child.wait_with_output()?;
            return Err(format!("the download never stalled: {}\n{}", show(&o), srv.requests()).into());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let o = child.wait_with_output()?;
    let log = srv.requests();
    fails_with(&o, 20, "received SIGINT: stopped")?;
    ensure!(
        !log.contains(&format!("STALL-END /{path}")),
        "kopiru waited for the stall to end after SIGINT (stall timeout 2 s):\n{log}"
    );
    ensure!(
        device_bytes(&lo.dev, 1 << 20)? == head,
        "the first MiB was written"
    );
    Ok(())
}

/// A block map beside the URL (`--bmap auto`) or at a URL of its own
/// (`--bmap URL`): only the mapped ranges are written, the rest of the
/// device keeps what it held.
pub fn bmap_url() -> R {
    let dir = fixture::run_root().join("flash-url-bmap");
    std::fs::create_dir_all(&dir)?;
    let crate::flash::Sparse { img, map, ranges } = crate::flash::sparse_with_map(&dir)?;
    let data = std::fs::read(&img)?;
    fixture::sh(Command::new("xz").args(["-k", "-f", "-q", "-T1", "-0"]).arg(&img))?;
    std::fs::copy(&map, dir.join("sparse.img.xz.bmap"))?;
    let srv = Server::start(&dir, None)?;
    let lo = Loop::new("url-bmap", 32, 4096, true)?;
    for (bmap, asked) in [
        (srv.url("sparse.bmap"), "GET /sparse.bmap "),
        ("auto".to_string(), "GET /sparse.img.xz.bmap "),
    ] {
        lo.fill("/dev/urandom", 32)?;
        let before = device_bytes(&lo.dev, data.len())?;
        let o = flash_url(&srv.url("sparse.img.xz"), &[&lo.dev], &["--bmap", &bmap], &[]);
        ensure!(code(&o) == 0, "--bmap {bmap}: {}", show(&o));
        ensure!(json(&o)?["devices"][0]["verified"] == true, "{}", show(&o));
        let after = device_bytes(&lo.dev, data.len())?;
        let wrong = crate::flash::not_as_mapped(&ranges, &data, &before, &after);
        ensure!(wrong == 0, "--bmap {bmap}: {wrong} sectors are not what the map says");
        ensure!(
            srv.requests().contains(asked),
            "--bmap {bmap}: the map was not asked for:\n{}",
            srv.requests()
        );
    }
    Ok(())
}

/// HTTP_PROXY: a host that does not resolve is reached through the proxy
/// (the test server, which answers absolute-form requests), a dropped
/// connection resumed through it; with the host in NO_PROXY the proxy is
/// bypassed and the name fails. HTTPS_PROXY: an https URL goes through a
/// CONNECT tunnel of the proxy.
pub fn proxy() -> R {
    let (dir, data) = served("proxy")?;
    let prox = Server::start(&dir, None)?;
    let lo = Loop::new("url-proxy", 16, 512, true)?;
    let via = format!("http://127.0.0.1:{}", prox.port);
    let url = "http://kopiru-test.invalid/image.raw.xz?fault=drop40";
    lo.fill("/dev/urandom", 8)?;
    let o = flash_url(url, &[&lo.dev], &[], &[("HTTP_PROXY", &via), ("NO_PROXY", "")]);
    exact(&o, &lo, &data, "through HTTP_PROXY")?;
    let log = prox.requests();
    ensure!(
        log.contains("GET http://kopiru-test.invalid/image.raw.xz?fault=drop40 range=bytes="),
        "no resumed request through the proxy:\n{log}"
    );
    let o = flash_url(
        url,
        &[&lo.dev],
        &[],
        &[("HTTP_PROXY", &via), ("NO_PROXY", "localhost,.invalid")],
    );
    fails_with(&o, 2, "kopiru-test.invalid")?;

    https_certs(&dir)?;
    let tls = Server::start(&dir, Some((&dir.join("srv.pem"), &dir.join("srv.key"))))?;
    lo.fill("/dev/urandom", 8)?;
    let ca = dir.join("ca.pem");
    let ca = ca.to_string_lossy();
    let env = [("HTTPS_PROXY", via.as_str()), ("NO_PROXY", ""), ("SSL_CERT_FILE", &ca)];
    let o = flash_url(&tls.url("image.raw.xz"), &[&lo.dev], &[], &env);
    exact(&o, &lo, &data, "through HTTPS_PROXY")?;
    let tunnel = format!("CONNECT 127.0.0.1:{} ", tls.port);
    ensure!(
        prox.requests().contains(&tunnel),
        "no CONNECT tunnel through the proxy:\n{}",
        prox.requests()
    );
    Ok(())
}

/// Why these tests cannot run here, if they cannot.
fn unavailable() -> Option<String> {
    crate::flash::unavailable().or_else(|| {
        ["python3", "openssl", "sha256sum"]
            .iter()
            .find(|t| !fixture::have(t))
            .map(|t| format!("{t} not installed"))
    })
}

/// Registers this module's trials.
pub fn trials(add: Add) {
    let needs = unavailable();
    add("flash_url_resumes".into(), needs.clone(), Box::new(resumes));
    add("flash_url_reconnecting_bar".into(), needs.clone(), Box::new(reconnecting_bar));
    add("flash_url_range_ignored".into(), needs.clone(), Box::new(range_ignored));
    add("flash_url_etag_changed".into(), needs.clone(), Box::new(etag_changed));
    add("flash_url_refusals".into(), needs.clone(), Box::new(refusals));
    add("flash_url_sha256".into(), needs.clone(), Box::new(sha256));
    add("flash_url_https".into(), needs.clone(), Box::new(https));
    add("flash_url_two_devices".into(), needs.clone(), Box::new(two_devices));
    add("flash_url_bmap_auto_missing".into(), needs.clone(), Box::new(bmap_auto_missing));
    add("flash_url_proxy".into(), needs.clone(), Box::new(proxy));
    add("flash_url_interrupted".into(), needs.clone(), Box::new(interrupted));
    add(
        "flash_url_bmap".into(),
        needs.or_else(crate::flash::bmaptool_unavailable),
        Box::new(bmap_url),
    );
}
