//! The library as an embedding program uses it: only the public API, on
//! real files in a scratch directory, each result checked on disk.

use kopiru::progress::{count_totals, CopyProgress, Totals};
use kopiru::{Cancel, CopyOptions, Noop, Preserve, SyncMode};
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
