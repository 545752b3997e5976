//! Every request the server answers, after [`super::security`]'s checks:
//! the page's files, the event stream, and the API (`/api/...`). What the
//! page asks is checked here for the page's sake (a drive that is not
//! listed, or busy, a file this user cannot read), and everything again
//! by the helper, which trusts nothing of this.

use super::http::{self, Request, Response};
use super::jobs::{self, Kind};
use super::{assets, Shared};
use serde_json::{json, Value};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Answers one connection: one request, or an event stream.
pub fn serve(shared: &Arc<Shared>, stream: TcpStream) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(30)));
    let req = match http::read_request(&stream) {
        Ok(r) => r,
        Err(http::Bad::Gone) => return,
        Err(http::Bad::Status(code, why)) => {
            let _ = respond(&stream, &Response::text(code, why), false);
            return;
        }
    };
    let head = req.method == "HEAD";
    // None: an event stream, served and ended.
    if let Some(resp) = route(shared, &req, &stream) {
        let _ = respond(&stream, &resp, head);
    }
}

fn respond(stream: &TcpStream, resp: &Response, head: bool) -> std::io::Result<()> {
    http::write_response(stream, resp, &super::security::HEADERS, head)
}

/// The answer to `req`; `None` when it was an event stream (already
/// served).
fn route(shared: &Arc<Shared>, req: &Request, stream: &TcpStream) -> Option<Response> {
    let g = &shared.guard;
    if let Err(r) = g.check_host(req) {
        return Some(r);
    }
    let get = matches!(req.method.as_str(), "GET" | "HEAD");
    if get && req.path == "/" && req.param("token").is_some() {
        return Some(g.exchange(req));
    }
    if !g.has_session(req) {
        return Some(Response::text(
            401,
            "not signed in: open the address `kopiru gui` printed (it carries a one-time \
             token), in this browser",
        ));
    }
    if let Some((content_type, body)) = assets::find(&req.path) {
        return Some(match get {
            true => Response::new(200, content_type, body),
            false => Response::text(405, "GET only"),
        });
    }
    let api = [
        "/api/events",
        "/api/state",
        "/api/browse",
        "/api/flash",
        "/api/backup",
        "/api/cancel",
        "/api/sha256sums",
        "/api/catalog",
    ];
    if !api.contains(&req.path.as_str()) {
        return Some(Response::text(404, "no such page"));
    }
    // Reading: from this page only (a same-origin request carries our
    // Origin or none). Changing: our Origin, always, and a JSON body (a
    // form elsewhere cannot send one without a preflight, which gets no
    // CORS answer).
    if let Err(r) = g.check_origin(req, !get) {
        return Some(r);
    }
    if !get {
        let json = req
            .header("content-type")
            .is_some_and(|t| t.split(';').next() == Some("application/json"));
        if req.method != "POST" {
            return Some(Response::text(405, "GET or POST only"));
        }
        if !json {
            return Some(Response::text(415, "a JSON body (application/json) only"));
        }
    }
    let body = || serde_json::from_slice::<Value>(&req.body).unwrap_or(Value::Null);
    Some(match (get, req.path.as_str()) {
        (true, "/api/events") => {
            super::events(shared, stream);
            return None;
        }
        (true, "/api/state") => Response::json(200, &shared.snapshot().1),
        (true, "/api/browse") => browse(shared, req.param("dir")),
        (false, "/api/flash") => start_flash(shared, &body()),
        (false, "/api/backup") => start_backup(shared, &body()),
        (false, "/api/cancel") => cancel(shared, &body()),
        (false, "/api/sha256sums") => sha256sums(shared, &body()),
        (false, "/api/catalog") => catalog(shared, &body()),
        _ => Response::text(405, "not with this method"),
    })
}

/// `{"error": why}` with `status`.
fn error(status: u16, why: impl Into<String>) -> Response {
    Response::json(status, &json!({"error": why.into()}))
}

fn text_field<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("").trim()
}

/// `~/x` as the home folder's x; anything else as given.
fn expand(shared: &Shared, p: &str) -> PathBuf {
    match p.strip_prefix("~/") {
        Some(rest) => shared.home.join(rest),
        None if p == "~" => shared.home.clone(),
        None => PathBuf::from(p),
    }
}

fn is_url(s: &str) -> bool {
    s.starts_with("http://") || s.starts_with("https://")
}

/// A drive the page may start something on: listed now, not the target
/// of a running job, and (`write`) not unavailable.
fn usable_drive(shared: &Shared, path: &str, write: bool) -> Result<(), String> {
    let st = shared.lock();
    let drives = st.drives.as_array().cloned().unwrap_or_default();
    let Some(d) = drives.iter().find(|d| d["path"] == path) else {
        return Err(format!("{path}: not a drive this page lists"));
    };
    if let (true, Some(why)) = (write, d["unavailable"].as_str()) {
        return Err(format!("{path}: unavailable: {why}"));
    }
    if st
        .jobs
        .iter()
        .any(|j| j.running() && j.devices.iter().any(|x| x == path))
    {
        return Err(format!("{path}: busy with another operation"));
    }
    Ok(())
}

fn start_flash(shared: &Arc<Shared>, v: &Value) -> Response {
    let image = text_field(v, "image");
    if image.is_empty() {
        return error(400, "no image given");
    }
    let image_arg = if is_url(image) {
        image.to_string()
    } else {
        let p = expand(shared, image);
        if !p.is_absolute() {
            return error(400, format!("{image}: give the image's full path"));
        }
        // The helper reads it as root: only what this user may read.
        if let Err(e) = std::fs::File::open(&p) {
            return error(400, format!("{}: {}", p.display(), kopiru::reason(&e)));
        }
        p.to_string_lossy().into_owned()
    };
    let sha = text_field(v, "sha256").to_ascii_lowercase();
    if !sha.is_empty() && (sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit())) {
        return error(400, "a SHA-256 is 64 hexadecimal digits");
    }
    let devices: Vec<String> = v
        .get("devices")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    if devices.is_empty() {
        return error(400, "no drive chosen");
    }
    for d in &devices {
        if let Err(why) = usable_drive(shared, d, true) {
            return error(409, why);
        }
    }
    let mut args = vec!["flash".to_string()];
    if !sha.is_empty() {
        args.extend(["--sha256".to_string(), sha]);
    }
    args.push("--".into());
    args.push(image_arg.clone());
    args.extend(devices.iter().cloned());
    let id = jobs::start(shared, Kind::Flash, image_arg, devices, args);
    Response::json(200, &json!({"job": id}))
}

fn start_backup(shared: &Arc<Shared>, v: &Value) -> Response {
    let device = text_field(v, "device");
    if let Err(why) = usable_drive(shared, device, false) {
        return error(409, why);
    }
    let output = expand(shared, text_field(v, "output"));
    let ext = output.extension().and_then(|e| e.to_str()).unwrap_or("");
    if !matches!(ext, "zst" | "xz") {
        return error(400, "the backup's name ends in .img.zst or .img.xz");
    }
    if !output.is_absolute() {
        return error(400, "give the backup's full path (or ~/NAME)");
    }
    if std::fs::symlink_metadata(&output).is_ok() {
        return error(409, format!("{}: exists already", output.display()));
    }
    let parent = output.parent().unwrap_or(Path::new("/"));
    if !writable(parent) {
        return error(
            400,
            format!("{}: not a folder you may write in", parent.display()),
        );
    }
    let out = output.to_string_lossy().into_owned();
    let args = vec!["image".into(), "--".into(), device.to_string(), out.clone()];
    let id = jobs::start(shared, Kind::Backup, out, vec![device.to_string()], args);
    Response::json(200, &json!({"job": id}))
}

/// Whether this user may create files in `dir`.
fn writable(dir: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    dir.is_dir() && unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } == 0
}

fn cancel(shared: &Arc<Shared>, v: &Value) -> Response {
    let id = v.get("job").and_then(Value::as_u64).unwrap_or(0);
    let found = shared.with_job(id, |j| {
        if j.running() {
            j.cancel();
        }
    });
    shared.changed();
    match found {
        true => Response::json(200, &json!({"job": id})),
        false => error(404, "no such job"),
    }
}

/// A folder's entries for the file chooser: folders, then files, hidden
/// ones left out; this user's view (the server runs as them).
fn browse(shared: &Shared, dir: Option<String>) -> Response {
    let dir = match dir.as_deref().map(str::trim) {
        None | Some("") => shared.home.clone(),
        Some(d) => expand(shared, d),
    };
    let rd = match std::fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) => return error(400, format!("{}: {}", dir.display(), kopiru::reason(&e))),
    };
    let mut entries: Vec<(bool, String, u64)> = rd
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                return None;
            }
            let m = std::fs::metadata(e.path()).ok()?;
            Some((!m.is_dir(), name, m.len()))
        })
        .take(5000)
        .collect();
    entries.sort();
    let parent = dir.parent().map(|p| p.to_string_lossy().into_owned());
    Response::json(
        200,
        &json!({
            "dir": dir.to_string_lossy(),
            "parent": parent,
            "entries": entries.iter().map(|(file, name, size)| json!({
                "name": name,
                "dir": !file,
                "size": size,
            })).collect::<Vec<_>>(),
        }),
    )
}

/// A text from a file (at most 16 MiB) or an http(s) URL, as this user.
fn fetch(shared: &Shared, source: &str) -> Result<String, String> {
    if is_url(source) {
        return match kopiru::flash::get_text(source, &kopiru::flash::HttpOptions::default()) {
            Ok(Some(t)) => Ok(t),
            Ok(None) => Err(format!("{source}: not found (HTTP 404)")),
            Err(e) => Err(format!("{source}: {}", kopiru::reason(&e))),
        };
    }
    let p = expand(shared, source);
    let mut s = String::new();
    use std::io::Read;
    std::fs::File::open(&p)
        .and_then(|f| f.take(16 << 20).read_to_string(&mut s))
        .map_err(|e| format!("{}: {}", p.display(), kopiru::reason(&e)))?;
    Ok(s)
}

/// The image's SHA-256 from a `SHA256SUMS` (a file or URL): the line
/// naming the image's file name, in GNU's form (`HEX  NAME`, `HEX *NAME`)
/// or BSD's (`SHA256 (NAME) = HEX`).
fn sha256sums(shared: &Shared, v: &Value) -> Response {
    let image = text_field(v, "image");
    let mut source = text_field(v, "source").to_string();
    let name = image.rsplit('/').next().unwrap_or(image);
    if name.is_empty() {
        return error(400, "give the image first: its name is looked up");
    }
    if source.is_empty() {
        // Beside the image, where publishers put it.
        match image.rsplit_once('/') {
            Some((dir, _)) => source = format!("{dir}/SHA256SUMS"),
            None => return error(400, "give the SHA256SUMS file or URL"),
        }
    }
    let text = match fetch(shared, &source) {
        Ok(t) => t,
        Err(e) => return error(400, e),
    };
    match find_sum(&text, name) {
        Some(sum) => Response::json(200, &json!({"sha256": sum, "source": source})),
        None => error(404, format!("{source} has no SHA-256 for {name}")),
    }
}

fn find_sum(text: &str, name: &str) -> Option<String> {
    let sum_of = |s: &str| s.parse::<kopiru::Sha256>().ok().map(|s| s.to_string());
    text.lines().find_map(|l| {
        let l = l.trim();
        if let Some(rest) = l.strip_prefix("SHA256 (") {
            let (n, sum) = rest.split_once(") = ")?;
            return (n == name).then(|| sum_of(sum.trim())).flatten();
        }
        let (sum, n) = l.split_once(char::is_whitespace)?;
        let n = n.trim_start().trim_start_matches('*');
        let n = n.rsplit('/').next().unwrap_or(n);
        (n == name).then(|| sum_of(sum)).flatten()
    })
}

/// An OS list in Raspberry Pi Imager's JSON format (`os_list`, each with
/// name, description, url, sizes and SHA-256s, `subitems`), flattened to
/// the entries that have an image: "Group › Name".
fn catalog(shared: &Shared, v: &Value) -> Response {
    let source = text_field(v, "source");
    if source.is_empty() {
        return error(400, "give the OS list's file or URL");
    }
    let text = match fetch(shared, source) {
        Ok(t) => t,
        Err(e) => return error(400, e),
    };
    let Ok(list) = serde_json::from_str::<Value>(&text) else {
        return error(400, format!("{source}: not JSON"));
    };
    let mut items = Vec::new();
    flatten(
        list.get("os_list").unwrap_or(&Value::Null),
        "",
        &mut items,
        0,
    );
    if items.is_empty() {
        return error(400, format!("{source}: no images in its os_list"));
    }
    Response::json(200, &json!({"items": items}))
}

fn flatten(list: &Value, prefix: &str, out: &mut Vec<Value>, depth: u32) {
    let Some(list) = list.as_array() else { return };
    if depth > 4 {
        return;
    }
    for os in list {
        let name = os["name"].as_str().unwrap_or("").trim();
        let full = match prefix {
            "" => name.to_string(),
            p => format!("{p} › {name}"),
        };
        if let Some(url) = os["url"].as_str().filter(|u| is_url(u)) {
            out.push(json!({
                "name": full,
                "description": os["description"],
                "url": url,
                "release_date": os["release_date"],
                "image_download_size": os["image_download_size"],
                "image_download_sha256": os["image_download_sha256"],
                "extract_size": os["extract_size"],
                "extract_sha256": os["extract_sha256"],
            }));
        }
        flatten(&os["subitems"], &full, out, depth + 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_in_both_forms() {
        let a = "a".repeat(64);
        let b = "B".repeat(64);
        let text = format!("{a}  other.img.xz\n{b} *dir/os.img.xz\n");
        assert_eq!(find_sum(&text, "os.img.xz"), Some("b".repeat(64)));
        assert_eq!(find_sum(&text, "other.img.xz"), Some(a.clone()));
        assert_eq!(find_sum(&text, "none.img"), None);
        let bsd = format!("SHA256 (os.img.xz) = {a}\n");
        assert_eq!(find_sum(&bsd, "os.img.xz"), Some(a));
    }

    #[test]
    fn catalog_flattens_subitems() {
        let list = json!({"os_list": [
            {"name": "A", "url": "https://x/a.img.xz", "extract_sha256": "00"},
            {"name": "Others", "subitems": [
                {"name": "B", "url": "https://x/b.img.xz"},
                {"name": "Not an image", "url": "file:///etc/passwd"},
            ]},
        ]});
        let mut items = Vec::new();
        flatten(&list["os_list"], "", &mut items, 0);
        let names: Vec<_> = items.iter().map(|i| i["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["A", "Others › B"]);
    }
}
