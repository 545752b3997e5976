//! Just enough HTTP/1.1 for one local page, on std's sockets: a request
//! (line, headers, a small body by Content-Length), and a response that
//! closes the connection, or an event stream that stays open. Everything
//! past the limits is refused, not buffered.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;

/// Request line and headers together, at most.
const MAX_HEAD: usize = 16 << 10;
/// A request's body, at most (the page sends small JSON objects).
pub const MAX_BODY: usize = 256 << 10;

/// A request as read.
#[derive(Debug, Default)]
pub struct Request {
    pub method: String,
    /// The path, before any `?` (not decoded).
    pub path: String,
    /// What follows the `?` (not decoded).
    pub query: String,
    /// Names in lower case, values trimmed, in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// The first header of this name (lower case), if any.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// How many headers of this name: a second Host or Origin is refused.
    pub fn count(&self, name: &str) -> usize {
        self.headers.iter().filter(|(n, _)| n == name).count()
    }

    /// A query parameter, percent-decoded.
    pub fn param(&self, name: &str) -> Option<String> {
        self.query.split('&').find_map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (decode(k) == name).then(|| decode(v))
        })
    }
}

/// `%XX` and `+` decoded (as a form's query string); bad escapes kept.
pub fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' => match s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                Some(v) => {
                    out.push(v);
                    i += 2;
                }
                None => out.push(b'%'),
            },
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Why a request could not be read: answered with this status, or (an
/// I/O error, a closed connection) not answered at all.
pub enum Bad {
    Status(u16, &'static str),
    Gone,
}

/// Reads one request: a request line, headers up to [`MAX_HEAD`], and a
/// body of Content-Length bytes up to [`MAX_BODY`] (chunked bodies are
/// refused).
pub fn read_request(stream: &TcpStream) -> Result<Request, Bad> {
    let mut r = BufReader::new(stream.take(MAX_HEAD as u64));
    let mut line = String::new();
    let mut head = 0;
    let mut next = |line: &mut String| -> Result<(), Bad> {
        line.clear();
        match r.read_line(line) {
            Ok(0) | Err(_) if head == 0 => Err(Bad::Gone),
            Ok(0) | Err(_) => Err(Bad::Status(400, "the request ends early")),
            Ok(n) => {
                head += n;
                Ok(())
            }
        }
    };
    next(&mut line)?;
    let mut parts = line.trim_end().split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Bad::Status(400, "not an HTTP request line"));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(Bad::Status(505, "HTTP/1.x only"));
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut req = Request {
        method: method.to_string(),
        path: path.to_string(),
        query: query.to_string(),
        ..Request::default()
    };
    loop {
        next(&mut line)?;
        let l = line.trim_end_matches(['\r', '\n']);
        if l.is_empty() {
            break;
        }
        let Some((name, value)) = l.split_once(':') else {
            return Err(Bad::Status(400, "a header without a colon"));
        };
        req.headers
            .push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    if req.header("transfer-encoding").is_some() {
        return Err(Bad::Status(411, "a body needs a Content-Length"));
    }
    let len: usize = match req.header("content-length") {
        None => 0,
        Some(v) => v
            .parse()
            .map_err(|_| Bad::Status(400, "a bad Content-Length"))?,
    };
    if len > MAX_BODY {
        return Err(Bad::Status(413, "the body is too large"));
    }
    // What the header reader has buffered beyond the head is the body's start.
    let buffered = r.buffer().to_vec();
    req.body = buffered;
    req.body.truncate(len);
    if req.body.len() < len {
        let mut rest = vec![0u8; len - req.body.len()];
        let mut s = stream;
        s.read_exact(&mut rest)
            .map_err(|_| Bad::Status(400, "the body ends early"))?;
        req.body.extend_from_slice(&rest);
    }
    Ok(req)
}

/// A response: status, headers beyond the common ones, body.
pub struct Response {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn new(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Response {
        Response {
            status,
            headers: vec![("Content-Type", content_type.to_string())],
            body: body.into(),
        }
    }

    /// A plain-text answer (errors, refusals).
    pub fn text(status: u16, body: &str) -> Response {
        Response::new(status, "text/plain; charset=utf-8", format!("{body}\n"))
    }

    /// A JSON answer.
    pub fn json(status: u16, v: &serde_json::Value) -> Response {
        Response::new(status, "application/json", v.to_string())
    }

    pub fn with(mut self, name: &'static str, value: impl Into<String>) -> Response {
        self.headers.push((name, value.into()));
        self
    }
}

pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        204 => "No Content",
        303 => "See Other",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Error",
    }
}

/// Writes `resp` with `common` headers, and closes the connection after.
pub fn write_response(
    mut stream: &TcpStream,
    resp: &Response,
    common: &[(&str, &str)],
    head_only: bool,
) -> io::Result<()> {
    let mut out = format!("HTTP/1.1 {} {}\r\n", resp.status, reason(resp.status));
    for (n, v) in common {
        out += &format!("{n}: {v}\r\n");
    }
    for (n, v) in &resp.headers {
        out += &format!("{n}: {v}\r\n");
    }
    out += &format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        resp.body.len()
    );
    let mut bytes = out.into_bytes();
    if !head_only {
        bytes.extend_from_slice(&resp.body);
    }
    stream.write_all(&bytes)?;
    stream.flush()
}

/// Starts an event stream (Server-Sent Events): the head only; events
/// follow with [`write_event`].
pub fn start_events(mut stream: &TcpStream, common: &[(&str, &str)]) -> io::Result<()> {
    let mut out = String::from("HTTP/1.1 200 OK\r\n");
    for (n, v) in common {
        out += &format!("{n}: {v}\r\n");
    }
    out += "Content-Type: text/event-stream\r\nConnection: close\r\n\r\n";
    stream.write_all(out.as_bytes())?;
    stream.flush()
}

/// One event whose data is `data` (one line: JSON has no raw newlines), or
/// with `None` a comment that keeps the connection alive and finds a
/// closed page.
pub fn write_event(mut stream: &TcpStream, data: Option<&str>) -> io::Result<()> {
    match data {
        Some(d) => write!(stream, "data: {d}\n\n")?,
        None => stream.write_all(b": keep-alive\n\n")?,
    }
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_parameters_are_decoded() {
        let r = Request {
            query: "dir=%2Fhome%2Fa+b&x=1&token=ab%zz".into(),
            ..Request::default()
        };
        assert_eq!(r.param("dir").as_deref(), Some("/home/a b"));
        assert_eq!(r.param("x").as_deref(), Some("1"));
        assert_eq!(r.param("token").as_deref(), Some("ab%zz"));
        assert_eq!(r.param("y"), None);
    }
}
