//! `--files-from` lists: each line (or NUL-terminated path with `--from0`)
//! is a path inside the one source directory, relative or absolute. What
//! the engine takes from it stays inside the source, and the same path
//! read again gives the same entry.
#![no_main]

use kopiru::fuzzing as k;
use libfuzzer_sys::fuzz_target;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

fuzz_target!(|data: &[u8]| {
    let Some((&choice, list)) = data.split_first() else {
        return;
    };
    let src = Path::new("/srv/source dir");
    // As the command reads the list (kopiru-cli's scale.rs).
    let nul = choice & 1 == 1;
    let sep = if nul { b'\0' } else { b'\n' };
    for l in list.split(|&b| b == sep) {
        let l = match nul {
            true => l,
            false => l.strip_suffix(b"\r").unwrap_or(l),
        };
        if l.is_empty() {
            continue;
        }
        let p = Path::new(OsStr::from_bytes(l));
        let up = p.components().any(|c| c == Component::ParentDir);
        match k::listed_inside(p, src) {
            Some(rel) => {
                assert!(!up, "{p:?} has .. but gave {rel:?}");
                assert!(
                    rel.components().all(|c| matches!(c, Component::Normal(_))),
                    "{p:?} gave {rel:?}"
                );
                assert!(src.join(&rel).starts_with(src));
                assert_eq!(k::listed_inside(&src.join(&rel), src), Some(rel.clone()));
                if let Some(name) = rel.file_name() {
                    assert_eq!(k::file_name_ok(name), !name.as_bytes().contains(&0));
                }
            }
            None => assert!(
                up || (p.is_absolute() && !p.starts_with(src)),
                "{p:?} refused"
            ),
        }
    }
});
