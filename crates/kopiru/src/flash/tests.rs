//! Whole flashes onto regular files (`--file`): cancellation, and the
//! first MiB held back. Where kopiru has no flash yet (Windows), none.
#![cfg(unix)]

use super::*;
use std::sync::atomic::{AtomicU64, Ordering};

/// A fresh directory under the system's temporary directory.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kopiru-flash-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch directory");
    d
}

/// An image of `len` bytes, none of them zero.
fn image(dir: &Path, len: usize) -> (PathBuf, Vec<u8>) {
    let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8 + 1).collect();
    let p = dir.join("image.raw");
    std::fs::write(&p, &data).expect("image");
    (p, data)
}

fn file_opts() -> FlashOptions {
    FlashOptions {
        allow_file: true,
        ..FlashOptions::default()
    }
}

/// Cancels after `after` bytes were written.
struct CancelAfter {
    cancel: Cancel,
    after: u64,
    written: AtomicU64,
}

impl DeviceProgress for CancelAfter {
    fn done(&self, n: u64) {
        if self.written.fetch_add(n, Ordering::Relaxed) + n >= self.after {
            self.cancel.cancel();
        }
    }
}
impl FlashEvents for CancelAfter {}

#[test]
fn whole_flash_to_a_file() {
    let dir = scratch("whole");
    let (img, data) = image(&dir, (3 << 20) + 123);
    let out = dir.join("out.img");
    let opts = file_opts();
    let img = Image::open(&img, None).expect("image");
    let targets = check_targets(&img, std::slice::from_ref(&out), &opts).expect("targets");
    let s = flash(&img, &targets, &opts, &crate::Noop);
    assert!(s.ok() && !s.cancelled, "{s:?}");
    assert_eq!(s.devices[0].verified, Some(true));
    assert_eq!(std::fs::read(&out).expect("out"), data);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cancelled_before_start_writes_nothing() {
    let dir = scratch("before");
    let (img, _) = image(&dir, 3 << 20);
    let out = dir.join("out.img");
    std::fs::write(&out, b"keep").expect("out");
    let opts = file_opts();
    let img = Image::open(&img, None).expect("image");
    let targets = check_targets(&img, std::slice::from_ref(&out), &opts).expect("targets");
    opts.cancel.cancel();
    let s = flash(&img, &targets, &opts, &crate::Noop);
    assert!(s.cancelled && !s.ok(), "{s:?}");
    assert!(s.source_error.is_none(), "{s:?}");
    assert_eq!(s.devices.len(), 1);
    assert!(s.devices[0].error.is_none() && s.devices[0].verified.is_none());
    assert_eq!(std::fs::read(&out).expect("out"), b"keep");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Cancelled after the first chunks: it stops within a chunk, is not
/// verified, and the first MiB (held back) is never written. Raw
/// (mapped) and piped-through-a-decoder images alike.
#[test]
fn cancelled_midway_keeps_the_first_mib() {
    let dir = scratch("midway");
    let (raw, data) = image(&dir, 24 << 20);
    let gz = dir.join("image.gz");
    {
        use std::io::Write;
        let f = std::fs::File::create(&gz).expect("gz");
        let mut e = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
        e.write_all(&data).expect("gzip");
        e.finish().expect("gzip");
    }
    for img in [&raw, &gz] {
        let out = dir.join("out.img");
        std::fs::write(&out, vec![0xEEu8; 2 << 20]).expect("out");
        let opts = file_opts();
        let path = img;
        let img = &Image::open(path, None).expect("image");
        let targets = check_targets(img, std::slice::from_ref(&out), &opts).expect("targets");
        let chunk = targets[0].chunk as u64;
        let events = CancelAfter {
            cancel: opts.cancel.clone(),
            after: 2 * chunk,
            written: AtomicU64::new(0),
        };
        let s = flash(img, &targets, &opts, &events);
        assert!(s.cancelled && !s.ok(), "{}: {s:?}", img.path.display());
        assert!(s.source_error.is_none(), "{s:?}");
        assert!(s.devices[0].error.is_none(), "{s:?}");
        assert_eq!(s.devices[0].verified, None, "not verified");
        // Stopped right after the chunk that crossed the threshold.
        let written = events.written.load(Ordering::Relaxed);
        assert!(written <= 2 * chunk, "{written} bytes written");
        assert!(s.image_bytes < data.len() as u64);
        let got = std::fs::read(&out).expect("out");
        assert!(
            got[..HEAD].iter().all(|&b| b == 0xEE),
            "{}: the first MiB was written",
            img.path.display()
        );
        // What was written past the first MiB is the image's.
        assert_eq!(got[HEAD..2 << 20], data[HEAD..2 << 20]);
        assert!(got.len() < data.len(), "not cut to the image's length");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Cancelled while reading back: reported as cancelled, not as verified
/// or as a mismatch.
#[test]
fn cancelled_while_verifying() {
    struct CancelOnVerify(Cancel);
    impl DeviceProgress for CancelOnVerify {
        fn verifying(&self, _total: u64) {
            self.0.cancel();
        }
    }
    impl FlashEvents for CancelOnVerify {}
    let dir = scratch("verifying");
    let (img, data) = image(&dir, 6 << 20);
    let out = dir.join("out.img");
    let opts = file_opts();
    let img = Image::open(&img, None).expect("image");
    let targets = check_targets(&img, std::slice::from_ref(&out), &opts).expect("targets");
    let s = flash(&img, &targets, &opts, &CancelOnVerify(opts.cancel.clone()));
    assert!(s.cancelled && !s.ok(), "{s:?}");
    assert!(s.devices[0].error.is_none() && s.devices[0].verified.is_none());
    // The writing itself had finished: the image is whole.
    assert_eq!(std::fs::read(&out).expect("out"), data);
    let _ = std::fs::remove_dir_all(&dir);
}

/// xz streams one after another (with stream padding between them) are
/// one image, as `xz -d` reads them; bytes after the last stream that are
/// not xz are an error, not silently dropped. (liblzma's decoder only:
/// lzma-rs, the fallback elsewhere, reads one stream.)
#[test]
#[cfg(target_os = "linux")]
fn xz_concatenated_streams() {
    let dir = scratch("xz-concat");
    let (_, data) = image(&dir, 3 << 20);
    let (a, b) = data.split_at(1 << 20);
    let mut xz = Vec::new();
    lzma_rs::xz_compress(&mut &a[..], &mut xz).expect("xz");
    xz.extend_from_slice(&[0; 4]);
    lzma_rs::xz_compress(&mut &b[..], &mut xz).expect("xz");
    let path = dir.join("image.xz");
    std::fs::write(&path, &xz).expect("image");
    let out = dir.join("out.img");
    let opts = file_opts();
    let img = Image::open(&path, None).expect("image");
    let targets = check_targets(&img, std::slice::from_ref(&out), &opts).expect("targets");
    let s = flash(&img, &targets, &opts, &crate::Noop);
    assert!(s.ok(), "{s:?}");
    assert_eq!((s.format, s.image_bytes), ("xz", data.len() as u64));
    assert_eq!(std::fs::read(&out).expect("out"), data);

    xz.extend_from_slice(b"junk");
    std::fs::write(&path, &xz).expect("image");
    let img = Image::open(&path, None).expect("image");
    let s = flash(&img, &targets, &opts, &crate::Noop);
    assert!(s.source_error.is_some() && !s.ok(), "{s:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
