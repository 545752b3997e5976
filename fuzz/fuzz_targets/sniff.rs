//! Format sniffing (`kopiru flash`): an image's first bytes against the
//! claim of its name and of `--format`. Whatever is accepted is what the
//! bytes are (a compressed format by its magic number), or raw.
#![no_main]

use kopiru::fuzzing::{self as k, Format};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

const NAMES: [Option<&str>; 9] = [
    None,
    Some("disk.img"),
    Some("disk.img.xz"),
    Some("disk.IMG.GZ"),
    Some("rootfs.tgz"),
    Some("disk.zst"),
    Some("disk.bz2"),
    Some("download"),
    Some("page.html"),
];

fuzz_target!(|data: &[u8]| {
    let Some((&choice, head)) = data.split_first() else {
        return;
    };
    let head = &head[..head.len().min(k::SNIFF)];
    let name = NAMES[usize::from(choice) % NAMES.len()].map(Path::new);
    let wanted = match usize::from(choice) / NAMES.len() % (Format::ALL.len() + 1) {
        0 => None,
        i => Some(Format::ALL[i - 1]),
    };
    let magic = k::magic(head);
    match k::sniff(head, name, wanted) {
        Ok(format) => {
            match wanted {
                Some(Format::Raw) => assert_eq!(format, Format::Raw),
                Some(w) => assert_eq!(format, w),
                None => {}
            }
            match format {
                // Compressed bytes are decoded unless --format raw says not.
                Format::Raw => assert!(magic.is_none() || wanted == Some(Format::Raw)),
                f => assert_eq!(magic, Some(f)),
            }
        }
        Err(e) => {
            assert_ne!(wanted, Some(Format::Raw), "--format raw takes any bytes");
            assert!(!e.to_string().is_empty());
        }
    }
});
