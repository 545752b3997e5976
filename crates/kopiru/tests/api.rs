//! The library as an embedding program uses it: only the public API, on
//! real files in a scratch directory, each result checked on disk.

use kopiru::probe::ProbeOptions;
use kopiru::progress::{count_totals, CopyProgress, Totals};
use kopiru::verify::VerifyOptions;
use kopiru::{Cancel, CopyOptions, Noop, PlanError, Preserve, Setting, SyncMode};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A fresh scratch directory for one test, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("kopiru-api-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
    fn path(&self, rel: &str) -> PathBuf {
        self.0.join(rel)
    }
    fn write(&self, rel: &str, data: &[u8]) {
        let p = self.path(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, data).unwrap();
    }
    /// Options as the command's, with a copies record of this test's own.
    fn options(&self) -> CopyOptions {
        let mut o = CopyOptions::new().sync(SyncMode::None);
        o.copies_record = Some(self.path("copies-record"));
        o
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Every path below `root`, sorted, directories ending in `/`.
fn listing(root: &Path) -> Vec<String> {
    fn walk(root: &Path, rel: &Path, out: &mut Vec<String>) {
        for e in fs::read_dir(root.join(rel)).unwrap() {
            let e = e.unwrap();
            let r = rel.join(e.file_name());
            let s = r.to_string_lossy().replace('\\', "/");
            match e.file_type().unwrap().is_dir() {
                true => {
                    out.push(format!("{s}/"));
                    walk(root, &r, out);
                }
                false => out.push(s),
            }
        }
    }
    let mut out = Vec::new();
    walk(root, Path::new(""), &mut out);
    out.sort();
    out
}

#[test]
fn new_is_the_commands_defaults_with_its_copies_record() {
    let o = CopyOptions::new();
    assert_eq!(o.copies_record, kopiru::default_copies_record());
    assert_eq!(o.preserve, Preserve::DEFAULT);
    assert_eq!(o.sync, SyncMode::End);
    assert!(CopyOptions::default().copies_record.is_none());
    let a = CopyOptions::new()
        .archive()
        .jobs(3)
        .delete(true)
        .update(true)
        .dry_run(true);
    assert_eq!(a.preserve, Preserve::ALL);
    assert_eq!(
        (a.jobs, a.delete, a.update, a.dry_run),
        (3, true, true, true)
    );
    assert!(CopyOptions::new().exclude("[unclosed").is_err());
}

#[test]
fn a_filtered_copy_and_its_totals() {
    let s = Scratch::new("filtered");
    s.write("src/main.rs", b"fn main() {}");
    s.write("src/lib/a.rs", b"pub mod a;");
    s.write("src/lib/notes.txt", b"notes");
    s.write("src/target/debug/big.o", &[7; 5000]);
    s.write("src/cache/x.rs", b"cached");
    let options = s
        .options()
        .exclude("/target")
        .unwrap()
        .exclude("cache/")
        .unwrap()
        .exclude("*.txt")
        .unwrap();
    let sources = vec![s.path("src")];
    let totals = Totals::new();
    count_totals(&sources, &options, &totals, &Cancel::new());
    assert!(totals.known());

    let summary = kopiru::copy(&sources, &s.path("dst"), &options, &Noop).unwrap();
    assert!(summary.errors.is_empty(), "{:?}", summary.errors);
    assert_eq!(listing(&s.path("dst")), ["lib/", "lib/a.rs", "main.rs"]);
    assert_eq!(fs::read(s.path("dst/lib/a.rs")).unwrap(), b"pub mod a;");
    assert_eq!((summary.files, summary.bytes), (2, 22));
    assert_eq!(
        (totals.files(), totals.bytes()),
        (summary.files, summary.bytes)
    );

    // include before exclude: only the .rs files and the directories.
    let only_rs = s
        .options()
        .include("*.rs")
        .unwrap()
        .include("*/")
        .unwrap()
        .exclude("*")
        .unwrap();
    let summary = kopiru::copy(&sources, &s.path("rs"), &only_rs, &Noop).unwrap();
    assert_eq!(summary.files, 3);
    assert_eq!(
        listing(&s.path("rs")),
        [
            "cache/",
            "cache/x.rs",
            "lib/",
            "lib/a.rs",
            "main.rs",
            "target/",
            "target/debug/"
        ]
    );
}

#[test]
fn the_progress_observer_ends_at_the_summary() {
    let s = Scratch::new("progress");
    for i in 0..200 {
        s.write(&format!("src/d{}/f{i}", i % 7), &vec![b'x'; 100 + i]);
    }
    let options = s.options();
    let sources = vec![s.path("src")];
    let progress = CopyProgress::start(&sources, &options);
    let summary = kopiru::copy(&sources, &s.path("dst"), &options, &progress).unwrap();
    // The walk runs beside the copy: wait for it (it has 200 files to see).
    let start = Instant::now();
    while !progress.totals().known() && start.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let now = progress.snapshot();
    assert_eq!((now.files, now.bytes), (summary.files, summary.bytes));
    assert_eq!(now.total_files, Some(200));
    assert_eq!(now.total_bytes, Some(summary.bytes));
    assert_eq!(now.fraction(), Some(1.0));
    assert_eq!(listing(&s.path("dst")).len(), 207);
}

#[test]
fn a_cancelled_copy_leaves_no_final_name() {
    let s = Scratch::new("cancel");
    s.write("src/a", b"a");
    let cancel = Cancel::new();
    cancel.cancel();
    let options = s.options().cancel(cancel);
    let summary = kopiru::copy(&[s.path("src")], &s.path("dst"), &options, &Noop).unwrap();
    assert!(summary.cancelled);
    assert!(!s.path("dst").exists());
}

#[test]
fn delete_update_and_dry_run() {
    let s = Scratch::new("delete");
    s.write("src/keep", b"new");
    s.write("src/sub/f", b"f");
    s.write("dst/gone", b"old");
    s.write("dst/keep", b"stale");
    s.write("dst/sub/extra", b"x");
    let (src, dst) = (vec![s.path("src")], s.path("dst"));
    let mirror = s.options().no_target_directory(true).delete(true);

    let dry = kopiru::copy(&src, &dst, &mirror.clone().dry_run(true), &Noop).unwrap();
    assert_eq!(dry.deleted, 2);
    assert_eq!(
        listing(&dst),
        ["gone", "keep", "sub/", "sub/extra"],
        "a dry run writes nothing"
    );

    let done = kopiru::copy(&src, &dst, &mirror, &Noop).unwrap();
    assert_eq!(done.deleted, 2);
    assert_eq!(listing(&dst), ["keep", "sub/", "sub/f"]);
    assert_eq!(fs::read(dst.join("keep")).unwrap(), b"new");

    // update: the destination's newer file stays.
    std::thread::sleep(Duration::from_millis(20));
    fs::write(dst.join("keep"), b"edited in the copy").unwrap();
    let summary = kopiru::copy(
        &src,
        &dst,
        &s.options().no_target_directory(true).update(true),
        &Noop,
    )
    .unwrap();
    assert_eq!(fs::read(dst.join("keep")).unwrap(), b"edited in the copy");
    assert!(summary.skipped >= 1, "{summary:?}");
}

#[cfg(unix)]
#[test]
fn link_dest_links_what_did_not_change() {
    use std::os::unix::fs::MetadataExt;
    let s = Scratch::new("link-dest");
    s.write("src/same", b"same");
    s.write("src/changes", b"v1");
    let src = vec![s.path("src")];
    let o = s.options().no_target_directory(true);
    kopiru::copy(&src, &s.path("day1"), &o, &Noop).unwrap();
    s.write("src/changes", b"version 2");
    let summary = kopiru::copy(&src, &s.path("day2"), &o.link_dest("../day1"), &Noop).unwrap();
    let ino = |p: &str| fs::metadata(s.path(p)).unwrap().ino();
    assert_eq!(ino("day2/same"), ino("day1/same"));
    assert_ne!(ino("day2/changes"), ino("day1/changes"));
    assert_eq!(fs::read(s.path("day2/changes")).unwrap(), b"version 2");
    assert_eq!(summary.method_count(kopiru::Method::Link), 1);
}

#[test]
fn conflicting_settings_are_refused_by_id_before_anything_is_written() {
    let s = Scratch::new("conflicts");
    s.write("src/a", b"a");
    let mut o = s.options();
    o.no_clobber = true;
    o.backup = Some(kopiru::Backup::Simple);
    let e = o.check().unwrap_err();
    assert_eq!(e.id(), "settings-exclude-each-other");
    assert!(matches!(
        e,
        PlanError::Excludes {
            first: Setting::NoClobber,
            second: Setting::Backup
        }
    ));
    // Neutral words: no front end's flags.
    assert!(!e.to_string().contains("--"), "{e}");
    let refused = kopiru::copy(&[s.path("src")], &s.path("dst"), &o, &Noop).unwrap_err();
    assert_eq!(refused, e);
    assert!(!s.path("dst").exists());

    // Decided by the plan: -T's one source.
    let o = s.options().no_target_directory(true);
    let e = kopiru::copy(&[s.path("src"), s.path("src/a")], &s.path("d"), &o, &Noop).unwrap_err();
    assert_eq!(e.id(), "one-source-as-itself");
    assert!(!e.to_string().contains("-T"), "{e}");

    // An entry refused by itself: the summary says the copy was refused
    // whole, and the refusal has its id.
    let o = s.options();
    let summary = kopiru::copy(&[s.path("src/a")], &s.path("src/a"), &o, &Noop).unwrap();
    assert!(summary.refused_whole(), "{summary:?}");
    let why = summary.errors[0].refusal().expect("a refusal");
    assert_eq!(why.id(), "same-file");
}

#[test]
fn verify_and_probe_as_verbs() {
    let s = Scratch::new("verify");
    s.write("src/a.txt", b"alpha");
    s.write("src/d/b.txt", b"beta");
    let o = s.options().no_target_directory(true);
    kopiru::copy(&[s.path("src")], &s.path("dst"), &o, &Noop).unwrap();

    /// Counts the bytes the comparison reports.
    #[derive(Default)]
    struct Bytes(std::sync::atomic::AtomicU64);
    impl kopiru::Reporter for Bytes {
        fn bytes(&self, n: u64) {
            self.0.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        }
    }
    let bytes = Bytes::default();
    let same = kopiru::verify(
        &s.path("src"),
        &s.path("dst"),
        &VerifyOptions::new(),
        &bytes,
    );
    assert!(
        same.differences.is_empty() && same.errors.is_empty(),
        "{same:?}"
    );
    assert_eq!((same.files, same.bytes), (2, 9));
    assert_eq!(bytes.0.into_inner(), 9);
    assert_eq!(same.outcome(), kopiru::Outcome::Done);

    s.write("dst/d/b.txt", b"BETA");
    let differ = kopiru::verify(&s.path("src"), &s.path("dst"), &VerifyOptions::new(), &Noop);
    assert_eq!(differ.differences.len(), 1, "{differ:?}");
    assert_eq!(differ.differences[0].what, kopiru::Mismatch::Content);
    assert_eq!(differ.outcome().code(), 1);

    let p = kopiru::probe(&s.path("src"), None, &ProbeOptions::new(), &Noop).unwrap();
    assert_eq!(p.paths.len(), 1);
    assert!(!p.paths[0].1.is_empty(), "a filesystem type: {p:?}");
    let missing = kopiru::probe(&s.path("nowhere"), None, &ProbeOptions::new(), &Noop);
    assert!(missing.is_err());
}

#[cfg(target_os = "linux")]
#[test]
fn dedupe_flash_and_image_as_verbs() {
    use kopiru::dedupe::DedupeOptions;
    use kopiru::flash::{check_targets, FlashOptions, Image};
    use kopiru::image::{check_source, ImageOptions};
    use kopiru::Format;

    let s = Scratch::new("devices");
    // Identical files: shared, or left alone on a filesystem that cannot
    // share blocks (said in the summary), never an error.
    let same: Vec<u8> = (0..256 << 10).map(|i| (i % 253) as u8).collect();
    s.write("dup/one", &same);
    s.write("dup/two", &same);
    let d = kopiru::dedupe(&[s.path("dup")], &DedupeOptions::new(), &Noop);
    assert!(d.errors.is_empty(), "{d:?}");
    assert_eq!(d.files_scanned, 2, "{d:?}");
    assert!(d.files_shared == 1 || !d.unsupported.is_empty(), "{d:?}");

    // A "device" that is a regular file, read into a zstd image...
    let disk: Vec<u8> = (0..(3 << 20) + 4096).map(|i| (i / 7 % 251) as u8).collect();
    s.write("disk.bin", &disk);
    let mut io = ImageOptions::new();
    io.allow_file = true;
    io.format = Format::of_output(&s.path("disk.img.zst"));
    let src = check_source(&s.path("disk.bin"), &s.path("disk.img.zst"), &io).unwrap();
    let made = kopiru::image(&src, &s.path("disk.img.zst"), &io, &Noop);
    assert!(made.ok() && made.verified == Some(true), "{made:?}");

    // ...and flashed back onto another file: byte for byte, verified.
    let mut fo = FlashOptions::new();
    fo.allow_file = true;
    let image = Image::open(&s.path("disk.img.zst"), None).unwrap();
    let targets = check_targets(&image, &[s.path("copy.bin")], &fo).unwrap();
    let flashed = kopiru::flash(&image, &targets, &fo, &Noop);
    assert!(flashed.ok(), "{flashed:?}");
    assert_eq!(flashed.format, "zstd");
    assert_eq!(fs::read(s.path("copy.bin")).unwrap(), disk);

    // A refusal has a stable id, whatever its words.
    let e = check_source(
        &s.path("disk.bin"),
        &s.path("other.img"),
        &ImageOptions::new(),
    )
    .unwrap_err();
    assert_eq!(e.refusal().map(|r| r.id()), Some("not-a-device"), "{e}");

    // A format with no encoder is refused before anything is made.
    let mut bz = ImageOptions::new();
    bz.allow_file = true;
    bz.format = Format::Bzip2;
    let e = check_source(&s.path("disk.bin"), &s.path("disk.img.bz2"), &bz).unwrap_err();
    assert_eq!(e.refusal().map(|r| r.id()), Some("cannot-encode"), "{e}");
    assert!(!s.path("disk.img.bz2").exists());
}
