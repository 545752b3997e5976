//! What keeps a page on 127.0.0.1 to its own user: a one-time token in the
//! address, exchanged for a session cookie (HttpOnly, SameSite=Strict);
//! the Host header (against DNS rebinding: Transmission's CVE-2018-5702);
//! the Origin of every request that changes anything and of the event
//! stream (a page elsewhere can send requests here, but not with our
//! Origin); and headers that forbid scripts other than the page's own
//! files, framing, and sniffing. No CORS header is ever sent.

use super::http::{Request, Response};
use std::sync::atomic::{AtomicBool, Ordering};

/// The session cookie's name.
const COOKIE: &str = "kopiru_session";

/// Sent with every response.
pub const HEADERS: [(&str, &str); 8] = [
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
         connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'",
    ),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
    (
        "Permissions-Policy",
        "camera=(), microphone=(), geolocation=()",
    ),
];

/// The secrets of one server: the token in the printed address (good
/// once), and the session the cookie carries.
pub struct Guard {
    token: String,
    token_used: AtomicBool,
    session: String,
    /// `127.0.0.1:PORT` and `localhost:PORT`.
    hosts: [String; 2],
    /// `http://` and those.
    origins: [String; 2],
}

/// 128 random bits in hex, from the kernel.
fn secret() -> std::io::Result<String> {
    use std::io::Read;
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(format!("{:032x}", u128::from_be_bytes(b)))
}

/// Equal, in a time that does not tell how much of a guess was right.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

impl Guard {
    pub fn new(port: u16) -> std::io::Result<Guard> {
        let hosts = [format!("127.0.0.1:{port}"), format!("localhost:{port}")];
        Ok(Guard {
            token: secret()?,
            token_used: AtomicBool::new(false),
            session: secret()?,
            origins: [
                format!("http://{}", hosts[0]),
                format!("http://{}", hosts[1]),
            ],
            hosts,
        })
    }

    /// The address to open: the page, with the one-time token.
    pub fn url(&self) -> String {
        format!("{}/?token={}", self.origins[0], self.token)
    }

    /// Refuses a request whose Host is not this server's own (one Host
    /// header, exactly `127.0.0.1:PORT` or `localhost:PORT`).
    pub fn check_host(&self, req: &Request) -> Result<(), Response> {
        match req.header("host") {
            Some(h) if req.count("host") == 1 && self.hosts.iter().any(|o| o == h) => Ok(()),
            _ => Err(Response::text(
                403,
                "refused: this server answers only to 127.0.0.1:PORT or localhost:PORT",
            )),
        }
    }

    /// Refuses a request from a page elsewhere: an `Origin` that is not
    /// this server's, a second one, or (`required`) none. A browser sends
    /// Origin with every POST; an event stream it opens from this page
    /// carries none (a same-origin GET), or this one. `Sec-Fetch-Site`,
    /// where sent, must say the request came from this page.
    pub fn check_origin(&self, req: &Request, required: bool) -> Result<(), Response> {
        let refuse = |why: &str| Err(Response::text(403, &format!("refused: {why}")));
        match req.header("origin") {
            _ if req.count("origin") > 1 => return refuse("more than one Origin"),
            Some(o) if !self.origins.iter().any(|x| x == o) => {
                return refuse("a request from another origin")
            }
            None if required => return refuse("no Origin header"),
            _ => {}
        }
        match req.header("sec-fetch-site") {
            None | Some("same-origin") => Ok(()),
            Some(_) => refuse("a request from another site"),
        }
    }

    /// Whether the request carries the session cookie.
    pub fn has_session(&self, req: &Request) -> bool {
        req.headers
            .iter()
            .filter(|(n, _)| n == "cookie")
            .flat_map(|(_, v)| v.split(';'))
            .filter_map(|c| c.trim().split_once('='))
            .any(|(n, v)| n == COOKIE && same(v, &self.session))
    }

    /// The first request with the right token gets the cookie, and a page
    /// that moves on to `/` (a navigation from this origin, so the
    /// SameSite=Strict cookie goes with it); any other is refused. The
    /// token is then spent, right or wrong guesses alike do not reveal it.
    pub fn exchange(&self, req: &Request) -> Response {
        let given = req.param("token").unwrap_or_default();
        if !same(&given, &self.token) {
            return Response::text(403, "refused: not this server's token");
        }
        if self.token_used.swap(true, Ordering::SeqCst) {
            return Response::text(
                403,
                "refused: this address was used already (its token works once): \
                 open the page you opened with it, or start kopiru gui again",
            );
        }
        let page = "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
                    <meta http-equiv=\"refresh\" content=\"0;url=/\">\
                    <title>kopiru</title></head><body><p><a href=\"/\">Open kopiru</a></p>\
                    </body></html>";
        Response::new(200, "text/html; charset=utf-8", page).with(
            "Set-Cookie",
            format!(
                "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
                self.session
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(headers: &[(&str, &str)], query: &str) -> Request {
        Request {
            method: "GET".into(),
            path: "/".into(),
            query: query.into(),
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
            body: Vec::new(),
        }
    }

    #[test]
    fn host_origin_cookie_and_token() {
        let g = Guard::new(4321).unwrap();
        assert!(g
            .check_host(&req(&[("host", "127.0.0.1:4321")], ""))
            .is_ok());
        assert!(g
            .check_host(&req(&[("host", "localhost:4321")], ""))
            .is_ok());
        for bad in [
            "evil.example:4321",
            "127.0.0.1",
            "127.0.0.1:4322",
            "localhost",
        ] {
            assert!(g.check_host(&req(&[("host", bad)], "")).is_err(), "{bad}");
        }
        let two = [("host", "127.0.0.1:4321"), ("host", "evil:4321")];
        assert!(g.check_host(&req(&two, "")).is_err());
        assert!(g.check_host(&req(&[], "")).is_err());

        let ours = [("origin", "http://127.0.0.1:4321")];
        assert!(g.check_origin(&req(&ours, ""), true).is_ok());
        assert!(g.check_origin(&req(&[], ""), true).is_err());
        assert!(g.check_origin(&req(&[], ""), false).is_ok());
        let theirs = [("origin", "http://evil.example")];
        assert!(g.check_origin(&req(&theirs, ""), false).is_err());
        let cross = [("sec-fetch-site", "cross-site")];
        assert!(g.check_origin(&req(&cross, ""), false).is_err());

        let token = g.url().split("token=").nth(1).unwrap().to_string();
        assert_eq!(g.exchange(&req(&[], "token=0000")).status, 403);
        let r = g.exchange(&req(&[], &format!("token={token}")));
        assert_eq!(r.status, 200);
        let cookie = r
            .headers
            .iter()
            .find(|(n, _)| *n == "Set-Cookie")
            .map(|(_, v)| v.clone())
            .unwrap();
        assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
        let pair = cookie.split(';').next().unwrap().to_string();
        assert!(g.has_session(&req(&[("cookie", &format!("a=b; {pair}"))], "")));
        assert!(!g.has_session(&req(&[("cookie", "kopiru_session=00")], "")));
        // Once only.
        assert_eq!(g.exchange(&req(&[], &format!("token={token}"))).status, 403);
    }
}
