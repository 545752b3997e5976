//! What `kopiru flash URL` reads of a server's answers and of the URL:
//! `Content-Range` when resuming, the URL's host (for `NO_PROXY`) and the
//! file name it gives the image.
#![no_main]

use kopiru::fuzzing as k;
use kopiru_fuzz::Bytes;
use libfuzzer_sys::fuzz_target;
use std::path::Path;

/// Whether `part` is a slice of `whole`.
fn within(part: &str, whole: &str) -> bool {
    let (p, w) = (part.as_ptr() as usize, whole.as_ptr() as usize);
    w <= p && p + part.len() <= w + whole.len()
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    // A range as a server writes it reads back as written.
    let (start, end, total) = (b.number(8), b.number(8), b.number(8));
    assert_eq!(
        k::content_range(&format!("bytes {start}-{end}/{total}")),
        Some((start, Some(total)))
    );
    assert_eq!(
        k::content_range(&format!("bytes {start}-{end}/*")),
        Some((start, None))
    );
    let Ok(s) = std::str::from_utf8(b.rest()) else {
        return;
    };
    if let Some((start, _)) = k::content_range(s) {
        assert!(s.trim_start().starts_with("bytes "), "{s:?} gave {start}");
    }
    let host = k::host_of(s);
    assert!(within(host, s));
    let name = k::url_file_name(s);
    assert!(within(name, s));
    assert!(!name.contains(['/', '?', '#']), "{name:?}");
    let _ = k::is_url(Path::new(s));
});
