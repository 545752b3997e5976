//! `kopiru bench fsync`: what durability costs on this machine. First the
//! buffering experiment (N writes of 1 byte and of 100 kB: buffered in the
//! process, flushed to the kernel after each, fsynced after each), then the
//! time until a small-file tree is durable with each `--sync` mode.

use crate::args::FsyncArgs;
use crate::exit;
use crate::size::{human, parse_size};
use kopiru::{CopyOptions, Noop, SyncMode};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::path::Path;
use std::time::Instant;

pub fn run(args: FsyncArgs) -> u8 {
    let root = args
        .dir
        .clone()
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("kopiru-bench-fsync-{}", std::process::id()));
    let result = std::fs::create_dir_all(&root)
        .map_err(|e| format!("{}: {e}", crate::render::path(&root)))
        .and_then(|()| bench(&root, &args));
    let _ = std::fs::remove_dir_all(&root);
    match result {
        Ok(()) => exit::OK,
        Err(e) => {
            errln!("kopiru: bench fsync: {e}");
            exit::FAILED
        }
    }
}

/// Bytes the benchmark writes at most at once: the larger row of the
/// buffering table, or the tree and one copy of it (with a block per file).
fn space_needed(args: &FsyncArgs, file_size: u64) -> u64 {
    let writes = args.writes as u64 * 100_000;
    let per_file = file_size.div_ceil(4096) * 4096 + 4096;
    writes.max(2 * args.files as u64 * per_file)
}

fn bench(root: &Path, args: &FsyncArgs) -> Result<(), String> {
    let at = |p: &Path| {
        let p = crate::render::path(p);
        move |e: std::io::Error| format!("{p}: {e}")
    };
    let file_size = parse_size(&args.file_size)?;
    // Said before the first byte, not after minutes of writing: what is
    // needed, and what is there.
    let need = space_needed(args, file_size);
    let free = File::open(root)
        .and_then(|d| free_space(&d))
        .map_err(at(root))?;
    if free < need {
        return Err(format!(
            "{}: {} free, the benchmark needs about {} ({} writes of 100 kB, or two \
             copies of {} files of {}); give --dir on a larger filesystem, or fewer \
             --writes or --files",
            crate::render::path(root),
            human(free),
            human(need),
            args.writes,
            args.files,
            human(file_size)
        ));
    }
    outln!(
        "{} writes each; median of {} runs, seconds",
        args.writes,
        args.runs
    );
    outln!(
        "{:<12} {:>12} {:>14} {:>14}",
        "write size",
        "buffered",
        "flush each",
        "fsync each"
    );
    for (size, label) in [(1usize, "1 B"), (100_000, "100 kB")] {
        let chunk = vec![b'k'; size];
        let mut row = format!("{label:<12}");
        for mode in [Flush::Never, Flush::Kernel, Flush::Device] {
            let path = root.join("writes");
            let t = median(args.runs, || {
                let _ = std::fs::remove_file(&path);
                let start = Instant::now();
                write_n(&path, &chunk, args.writes, mode)?;
                Ok(start.elapsed().as_secs_f64())
            })
            .map_err(at(&path))?;
            row.push_str(&format!(" {t:>13.3}"));
        }
        outln!("{row}");
    }

    let file_size = file_size as usize;
    let src = root.join("src");
    make_tree(&src, args.files, file_size).map_err(at(&src))?;
    outln!();
    outln!(
        "copy of {} files of {}, time until durable; median of {} runs, seconds",
        args.files,
        human(file_size as u64),
        args.runs
    );
    let dst = root.join("dst");
    let modes: [(&str, SyncMode, bool); 4] = [
        ("--sync none (not durable)", SyncMode::None, false),
        ("--sync none, then syncfs", SyncMode::None, true),
        ("--sync end (default)", SyncMode::End, false),
        ("--sync file", SyncMode::File, false),
    ];
    for (name, sync, then_syncfs) in modes {
        let t = median(args.runs, || {
            let _ = std::fs::remove_dir_all(&dst);
            // SAFETY: sync takes no arguments, touches no memory and cannot fail.
            unsafe { libc::sync() };
            let opts = CopyOptions::default().sync(sync);
            let start = Instant::now();
            let s = kopiru::copy(std::slice::from_ref(&src), &dst, &opts, &Noop)
                .map_err(std::io::Error::other)?;
            if let Some(e) = s.errors.first() {
                return Err(std::io::Error::other(crate::render::error(e)));
            }
            if then_syncfs {
                sync_filesystem(&File::open(&dst)?)?;
            }
            Ok(start.elapsed().as_secs_f64())
        })
        .map_err(at(&dst))?;
        outln!("{name:<28} {t:>8.3}");
    }
    Ok(())
}

#[derive(Clone, Copy)]
enum Flush {
    /// Into the process's buffer; one write to the kernel at the end.
    Never,
    /// Each write handed to the kernel (page cache).
    Kernel,
    /// Each write made durable (fsync).
    Device,
}

fn write_n(path: &Path, chunk: &[u8], n: usize, mode: Flush) -> std::io::Result<()> {
    let file = File::create(path)?;
    let mut w = BufWriter::with_capacity(1 << 16, &file);
    for _ in 0..n {
        w.write_all(chunk)?;
        match mode {
            Flush::Never => {}
            Flush::Kernel => w.flush()?,
            Flush::Device => {
                w.flush()?;
                file.sync_all()?;
            }
        }
    }
    w.flush()?;
    Ok(())
}

fn median(runs: usize, mut f: impl FnMut() -> std::io::Result<f64>) -> std::io::Result<f64> {
    let mut t = (0..runs.max(1))
        .map(|_| f())
        .collect::<Result<Vec<_>, _>>()?;
    t.sort_by(f64::total_cmp);
    Ok(t[t.len() / 2])
}

/// `count` files of `size` bytes, 1000 per directory.
fn make_tree(dir: &Path, count: usize, size: usize) -> std::io::Result<()> {
    let data: Vec<u8> = (0..size).map(|i| (i * 31 % 251) as u8).collect();
    for i in 0..count {
        let sub = dir.join(format!("d{:03}", i / 1000));
        if i % 1000 == 0 {
            std::fs::create_dir_all(&sub)?;
        }
        std::fs::write(sub.join(format!("f{i:06}")), &data)?;
    }
    Ok(())
}

/// Free bytes on the filesystem that holds `f` (`fstatfs`'s free blocks).
fn free_space(f: &File) -> std::io::Result<u64> {
    let mut st = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: `f` is an open descriptor; `st` points to room for one `statfs`.
    if unsafe { libc::fstatfs(f.as_fd().as_raw_fd(), st.as_mut_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fstatfs succeeded, so it filled in `st`.
    let st = unsafe { st.assume_init() };
    // The field types differ between systems (u32 on macOS).
    #[allow(clippy::unnecessary_cast)]
    Ok(st.f_bfree as u64 * st.f_bsize as u64)
}

/// Flushes the whole filesystem that holds `f` (`syncfs`); where there is
/// no `syncfs` (macOS), the file itself.
fn sync_filesystem(f: &File) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: plain libc call on a borrowed open descriptor.
        if unsafe { libc::syncfs(f.as_fd().as_raw_fd()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    f.sync_all()
}
