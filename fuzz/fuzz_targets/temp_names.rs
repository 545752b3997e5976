//! The names of temporaries found in a destination directory
//! (`.kopiru-tmp.<pid>.<n>`, cleaned when their process is gone): any other
//! program may have made a name there. A process id is read only from a
//! name of that form.
#![no_main]

use kopiru::fuzzing as k;
use libfuzzer_sys::fuzz_target;
use std::ffi::CString;

fuzz_target!(|data: &[u8]| {
    let Ok(name) = CString::new(data) else {
        return;
    };
    if let Some(pid) = k::leftover_pid(&name) {
        let text = std::str::from_utf8(data).expect("a pid's name is text");
        let rest = text.strip_prefix(".kopiru-tmp.").expect("the prefix");
        let (p, n) = rest.split_once('.').expect("<pid>.<n>");
        assert_eq!(p.parse::<u32>().ok(), Some(pid));
        assert!(
            !n.is_empty()
                && n.trim_start_matches('+')
                    .bytes()
                    .all(|b| b.is_ascii_digit())
        );
    }
});
