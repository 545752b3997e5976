//! `--dry-run`: walks the sources as a copy would (same filter, same rules
//! for what is kept), reads the destination, and reports each entry that a
//! copy would create or replace ([`Reporter::change`]). It opens nothing
//! for writing: the destination is only stat'ed, listed and read.

use crate::copy::plan::Job;
use crate::copy::tree::keeps;
use crate::error::{Error, Op, Refusal, Side};
use crate::events::{Change, ChangeKind, EntryKind, Reporter, Summary};
use crate::options::{CopyOptions, Follow};
use crate::paths::join_name;
use crate::sys::{self, AsFd, Fd, FileKind, Name, Stat};
use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

/// Reports what copying `jobs` would do; the summary counts it.
pub(crate) fn run(
    jobs: Vec<Job>,
    opts: &CopyOptions,
    reporter: &dyn Reporter,
    refused: Vec<Error>,
) -> Summary {
    let mut p = Preview {
        opts,
        reporter,
        summary: Summary::default(),
        links: HashMap::new(),
        ancestors: Vec::new(),
    };
    for e in refused {
        p.error(e);
    }
    for job in jobs {
        let at = At {
            src: job.src_dir,
            dst: Some(job.dst_dir),
            src_path: job.src_parent,
            dst_path: job.dst_parent,
            rel: None,
            dev: None,
        };
        p.entry(&at, &job.src_name, &job.dst_name, job.follow);
    }
    p.summary.cancelled = opts.cancel.is_cancelled();
    p.summary
}

struct Preview<'a> {
    opts: &'a CopyOptions,
    reporter: &'a dyn Reporter,
    summary: Summary,
    /// The destination path of the first name of each multiply-linked file.
    links: HashMap<(u64, u64), PathBuf>,
    /// (device, inode) of the source directories being walked (-L loops).
    ancestors: Vec<(u64, u64)>,
}

/// A source directory and its destination (`None`: it would be created).
struct At {
    src: Fd,
    dst: Option<Fd>,
    src_path: PathBuf,
    dst_path: PathBuf,
    /// Its path inside the copied directory; `None` for the parent of a
    /// command-line source.
    rel: Option<PathBuf>,
    /// The device of the copied source directory (`-x`).
    dev: Option<u64>,
}

impl Preview<'_> {
    fn error(&mut self, e: Error) {
        self.reporter.error(&e);
        self.summary.errors.push(e);
    }

    fn report(&self, path: &Path, kind: EntryKind, change: ChangeKind, target: Option<&Path>) {
        self.reporter.change(&Change {
            path,
            source: None,
            kind,
            change,
            target,
        });
    }

    fn entry(&mut self, at: &At, name: &Name, dst_name: &Name, follow: bool) {
        if self.opts.cancel.is_cancelled() {
            return;
        }
        let src_path = join_name(&at.src_path, name);
        let st = match sys::stat_at(at.src.as_fd(), name, follow) {
            Ok(st) => st,
            Err(e) => return self.error(Error::src(src_path, Op::Stat, &e)),
        };
        let dst_path = join_name(&at.dst_path, dst_name);
        let d = at
            .dst
            .as_ref()
            .and_then(|d| sys::stat_at(d.as_fd(), dst_name, false).ok());
        let d_is_dir = d.is_some_and(|d| d.kind() == FileKind::Dir);
        let refuse = |why| Error::refused(Side::Destination, &dst_path, Op::Copy, why);
        match (st.kind(), d_is_dir) {
            (FileKind::Dir, false) if d.is_some() => {
                self.error(refuse(Refusal::DirOverNonDir { source: None }))
            }
            (FileKind::Dir, _) => self.dir(at, name, dst_name, &st, d.is_some(), follow),
            // -n, and -u when it is not older, keep it (as the copy does).
            (_, true) if d.is_some_and(|d| self.opts.skips(&d, &st)) => self.summary.skipped += 1,
            (_, true) => self.error(refuse(Refusal::NonDirOverDir { source: None })),
            (kind, false) => self.other(at, (name, dst_name), &dst_path, &st, d, kind),
        }
    }

    /// A non-directory: created, replaced or kept.
    fn other(
        &mut self,
        at: &At,
        (name, dst_name): (&Name, &Name),
        dst_path: &Path,
        st: &Stat,
        d: Option<Stat>,
        kind: FileKind,
    ) {
        let s = &mut self.summary;
        if kind == FileKind::File && self.opts.preserve.links && st.nlink > 1 {
            if let Some(first) = self.links.get(&(st.dev, st.ino)) {
                s.hardlinks += 1;
                let change = match d {
                    None => ChangeKind::Created,
                    Some(_) => ChangeKind::Replaced {
                        size: false,
                        time: false,
                        perms: false,
                        owner: false,
                        group: false,
                    },
                };
                let first = first.clone();
                return self.report(dst_path, EntryKind::HardLink, change, Some(&first));
            }
            self.links.insert((st.dev, st.ino), dst_path.to_path_buf());
        }
        // --checksum: the two files' contents (a regular file is opened
        // the same with or without following).
        let same = || {
            let src = sys::open_source(at.src.as_fd(), name, false, true, false);
            let dst = at
                .dst
                .as_ref()
                .map(|d| sys::open_source(d.as_fd(), dst_name, false, false, false));
            match (src, dst) {
                (Ok(a), Some(Ok(b))) => sys::same_data(a.as_fd(), b.as_fd(), st.size),
                _ => false,
            }
        };
        let change = match d {
            None => ChangeKind::Created,
            Some(d) if keeps(self.opts, &d, st, false, true, same) => {
                s.skipped += 1;
                return;
            }
            Some(d) => ChangeKind::replaced(&d, st, true, &self.opts.preserve),
        };
        let (kind, target) = match kind {
            FileKind::File => {
                s.files += 1;
                s.bytes += st.size;
                (EntryKind::File, None)
            }
            FileKind::Symlink => {
                s.symlinks += 1;
                match sys::read_link_at(at.src.as_fd(), name) {
                    Ok(t) => (EntryKind::Symlink, Some(PathBuf::from(sys::os_str(&t)))),
                    Err(e) => {
                        let path = join_name(&at.src_path, name);
                        return self.error(Error::src(path, Op::Readlink, &e));
                    }
                }
            }
            _ => {
                s.specials += 1;
                (EntryKind::Special, None)
            }
        };
        self.report(dst_path, kind, change, target.as_deref());
    }

    /// A directory: reported when it would be made, then walked.
    fn dir(
        &mut self,
        at: &At,
        name: &Name,
        dst_name: &Name,
        st: &Stat,
        exists: bool,
        follow: bool,
    ) {
        let src_path = join_name(&at.src_path, name);
        let dst_path = join_name(&at.dst_path, dst_name);
        if self.ancestors.contains(&(st.dev, st.ino)) {
            let e = sys::loop_error();
            return self.error(Error::src(src_path, Op::Follow, &e));
        }
        let counted = |s: &mut Self| {
            s.summary.dirs += 1;
            match exists {
                true => s.summary.dirs_merged += 1,
                false => s.report(&dst_path, EntryKind::Dir, ChangeKind::Created, None),
            }
        };
        // -x: a directory on another filesystem than its source root is
        // made, not entered.
        if self.opts.one_file_system && at.dev.is_some_and(|dev| dev != st.dev) {
            return counted(self);
        }
        // Opened first: a directory that cannot be read is not made by the
        // copy either, so it is not listed (and the exit code is the
        // copy's: 1 when nothing else would be copied).
        let open = |keep_atime| sys::open_source(at.src.as_fd(), name, true, follow, keep_atime);
        let src = match open(true).or_else(|_| open(false)) {
            Ok(fd) => fd,
            Err(e) => return self.error(Error::src(src_path, Op::Open, &e)),
        };
        counted(self);
        let dst = match (exists, &at.dst) {
            (true, Some(d)) => match sys::open_dir(d.as_fd(), dst_name) {
                Ok(fd) => Some(fd),
                Err(e) => return self.error(Error::dst(dst_path, Op::Open, &e)),
            },
            _ => None,
        };
        let rel = match &at.rel {
            None => PathBuf::new(),
            Some(r) => r.join(sys::os_str(name)),
        };
        let here = At {
            src,
            dst,
            src_path,
            dst_path,
            rel: Some(rel),
            dev: at.dev.or(Some(st.dev)),
        };
        self.ancestors.push((st.dev, st.ino));
        if let Err(e) = self.list(&here) {
            self.error(Error::src(&here.src_path, Op::ReadDirectory, &e));
        }
        self.ancestors.pop();
    }

    /// Walks the entries of `at`, in name order, through the filter.
    fn list(&mut self, at: &At) -> io::Result<()> {
        let mut entries = sys::read_dir(at.src.as_fd())?;
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        let follow = self.opts.follow == Follow::Always;
        let rel = at.rel.as_deref().unwrap_or(Path::new(""));
        for e in entries {
            let filter = &self.opts.filter;
            if !filter.is_empty() {
                let is_dir = || {
                    sys::stat_at(at.src.as_fd(), &e.name, follow)
                        .is_ok_and(|st| st.kind() == FileKind::Dir)
                };
                if filter.excludes(&rel.join(sys::os_str(&e.name)), is_dir) {
                    continue;
                }
            }
            self.entry(at, &e.name, &e.name, follow);
        }
        Ok(())
    }
}
