//! The copies record (`$XDG_STATE_HOME/kopiru/copies`): the line kopiru
//! writes for a copy is one line, is found again whatever else the file
//! holds, and names that copy only (another source, copy or path is not
//! taken for it).
#![no_main]

use kopiru::fuzzing as k;
use kopiru_fuzz::Bytes;
use libfuzzer_sys::fuzz_target;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let (src, dst) = (b.part(), b.part());
    let path = Path::new(OsStr::from_bytes(b.part()));
    let (src2, dst2) = (b.part(), b.part());
    let path2 = Path::new(OsStr::from_bytes(b.part()));
    let text = String::from_utf8_lossy(b.rest());
    let line = k::record_line(src, dst, path);
    assert!(
        line.ends_with('\n') && line.matches('\n').count() == 1,
        "{line:?}"
    );
    // Whatever lines come before and after (lines are appended whole).
    let mut file = text.to_string();
    if !file.is_empty() && !file.ends_with('\n') {
        file.push('\n');
    }
    let before = file.len();
    file.push_str(&line);
    file.push_str(&text);
    assert!(
        k::record_says_copy(&file, src, dst, path),
        "{path:?} not found in {file:?}"
    );
    // Another copy is not taken for this one (where the rest of the file
    // does not say it).
    let other = (src2, dst2, path2) != (src, dst, path);
    if other && !k::record_says_copy(&(file[..before].to_string() + &text), src2, dst2, path2) {
        assert!(
            !k::record_says_copy(&file, src2, dst2, path2),
            "{src2:?} {dst2:?} {path2:?} taken for {line:?}"
        );
    }
});
