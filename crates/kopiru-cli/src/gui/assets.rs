//! The page's files, built into the binary: the only paths served besides
//! the API. A path is looked up in this table as it is, never joined to a
//! directory, so nothing outside it (`/../../etc/passwd`) can be named.

/// (path, content type, bytes).
const FILES: [(&str, &str, &[u8]); 5] = [
    (
        "/",
        "text/html; charset=utf-8",
        include_bytes!("page/index.html"),
    ),
    (
        "/index.html",
        "text/html; charset=utf-8",
        include_bytes!("page/index.html"),
    ),
    (
        "/app.js",
        "text/javascript; charset=utf-8",
        include_bytes!("page/app.js"),
    ),
    (
        "/app.css",
        "text/css; charset=utf-8",
        include_bytes!("page/app.css"),
    ),
    (
        "/icon.svg",
        "image/svg+xml",
        include_bytes!("page/icon.svg"),
    ),
];

/// The file at `path` (the request's path, undecoded), if it is one.
pub fn find(path: &str) -> Option<(&'static str, &'static [u8])> {
    FILES
        .iter()
        .find(|(p, _, _)| *p == path)
        .map(|&(_, t, b)| (t, b))
}
