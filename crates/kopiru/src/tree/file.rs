//! One regular file: its data through the method ladder, its metadata, and
//! its placement under its final name (through [`crate::durable`]).

use super::node::*;
use super::worker::Worker;
use super::*;
use crate::data::{self};
use crate::error::Op;
use crate::events::{EntryKind, FileDone, Method};
use crate::meta::{self, Target};
use crate::options::{BasisKind, SyncMode};
use crate::sys::AsFd;
use crate::sys::{self, Fd, FileKind};
use crate::sys::{Name, NameBuf};
use crate::verify::SourceHash;
use std::io;
use std::sync::atomic::Ordering;

impl<'scope, 'env, 'a> Worker<'scope, 'env, 'a> {
    /// Copies one regular file's data and metadata, then gives it its final
    /// name ([`Worker::place`]). Returns the name the finished data has now
    /// (hard links are made to it); `None` if it failed (reported, nothing
    /// partial left), was refused, kept or cancelled. `created`: the new
    /// file, created ahead under `dst_name` in a staged tree this run made.
    pub(crate) fn copy_file(
        &mut self,
        f: &SourceFile,
        created: Option<io::Result<Fd>>,
    ) -> Option<NameBuf> {
        let dir = f.dir;
        if self.sh.opts.cancel.is_cancelled() {
            if let Some(Ok(_)) = created {
                let _ = sys::unlink_at(dir.dst.as_fd(), f.dst_name, false);
            }
            return None;
        }
        let mut old = None;
        if !dir.fresh {
            match self.existing(dir, f.dst_name, (f.st, Some(f.src)), true) {
                Existing::Keep => return Some(f.dst_name.to_owned()),
                Existing::Refused => return None,
                Existing::Absent => {}
                Existing::Replace(d) => old = Some(d),
            }
        }
        let basis = match created {
            None => self.unchanged_basis(f),
            Some(_) => None,
        };
        if let Some(Basis::Link) = basis {
            if let Some(placed) = self.link_basis(f, old) {
                return placed;
            }
        }
        // A partial copy of this file, left by an interrupted run, is
        // continued after the part that matches the source.
        let partial = match created {
            None if !dir.fresh => dir.take_partial(f.dst_name),
            _ => None,
        };
        let (tmp, start) = match partial.and_then(|p| self.open_partial(f, p)) {
            Some((p, fd, len)) => (p, Start::Continue(fd, len)),
            None => match basis {
                Some(Basis::Clone(b)) => (self.write_name(dir, f.dst_name), Start::CloneOf(b)),
                _ if created.is_none() && old.is_none() && self.may_write_anonymous(dir) => {
                    (self.write_name(dir, f.dst_name), Start::Anonymous)
                }
                _ => (self.write_name(dir, f.dst_name), Start::New(created)),
            },
        };
        let cloned = match &start {
            Start::New(None) => self.clone_new(dir, f.src, &tmp),
            _ => None,
        };
        let (moved, hashed, named) = match cloned {
            Some(Ok(())) => {
                let moved = data::Moved {
                    method: Method::Clone,
                    bytes: f.st.size,
                    why_not: None,
                    source_hash: None,
                };
                (moved, None, false)
            }
            Some(Err(e)) => {
                self.dst_error(dir, f.dst_name, Op::Clone, &e);
                return None;
            }
            None => self.write_new(f, &tmp, start)?,
        };
        let placed = match named {
            true => self.placed_anonymous(dir, f.dst_name)?,
            false => self.place(dir, tmp, f.dst_name)?,
        };
        if let Some(h) = hashed {
            self.sh.source_hashes.lock().expect("hashes lock").push(h);
        }
        self.file_done(f, moved.bytes, moved.method, moved.why_not.as_deref());
        self.changed(dir, (f.name, f.dst_name), EntryKind::File, old, f.st, None);
        Some(placed)
    }

    /// The file that mirrors `f` in the basis directory (`--link-dest`,
    /// `--clone-dest`), when it is unchanged against the source: the same
    /// size and modification time, or with `--checksum` the same content.
    /// A hard link shares its inode's metadata, so for `--link-dest` the
    /// kept pieces (mode, owner, and times even with `--checksum`) must
    /// match too.
    fn unchanged_basis(&self, f: &SourceFile) -> Option<Basis> {
        let opts = self.sh.opts;
        let kind = opts.basis.as_ref()?.kind;
        let (bdir, bname) = f.dir.basis_of(f.dst_name)?;
        let b = sys::stat_at(bdir.as_fd(), bname, false).ok()?;
        let st = f.st;
        if b.kind() != FileKind::File || b.size != st.size {
            return None;
        }
        let link = kind == BasisKind::Link;
        let p = &opts.preserve;
        let times_differ = b.mtime != st.mtime && (!opts.checksum || (link && p.times));
        let kept_differ = link
            && ((p.mode && b.perm() != st.perm())
                || (p.owner && (b.uid, b.gid) != (st.uid, st.gid)));
        if times_differ || kept_differ {
            return None;
        }
        let open = || sys::open_source(bdir.as_fd(), bname, false, false, false).ok();
        let fd = match (opts.checksum, link) {
            (false, true) => None,
            _ => Some(open()?),
        };
        if let (true, Some(fd)) = (opts.checksum, &fd) {
            if !sys::same_data(f.src.as_fd(), fd.as_fd(), st.size) {
                return None;
            }
        }
        match fd {
            Some(fd) if !link => Some(Basis::Clone(fd)),
            _ => Some(Basis::Link),
        }
    }

    /// `--link-dest`: makes the copy a hard link to the unchanged basis
    /// file. `None`: the link could not be made (another filesystem, too
    /// many links), so the file is copied instead.
    fn link_basis(&mut self, f: &SourceFile, old: Option<sys::Stat>) -> Option<Option<NameBuf>> {
        let dir = f.dir;
        let (bdir, bname) = dir.basis_of(f.dst_name)?;
        let tmp = self.write_name(dir, f.dst_name);
        sys::link_at(bdir.as_fd(), bname, dir.dst.as_fd(), &tmp).ok()?;
        let Some(placed) = self.place(dir, tmp, f.dst_name) else {
            return Some(None);
        };
        self.sh.reporter.bytes(f.st.size);
        let why = Some("hard link to the unchanged file in --link-dest");
        self.file_done(f, f.st.size, Method::Link, why);
        self.changed(dir, (f.name, f.dst_name), EntryKind::File, old, f.st, None);
        Some(Some(placed))
    }

    /// `--partial`/`--resume`: opens the partial copy `part` of `f` and
    /// finds how much of it is the source's. `None`: it cannot be used
    /// (removed; the file is copied whole).
    fn open_partial(&mut self, f: &SourceFile, part: NameBuf) -> Option<(NameBuf, Fd, u64)> {
        let dst = f.dir.dst.as_fd();
        let usable = self.sh.opts.method != crate::options::MethodChoice::Clone;
        let opened = usable
            .then(|| sys::open_existing_rw(dst, &part).ok())
            .flatten();
        let prefix = opened.and_then(|fd| {
            let size = sys::fstat(fd.as_fd()).ok()?.size;
            let cancel = &self.sh.opts.cancel;
            let src = f.src.as_fd();
            let len =
                data::matching_prefix(src, f.st.size, fd.as_fd(), size, &mut self.buf, cancel);
            Some((fd, len.ok()?))
        });
        match prefix {
            Some((fd, len)) if len > 0 => Some((part, fd, len)),
            _ => {
                let _ = sys::unlink_at(dst, &part, false);
                None
            }
        }
    }

    /// Creates `tmp` (a new name) and fills it with the source's data and
    /// metadata, times last (which `--resume` relies on), flushed as
    /// `--sync` asks ([`Worker::sync_written`]). Also returns the source's
    /// hash, when it was hashed, keyed by the new file's device and inode.
    /// `None`: failed (reported) or cancelled, and `tmp` removed (under
    /// `--partial`, the data written so far is kept: [`Worker::keep_partial`]).
    /// `start`: how the data begins (see [`Start`]). The last value is
    /// true when the file was made without a name ([`Start::Anonymous`])
    /// and has its final name already; else it is under `tmp`.
    pub(crate) fn write_new(
        &mut self,
        f: &SourceFile,
        tmp: &Name,
        start: Start,
    ) -> Option<(data::Moved, Option<SourceHash>, bool)> {
        let (dir, st) = (f.dir, f.st);
        let opts = self.sh.opts;
        let pair = self.pair_caps(st.dev, dir.dst_dev);
        let perm = st.perm() & 0o777;
        let created_perm = perm & !self.sh.umask;
        // Windows' CopyFile2 creates the file and copies its data at once.
        let mut why = None;
        let copied = match &start {
            Start::New(None) if sys::COPY_CREATES_FILE => data::copy_creating(
                f.src.as_fd(),
                dir.dst.as_fd(),
                tmp,
                perm,
                &pair,
                opts,
                self.sh.reporter,
                &mut why,
            ),
            _ => None,
        };
        let mut anonymous = matches!(start, Start::Anonymous);
        let (created, from, basis) = match start {
            Start::New(c) => (c, 0, None),
            Start::Anonymous => match sys::create_anonymous(dir.dst.as_fd(), perm) {
                Ok(fd) => (Some(Ok(fd)), 0, None),
                Err(e) => {
                    // No O_TMPFILE on this filesystem (EOPNOTSUPP; EISDIR
                    // before Linux 3.11): temporary names from now on. Any
                    // other error is the directory's, met again (and
                    // reported) when the file is made under one.
                    if matches!(
                        e.kind(),
                        io::ErrorKind::Unsupported | io::ErrorKind::IsADirectory
                    ) {
                        self.sh.anonymous.store(false, Ordering::Relaxed);
                    }
                    anonymous = false;
                    (None, 0, None)
                }
            },
            Start::Continue(fd, len) => (Some(Ok(fd)), len, None),
            Start::CloneOf(b) => (None, 0, Some(b)),
        };
        let (created, copied) = match copied {
            Some(Ok((fd, moved))) => (Ok(fd), Some(Ok(moved))),
            // CopyFile2 failed or was cancelled, leaving nothing under the
            // temporary name.
            Some(Err(e)) => (Err(e), None),
            None => (
                created
                    .unwrap_or_else(|| sys::create_new(dir.dst.as_fd(), tmp, perm))
                    .map_err(|e| (Op::Create, e)),
                None,
            ),
        };
        let dst = match created {
            Ok(fd) => fd,
            Err((op, e)) => {
                // A cancelled CopyFile2 stopped; it did not fail.
                if op == Op::Create || !opts.cancel.is_cancelled() {
                    self.dst_error(dir, f.dst_name, op, &e);
                }
                return None;
            }
        };
        let fail = |w: &Self, op: Op, e: &io::Error, data_written: bool| {
            let kept = data_written && opts.partial && w.keep_partial(dir, tmp, f.dst_name);
            if !kept {
                let _ = sys::unlink_at(dir.dst.as_fd(), tmp, false);
            }
            if opts.cancel.is_cancelled() {
                // Stopped, not failed: nothing to report.
            } else if matches!(op, Op::Read | Op::Seek) {
                w.src_error(dir, f.name, op, e);
            } else {
                w.dst_error(dir, f.dst_name, op, e);
            }
        };
        let cloned = basis.and_then(|b| sys::clone_fd(b.as_fd(), dst.as_fd()).ok());
        let moved = match (copied, cloned, from) {
            (Some(moved), _, _) => moved,
            (None, Some(()), _) => {
                self.sh.reporter.bytes(st.size);
                Ok(data::Moved {
                    method: Method::Clone,
                    bytes: st.size,
                    why_not: Some("cloned from the unchanged file in --clone-dest".into()),
                    source_hash: None,
                })
            }
            (None, None, 0) => data::copy_data(
                f.src.as_fd(),
                st,
                dst.as_fd(),
                &pair,
                opts,
                &mut self.buf,
                self.sh.reporter,
            ),
            (None, None, from) => data::continue_data(
                f.src.as_fd(),
                st,
                dst.as_fd(),
                from,
                &pair,
                opts,
                &mut self.buf,
                self.sh.reporter,
            ),
        };
        let moved = match moved {
            Ok(mut m) => {
                if let Some(w) = why {
                    // Why CopyFile2 was not used, before the ladder's own.
                    m.why_not = Some(data::join_why(Some(w), m.why_not.as_deref().unwrap_or("")));
                }
                m
            }
            Err((op, e)) => {
                drop(dst);
                fail(self, op, &e, true);
                return None;
            }
        };
        // One fstat of the new file serves both the hash's key and, with
        // -a, the owner new entries here get.
        let dst_stat = moved.source_hash.map(|_| sys::fstat(dst.as_fd()));
        let hashed = match (moved.source_hash, &dst_stat) {
            (Some(hash), Some(Ok(d))) => Some(SourceHash {
                dev: d.dev,
                ino: d.ino,
                hash,
            }),
            _ => None,
        };
        let owner_now = self.new_owner(dir, || dst_stat.unwrap_or_else(|| sys::fstat(dst.as_fd())));
        let warnings = meta::apply(
            Target::Fd(dst.as_fd()),
            Some(f.src.as_fd()),
            st,
            created_perm,
            owner_now,
            &opts.preserve,
            self.sh.umask,
        );
        if let Err(e) = self.sync_written(dst.as_fd(), moved.method) {
            drop(dst);
            fail(self, Op::Sync, &e, false);
            return None;
        }
        let mut named = false;
        if anonymous {
            // Whole now: named at once. The name taken meanwhile (another
            // process made it): under the temporary name instead, which
            // `place` then renames over it as for any file.
            let (d, fd) = (dir.dst.as_fd(), dst.as_fd());
            let linked = match sys::link_anonymous(fd, d, f.dst_name) {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    sys::link_anonymous(fd, d, tmp)
                }
                r => r.map(|()| named = true),
            };
            if let Err(e) = linked {
                // Naming nameless files does not work here: temporary
                // names for the files after this one.
                self.sh.anonymous.store(false, Ordering::Relaxed);
                drop(dst);
                fail(self, Op::Link, &e, false);
                return None;
            }
        }
        if let Err(e) = self.sh.closer.close(dst) {
            let name = if named { f.dst_name } else { tmp };
            let _ = sys::unlink_at(dir.dst.as_fd(), name, false);
            fail(self, Op::Close, &e, false);
            return None;
        }
        if !warnings.is_empty() {
            self.warnings(&join(&dir.dst_path, sys::os_str(f.dst_name)), warnings);
        }
        Some((moved, hashed, named))
    }

    /// Whether a new file in `dir` is made without a name and named once
    /// whole ([`Start::Anonymous`]): where the system can, in a visible
    /// directory whose names are placed as files finish (not deferred to
    /// the end, not a staged tree's, where files are written under their
    /// final names), and without `--partial` (which keeps a failed file's
    /// data under a name). One name made instead of a temporary one made
    /// and renamed: less work for the filesystem, and nothing left behind
    /// by a process that dies. Not under `--sync file`: Btrfs does not log
    /// an inode fsynced while it had no name, so the directory's fsync
    /// recorded the new name with size 0 (a dm-log-writes replay found such
    /// files empty after exit 0; issue 27). A named temporary, fsynced and
    /// renamed, holds there; an fsync after `linkat` held too but cost
    /// Btrfs 41 % (4,270 files: 32.1 s against 22.7 s), where named
    /// temporaries cost nothing measurable (21.5 s; ext4 4.7 s against
    /// 4.9 s).
    fn may_write_anonymous(&self, dir: &DirNode) -> bool {
        let named_as_written = dir.staged && dir.fresh;
        self.sh.anonymous.load(Ordering::Relaxed)
            && self.sh.opts.sync != SyncMode::File
            && !named_as_written
            && !self.defers(dir)
            && !self.sh.opts.partial
    }

    /// [`Worker::place`] for a file named as it was finished
    /// ([`Start::Anonymous`]): under `--sync file` its name is made
    /// durable with its directory.
    fn placed_anonymous(&self, dir: &DirNode, dst_name: &Name) -> Option<NameBuf> {
        if self.sh.opts.sync == SyncMode::File {
            if let Err(e) = sys::sync_file(dir.dst.as_fd()) {
                self.dst_error(dir, dst_name, Op::Sync, &e);
                return None;
            }
        }
        Some(dst_name.to_owned())
    }

    pub(crate) fn file_done(
        &self,
        f: &SourceFile,
        bytes: u64,
        method: Method,
        why_not: Option<&str>,
    ) {
        let c = &self.sh.counters;
        c.files.fetch_add(1, Ordering::Relaxed);
        c.bytes.fetch_add(bytes, Ordering::Relaxed);
        c.methods[method as usize].fetch_add(1, Ordering::Relaxed);
        self.sh.reporter.file_done(&FileDone {
            src_dir: &f.dir.src_path,
            dst_dir: &f.dir.dst_path,
            name: sys::os_str(f.name),
            dst_name: sys::os_str(f.dst_name),
            bytes,
            method,
            why_not,
        });
    }

    /// macOS: `fclonefileat` creates the copy, data and metadata, in one
    /// call. `None` means "not cloned, copy it the usual way".
    pub(crate) fn clone_new(&self, dir: &DirNode, src: &Fd, tmp: &Name) -> Option<io::Result<()>> {
        use crate::options::{MethodChoice, SparseMode};
        let opts = self.sh.opts;
        if !sys::CLONE_CREATES_FILE
            || !matches!(opts.method, MethodChoice::Auto | MethodChoice::Clone)
            || opts.sparse == SparseMode::Never
        {
            return None;
        }
        let made = sys::clone_new(src.as_fd(), dir.dst.as_fd(), tmp).and_then(|()| {
            if opts.sync != SyncMode::File {
                return Ok(());
            }
            let synced = sys::open_source(dir.dst.as_fd(), tmp, false, false, false)
                .and_then(|fd| sys::sync_file(fd.as_fd()));
            if synced.is_err() {
                let _ = sys::unlink_at(dir.dst.as_fd(), tmp, false);
            }
            synced
        });
        match made {
            Ok(()) => Some(Ok(())),
            Err(e) if opts.method == MethodChoice::Clone => Some(Err(e)),
            Err(_) => None,
        }
    }
}

/// How a new file's data begins ([`Worker::write_new`]).
pub(crate) enum Start {
    /// Empty: created now, or already (`Some`, by [`Ahead`] under its
    /// final name in a staged tree, with the source's permissions).
    New(Option<io::Result<Fd>>),
    /// Created now without a name (`O_TMPFILE`), named when whole.
    Anonymous,
    /// A partial copy (`--partial`), open, whose first bytes match.
    Continue(Fd, u64),
    /// Cloned from this unchanged basis file (`--clone-dest`), else copied.
    CloneOf(Fd),
}

/// An unchanged file of `--link-dest` or `--clone-dest` ([`Worker::unchanged_basis`]).
enum Basis {
    Link,
    Clone(Fd),
}
