//! kopiru-lab: the crash lab's host-independent tools (see docs/LAB.md).
//!
//! ```text
//! kopiru-lab list LOG                      every entry: index, kind, sector, count, mark
//! kopiru-lab points LOG                    the crash points: flush/FUA entries and marks
//! kopiru-lab replay LOG DEV --from A --to B  apply entries A..=B onto DEV, then flush it
//! kopiru-lab check SRC DST [--old OLD] [--complete | --exact]
//! ```
//!
//! Replay is incremental: replay `--from 0 --to I`, check a copy, then
//! `--from I+1 --to J` onto the same (never mounted) device.

// The lab runs in Linux guests (dm-log-writes): elsewhere (the MSVC
// compile check of the workspace) only a main that says so.
#[cfg(unix)]
mod check;
#[cfg(unix)]
mod log;

#[cfg(unix)]
use std::fs::{File, OpenOptions};
#[cfg(unix)]
use std::path::Path;
use std::process::ExitCode;

#[cfg(not(unix))]
fn main() -> ExitCode {
    eprintln!("kopiru-lab: runs on Linux only (it replays dm-log-writes logs)");
    ExitCode::from(2)
}

#[cfg(unix)]
fn usage() -> ExitCode {
    eprintln!(
        "usage: kopiru-lab list LOG | points LOG | replay LOG DEV --from A --to B | \
         check SRC DST [--old OLD] [--complete | --exact]"
    );
    ExitCode::from(2)
}

#[cfg(unix)]
fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

#[cfg(unix)]
fn run(args: &[String]) -> Result<ExitCode, String> {
    let cmd = args.first().map(String::as_str);
    match cmd {
        Some("list") | Some("points") if args.len() == 2 => {
            let f = File::open(&args[1]).map_err(|e| format!("{}: {e}", args[1]))?;
            let entries = log::Entries::new(&f).map_err(|e| e.to_string())?;
            let sup = entries.sup();
            if cmd == Some("list") {
                println!(
                    "# {} entries, sector size {}",
                    sup.nr_entries, sup.sectorsize
                );
            }
            for e in entries {
                let e = e.map_err(|e| e.to_string())?;
                if cmd == Some("points") && !e.is_flush_point() && e.mark.is_none() {
                    continue;
                }
                println!(
                    "{} {} {} {} {}",
                    e.index,
                    e.kind(),
                    e.sector,
                    e.nr_sectors,
                    e.mark.as_deref().unwrap_or("-")
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Some("replay") if args.len() >= 3 => {
            let from: u64 = flag(args, "--from")
                .unwrap_or_else(|| "0".into())
                .parse()
                .map_err(|e| format!("--from: {e}"))?;
            let to: u64 = flag(args, "--to")
                .ok_or("replay needs --to")?
                .parse()
                .map_err(|e| format!("--to: {e}"))?;
            let f = File::open(&args[1]).map_err(|e| format!("{}: {e}", args[1]))?;
            let dev = OpenOptions::new()
                .write(true)
                .open(&args[2])
                .map_err(|e| format!("{}: {e}", args[2]))?;
            let mut applied = 0u64;
            for e in log::Entries::new(&f).map_err(|e| e.to_string())? {
                let e = e.map_err(|e| e.to_string())?;
                if e.index > to {
                    break;
                }
                if e.index >= from {
                    log::apply(&f, &dev, &e).map_err(|err| format!("entry {}: {err}", e.index))?;
                    applied += 1;
                }
            }
            dev.sync_all()
                .map_err(|e| format!("flush {}: {e}", args[2]))?;
            eprintln!("replayed {applied} entries ({from}..={to})");
            Ok(ExitCode::SUCCESS)
        }
        Some("check") if args.len() >= 3 => {
            let old = flag(args, "--old");
            let has = |f: &str| args.iter().any(|a| a == f);
            let want = if has("--exact") {
                check::Want::Exact
            } else if has("--complete") {
                check::Want::Complete
            } else {
                check::Want::FinalNames
            };
            let r = check::check(
                Path::new(&args[1]),
                Path::new(&args[2]),
                old.as_deref().map(Path::new),
                want,
            )
            .map_err(|e| e.to_string())?;
            for v in &r.violations {
                println!("VIOLATION {v}");
            }
            println!(
                "exact {} old {} temporaries {} violations {}",
                r.exact,
                r.old,
                r.temporaries,
                r.violations.len()
            );
            Ok(if r.violations.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        _ => Ok(usage()),
    }
}

#[cfg(unix)]
fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("kopiru-lab: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::log::*;
    use std::io::Write;
    use std::os::unix::fs::FileExt;

    const SS: usize = 4096;

    fn header(sector: u64, nr: u64, flags: u64, len: u64) -> Vec<u8> {
        let mut b = vec![0u8; SS];
        for (i, v) in [sector, nr, flags, len].into_iter().enumerate() {
            b[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
        }
        b
    }

    /// A log of: write 8 sectors of 0xaa at sector 16, flush, mark "m",
    /// discard 8 sectors at 16, FUA write of 0xbb at sector 0.
    fn synthetic(dir: &std::path::Path) -> std::fs::File {
        let mut log = vec![0u8; SS];
        log[0..8].copy_from_slice(&MAGIC.to_le_bytes());
        log[8..16].copy_from_slice(&VERSION.to_le_bytes());
        log[16..24].copy_from_slice(&5u64.to_le_bytes());
        log[24..28].copy_from_slice(&(SS as u32).to_le_bytes());
        log.extend(header(16, 8, 0, 0));
        log.extend(vec![0xaa; SS]);
        log.extend(header(0, 0, FLUSH, 0));
        let mut m = header(0, 0, MARK, 1);
        m[32] = b'm';
        log.extend(m);
        log.extend(header(16, 8, DISCARD, 0));
        log.extend(header(0, 8, FUA, 0));
        log.extend(vec![0xbb; SS]);
        let p = dir.join("log");
        std::fs::File::create(&p).unwrap().write_all(&log).unwrap();
        std::fs::File::open(&p).unwrap()
    }

    fn tmpdir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("kopiru-lab-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn parses_entries_marks_and_flushes() {
        let d = tmpdir("parse");
        let f = synthetic(&d);
        let es: Vec<Entry> = Entries::new(&f).unwrap().map(Result::unwrap).collect();
        assert_eq!(es.len(), 5);
        assert_eq!(
            (es[0].sector, es[0].data_len, es[0].offset),
            (16, 4096, 4096)
        );
        assert!(es[1].is_flush_point() && !es[0].is_flush_point());
        assert_eq!(es[2].mark.as_deref(), Some("m"));
        assert_eq!(es[3].kind(), "discard");
        assert_eq!(es[3].data_len, 0);
        assert_eq!(es[4].kind(), "fua");
        assert_eq!(es[4].offset, 4096 * 6);
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn rejects_a_bad_magic() {
        let d = tmpdir("magic");
        let p = d.join("log");
        std::fs::write(&p, vec![0u8; SS]).unwrap();
        assert!(Entries::new(&std::fs::File::open(&p).unwrap()).is_err());
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn replays_incrementally_with_discard_as_zeros() {
        let d = tmpdir("replay");
        let f = synthetic(&d);
        let dev = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(d.join("dev"))
            .unwrap();
        dev.set_len(64 * 512).unwrap();
        let es: Vec<Entry> = Entries::new(&f).unwrap().map(Result::unwrap).collect();
        let read = |at: u64| {
            let mut b = [0u8; 1];
            dev.read_exact_at(&mut b, at).unwrap();
            b[0]
        };
        for e in &es[..=2] {
            apply(&f, &dev, e).unwrap();
        }
        assert_eq!((read(16 * 512), read(0)), (0xaa, 0));
        for e in &es[3..] {
            apply(&f, &dev, e).unwrap();
        }
        assert_eq!((read(16 * 512), read(0), read(4095)), (0, 0xbb, 0xbb));
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn checker_flags_a_short_file_under_a_final_name() {
        let d = tmpdir("check");
        let (src, dst) = (d.join("src"), d.join("dst"));
        std::fs::create_dir_all(src.join("sub")).unwrap();
        std::fs::create_dir_all(dst.join("sub")).unwrap();
        std::fs::write(src.join("sub/a"), b"hello").unwrap();
        std::fs::write(src.join("b"), b"world").unwrap();
        std::fs::write(dst.join("sub/a"), b"hello").unwrap();
        std::fs::write(dst.join(".kopiru-tmp.1.2"), b"wor").unwrap();
        use super::check::{check, Want};
        let r = check(&src, &dst, None, Want::FinalNames).unwrap();
        assert!(r.violations.is_empty(), "{:?}", r.violations);
        assert_eq!((r.exact, r.temporaries), (1, 1));
        let r = check(&src, &dst, None, Want::Complete).unwrap();
        assert_eq!(r.violations.len(), 1, "{:?}", r.violations);
        std::fs::write(dst.join("b"), b"").unwrap();
        let r = check(&src, &dst, None, Want::FinalNames).unwrap();
        assert_eq!(r.violations.len(), 1, "{:?}", r.violations);
        // Counted once, not again by --complete.
        let r = check(&src, &dst, None, Want::Complete).unwrap();
        assert_eq!(r.violations.len(), 1, "{:?}", r.violations);
        // --exact: an old file the source does not have (one --delete
        // removes) is fine before, not after; a temporary is always fine.
        std::fs::write(dst.join("b"), b"world").unwrap();
        std::fs::write(dst.join("extra"), b"x").unwrap();
        let old = d.join("old");
        std::fs::create_dir_all(&old).unwrap();
        std::fs::write(old.join("extra"), b"x").unwrap();
        let r = check(&src, &dst, Some(&old), Want::Complete).unwrap();
        assert!(r.violations.is_empty(), "{:?}", r.violations);
        let r = check(&src, &dst, Some(&old), Want::Exact).unwrap();
        assert_eq!(r.violations.len(), 1, "{:?}", r.violations);
        assert!(
            r.violations[0].starts_with("extra: present"),
            "{:?}",
            r.violations
        );
        std::fs::remove_dir_all(d).unwrap();
    }
}
