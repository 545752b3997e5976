//! A sharded copy on one rank: list the tree, claim pieces of it and copy
//! them, then meet the other ranks through the coordination directory
//! (coord.rs; the protocol is described in the module above).

use super::coord::{Coordination, Outcome};
use super::{piece_of, pieces, Shard};
use crate::copy::listed::{self, Listed, Root};
use crate::copy::place::{self, remove_tree, staged_name, StagedTree};
use crate::copy::plan::{PlanError, Setting};
use crate::error::{Error, Op, Refusal, ShardRefusal, Side};
use crate::events::{Phase, Reporter, Summary};
use crate::options::{CopyOptions, Follow};
use crate::paths::join_name;
use crate::sys::{self, AsFd, Fd, FileKind, Name, NameBuf};
use std::io;
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
        h.update(sys::os_str_bytes(w.rel.as_os_str()));
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
    let (jobs, refused) = listed::planned(sources, dest, opts, Setting::Shard, false)?;
    let Some(job) = jobs.into_iter().next() else {
        return Ok(listed::refused_only(refused, reporter));
    };
    let src = join_name(&job.src_parent, &job.src_name);
    let dst_path = join_name(&job.dst_parent, &job.dst_name);
    let basis = listed::basis_root(opts, dest)?;
    let exists = sys::stat_at(job.dst_dir.as_fd(), &job.dst_name, false).is_ok();
    let staged = staged_name(&job.dst_name);
    let joined = Coordination::join(
        &job.dst_dir,
        &job.dst_parent,
        &job.dst_name,
        shard,
        opts,
        |reset| match !exists && reset {
            true => prepare_staged(&job.dst_dir, &staged, opts)
                .map_err(|e| Error::dst(join_name(&job.dst_parent, &staged), Op::Mkdir, &e)),
            false => Ok(()),
        },
    );
    let coord = match joined {
        Ok(c) => c,
        Err(e) => return Ok(listed::refused_only(vec![e], reporter)),
    };
    // Joined first and walked after, so that a rank which dies early is
    // seen dead by the others (its member lock is free), not awaited.
    let walked = match walk_agreed(&coord, &src, shard, opts) {
        Ok(w) => w,
        Err(e) => return Ok(listed::refused_only(vec![e], reporter)),
    };
    let count = pieces(walked.len(), shard.count);
    let (all_dirs, by_piece) = cut(walked, count);
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
            let e = Error::dst(join_name(&job.dst_parent, root_name), Op::Open, &e);
            let _ = coord.mark(&format!("done.{}", shard.index), b"cancelled");
            return Ok(listed::refused_only(vec![e], reporter));
        }
    };
    let mut summary = Summary::default();
    for e in refused {
        push_error(&mut summary, reporter, e);
    }
    let rank = Rank {
        coord: &coord,
        shard,
        src: &src,
        root: &root,
        basis: basis.as_deref(),
        opts,
        reporter,
    };
    rank.copy_pieces(by_piece, &mut summary);
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
    meet(outcome, &dst_path, &mut summary, reporter);
    coord.leave();
    Ok(summary)
}

/// Walks the source, and checks that every rank cut the same list: the
/// first to list it leaves its fingerprint, and a rank whose list differs
/// copies nothing. `Err`: this rank says it is done without copying.
fn walk_agreed(
    coord: &Coordination,
    src: &Path,
    shard: Shard,
    opts: &CopyOptions,
) -> Result<Vec<Walked>, Error> {
    let done = |how: &[u8]| {
        let _ = coord.mark(&format!("done.{}", shard.index), how);
    };
    let walked = walk(src, opts).inspect_err(|_| done(b"cancelled"))?;
    match coord.agree(&fingerprint(&walked)) {
        Ok(true) => Ok(walked),
        Ok(false) => {
            done(b"failed");
            let why = Refusal::Shard(ShardRefusal::ShardListDiffers);
            Err(Error::refused(Side::Source, src, Op::ReadDirectory, why))
        }
        Err(e) => {
            done(b"failed");
            Err(Error::dst(&coord.path, Op::Write, &e))
        }
    }
}

/// The walked entries cut into `count` pieces, and every directory of the
/// tree ("" for its top).
fn cut(walked: Vec<Walked>, count: usize) -> (Vec<PathBuf>, Vec<Vec<Listed>>) {
    let mut all_dirs = vec![PathBuf::new()];
    let mut by_piece: Vec<Vec<Listed>> = (0..count).map(|_| Vec::new()).collect();
    let n = walked.len();
    for (i, w) in walked.into_iter().enumerate() {
        if w.kind == Some(FileKind::Dir) {
            all_dirs.push(w.rel.clone());
        }
        by_piece[piece_of(i, n, count)].push(Listed {
            rel: w.rel,
            kind: w.kind,
        });
    }
    (all_dirs, by_piece)
}

/// This rank's part of the run.
struct Rank<'a> {
    coord: &'a Coordination,
    shard: Shard,
    src: &'a Path,
    root: &'a Root,
    basis: Option<&'a Path>,
    opts: &'a CopyOptions,
    reporter: &'a dyn Reporter,
}

impl Rank<'_> {
    /// Claims and copies pieces, starting at this rank's own share of them
    /// (a different part of the tree from the others), then any piece
    /// still unclaimed; then lists the hard-linked files set aside for
    /// rank 0, flushes, and says it is done.
    fn copy_pieces(&self, mut by_piece: Vec<Vec<Listed>>, summary: &mut Summary) {
        let (shard, opts, reporter) = (self.shard, self.opts, self.reporter);
        let count = by_piece.len();
        let mut later = Vec::new();
        // A piece may be left unclaimed, or hard links unlisted: the run fails.
        let mut broken = false;
        let first = shard.index * count / shard.count;
        for p in (first..count).chain(0..first) {
            if opts.cancel.is_cancelled() {
                summary.cancelled = true;
                break;
            }
            match self.coord.claim(p) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    // Unclaimed, it may be copied by no rank: the run must
                    // not be put in place as if whole.
                    push_error(summary, reporter, self.coord_error(Op::Create, &e));
                    broken = true;
                    break;
                }
            }
            let entries = std::mem::take(&mut by_piece[p]);
            let copied = listed::copy_entries(
                self.src,
                self.root,
                entries,
                self.basis,
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
                list.extend_from_slice(sys::os_str_bytes(rel.as_os_str()));
                list.push(0);
            }
            if let Err(e) = self.coord.mark(&format!("links.{}", shard.index), &list) {
                push_error(summary, reporter, self.coord_error(Op::Write, &e));
                broken = true;
            }
        }
        if !summary.cancelled {
            // This rank's data, on this machine, is on the device before it
            // says done.
            if let Err(e) = place::flush_written(opts, self.root.dir.as_fd()) {
                push_error(summary, reporter, Error::dst(&self.root.path, Op::Sync, &e));
            }
        }
        // Anything but a count makes rank 0 give the run up.
        let done = match (summary.cancelled, broken) {
            (true, _) => "cancelled".to_string(),
            (false, true) => "failed".to_string(),
            (false, false) => summary.errors.len().to_string(),
        };
        if let Err(e) = self
            .coord
            .mark(&format!("done.{}", shard.index), done.as_bytes())
        {
            push_error(summary, reporter, self.coord_error(Op::Write, &e));
        }
    }

    fn coord_error(&self, op: Op, e: &io::Error) -> Error {
        Error::dst(&self.coord.path, op, e)
    }
}

/// What the run's outcome means for this rank's summary: errors of other
/// ranks, a rank that failed, or a cancel.
fn meet(outcome: Outcome, dst_path: &Path, summary: &mut Summary, reporter: &dyn Reporter) {
    let own = summary.errors.len() as u64;
    let why = match outcome {
        Outcome::Published { errors } if errors > own => {
            Refusal::Shard(ShardRefusal::ShardErrors {
                errors: errors - own,
            })
        }
        Outcome::Published { .. } => return,
        Outcome::Failed { rank } => Refusal::Shard(ShardRefusal::ShardFailed { rank }),
        Outcome::Cancelled => {
            summary.cancelled = true;
            return;
        }
    };
    let e = Error::refused(Side::Destination, dst_path, Op::Copy, why);
    push_error(summary, reporter, e);
}

fn push_error(summary: &mut Summary, reporter: &dyn Reporter, e: Error) {
    reporter.error(&e);
    summary.errors.push(e);
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
        match self.copy_links(opts, summary, reporter) {
            Ok(n) => errors += n,
            Err(Some(e)) => {
                push_error(summary, reporter, e);
                return fail(Some(0));
            }
            Err(None) => {
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
        if let Err(e) = place::flush_written(opts, self.root.dir.as_fd()) {
            push_error(summary, reporter, Error::dst(&self.root.path, Op::Sync, &e));
            return fail(Some(0));
        }
        if self.root.staged {
            // Put in place as a one-process copy's staged tree is.
            let placed = self
                .staged_tree(opts)
                .map_err(|e| Error::dst(&self.root.path, Op::Open, &e))
                .and_then(|t| place::publish::publish_alone(opts, &t));
            if let Err(e) = placed {
                // Only a failed flush of the name leaves the tree in place.
                let in_place = e.op == Op::Sync;
                push_error(summary, reporter, e);
                if !in_place {
                    return fail(Some(0));
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

    /// Copies the hard-linked files every rank set aside, every name of
    /// each inode in this process. Returns the errors among them; `Err`:
    /// the list or the root could not be had (`Some`), or cancelled.
    fn copy_links(
        &self,
        opts: &CopyOptions,
        summary: &mut Summary,
        reporter: &dyn Reporter,
    ) -> Result<u64, Option<Error>> {
        let links = self
            .coord
            .deferred_links()
            .map_err(|e| Some(Error::dst(&self.coord.path, Op::Read, &e)))?;
        if links.is_empty() {
            return Ok(0);
        }
        let root = self.root.dir.try_clone().map(|dir| Root {
            dir,
            path: self.root.path.clone(),
            defer_links: false,
            ..*self.root
        });
        let root = root.map_err(|e| Some(Error::dst(&self.root.path, Op::Open, &e)))?;
        let entries = links.into_iter().map(|rel| Listed {
            rel,
            kind: Some(FileKind::File),
        });
        let entries = entries.collect();
        let copied = listed::copy_entries(
            self.src,
            &root,
            entries,
            self.basis,
            opts,
            reporter,
            Vec::new(),
        );
        let errors = copied.summary.errors.len() as u64;
        summary.absorb(copied.summary);
        match summary.cancelled {
            true => Err(None),
            false => Ok(errors),
        }
    }

    /// The staged tree of a new DEST, to be put in place; its source's
    /// identity is taken for the record of copies.
    fn staged_tree(&self, opts: &CopyOptions) -> io::Result<StagedTree> {
        let (parent, parent_path) = self.parent;
        let (staged, name) = self.names;
        Ok(StagedTree {
            parent: parent.try_clone()?,
            parent_path: parent_path.to_path_buf(),
            dev: self.root.dev,
            tmp: staged.clone(),
            name: name.clone(),
            source: opts
                .copies_record
                .as_ref()
                .and_then(|_| crate::copy::record::identity_of(self.src)),
            _lock: None,
            src_path: None,
            merge: false,
        })
    }
}
