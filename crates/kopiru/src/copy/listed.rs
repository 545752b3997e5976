//! Copying listed entries rather than whole trees: `--files-from`, and each
//! rank's share of a sharded copy ([`crate::copy::shard`]). The entries are paths
//! inside one source directory; each goes to the same path under the
//! destination root. They are grouped by parent directory, so the tree code
//! gets one directory pair per group (made here, as `mkdir -p` would) and
//! its entries, and runs them on its workers as usual. A directory's own
//! metadata comes last, once everything is in it: [`apply_dir_meta`].

use crate::copy::meta::{self, Target};
use crate::copy::place::{self, StagedTree};
use crate::copy::plan::{self, PlanError, Setting};
use crate::copy::tree::{self, Group, GroupDir, Item};
use crate::error::{Error, Op, Refusal, Side};
use crate::events::{Reporter, Summary};
use crate::options::{CopyOptions, Follow};
use crate::paths::join_name;
use crate::sys::{self, AsFd, Fd, FileKind, Name};
use std::collections::{BTreeSet, HashMap};
use std::io;
use std::path::{Component, Path, PathBuf};

/// One listed entry.
pub(crate) struct Listed {
    /// Its path inside the source directory (normal components only).
    pub(crate) rel: PathBuf,
    /// Its kind, when the lister knows it (saves a stat).
    pub(crate) kind: Option<FileKind>,
}

/// Where the listed entries land: the directory that mirrors the source.
pub(crate) struct Root {
    pub(crate) dir: Fd,
    /// As shown in messages.
    pub(crate) path: PathBuf,
    pub(crate) dev: u64,
    /// Inside a staged tree, invisible until renamed into place.
    pub(crate) staged: bool,
    /// Made by this run (every rank of it), so it holds only what the run
    /// put there: no entry needs to be looked for before it is written.
    pub(crate) fresh: bool,
    /// Hard-linked files are set aside ([`Copied::deferred_links`]), not
    /// copied: a shard's ranks copy them in one process at the end.
    pub(crate) defer_links: bool,
    /// Other processes (a shard's ranks) write in these directories at the
    /// same time: a run does not clean temporaries there as it starts (they
    /// may be theirs); [`apply_dir_meta`] does, when all are done.
    pub(crate) shared: bool,
}

/// What [`copy_entries`] did.
pub(crate) struct Copied {
    pub(crate) summary: Summary,
    /// The directories it made as listed entries, whose metadata is applied
    /// at the end.
    pub(crate) dirs: Vec<PathBuf>,
    /// The hard-linked files set aside ([`Root::defer_links`]), by their
    /// path inside the source (read by the sharded run).
    pub(crate) deferred_links: Vec<PathBuf>,
}

/// `--files-from`: the one source directory, DEST as its copy (made if
/// missing), the listed entries copied, then every directory touched gets
/// its source's metadata, deepest first, and (`--sync`) is flushed.
pub(crate) fn copy(
    sources: &[PathBuf],
    dest: &Path,
    list: &[PathBuf],
    opts: &CopyOptions,
    reporter: &dyn Reporter,
) -> Result<Summary, PlanError> {
    let (src, root, mut refused) = match plan_root(sources, dest, opts, Setting::FilesFrom)? {
        Ok(planned) => planned,
        Err(refused) => return Ok(refused_only(refused, reporter)),
    };
    let real_src = src.canonicalize().unwrap_or_else(|_| src.clone());
    let mut entries = Vec::new();
    // The directories above the entries, whose metadata comes last.
    let mut dirs = BTreeSet::from([PathBuf::new()]);
    for p in list {
        match inside(p, &real_src) {
            Some(rel) if rel.as_os_str().is_empty() => {}
            Some(rel) => {
                dirs.extend(rel.ancestors().skip(1).map(Path::to_path_buf));
                entries.push(Listed { rel, kind: None });
            }
            None => refused.push(Error::refused(
                Side::Source,
                p,
                Op::Copy,
                Refusal::OutsideSource,
            )),
        }
    }
    let basis = basis_root(opts, dest)?;
    let copied = copy_entries(
        &src,
        &root,
        entries,
        basis.as_deref(),
        opts,
        reporter,
        refused,
    );
    let mut summary = copied.summary;
    if summary.cancelled {
        return Ok(summary);
    }
    dirs.extend(copied.dirs);
    let dirs: Vec<PathBuf> = dirs.into_iter().collect();
    for w in apply_dir_meta(&src, &root, &dirs, opts, false) {
        reporter.warning(&w);
        summary.warnings.push(w);
    }
    if let Err(e) = place::flush_written(opts, root.dir.as_fd()) {
        let e = Error::dst(&root.path, Op::Sync, &e);
        reporter.error(&e);
        summary.errors.push(e);
    }
    Ok(summary)
}

/// The entries as items, grouped by their parent directory (in the order
/// met). Entries of one directory come together (a walk lists them so; a
/// list mostly does): a run of the same parent is one lookup. A name that
/// cannot be a file name here is refused (added to `refused`).
fn by_parent(
    src: &Path,
    entries: Vec<Listed>,
    opts: &CopyOptions,
    refused: &mut Vec<Error>,
) -> Vec<(PathBuf, Vec<Item>)> {
    let mut by_parent: Vec<(PathBuf, Vec<Item>)> = Vec::new();
    let mut index: HashMap<PathBuf, usize> = HashMap::new();
    for e in entries {
        let (Some(name), parent) = (e.rel.file_name(), e.rel.parent().unwrap_or(Path::new("")))
        else {
            continue;
        };
        let name = match sys::cstring(name) {
            Ok(n) => n,
            Err(err) => {
                refused.push(Error::src(src.join(&e.rel), Op::Name, &err));
                continue;
            }
        };
        let item = Item {
            name,
            dst_name: None,
            kind: e.kind,
            follow: opts.follow == Follow::Always,
            shallow: !opts.recursive,
            read_data: false,
            write_into: false,
        };
        let same = |(p, _): &(PathBuf, Vec<Item>)| p.as_os_str() == parent.as_os_str();
        let at = match by_parent.last().is_some_and(same) {
            true => by_parent.len() - 1,
            false => *index.entry(parent.to_path_buf()).or_insert_with(|| {
                by_parent.push((parent.to_path_buf(), Vec::new()));
                by_parent.len() - 1
            }),
        };
        by_parent[at].1.push(item);
    }
    by_parent
}

/// A summary of nothing done but refusals, each reported (a copy an
/// earlier run completed as a warning, as [`crate::copy`] reports it).
pub(crate) fn refused_only(refused: Vec<Error>, reporter: &dyn Reporter) -> Summary {
    let (done, refused) = super::kept::left_alone(refused);
    for e in &refused {
        reporter.error(e);
    }
    let mut summary = Summary {
        errors: refused,
        ..Summary::default()
    };
    super::kept::already_copied(done, reporter, &mut summary);
    summary
}

/// Plans a listed copy (`what`: the option, for messages): one source, a
/// directory, whose copy is DEST itself; DEST made if missing. `Ok(Err)`:
/// refused (the refusals); `Err`: a usage error.
#[allow(clippy::type_complexity)]
pub(crate) fn plan_root(
    sources: &[PathBuf],
    dest: &Path,
    opts: &CopyOptions,
    what: Setting,
) -> Result<Result<(PathBuf, Root, Vec<Error>), Vec<Error>>, PlanError> {
    let (jobs, refused) = planned(sources, dest, opts, what, true)?;
    let Some(job) = jobs.into_iter().next() else {
        return Ok(Err(refused));
    };
    let path = join_name(&job.dst_parent, &job.dst_name);
    let made = match sys::mkdir_at(job.dst_dir.as_fd(), &job.dst_name, 0o777) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err((Op::Mkdir, e)),
        _ => sys::open_dir(job.dst_dir.as_fd(), &job.dst_name).map_err(|e| (Op::Open, e)),
    };
    let root = made.and_then(|dir| {
        let dev = sys::fstat(dir.as_fd()).map_err(|e| (Op::Stat, e))?.dev;
        Ok(Root {
            dir,
            path: path.clone(),
            dev,
            staged: false,
            fresh: false,
            defer_links: false,
            shared: false,
        })
    });
    match root {
        Ok(root) => Ok(Ok((sources[0].clone(), root, refused))),
        Err((op, e)) => {
            let mut refused = refused;
            refused.push(Error::dst(path, op, &e));
            Ok(Err(refused))
        }
    }
}

/// cp's planning of the one source directory of a listed or sharded copy
/// (with `as_itself`, DEST is its copy, as with `-T`).
pub(crate) fn planned(
    sources: &[PathBuf],
    dest: &Path,
    opts: &CopyOptions,
    what: Setting,
    as_itself: bool,
) -> Result<(Vec<plan::Job>, Vec<Error>), PlanError> {
    let one_dir = match sources {
        [src] => sys::stat_path(src, true).map(|st| st.kind() == FileKind::Dir),
        _ => Ok(false),
    };
    if let Ok(false) = one_dir {
        return Err(PlanError::ListedNeedsOneSource { what });
    }
    let plan_opts = CopyOptions {
        no_target_directory: as_itself || opts.no_target_directory,
        follow: opts.follow,
        copies_record: opts.copies_record.clone(),
        ..CopyOptions::default()
    };
    plan::plan(sources, dest, &plan_opts)
}

/// `--link-dest`/`--clone-dest`'s directory, mirroring DEST.
pub(crate) fn basis_root(opts: &CopyOptions, dest: &Path) -> Result<Option<PathBuf>, PlanError> {
    opts.basis
        .as_ref()
        .map(|b| plan::basis_dir(b, dest))
        .transpose()
}

/// `p` as a path inside the source directory `src` (canonical): relative
/// paths as they are (`./` dropped), absolute ones with `src` stripped.
/// `None`: outside it (`..`, or another absolute path).
pub(crate) fn inside(p: &Path, src: &Path) -> Option<PathBuf> {
    let rel = match p.is_absolute() {
        true => p.strip_prefix(src).ok()?,
        false => p,
    };
    let mut out = PathBuf::new();
    for c in rel.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            _ => return None,
        }
    }
    Some(out)
}

/// Copies `entries` of the source directory `src` to the same paths under
/// `root`. `refused`: errors found before (reported with the rest).
#[allow(clippy::too_many_arguments)]
pub(crate) fn copy_entries(
    src: &Path,
    root: &Root,
    entries: Vec<Listed>,
    basis: Option<&Path>,
    opts: &CopyOptions,
    reporter: &dyn Reporter,
    mut refused: Vec<Error>,
) -> Copied {
    let src_root = match sys::open_path(src, sys::OPEN_DIR_FLAGS) {
        Ok(fd) => fd,
        Err(e) => {
            refused.push(Error::src(src, Op::Open, &e));
            return Copied {
                summary: refused_only(refused, reporter),
                dirs: Vec::new(),
                deferred_links: Vec::new(),
            };
        }
    };
    let src_dev = sys::fstat(src_root.as_fd()).map_or(0, |st| st.dev);
    let by_parent = by_parent(src, entries, opts, &mut refused);
    let mut groups = Vec::new();
    // Each staged directory holds descriptors until the end.
    sys::raise_fd_limit();
    let mut chain = Chain {
        stage: !root.staged,
        resume: opts.resume,
        ..Chain::default()
    };
    for (parent, items) in by_parent {
        // The group's node owns its pair; the chain keeps its own.
        let dup = |fd: &Fd, side| fd.try_clone().map_err(|e| (side, Op::Open, e));
        let opened = chain
            .open((src_root.as_fd(), root.dir.as_fd()), (src, root), &parent)
            .and_then(|o| {
                let (s, d) = (dup(&o.src, Side::Source)?, dup(&o.dst, Side::Destination)?);
                Ok((s, d, o.made, o.staged))
            });
        let (s, d, made, staged) = match opened {
            Ok(pair) => pair,
            Err((side, op, err)) => {
                // Each entry of the group fails with its directory.
                for item in &items {
                    let e = match err.raw_os_error() {
                        Some(n) => io::Error::from_raw_os_error(n),
                        None => io::Error::new(err.kind(), err.to_string()),
                    };
                    let rel = parent.join(sys::os_str(&item.name));
                    refused.push(match side {
                        Side::Source => Error::src(src.join(rel), op, &e),
                        Side::Destination => Error::dst(root.path.join(rel), op, &e),
                    });
                }
                continue;
            }
        };
        let dir = GroupDir {
            src: s,
            dst: d,
            src_path: crate::paths::join(src, parent.as_os_str()),
            dst_path: crate::paths::join(&root.path, parent.as_os_str()),
            dst_dev: root.dev,
            root_dev: src_dev,
            staged,
            // A directory this process made was empty then: only entries
            // of other lists (never these names) can have come since.
            fresh: root.fresh || made,
            basis: basis.and_then(|b| sys::open_path(&b.join(&parent), sys::OPEN_DIR_FLAGS).ok()),
            rel: parent,
        };
        groups.push(Group { dir, items });
    }
    let trees = std::mem::take(&mut chain.trees);
    drop(chain);
    let ran = tree::run_groups(
        groups,
        trees,
        opts,
        reporter,
        refused,
        tree::GroupsIn {
            defer_links: root.defer_links,
            shared: root.shared,
        },
    );
    Copied {
        summary: ran.summary,
        dirs: ran.dirs,
        deferred_links: ran.deferred_links,
    }
}

/// The source and destination directories opened last, from the roots
/// down: the groups come in path order (parents first), so each directory
/// is opened from its parent's descriptor, once, not from the root.
///
/// A destination directory missing in a visible DEST is made under a
/// staged name beside it (as a whole-tree copy stages its top directory)
/// and put in place when the run ends ([`tree::run_groups`] publishes
/// [`Chain::trees`]): its files are written under their final names,
/// without the temporary name or nameless file each file in a visible
/// directory needs. Another process making the same directory meanwhile
/// (fpart splits directories among its jobs) keeps it apart: the staged
/// name is locked, the other makes the directory itself, and the staged
/// one is merged into it when put in place.
#[derive(Default)]
struct Chain {
    open: Vec<Opened>,
    /// Opening only: a missing destination directory is an error.
    no_make: bool,
    /// Stage the directories made (DEST is visible).
    stage: bool,
    /// `--resume`: a staged directory an interrupted run left is used.
    resume: bool,
    /// Directories staged by this run, by path: opened there again.
    staged: HashMap<PathBuf, sys::NameBuf>,
    /// The staged directories, to be put in place at the end.
    trees: Vec<StagedTree>,
}

/// One open pair of the chain.
struct Opened {
    rel: PathBuf,
    src: Fd,
    dst: Fd,
    /// This process made the destination directory (so it held nothing else).
    made: bool,
    /// It is inside (or is) a staged directory, invisible until published.
    staged: bool,
}

impl Chain {
    /// Opens the source and destination directories `rel` (the
    /// destination's made if missing, as `mkdir -p`, or staged), never
    /// through a symlink, and returns them, borrowed from the chain, with
    /// whether this process made the destination, and whether it is staged.
    fn open(
        &mut self,
        (src_root, dst_root): (sys::FdRef, sys::FdRef),
        (src, root): (&Path, &Root),
        rel: &Path,
    ) -> Result<&Opened, (Side, Op, io::Error)> {
        while self.open.last().is_some_and(|o| !rel.starts_with(&o.rel)) {
            self.open.pop();
        }
        if self.open.is_empty() {
            let s = sys::open_dir(src_root, sys::DOT).map_err(|e| (Side::Source, Op::Open, e))?;
            let d =
                sys::open_dir(dst_root, sys::DOT).map_err(|e| (Side::Destination, Op::Open, e))?;
            self.open.push(Opened {
                rel: PathBuf::new(),
                src: s,
                dst: d,
                made: false,
                staged: root.staged,
            });
        }
        let top = &self.open.last().expect("the roots at least").rel;
        let rest: Vec<_> = rel
            .strip_prefix(top)
            .expect("an ancestor")
            .components()
            .map(|c| c.as_os_str().to_owned())
            .collect();
        for c in rest {
            let name = sys::cstring(&c).map_err(|e| (Side::Source, Op::Name, e))?;
            let up = self.open.last().expect("the roots at least");
            let p = up.rel.join(&c);
            let sub_s =
                sys::open_dir(up.src.as_fd(), &name).map_err(|e| (Side::Source, Op::Open, e))?;
            let staged_here = match self.staged.get(&p) {
                Some(tmp) => Some((sys::open_dir(up.dst.as_fd(), tmp), true)),
                None if self.stage && !self.no_make && !up.staged => self
                    .make_staged((src, root), &name, &p)
                    .map(|(fd, made)| (Ok(fd), made)),
                None => None,
            };
            let up = self.open.last().expect("the roots at least");
            let (sub_d, made, staged) = match staged_here {
                Some((d, made)) => (d, made, true),
                None => {
                    let made = match self.no_make {
                        true => Ok(false),
                        false => sys::mkdir_at(up.dst.as_fd(), &name, 0o777).map(|()| true),
                    }
                    .or_else(|e| match e.kind() {
                        io::ErrorKind::AlreadyExists => Ok(false),
                        _ => Err((Side::Destination, Op::Mkdir, e)),
                    })?;
                    (sys::open_dir(up.dst.as_fd(), &name), made, up.staged)
                }
            };
            let sub_d = sub_d.map_err(|e| (Side::Destination, Op::Open, e))?;
            self.open.push(Opened {
                rel: p,
                src: sub_s,
                dst: sub_d,
                made,
                staged,
            });
        }
        Ok(self.open.last().expect("the roots at least"))
    }

    /// Makes the missing directory `name` (at `rel`) in the last open
    /// directory under its staged name, locked, and notes it for the end;
    /// returns it and whether this process made it (not: an interrupted
    /// run's, continued under `--resume`). `None`: it is there already, or
    /// its staged name is another live process's, or it could not be
    /// staged: it is made (or opened) as it is, in place. A staged name
    /// left by an interrupted run is removed (or, under `--resume`, used)
    /// even when the directory exists by now.
    fn make_staged(
        &mut self,
        (_, root): (&Path, &Root),
        name: &Name,
        rel: &Path,
    ) -> Option<(Fd, bool)> {
        let up = self.open.last()?;
        let d = up.dst.as_fd();
        let tmp = place::staged_name(name);
        let there = || sys::stat_at(d, name, false).is_ok();
        let mut reused = None;
        if sys::stat_at(d, &tmp, false).is_ok() {
            match place::try_lock_at(d, &tmp) {
                Ok(Some(fd)) if self.resume && !there() => reused = Some(fd),
                Ok(Some(fd)) => {
                    // Removed while its lock is held, so that a process
                    // that has just made it (and not yet locked it) finds
                    // it gone once it can lock it, and stays away.
                    place::remove_tree(d, &tmp, &mut 0).ok()?;
                    drop(fd);
                }
                // Another live process's (or one that cannot be told).
                _ => return None,
            }
        }
        let (lock, made) = match reused {
            Some(fd) => (fd, false),
            None if there() => return None,
            None => {
                sys::mkdir_at(d, &tmp, 0o777).ok()?;
                let fd = sys::open_dir(d, &tmp).ok()?;
                // Locked, then checked to be still the directory under the
                // staged name: one that found it unlocked in between took
                // it for an interrupted run's and removed it.
                if !sys::try_lock(fd.as_fd()).unwrap_or(false) || !place::still_named(d, &tmp, &fd)
                {
                    return None;
                }
                (fd, true)
            }
        };
        let fd = lock.try_clone().ok()?;
        let parent = up.dst.try_clone().ok()?;
        let parent_path = crate::paths::join(&root.path, up.rel.as_os_str());
        self.staged.insert(rel.to_path_buf(), tmp.clone());
        self.trees.push(StagedTree {
            parent,
            parent_path,
            dev: root.dev,
            tmp,
            name: name.to_owned(),
            source: None,
            _lock: Some(lock),
            src_path: None,
            merge: true,
        });
        Some((fd, made))
    }
}

/// Gives each directory `rel` of `dirs` under `root` the metadata of the
/// same directory of the source `src`, deepest first (a directory's times
/// change while entries are made in it). Returns what could not be kept.
///
/// With `clean`, each directory's leftovers ([`place::remove_leftovers`])
/// are removed first (a shard's end, once no rank writes any more).
pub(crate) fn apply_dir_meta(
    src: &Path,
    root: &Root,
    dirs: &[PathBuf],
    opts: &CopyOptions,
    clean: bool,
) -> Vec<Error> {
    // Children sort after their parents, so in reverse every directory
    // comes after its subdirectories, and the chain opens each one once.
    let mut order: Vec<&PathBuf> = dirs.iter().collect();
    order.sort();
    let (Ok(src_root), umask) = (sys::open_path(src, sys::OPEN_DIR_FLAGS), sys::umask()) else {
        return vec![Error::src(
            src,
            Op::Open,
            &io::Error::from(io::ErrorKind::NotFound),
        )];
    };
    let mut chain = Chain {
        no_make: true,
        ..Chain::default()
    };
    let mut warnings = Vec::new();
    for rel in order.into_iter().rev() {
        let dst_path = crate::paths::join(&root.path, rel.as_os_str());
        let both = chain
            .open((src_root.as_fd(), root.dir.as_fd()), (src, root), rel)
            .map_err(|(side, op, e)| match side {
                Side::Source => Error::src(src.join(rel), op, &e),
                Side::Destination => Error::dst(&dst_path, op, &e),
            })
            .and_then(|o| {
                let (s, d) = (&o.src, &o.dst);
                let st =
                    sys::fstat(s.as_fd()).map_err(|e| Error::src(src.join(rel), Op::Stat, &e))?;
                if clean {
                    place::remove_leftovers(d.as_fd())
                        .map_err(|e| Error::dst(&dst_path, Op::Remove, &e))?;
                }
                let now = sys::fstat(d.as_fd()).map_err(|e| Error::dst(&dst_path, Op::Stat, &e))?;
                Ok((s, st, d, now))
            });
        let (s, st, d, now) = match both {
            Ok(x) => x,
            Err(e) => {
                warnings.push(e);
                continue;
            }
        };
        // Made by this process or another rank, or there before: which,
        // is not known here, so each gets its source's mode less the umask
        // unless the mode is kept (a directory that was there is not left
        // as it was, unlike in a copy of a whole tree).
        let owner_now = Some((now.uid, now.gid));
        let w = meta::apply(
            Target::Fd(d.as_fd()),
            (Some(s.as_fd()), &st),
            meta::Before::Nothing,
            meta::Now {
                perm: now.perm(),
                owner: owner_now,
            },
            &opts.preserve,
            umask,
        );
        warnings.extend(w.into_iter().map(|(op, e)| Error::dst(&dst_path, op, &e)));
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_paths_stay_inside_the_source() {
        let src = Path::new("/data/src");
        assert_eq!(inside(Path::new("a/b"), src), Some(PathBuf::from("a/b")));
        assert_eq!(
            inside(Path::new("./a/./b"), src),
            Some(PathBuf::from("a/b"))
        );
        assert_eq!(inside(Path::new("../x"), src), None);
        assert_eq!(inside(Path::new("a/../../x"), src), None);
        // Absolute paths ("/data" is not one on Windows).
        if cfg!(unix) {
            let abs = inside(Path::new("/data/src/a/b"), src);
            assert_eq!(abs, Some(PathBuf::from("a/b")));
            assert_eq!(inside(Path::new("/data/src"), src), Some(PathBuf::new()));
            assert_eq!(inside(Path::new("/data/other/x"), src), None);
        }
    }
}
