//! `kopiru dedupe`: identical regular files made to share their blocks.
//!
//! Candidates are narrowed cheaply before anything is read in full: by
//! filesystem and size, then by the physical extent map (files already
//! sharing all their blocks count as one), then by a BLAKE3 of three 4 KiB
//! samples, then by a BLAKE3 of the whole file; each file is read in full at
//! most once. Sharing is done by the kernel's verified dedupe, which compares
//! the bytes under lock, so a file changed after it was hashed is left alone.

use crate::error::{Error, Op, Side};
use crate::events::Reporter;
use crate::par::par_map;
use crate::sys::AsFd;
use crate::sys::{self, Fd, FileKind};
use std::collections::HashMap;
use std::ffi::CString;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes per sample; files up to three samples long are hashed whole at once.
const SAMPLE: usize = 4096;
/// Read size for full hashes.
const CHUNK: usize = 1 << 20;

/// What the caller asks of a dedupe run. Start from
/// [`DedupeOptions::new`] (what `kopiru dedupe` does) and set fields.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct DedupeOptions {
    /// Find and report, change nothing.
    pub dry_run: bool,
    /// Files smaller than this are skipped; `None`: one filesystem block.
    pub min_size: Option<u64>,
    /// Threads for hashing and sharing; 0 picks from the machine.
    pub jobs: usize,
    /// Stops the run when cancelled: checked between files and between
    /// chunks of a file being hashed; nothing is shared after that.
    pub cancel: crate::Cancel,
}

impl DedupeOptions {
    /// The command's defaults: share blocks, files of at least a block, a
    /// thread per CPU.
    pub fn new() -> Self {
        DedupeOptions::default()
    }
}

/// A filesystem whose files were left alone because it cannot share blocks.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Unsupported {
    /// The PATH given (a command-line path) under which it was found first.
    pub path: PathBuf,
    /// Its type ("ext4", ...).
    pub fs_type: String,
    /// Where it is mounted (empty: not known).
    pub mount_point: String,
    /// Files found on it (as counted in [`DedupeSummary::files_scanned`]),
    /// left alone.
    pub files: u64,
}

/// What a dedupe run found and did.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct DedupeSummary {
    /// Regular files looked at, of at least the minimum size (hard links
    /// counted once), those on filesystems that cannot share blocks
    /// included ([`Unsupported::files`]).
    pub files_scanned: u64,
    /// Groups of identical files with something to share.
    pub groups: u64,
    /// Files that now share the blocks of another file of their group (or
    /// would, with `--dry-run`).
    pub files_shared: u64,
    /// Bytes of those files.
    pub bytes_shared: u64,
    /// Files skipped because they already share all their blocks with an
    /// identical file.
    pub already_shared: u64,
    /// Files changed between hashing and sharing: left as they were.
    pub changed: u64,
    /// Bytes read to hash.
    pub bytes_hashed: u64,
    /// Free space gained, as the filesystems report it (0 with `--dry-run`).
    pub space_freed: i64,
    /// Filesystems that cannot share blocks.
    pub unsupported: Vec<Unsupported>,
    /// Files that could not be read or shared.
    pub errors: Vec<Error>,
    /// Wall time.
    pub elapsed: Duration,
    /// Stopped by its cancel handle: what was shared before stays shared.
    pub cancelled: bool,
}

/// One regular file (one inode).
struct File {
    dir: Arc<Fd>,
    name: CString,
    path: PathBuf,
    dev: u64,
    size: u64,
}

/// Files with the same data: identical extent maps, or (after hashing) one
/// representative and the clusters that equal it.
struct Cluster {
    files: Vec<usize>,
    /// Some of its blocks are shared with a file outside the group (or a
    /// snapshot): they stay allocated whatever happens, so it makes the
    /// best source.
    shared_elsewhere: bool,
}

/// Finds identical files under `paths` and makes them share blocks.
pub fn dedupe(paths: &[PathBuf], opts: &DedupeOptions, reporter: &dyn Reporter) -> DedupeSummary {
    let start = Instant::now();
    let mut s = DedupeSummary::default();
    if let Err(e) = sys::available(sys::Feature::Dedupe) {
        let at = paths.first().cloned().unwrap_or_default();
        s.errors.push(Error::io(Side::Source, at, Op::Dedupe, e));
        return s;
    }
    let files = scan(paths, opts, &mut s);
    s.files_scanned = files.len() as u64 + s.unsupported.iter().map(|u| u.files).sum::<u64>();

    // Same filesystem and size.
    let mut by_size: HashMap<(u64, u64), Vec<usize>> = HashMap::new();
    for (i, f) in files.iter().enumerate() {
        by_size.entry((f.dev, f.size)).or_default().push(i);
    }
    let size_groups: Vec<Vec<usize>> = by_size.into_values().filter(|g| g.len() > 1).collect();

    // Files whose extent maps are equal already share their data. Files no
    // longer than three samples are hashed whole in the same visit: one
    // open instead of two (they are most files of a node_modules tree).
    let all: Vec<usize> = size_groups.iter().flatten().copied().collect();
    let visited = par_map(&all, opts.jobs, |i, buf: &mut Vec<u8>| {
        let f = &files[i];
        let fd = match opts.cancel.check().and_then(|()| open(f)) {
            Ok(fd) => fd,
            Err(e) => return (Err(e), None),
        };
        let small = f.size <= 3 * SAMPLE as u64;
        let hash = small.then(|| {
            buf.resize(CHUNK, 0);
            hash_file(&fd, f.size, None, buf, &opts.cancel)
        });
        (sys::extents(fd.as_fd()), hash)
    });
    let mut maps: HashMap<usize, io::Result<Vec<sys::Extent>>> = HashMap::new();
    let mut small_hashes: HashMap<usize, blake3::Hash> = HashMap::new();
    for (i, (map, hash)) in visited {
        maps.insert(i, map);
        match hash {
            Some(Ok((h, n))) => {
                s.bytes_hashed += n;
                reporter.bytes(n);
                small_hashes.insert(i, h);
            }
            Some(Err(e)) if !opts.cancel.is_cancelled() => {
                s.errors.push(Error::src(&files[i].path, Op::Read, &e))
            }
            _ => {}
        }
    }
    let mut clusters: Vec<Vec<Cluster>> = Vec::new();
    for g in size_groups {
        let cl = cluster_by_extents(&files, &g, &mut maps, &mut s);
        if cl.len() > 1 {
            clusters.push(cl);
        } else {
            s.already_shared += g.len() as u64 - 1;
        }
    }

    let groups = by_content(&files, clusters, small_hashes, opts, reporter, &mut s);

    // Share: every file of every other cluster gets the first cluster's
    // blocks (the biggest cluster, so the fewest files move).
    let mut pairs: Vec<(usize, usize)> = Vec::new();
    for mut g in groups {
        g.sort_by_key(|c| std::cmp::Reverse((c.files.len(), c.shared_elsewhere)));
        s.groups += 1;
        let src = g[0].files[0];
        s.already_shared += g[0].files.len() as u64 - 1;
        for c in &g[1..] {
            for &f in &c.files {
                pairs.push((src, f));
            }
        }
    }
    s.cancelled = opts.cancel.is_cancelled();
    if opts.dry_run {
        s.files_shared = pairs.len() as u64;
        s.bytes_shared = pairs.iter().map(|&(_, f)| files[f].size).sum();
    } else if !s.cancelled {
        share_all(&files, &pairs, opts, &mut s);
    }
    s.cancelled = opts.cancel.is_cancelled();
    s.elapsed = start.elapsed();
    s
}

/// Splits clusters of equal size into groups of equal content: by three
/// samples, then by the whole file, each hashed on a cluster's first file.
fn by_content(
    files: &[File],
    clusters: Vec<Vec<Cluster>>,
    small_hashes: HashMap<usize, blake3::Hash>,
    opts: &DedupeOptions,
    reporter: &dyn Reporter,
    s: &mut DedupeSummary,
) -> Vec<Vec<Cluster>> {
    let reps: Vec<usize> = clusters
        .iter()
        .flatten()
        .map(|c| c.files[0])
        .filter(|&i| files[i].size > 3 * SAMPLE as u64)
        .collect();
    let mut sampled = hash_all(files, &reps, opts, Some(SAMPLE), reporter, s);
    sampled.extend(small_hashes);
    let mut candidates: Vec<Vec<Cluster>> = Vec::new();
    for group in clusters {
        let mut by_sample: HashMap<blake3::Hash, Vec<Cluster>> = HashMap::new();
        for c in group {
            if let Some(h) = sampled.get(&c.files[0]) {
                by_sample.entry(*h).or_default().push(c);
            }
        }
        candidates.extend(by_sample.into_values().filter(|v| v.len() > 1));
    }
    // Files no longer than three samples were hashed whole already.
    let need_full: Vec<usize> = candidates
        .iter()
        .flatten()
        .map(|c| c.files[0])
        .filter(|&i| files[i].size > 3 * SAMPLE as u64)
        .collect();
    let full = hash_all(files, &need_full, opts, None, reporter, s);
    let mut groups: Vec<Vec<Cluster>> = Vec::new();
    for group in candidates {
        let mut by_hash: HashMap<blake3::Hash, Vec<Cluster>> = HashMap::new();
        for c in group {
            let rep = c.files[0];
            let h = if files[rep].size > 3 * SAMPLE as u64 {
                full.get(&rep)
            } else {
                sampled.get(&rep)
            };
            if let Some(h) = h {
                by_hash.entry(*h).or_default().push(c);
            }
        }
        groups.extend(by_hash.into_values().filter(|v| v.len() > 1));
    }
    groups
}

/// Walks the paths (never following symlinks) and returns one entry per
/// regular file of at least the minimum size on a filesystem that can share
/// blocks.
fn scan(paths: &[PathBuf], opts: &DedupeOptions, s: &mut DedupeSummary) -> Vec<File> {
    let mut files = Vec::new();
    let mut seen: std::collections::HashSet<(u64, u64)> = Default::default();
    // Per device: its block size, and whether it can share blocks (else
    // its entry in `s.unsupported`, where its files are counted).
    let mut devs: HashMap<u64, (Option<u64>, Result<(), usize>)> = HashMap::new();
    let mut mounts: Option<Vec<(u64, String)>> = None;
    // (directory, name, path, the command-line path it is under)
    let mut stack: Vec<(Arc<Fd>, CString, PathBuf, usize)> = Vec::new();
    for (root, p) in paths.iter().enumerate() {
        let (parent, name) = match sys::open_parent(p) {
            Ok(x) => x,
            Err(e) => {
                s.errors.push(Error::src(p, Op::Open, &e));
                continue;
            }
        };
        stack.push((Arc::new(parent), name, p.clone(), root));
    }
    while let Some((dir, name, path, root)) = stack.pop() {
        let st = match sys::stat_at(dir.as_fd(), &name, false) {
            Ok(st) => st,
            Err(e) => {
                s.errors.push(Error::src(&path, Op::Stat, &e));
                continue;
            }
        };
        match st.kind() {
            FileKind::Dir => {
                // O_NOATIME: listing a directory must not change its atime.
                let sub = sys::open_source(dir.as_fd(), &name, true, false, true)
                    .or_else(|_| sys::open_dir(dir.as_fd(), &name));
                let sub = match sub {
                    Ok(fd) => Arc::new(fd),
                    Err(e) => {
                        s.errors.push(Error::src(&path, Op::Open, &e));
                        continue;
                    }
                };
                match sys::read_dir(sub.as_fd()) {
                    Ok(entries) => {
                        for e in entries {
                            let p = path.join(sys::os_str(&e.name));
                            stack.push((sub.clone(), e.name, p, root));
                        }
                    }
                    Err(e) => s.errors.push(Error::src(&path, Op::ReadDirectory, &e)),
                }
            }
            FileKind::File if st.size > 0 && seen.insert((st.dev, st.ino)) => {
                let (block, can) = *devs.entry(st.dev).or_insert_with(|| {
                    let Ok(fd) = sys::open_source(dir.as_fd(), &name, false, false, false) else {
                        return (None, Ok(()));
                    };
                    let block = sys::fs_space(fd.as_fd()).ok().map(|s| s.block);
                    if sys::can_share_blocks(fd.as_fd()) {
                        return (block, Ok(()));
                    }
                    let mount_point = mounts
                        .get_or_insert_with(sys::mounts)
                        .iter()
                        .find(|(d, _)| *d == st.dev)
                        .map(|(_, at)| at.clone())
                        .unwrap_or_default();
                    s.unsupported.push(Unsupported {
                        path: paths[root].clone(),
                        fs_type: sys::fs_type(fd.as_fd()).unwrap_or_default(),
                        mount_point,
                        files: 0,
                    });
                    // Counted even if its block size is not known.
                    (Some(block.unwrap_or(0)), Err(s.unsupported.len() - 1))
                });
                let Some(block) = block else { continue };
                if st.size < opts.min_size.unwrap_or(block) {
                    continue;
                }
                if let Err(u) = can {
                    s.unsupported[u].files += 1;
                    continue;
                }
                files.push(File {
                    dir: dir.clone(),
                    name,
                    path,
                    dev: st.dev,
                    size: st.size,
                });
            }
            _ => {}
        }
    }
    files
}

fn open(f: &File) -> io::Result<Fd> {
    // O_NOATIME first, so hashing leaves access times alone.
    sys::open_source(f.dir.as_fd(), &f.name, false, false, true)
        .or_else(|_| sys::open_source(f.dir.as_fd(), &f.name, false, false, false))
}

/// Splits a size group into clusters of files with equal extent maps. A
/// file whose map cannot be compared is a cluster of its own; one with data
/// inline in metadata (Btrfs) cannot share blocks and is left out.
fn cluster_by_extents(
    files: &[File],
    group: &[usize],
    maps: &mut HashMap<usize, io::Result<Vec<sys::Extent>>>,
    s: &mut DedupeSummary,
) -> Vec<Cluster> {
    let mut clusters: Vec<(Option<Vec<sys::Extent>>, Cluster)> = Vec::new();
    for &i in group {
        let (map, shared_elsewhere) = match maps.remove(&i) {
            Some(Ok(m)) if m.iter().any(|e| e.inline) => continue,
            Some(Ok(m)) if !m.is_empty() && m.iter().all(|e| e.shared && !e.opaque) => {
                (Some(m), true)
            }
            Some(Ok(m)) => (None, m.iter().any(|e| e.shared)),
            Some(Err(e)) => {
                s.errors
                    .push(Error::src(&files[i].path, Op::MapExtents, &e));
                continue;
            }
            None => continue,
        };
        match clusters
            .iter_mut()
            .find(|(m, _)| map.is_some() && *m == map)
        {
            Some((_, c)) => c.files.push(i),
            None => clusters.push((
                map,
                Cluster {
                    files: vec![i],
                    shared_elsewhere,
                },
            )),
        }
    }
    clusters.into_iter().map(|(_, c)| c).collect()
}

/// BLAKE3 of each listed file on worker threads: of three samples (start,
/// middle, end) with `sample`, else of everything.
fn hash_all(
    files: &[File],
    which: &[usize],
    opts: &DedupeOptions,
    sample: Option<usize>,
    reporter: &dyn Reporter,
    s: &mut DedupeSummary,
) -> HashMap<usize, blake3::Hash> {
    let results = par_map(which, opts.jobs, |i, buf: &mut Vec<u8>| {
        if buf.is_empty() {
            buf.resize(CHUNK, 0);
        }
        let f = &files[i];
        let r = opts
            .cancel
            .check()
            .and_then(|()| open(f))
            .and_then(|fd| hash_file(&fd, f.size, sample, buf, &opts.cancel));
        if let Ok((_, n)) = &r {
            reporter.bytes(*n);
        }
        r
    });
    let mut hashes = HashMap::new();
    for (i, r) in results {
        match r {
            Ok((h, n)) => {
                s.bytes_hashed += n;
                hashes.insert(i, h);
            }
            Err(_) if opts.cancel.is_cancelled() => {}
            Err(e) => s.errors.push(Error::src(&files[i].path, Op::Read, &e)),
        }
    }
    hashes
}

fn hash_file(
    fd: &Fd,
    size: u64,
    sample: Option<usize>,
    buf: &mut [u8],
    cancel: &crate::Cancel,
) -> io::Result<(blake3::Hash, u64)> {
    let mut h = blake3::Hasher::new();
    let mut read = 0u64;
    let mut take = |h: &mut blake3::Hasher, off: u64, len: usize| -> io::Result<()> {
        let mut done = 0;
        while done < len {
            cancel.check()?;
            let n = sys::pread(fd.as_fd(), &mut buf[..len - done], off + done as u64)?;
            if n == 0 {
                return Err(io::Error::other("file shrank while being read"));
            }
            h.update(&buf[..n]);
            done += n;
        }
        read += len as u64;
        Ok(())
    };
    match sample {
        Some(n) if size > 3 * n as u64 => {
            for off in [0, size / 2 - n as u64 / 2, size - n as u64] {
                take(&mut h, off, n)?;
            }
        }
        _ => {
            let mut off = 0u64;
            while off < size {
                let len = (size - off).min(CHUNK as u64) as usize;
                take(&mut h, off, len)?;
                off += len as u64;
            }
        }
    }
    Ok((h.finalize(), read))
}

/// Makes one destination share the (open) source's blocks.
fn share_one(src: &Fd, dst: &File) -> io::Result<sys::Shared> {
    let d = open(dst)?;
    let share =
        |d: &Fd| sys::share_blocks(src.as_fd(), d.as_fd(), dst.dir.as_fd(), &dst.name, dst.size);
    match share(&d) {
        // Without privilege the kernel wants the destination open for
        // writing (which changes nothing in it).
        Err(e) if sys::not_permitted(&e) => {
            let flags = sys::O_WRONLY | sys::O_NOFOLLOW;
            share(&sys::open_raw(dst.dir.as_fd(), &dst.name, flags, 0)?)
        }
        r => r,
    }
}

/// Shares blocks for every (source, destination) pair on worker threads,
/// and measures the free space gained on each filesystem.
fn share_all(
    files: &[File],
    pairs: &[(usize, usize)],
    opts: &DedupeOptions,
    s: &mut DedupeSummary,
) {
    // Free space before, per filesystem (through a descriptor that stays
    // open for the flush and the second reading).
    let mut spaces: HashMap<u64, (Fd, u64)> = HashMap::new();
    for &(src, _) in pairs {
        let f = &files[src];
        if spaces.contains_key(&f.dev) {
            continue;
        }
        if let Ok(fd) = open(f) {
            let _ = sys::sync_fs(fd.as_fd());
            if let Ok(sys::Space { free, .. }) = sys::fs_space(fd.as_fd()) {
                spaces.insert(f.dev, (fd, free));
            }
        }
    }
    // One task per source: it is opened once for all its destinations.
    let mut by_src: HashMap<usize, Vec<usize>> = HashMap::new();
    for &(src, dst) in pairs {
        by_src.entry(src).or_default().push(dst);
    }
    let srcs: Vec<usize> = by_src.keys().copied().collect();
    let results = par_map(&srcs, opts.jobs, |si, _: &mut ()| {
        let src = &files[si];
        let dsts = &by_src[&si];
        let s = match open(src) {
            Ok(fd) => fd,
            Err(e) => {
                let errno = e.raw_os_error().unwrap_or(sys::EIO);
                return dsts
                    .iter()
                    .map(|&d| (d, Err(io::Error::from_raw_os_error(errno))))
                    .collect();
            }
        };
        dsts.iter()
            .map(|&di| {
                let r = opts.cancel.check().and_then(|()| share_one(&s, &files[di]));
                (di, r)
            })
            .collect::<Vec<_>>()
    });
    for (di, r) in results.into_iter().flat_map(|(_, v)| v) {
        let dst = &files[di];
        match r {
            Ok(sys::Shared::Done) => {
                s.files_shared += 1;
                s.bytes_shared += dst.size;
            }
            Ok(sys::Shared::Differs) => s.changed += 1,
            Err(_) if opts.cancel.is_cancelled() => {}
            Err(e) => s.errors.push(Error::dst(&dst.path, Op::Dedupe, &e)),
        }
    }
    // Btrfs shows freed space only after its transaction commits.
    for (fd, before) in spaces.values() {
        let _ = sys::sync_fs(fd.as_fd());
        if let Ok(sys::Space { free: after, .. }) = sys::fs_space(fd.as_fd()) {
            s.space_freed += after as i64 - *before as i64;
        }
    }
}
