//! `kopiru bench sweep`: the file-count experiment on the user's machine. The
//! same total bytes as 1, 16, 256, ... files, copied by kopiru and by `cp -r`
//! and `rsync -a` where installed, like with like: kopiru `--sync none`
//! against the tools that leave the data in the page cache, and kopiru's
//! default (durable at exit) against `cp -r` followed by `sync -f`; a table
//! of medians and a log-log chart.

use crate::args::SweepArgs;
use crate::exit;
use crate::plot::Series;
use crate::size::{human, parse_size};
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

pub fn run(args: SweepArgs) -> u8 {
    match sweep(&args) {
        Ok(()) => exit::OK,
        Err(e) => {
            errln!("kopiru: bench sweep: {e}");
            exit::FAILED
        }
    }
}

fn sweep(args: &SweepArgs) -> Result<(), String> {
    let total = parse_size(&args.total)?;
    let root = args
        .dir
        .clone()
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("kopiru-sweep-{}", std::process::id()));
    std::fs::create_dir_all(&root).map_err(|e| format!("{}: {e}", crate::render::path(&root)))?;
    let result = sweep_in(&root, total, args);
    let _ = std::fs::remove_dir_all(&root);
    result
}

fn sweep_in(root: &Path, total: u64, args: &SweepArgs) -> Result<(), String> {
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let kopiru = |sync: &str| {
        vec![
            me.to_string_lossy().into_owned(),
            "copy".into(),
            "--no-progress".into(),
            format!("--sync={sync}"),
        ]
    };
    // Not durable at exit: the data may still be in the page cache.
    let mut tools: Vec<(String, Vec<String>)> = vec![("kopiru --sync none".into(), kopiru("none"))];
    if installed("cp") {
        tools.push(("cp -r".into(), vec!["cp".into(), "-r".into()]));
    }
    if installed("rsync") {
        tools.push(("rsync -a".into(), vec!["rsync".into(), "-a".into()]));
    }
    // Durable at exit.
    tools.push(("kopiru".into(), kopiru("end")));
    if installed("cp") && installed("sync") {
        // sync -f: the destination's filesystem, as kopiru's own flush.
        let script = r#"cp -r "$1" "$2" && sync -f "$2""#;
        let cmd = ["sh", "-c", script, "sh"].map(String::from).to_vec();
        tools.push(("cp -r && sync -f".into(), cmd));
    }
    let mut series: Vec<Series> = tools
        .iter()
        .map(|(t, _)| Series {
            tool: t.clone(),
            seconds: Vec::new(),
        })
        .collect();
    // A corpus that cannot be made (a full disk) ends the sweep: the rows
    // measured so far are still printed and drawn.
    let mut stopped = None;
    let mut measured = 0;
    for &count in &args.counts {
        let src = root.join(format!("n{count}"));
        errln!(
            "kopiru: bench: making {count} files of {} bytes",
            total / count.max(1)
        );
        if let Err(e) = make_corpus(&src, count, total) {
            let _ = std::fs::remove_dir_all(&src);
            stopped = Some(format!(
                "stopped before {count} files: {}: {e}; the rows above were measured",
                crate::render::path(&src)
            ));
            break;
        }
        measured += 1;
        for ((_, cmd), s) in tools.iter().zip(series.iter_mut()) {
            let median = time_tool(cmd, &src, &root.join("dst"), args.runs);
            match median {
                Some(t) => errln!("kopiru: bench: {count} files, {}: {t:.3} s", s.tool),
                None => errln!("kopiru: bench: {count} files, {}: failed", s.tool),
            }
            s.seconds.push(median);
        }
        let _ = std::fs::remove_dir_all(&src);
    }
    let counts = &args.counts[..measured];
    if measured > 0 {
        print_table(counts, total, &series);
    }
    if let (Some(plot), true) = (&args.plot, measured > 0) {
        let svg = crate::plot::loglog(counts, &series, total);
        std::fs::write(plot, svg).map_err(|e| format!("{}: {e}", crate::render::path(plot)))?;
        errln!(
            "kopiru: bench: chart written to {}",
            crate::render::path(plot)
        );
    }
    stopped.map_or(Ok(()), Err)
}

fn installed(cmd: &str) -> bool {
    Command::new(cmd)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The median wall time of `runs` copies of `src` to a fresh `dst`; the
/// destination is removed and the filesystems synced before each, untimed.
fn time_tool(cmd: &[String], src: &Path, dst: &Path, runs: usize) -> Option<f64> {
    let mut times = Vec::new();
    for _ in 0..runs.max(1) {
        let _ = std::fs::remove_dir_all(dst);
        sync_all();
        let src_arg = if cmd[0] == "rsync" {
            format!("{}/", src.display())
        } else {
            src.display().to_string()
        };
        let start = Instant::now();
        let ok = Command::new(&cmd[0])
            .args(&cmd[1..])
            .arg(src_arg)
            .arg(dst)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return None;
        }
        times.push(start.elapsed().as_secs_f64());
    }
    let _ = std::fs::remove_dir_all(dst);
    times.sort_by(f64::total_cmp);
    Some(times[times.len() / 2])
}

/// `count` files holding `total` bytes together, at most 1000 per folder.
fn make_corpus(dir: &Path, count: u64, total: u64) -> std::io::Result<()> {
    let size = (total / count.max(1)) as usize;
    let mut block = vec![0u8; size.min(1 << 20)];
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for b in block.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    for i in 0..count {
        let sub = dir.join(format!("d{:04}", i / 1000));
        if i % 1000 == 0 {
            std::fs::create_dir_all(&sub)?;
        }
        let mut f = std::fs::File::create(sub.join(format!("f{i:07}")))?;
        let mut left = size;
        while left > 0 {
            let n = left.min(block.len());
            f.write_all(&block[..n])?;
            left -= n;
        }
    }
    Ok(())
}

fn print_table(counts: &[u64], total: u64, series: &[Series]) {
    let mut out = String::from("files     size each");
    // Each column as wide as its tool's name.
    let width = |s: &Series| s.tool.len().max(10);
    for s in series {
        out.push_str(&format!("  {:>w$}", s.tool, w = width(s)));
    }
    out.push('\n');
    for (i, &count) in counts.iter().enumerate() {
        out.push_str(&format!("{count:<9} {:>9}", human(total / count.max(1))));
        for s in series {
            let cell = match s.seconds[i] {
                Some(t) => format!("{t:.3}s"),
                None => "failed".into(),
            };
            out.push_str(&format!("  {cell:>w$}", w = width(s)));
        }
        out.push('\n');
    }
    out!("{out}");
}

/// Writes every filesystem's dirty data out before a timed run (`sync`).
/// Windows has no unprivileged equivalent: nothing there.
fn sync_all() {
    // SAFETY: sync takes no arguments, touches no memory and cannot fail.
    #[cfg(unix)]
    unsafe {
        libc::sync()
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("256M"), Ok(256 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("64KiB"), Ok(64 << 10));
        assert_eq!(parse_size("2mb"), Ok(2 << 20));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("3X").is_err());
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(16384), "16.0 KiB");
        assert_eq!(human(256 << 20), "256.0 MiB");
    }
}
