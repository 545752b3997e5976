//! A sharded copy on one rank: list the tree, claim pieces of it and copy
//! them, then meet the other ranks through the coordination directory
//! (coord.rs; the protocol is described in the module above).

use super::coord::{Coordination, Outcome};
use super::{piece_of, pieces, Shard};
use crate::durable::{remove_tree, staged_name};
use crate::error::{Error, Op, Refusal, Side};
use crate::events::{Phase, Reporter, Summary};
use crate::listed::{self, Listed, Root};
use crate::options::{CopyOptions, Follow, SyncMode};
use crate::plan::PlanError;
use crate::sys::{self, AsFd, Fd, FileKind, Name, NameBuf};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// One entry found by the walk.
struct Walked {
    rel: PathBuf,
    kind: Option<FileKind>,
}

/// What every rank's list must share: its length and a hash of its paths
/// (not the kinds: a rank that could not stat an entry still lists it).
fn fingerprint(walked: &[Walked]) -> Vec<u8> {
    let mut h = blake3::Hasher::new();
    for w in walked {
        h.update(w.rel.as_os_str().as_bytes());
        h.update(&[0]);
    }
    format!("{} {}", walked.len(), h.finalize().to_hex()).into_bytes()
}

/// Copies this rank's share of `sources[0]` (one directory) to `dest`, with
/// cp's destination rules, and meets the other ranks at the end.
pub(crate) fn copy(
    sources: &[PathBuf],
    dest: &Path,
    shard: Shard,
    opts: &CopyOptions,
    reporter: &dyn Reporter,
) -> Result<Summary, PlanError> {
    let (jobs, refused) = listed::planned(sources, dest, opts, "--shard", false)?;
    let Some(job) = jobs.into_iter().next() else {
        return Ok(listed::refused_only(refused, reporter));
    };
    let src = tree_path(&job.src_parent, &job.src_name);
    let dst_path = tree_path(&job.dst_parent, &job.dst_name);
    let basis = listed::basis_root(opts, dest)?;
    let exists = sys::stat_at(job.dst_dir.as_fd(), &job.dst_name, false).is_ok();
    let staged = staged_name(&job.dst_name);
    let joined = Coordination::join(
        &job.dst_dir,
        &job.dst_parent,
        &job.dst_name,
        shard,
        opts,
        |reset| {
            if exists {
                return Ok(());
            }
            if reset {
                prepare_staged(&job.dst_dir, &staged, opts)
                    .map_err(|e| Error::dst(tree_path(&job.dst_parent, &staged), Op::Mkdir, &e))
            } else {
                Ok(())
            }
        },
    );
    let coord = match joined {
        Ok(c) => c,
        Err(e) => return Ok(listed::refused_only(vec![e], reporter)),
    };
    // Joined first and walked after, so that a rank which dies early is
    // seen dead by the others (its member lock is free), not awaited.
    let walked = match walk(&src, opts) {
        Ok(w) => w,
        Err(e) => {
            let _ = coord.mark(&format!("done.{}", shard.index), b"cancelled");
            return Ok(listed::refused_only(vec![e], reporter));
        }
    };
    // Every rank must cut the same list: the first to list it leaves its
    // fingerprint, and a rank whose list differs copies nothing.
    match coord.agree(&fingerprint(&walked)) {
        Ok(true) => {}
        Ok(false) => {
            let _ = coord.mark(&format!("done.{}", shard.index), b"failed");
            let why = Refusal::ShardListDiffers;
            let e = Error::refused(Side::Source, &src, Op::ReadDirectory, why);
            return Ok(listed::refused_only(vec![e], reporter));
        }
        Err(e) => {
            let _ = coord.mark(&format!("done.{}", shard.index), b"failed");
            let e = Error::dst(&coord.path, Op::Write, &e);
            return Ok(listed::refused_only(vec![e], reporter));
        }
    }
    let count = pieces(walked.len(), shard.count);

    let mut all_dirs = vec![PathBuf::new()];
    let mut by_piece: Vec<Vec<Listed>> = (0..count).map(|_| Vec::new()).collect();
    let n = walked.len();
    for (i, w) in walked.into_iter().enumerate() {
        let p = piece_of(i, n, count);
        if w.kind == Some(FileKind::Dir) {
            all_dirs.push(w.rel.clone());
        }
        by_piece[p].push(Listed {
            rel: w.rel,
            kind: w.kind,
        });
    }
    let root_name: &Name = if exists { &job.dst_name } else { &staged };
    let root = sys::open_dir(job.dst_dir.as_fd(), root_name).and_then(|dir| {
        let dev = sys::fstat(dir.as_fd())?.dev;
        Ok(Root {
            dir,
            path: dst_path.clone(),
            dev,
            staged: !exists,
            fresh: !exists && coord.fresh,
            // Each rank meets only some names of a hard-linked inode: rank
            // 0 copies them all at the end, in one process, as one inode.
            defer_links: opts.preserve.links,
            shared: true,
        })
    });
    let root = match root {
        Ok(r) => r,
        Err(e) => {
            let e = Error::dst(tree_path(&job.dst_parent, root_name), Op::Open, &e);
            let _ = coord.mark(&format!("done.{}", shard.index), b"cancelled");
            return Ok(listed::refused_only(vec![e], reporter));
        }
    };

    let mut summary = Summary::default();
    let mut later = Vec::new();
    // A piece may be left unclaimed, or hard links unlisted: the run fails.
    let mut broken = false;
    for e in refused {
        push_error(&mut summary, reporter, e);
    }
    // Each rank starts at its own share of the pieces (a different part of
    // the tree from the others), then goes on to any piece still unclaimed.
    let first = shard.index * count / shard.count;
    for p in (first..count).chain(0..first) {
        if opts.cancel.is_cancelled() {
            summary.cancelled = true;
            break;
        }
        match coord.claim(p) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(e) => {
                // Unclaimed, it may be copied by no rank: the run must not
                // be put in place as if whole.
                push_error(
                    &mut summary,
                    reporter,
                    Error::dst(&coord.path, Op::Create, &e),
                );
                broken = true;
                break;
            }
        }
        let entries = std::mem::take(&mut by_piece[p]);
        let copied = listed::copy_entries(
            &src,
            &root,
            entries,
            basis.as_deref(),
            opts,
            reporter,
            Vec::new(),
        );
        summary.absorb(copied.summary);
        later.extend(copied.deferred_links);
        if summary.cancelled {
            break;
        }
    }
    if !later.is_empty() && !summary.cancelled {
        let mut list = Vec::new();
        for rel in &later {
            list.extend_from_slice(rel.as_os_str().as_bytes());
            list.push(0);
        }
        if let Err(e) = coord.mark(&format!("links.{}", shard.index), &list) {
            push_error(
                &mut summary,
                reporter,
                Error::dst(&coord.path, Op::Write, &e),
            );
            broken = true;
        }
    }
    if opts.sync != SyncMode::None && !summary.cancelled {
        // This rank's data, on this machine, is on the device before it says done.
        if let Err(e) = sys::sync_fs(root.dir.as_fd()) {
            push_error(&mut summary, reporter, Error::dst(&dst_path, Op::Sync, &e));
        }
    }
    // Anything but a count makes rank 0 give the run up.
    let done = match (summary.cancelled, broken) {
        (true, _) => "cancelled".to_string(),
        (false, true) => "failed".to_string(),
        (false, false) => summary.errors.len().to_string(),
    };
    if let Err(e) = coord.mark(&format!("done.{}", shard.index), done.as_bytes()) {
        push_error(
            &mut summary,
            reporter,
            Error::dst(&coord.path, Op::Write, &e),
        );
    }
    reporter.phase(Phase::Waiting);
    let outcome = match shard.index {
        0 => {
            let end = End {
                coord: &coord,
                src: &src,
                root: &root,
                dirs: &all_dirs,
                basis: basis.as_deref(),
                parent: (&job.dst_dir, &job.dst_parent),
                names: (&staged, &job.dst_name),
            };
            end.publish(opts, &mut summary, reporter)
        }
        _ => coord.wait_published(opts),
    };
    let own = summary.errors.len() as u64;
    match outcome {
        Outcome::Published { errors } if errors > own => {
            let why = Refusal::ShardErrors {
                errors: errors - own,
            };
            push_error(
                &mut summary,
                reporter,
                Error::refused(Side::Destination, &dst_path, Op::Copy, why),
            );
        }
        Outcome::Published { .. } => {}
        Outcome::Failed { rank } => {
            let why = Refusal::ShardFailed { rank };
            push_error(
                &mut summary,
                reporter,
                Error::refused(Side::Destination, &dst_path, Op::Copy, why),
            );
        }
        Outcome::Cancelled => summary.cancelled = true,
    }
    coord.leave();
    Ok(summary)
}

fn push_error(summary: &mut Summary, reporter: &dyn Reporter, e: Error) {
    reporter.error(&e);
    summary.errors.push(e);
}

pub(super) fn tree_path(dir: &Path, name: &Name) -> PathBuf {
    crate::tree::join(dir, sys::os_str(name))
}

/// A new DEST's staged tree, for the run that resets the coordination: a
/// leftover is removed (or kept, with `--resume`), then it is made.
fn prepare_staged(parent: &Fd, staged: &Name, opts: &CopyOptions) -> io::Result<()> {
    let leftover = sys::stat_at(parent.as_fd(), staged, false).is_ok();
    if leftover && !opts.resume {
        remove_tree(parent.as_fd(), staged, &mut 0)?;
    }
    match sys::mkdir_at(parent.as_fd(), staged, 0o700) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(e),
        _ => Ok(()),
    }
}

/// Every entry of the tree at `src`, in the same order on every rank: names
/// in byte order, depth first. Entries `--exclude` leaves out are not
/// listed, nor is what is below them; `-x` lists a mount point, not its
/// content. An entry that cannot be looked at is still listed (its rank
/// reports the error when it copies it); a directory that cannot be read is
/// an error here.
fn walk(src: &Path, opts: &CopyOptions) -> Result<Vec<Walked>, Error> {
    let root =
        sys::open_path(src, sys::OPEN_DIR_FLAGS).map_err(|e| Error::src(src, Op::Open, &e))?;
    let root_dev = sys::fstat(root.as_fd())
        .map_err(|e| Error::src(src, Op::Stat, &e))?
        .dev;
    let follow = opts.follow == Follow::Always;
    let mut out = Vec::new();
    let mut stack = vec![(root, PathBuf::new())];
    while let Some((dir, rel)) = stack.pop() {
        let mut entries = sys::read_dir(dir.as_fd())
            .map_err(|e| Error::src(src.join(&rel), Op::ReadDirectory, &e))?;
        entries.sort_by(|a, b| sys::name_bytes(&a.name).cmp(sys::name_bytes(&b.name)));
        let mut subdirs = Vec::new();
        for e in entries {
            let child = rel.join(sys::os_str(&e.name));
            // The kind comes from the directory's listing where it says;
            // a stat only where more is needed: the pieces are cut by entry
            // count (claimed one at a time, they balance the bytes anyway),
            // and hard links are found as they are copied.
            let dir_dev = opts.one_file_system && e.kind == Some(FileKind::Dir);
            // (With -L, the kind of what each link names.)
            let stat = follow || e.kind.is_none() || dir_dev;
            let st = match stat {
                true => sys::stat_at(dir.as_fd(), &e.name, follow).ok(),
                false => None,
            };
            let kind = if stat { st.map(|s| s.kind()) } else { e.kind };
            if opts.filter.excludes(&child, || kind == Some(FileKind::Dir)) {
                continue;
            }
            if kind == Some(FileKind::Dir) && st.is_none_or(|s| s.dev == root_dev) {
                let sub = sys::open_dir(dir.as_fd(), &e.name)
                    .map_err(|err| Error::src(src.join(&child), Op::Open, &err))?;
                subdirs.push((sub, child.clone()));
            }
            out.push(Walked { rel: child, kind });
        }
        stack.extend(subdirs.into_iter().rev());
    }
    Ok(out)
}

/// What rank 0 needs to end the run.
struct End<'a> {
    coord: &'a Coordination,
    src: &'a Path,
    root: &'a Root,
    /// Every directory of the tree, by its path inside the source.
    dirs: &'a [PathBuf],
    /// `--link-dest`/`--clone-dest`'s directory, if given.
    basis: Option<&'a Path>,
    /// DEST's parent (descriptor and path).
    parent: (&'a Fd, &'a Path),
    /// The staged tree's name and DEST's.
    names: (&'a NameBuf, &'a NameBuf),
}

impl End<'_> {
    /// Waits for every rank, then gives the directories their metadata,
    /// flushes, renames a staged tree into place and writes `published`;
    /// or writes `failed`.
    fn publish(
        &self,
        opts: &CopyOptions,
        summary: &mut Summary,
        reporter: &dyn Reporter,
    ) -> Outcome {
        let fail = |rank: Option<usize>| {
            let _ = self.coord.mark(
                "failed",
                rank.map_or(String::new(), |r| r.to_string()).as_bytes(),
            );
            Outcome::Failed { rank }
        };
        if summary.cancelled {
            return fail(Some(0));
        }
        let mut errors = match self.coord.wait_done() {
            Ok(n) => n,
            Err(None) => {
                let _ = self.coord.mark("failed", b"0");
                return Outcome::Cancelled;
            }
            Err(rank) => return fail(rank),
        };
        // The hard-linked files, every name of each inode, in this process.
        let links = match self.coord.deferred_links() {
            Ok(l) => l,
            Err(e) => {
                push_error(
                    summary,
                    reporter,
                    Error::dst(&self.coord.path, Op::Read, &e),
                );
                return fail(Some(0));
            }
        };
        if !links.is_empty() {
            let root = self.root.dir.try_clone().map(|dir| Root {
                dir,
                path: self.root.path.clone(),
                defer_links: false,
                ..*self.root
            });
            let root = match root {
                Ok(r) => r,
                Err(e) => {
                    push_error(summary, reporter, Error::dst(&self.root.path, Op::Open, &e));
                    return fail(Some(0));
                }
            };
            let entries = links.into_iter().map(|rel| Listed {
                rel,
                kind: Some(FileKind::File),
            });
            let copied = listed::copy_entries(
                self.src,
                &root,
                entries.collect(),
                self.basis,
                opts,
                reporter,
                Vec::new(),
            );
            errors += copied.summary.errors.len() as u64;
            summary.absorb(copied.summary);
            if summary.cancelled {
                let _ = self.coord.mark("failed", b"0");
                return Outcome::Cancelled;
            }
        }
        reporter.phase(Phase::Flushing);
        // No rank writes any more: what interrupted runs left in a DEST
        // that was there (or a resumed one) goes now.
        let clean = !self.root.fresh;
        for w in listed::apply_dir_meta(self.src, self.root, self.dirs, opts, clean) {
            reporter.warning(&w);
            summary.warnings.push(w);
        }
        let durable = opts.sync != SyncMode::None;
        if durable {
            if let Err(e) = sys::sync_fs(self.root.dir.as_fd()) {
                push_error(summary, reporter, Error::dst(&self.root.path, Op::Sync, &e));
                return fail(Some(0));
            }
        }
        let (parent, parent_path) = self.parent;
        let (staged, name) = self.names;
        if self.root.staged {
            if let Err(e) = sys::rename_noreplace(parent.as_fd(), staged, parent.as_fd(), name) {
                push_error(
                    summary,
                    reporter,
                    Error::dst(&self.root.path, Op::Rename, &e),
                );
                return fail(Some(0));
            }
            self.record(opts);
            if durable {
                if let Err(e) = sys::sync_file(parent.as_fd()) {
                    push_error(summary, reporter, Error::dst(parent_path, Op::Sync, &e));
                }
            }
        }
        let errors = errors.max(summary.errors.len() as u64);
        if let Err(e) = self.coord.mark("published", errors.to_string().as_bytes()) {
            push_error(
                summary,
                reporter,
                Error::dst(&self.coord.path, Op::Write, &e),
            );
        }
        Outcome::Published { errors }
    }

    /// Notes the published tree as the copy of its source, so the same
    /// command run again merges into it (as a one-process copy does).
    fn record(&self, opts: &CopyOptions) {
        if let Some(file) = &opts.copies_record {
            let source = crate::record::identity_of(self.src);
            crate::record::note(
                file,
                source.as_deref(),
                self.root.dir.as_fd(),
                &self.root.path,
            );
        }
    }
}
