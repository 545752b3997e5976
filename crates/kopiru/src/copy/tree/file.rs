//! One regular file: its data through the method ladder, its metadata, and
//! its placement under its final name (through [`crate::copy::place`]).

use super::node::{DirNode, Existing, SourceFile};
use super::worker::Worker;
use crate::copy::data;
use crate::copy::meta::{self, Target};
use crate::error::Op;
use crate::events::{EntryKind, FileDone, Method};
use crate::options::BasisKind;
use crate::paths::join_name;
use crate::sys::{self, AsFd, Fd, FileKind, Name, NameBuf, Stat};
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
        if f.write_into {
            return self.write_in_place(f, None);
        }
        let mut old = None;
        if !dir.fresh {
            match self.existing(dir, f.dst_name, (f.st, Some(f.src)), true) {
                // A file kept as a complete copy takes the source's other
                // names as links; one left alone by -n or -u is not the
                // source's data, so they are copied on their own (cp's).
                Existing::Keep => {
                    let opts = self.sh.opts;
                    let copy_of_source = !(opts.no_clobber || opts.update);
                    return copy_of_source.then(|| f.dst_name.to_owned());
                }
                Existing::Refused => return None,
                Existing::Absent => {}
                Existing::Replace(d) => old = Some(d),
            }
        }
        if let Some(kind) = self.sh.opts.link_files {
            return self.link_to_source(f, kind, old);
        }
        let in_place = old.filter(|d| d.kind() == FileKind::File);
        if let (true, Some(d)) = (
            self.sh.opts.inplace || self.sh.opts.attributes_only,
            in_place,
        ) {
            return self.write_in_place(f, Some(d));
        }
        // --attributes-only never replaces another kind of entry by an
        // empty file (cp: "File exists").
        if let (true, Some(_)) = (self.sh.opts.attributes_only, old) {
            let e = io::Error::from(io::ErrorKind::AlreadyExists);
            self.dst_error(dir, f.dst_name, Op::Create, &e);
            return None;
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
        let (place, dest) = (&self.sh.place, dir.dest());
        let (tmp, start) = match partial.and_then(|p| self.open_partial(f, p)) {
            Some((p, fd, len)) => (p, Start::Continue(fd, len)),
            None => match basis {
                Some(Basis::Clone(b)) => (place.write_name(&dest, f.dst_name), Start::CloneOf(b)),
                _ if created.is_none() && old.is_none() && place.writes_anonymous(&dest) => {
                    (place.write_name(&dest, f.dst_name), Start::Anonymous)
                }
                _ => (place.write_name(&dest, f.dst_name), Start::New(created)),
            },
        };
        let cloned = match &start {
            Start::New(None) => self.clone_new(dir, f.src, &tmp),
            _ => None,
        };
        let written = match cloned {
            Some(Ok(())) => Written {
                moved: data::Moved {
                    method: Method::Clone,
                    bytes: f.st.size,
                    why_not: None,
                    source_hash: None,
                },
                hash: None,
                named: false,
            },
            Some(Err(e)) => {
                self.dst_error(dir, f.dst_name, Op::Clone, &e);
                return None;
            }
            None => {
                let replaced = self.replaced(dir, f.dst_name, old.as_ref());
                self.write_new(f, &tmp, start, replaced)?
            }
        };
        let (place, dest, sh) = (&self.sh.place, dir.dest(), self.sh);
        let placed = match written.named {
            true => place.placed(&dest, f.dst_name, sh)?,
            false => place.place(&dest, tmp, f.dst_name, sh)?,
        };
        let (moved, hashed) = (written.moved, written.hash);
        if let Some(h) = hashed {
            self.sh.source_hashes.lock().expect("hashes lock").push(h);
        }
        self.file_done(f, moved.bytes, moved.method, moved.why_not.as_deref());
        self.changed(dir, (f.name, f.dst_name), EntryKind::File, old, f.st, None);
        Some(placed)
    }

    /// Writes `f`'s data into what is at its destination name, as cp
    /// writes: an existing FIFO or device named as DEST (`old` `None`;
    /// never replaced, never backed up, its metadata left alone), or with
    /// `--inplace` the regular file `old`, emptied first (its other hard
    /// links see the new data; its mode and owner stay unless kept from
    /// the source). Not atomic: a reader, or a crash, can see it part-way.
    /// `None`: nothing else may link to it (reported, kept or done).
    fn write_in_place(&mut self, f: &SourceFile, old: Option<Stat>) -> Option<NameBuf> {
        let (dir, opts) = (f.dir, self.sh.opts);
        let dst = dir.dst.as_fd();
        let d = match old {
            Some(d) => d,
            None => {
                let d = match sys::stat_at(dst, f.dst_name, true) {
                    Ok(d) => d,
                    Err(e) => {
                        self.dst_error(dir, f.dst_name, Op::Stat, &e);
                        return None;
                    }
                };
                let path = || join_name(&dir.dst_path, f.dst_name);
                if opts.no_clobber
                    || (opts.update && d.mtime >= f.st.mtime)
                    || (opts.interactive && !self.sh.reporter.confirm_replace(&path()))
                {
                    self.sh.kept(&dir.dst_path, f.dst_name);
                    return None;
                }
                d
            }
        };
        let regular = d.kind() == FileKind::File;
        // --attributes-only: an existing file keeps its data.
        let data = !opts.attributes_only;
        let fd = match sys::open_write_existing(dst, f.dst_name, !regular, regular && data) {
            Ok(fd) => fd,
            Err(e) => {
                self.dst_error(dir, f.dst_name, Op::Open, &e);
                return None;
            }
        };
        let moved = match (regular, data) {
            (true, false) => Ok(attributes_only()),
            (true, true) => {
                let pair = self.pair_caps(f.st.dev, dir.dst_dev);
                let (src, buf, reporter) = (f.src.as_fd(), &mut self.buf, self.sh.reporter);
                data::copy_data(src, f.st, fd.as_fd(), &pair, opts, buf, reporter)
            }
            (false, _) => {
                let seekable = d.kind() == FileKind::BlockDevice;
                let (src, buf, reporter) = (f.src.as_fd(), &mut self.buf, self.sh.reporter);
                data::copy_into(src, fd.as_fd(), seekable, opts, buf, reporter)
            }
        };
        let moved = match moved {
            Ok(m) => m,
            Err((op, e)) => {
                if opts.cancel.is_cancelled() {
                } else if matches!(op, Op::Read | Op::Seek) {
                    self.src_error(dir, f.name, op, &e);
                } else {
                    self.dst_error(dir, f.dst_name, op, &e);
                }
                return None;
            }
        };
        if regular {
            let now = meta::Now {
                perm: d.perm(),
                owner: Some((d.uid, d.gid)),
            };
            let (preserve, umask) = (&opts.preserve, self.sh.umask);
            let target = Target::Fd(fd.as_fd());
            let w = meta::apply(
                target,
                (Some(f.src.as_fd()), f.st),
                meta::Before::Same,
                now,
                preserve,
                umask,
            );
            if !w.is_empty() {
                self.warnings(&join_name(&dir.dst_path, f.dst_name), w);
            }
        }
        // A device's data is made durable by flushing it, not its
        // filesystem; a FIFO or a terminal has nothing to flush.
        let synced = match (regular, d.kind(), opts.sync) {
            (_, _, crate::options::SyncMode::None) => Ok(()),
            (true, _, _) => self.sh.place.sync_written(fd.as_fd(), moved.method),
            (false, FileKind::BlockDevice, _) => sys::sync_file(fd.as_fd()),
            (false, _, _) => Ok(()),
        };
        if let Err(e) = synced {
            self.dst_error(dir, f.dst_name, Op::Sync, &e);
            return None;
        }
        drop(fd);
        self.file_done(f, moved.bytes, moved.method, moved.why_not.as_deref());
        self.changed(
            dir,
            (f.name, f.dst_name),
            EntryKind::File,
            Some(d),
            f.st,
            None,
        );
        regular.then(|| f.dst_name.to_owned())
    }

    /// cp's `-l` and `-s`: `f` becomes a hard link to its source, or a
    /// symbolic link naming it, put in place as a copy would be (`old`:
    /// what it replaces). `None`: failed, reported.
    fn link_to_source(
        &mut self,
        f: &SourceFile,
        kind: crate::options::LinkFiles,
        old: Option<Stat>,
    ) -> Option<NameBuf> {
        let dir = f.dir;
        let op = match kind {
            crate::options::LinkFiles::Hard => Op::Link,
            crate::options::LinkFiles::Symbolic => Op::Symlink,
        };
        // cp keeps an existing file unless -f or --remove-destination
        // (or its backup was made, or -i was answered yes): a link over it
        // would leave nothing of its data.
        let opts = self.sh.opts;
        let may_replace =
            opts.force || opts.remove_destination || opts.backup.is_some() || opts.interactive;
        if old.is_some() && !may_replace {
            let exists =
                io::Error::new(io::ErrorKind::AlreadyExists, "File exists (-f replaces it)");
            self.dst_error(dir, f.dst_name, op, &exists);
            return None;
        }
        let (place, dest) = (&self.sh.place, dir.dest());
        let tmp = place.write_name(&dest, f.dst_name);
        let dst = dir.dst.as_fd();
        let (made, why) = match kind {
            crate::options::LinkFiles::Hard => (
                // Through the open source: a followed symlink's target.
                sys::link_anonymous(f.src.as_fd(), dst, &tmp)
                    .or_else(|_| sys::link_at(dir.src.as_fd(), f.name, dst, &tmp)),
                "hard link to the source (-l)",
            ),
            crate::options::LinkFiles::Symbolic => (
                self.source_target(dir, f.name)
                    .and_then(|target| sys::symlink_at(&target, dst, &tmp)),
                "symbolic link to the source (-s)",
            ),
        };
        if let Err(e) = made {
            self.dst_error(dir, f.dst_name, op, &e);
            return None;
        }
        let placed = self.sh.place.place(&dir.dest(), tmp, f.dst_name, self.sh)?;
        self.file_done(f, 0, Method::Link, Some(why));
        self.changed(dir, (f.name, f.dst_name), EntryKind::File, old, f.st, None);
        Some(placed)
    }

    /// What a symbolic link to the source entry `name` in `dir` holds
    /// (`-s`): its path as given. A relative one names the right entry only
    /// from the current directory, so it is refused elsewhere (as cp does).
    pub(crate) fn source_target(
        &self,
        dir: &DirNode,
        name: &Name,
    ) -> io::Result<std::ffi::CString> {
        let path = join_name(&dir.src_path, name);
        if path.is_relative() && dir.dst_path != std::path::Path::new(".") {
            return Err(io::Error::other(
                "can make relative symbolic links only in the current directory \
                 (name the source by its absolute path)",
            ));
        }
        sys::cstring(path.as_os_str())
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
        // The mode the copy gets: the source's, or cp's (less the umask).
        let mode = match p.mode {
            true => st.perm(),
            false => st.perm() & 0o777 & !self.sh.umask,
        };
        let kept_differ =
            link && (b.perm() != mode || (p.owner && (b.uid, b.gid) != (st.uid, st.gid)));
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
        let (place, dest) = (&self.sh.place, dir.dest());
        let tmp = place.write_name(&dest, f.dst_name);
        sys::link_at(bdir.as_fd(), bname, dir.dst.as_fd(), &tmp).ok()?;
        let Some(placed) = place.place(&dest, tmp, f.dst_name, self.sh) else {
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
    /// `--sync` asks. `None`: failed (reported) or cancelled, and `tmp`
    /// removed (under `--partial`, the data written so far is kept).
    /// `start`: how the data begins (see [`Start`]).
    pub(crate) fn write_new(
        &mut self,
        f: &SourceFile,
        tmp: &Name,
        start: Start,
        replaced: Option<Stat>,
    ) -> Option<Written> {
        let mut new = self.create_new(f, tmp, start, replaced)?;
        let moved = match self.fill(f, &mut new) {
            Ok(m) => m,
            Err((op, e)) => {
                drop(new);
                self.abandon(f, tmp, (op, &e), true);
                return None;
            }
        };
        self.finish_new(f, tmp, new, moved)
    }

    /// Creates the new file: without a name ([`Start::Anonymous`]) where
    /// placement allows, else under `tmp` (on Windows, by `CopyFile2` with
    /// its data). `None`: failed, reported.
    fn create_new(
        &mut self,
        f: &SourceFile,
        tmp: &Name,
        start: Start,
        replaced: Option<Stat>,
    ) -> Option<NewFile> {
        let (dir, st) = (f.dir, f.st);
        let opts = self.sh.opts;
        let perm = self.create_perm(st, replaced.as_ref());
        let mut new = NewFile {
            replaced,
            fd: None,
            copied: None,
            from: 0,
            basis: None,
            anonymous: false,
            why: None,
            pair: self.pair_caps(st.dev, dir.dst_dev),
        };
        match start {
            Start::New(Some(created)) => match created {
                Ok(fd) => new.fd = Some(fd),
                Err(e) => {
                    self.dst_error(dir, f.dst_name, Op::Create, &e);
                    return None;
                }
            },
            Start::New(None) if sys::COPY_CREATES_FILE => {
                let (src, reporter) = (f.src.as_fd(), self.sh.reporter);
                let (pair, why) = (&new.pair, &mut new.why);
                let dst = dir.dst.as_fd();
                match data::copy_creating(src, dst, tmp, perm, pair, opts, reporter, why) {
                    Some(Ok((fd, moved))) => {
                        new.fd = Some(fd);
                        new.copied = Some(moved);
                    }
                    // CopyFile2 failed or was cancelled (which is no
                    // failure), leaving nothing under the temporary name.
                    Some(Err((op, e))) => {
                        if op == Op::Create || !opts.cancel.is_cancelled() {
                            self.dst_error(dir, f.dst_name, op, &e);
                        }
                        return None;
                    }
                    None => {}
                }
            }
            Start::New(None) => {}
            Start::Anonymous => {
                let timer = self.sh.latency.time_create(dir.dst.as_fd(), dir.dst_dev);
                new.fd = self.sh.place.create_anonymous(&dir.dest(), perm);
                new.anonymous = new.fd.is_some();
                if let (Some(t), true) = (timer, new.anonymous) {
                    self.sh.latency.created(t, dir.dst.as_fd());
                }
            }
            Start::Continue(fd, len) => (new.fd, new.from) = (Some(fd), len),
            Start::CloneOf(b) => new.basis = Some(b),
        }
        if new.fd.is_none() {
            let timer = self.sh.latency.time_create(dir.dst.as_fd(), dir.dst_dev);
            match sys::create_new(dir.dst.as_fd(), tmp, perm) {
                Ok(fd) => {
                    if let Some(t) = timer {
                        self.sh.latency.created(t, dir.dst.as_fd());
                    }
                    new.fd = Some(fd);
                }
                Err(e) => {
                    self.dst_error(dir, f.dst_name, Op::Create, &e);
                    return None;
                }
            }
        }
        Some(new)
    }

    /// The new file's data: already copied (`CopyFile2`), cloned from a
    /// basis file, or through the method ladder (from where a partial copy
    /// ends).
    fn fill(&mut self, f: &SourceFile, new: &mut NewFile) -> Result<data::Moved, (Op, io::Error)> {
        let (st, opts) = (f.st, self.sh.opts);
        let dst = new.fd.as_ref().expect("created").as_fd();
        let cloned = new
            .basis
            .as_ref()
            .and_then(|b| sys::clone_fd(b.as_fd(), dst).ok());
        let reporter = self.sh.reporter;
        let mut moved = match (new.copied.take(), cloned, new.from) {
            _ if opts.attributes_only => Ok(attributes_only()),
            (Some(moved), _, _) => Ok(moved),
            (None, Some(()), _) => {
                reporter.bytes(st.size);
                Ok(data::Moved {
                    method: Method::Clone,
                    bytes: st.size,
                    why_not: Some("cloned from the unchanged file in --clone-dest".into()),
                    source_hash: None,
                })
            }
            (None, None, 0) => {
                let src = f.src.as_fd();
                data::copy_data(src, st, dst, &new.pair, opts, &mut self.buf, reporter)
            }
            (None, None, from) => {
                let (src, buf) = (f.src.as_fd(), &mut self.buf);
                data::continue_data(src, st, dst, from, &new.pair, opts, buf, reporter)
            }
        }?;
        if let Some(w) = new.why.take() {
            // Why CopyFile2 was not used, before the ladder's own.
            moved.why_not = Some(data::join_why(
                Some(w),
                moved.why_not.as_deref().unwrap_or(""),
            ));
        }
        Ok(moved)
    }

    /// The new file's metadata, its flush as `--sync` asks, its name (a
    /// nameless file's final one at once), and its close.
    fn finish_new(
        &mut self,
        f: &SourceFile,
        tmp: &Name,
        new: NewFile,
        moved: data::Moved,
    ) -> Option<Written> {
        let (dir, st) = (f.dir, f.st);
        let dst = new.fd.expect("created");
        // One fstat of the new file serves both the hash's key and, with
        // -a, the owner new entries here get.
        let dst_stat = moved.source_hash.map(|_| sys::fstat(dst.as_fd()));
        let hash = match (moved.source_hash, &dst_stat) {
            (Some(hash), Some(Ok(d))) => Some(SourceHash {
                dev: d.dev,
                ino: d.ino,
                hash,
            }),
            _ => None,
        };
        let owner_now = self.new_owner(dir, || dst_stat.unwrap_or_else(|| sys::fstat(dst.as_fd())));
        // Made in a directory with a default ACL, its bits are that ACL's:
        // a kept mode is set whatever they are.
        let unknown = self.sh.opts.preserve.mode && dir.inherits_acl();
        let now = meta::Now {
            perm: match unknown {
                true => u32::MAX,
                false => self.create_perm(st, new.replaced.as_ref()) & !self.sh.umask,
            },
            owner: owner_now,
        };
        // The file it replaces is still under its name: its extended
        // attributes stay with the name, unless the source's are kept.
        let old_fd = match (&new.replaced, self.sh.opts.preserve.xattrs) {
            (Some(_), false) => {
                sys::open_source(dir.dst.as_fd(), f.dst_name, false, false, false).ok()
            }
            _ => None,
        };
        let before = match &new.replaced {
            Some(old) => meta::Before::Replaced {
                old,
                fd: old_fd.as_ref().map(|fd| fd.as_fd()),
            },
            None => meta::Before::Nothing,
        };
        let warnings = meta::apply(
            Target::Fd(dst.as_fd()),
            (Some(f.src.as_fd()), st),
            before,
            now,
            &self.sh.opts.preserve,
            self.sh.umask,
        );
        drop(old_fd);
        let place = &self.sh.place;
        if let Err(e) = place.sync_written(dst.as_fd(), moved.method) {
            drop(dst);
            self.abandon(f, tmp, (Op::Sync, &e), false);
            return None;
        }
        // Whole now: a nameless file is named.
        let named = match new.anonymous {
            false => false,
            true => match place.name_anonymous(&dir.dest(), dst.as_fd(), (tmp, f.dst_name)) {
                Ok(named) => named,
                Err(e) => {
                    drop(dst);
                    self.abandon(f, tmp, (Op::Link, &e), false);
                    return None;
                }
            },
        };
        if let Err(e) = self.sh.closer.close(dst) {
            let name = if named { f.dst_name } else { tmp };
            let _ = sys::unlink_at(dir.dst.as_fd(), name, false);
            self.abandon(f, tmp, (Op::Close, &e), false);
            return None;
        }
        if !warnings.is_empty() {
            self.warnings(&join_name(&dir.dst_path, f.dst_name), warnings);
        }
        Some(Written { moved, hash, named })
    }

    /// A new file failed (or was cancelled): what `tmp` holds is removed,
    /// or kept as a partial copy when data was written (`--partial`), and
    /// the failure is reported on its side, unless cancelled.
    fn abandon(&self, f: &SourceFile, tmp: &Name, (op, e): (Op, &io::Error), data_written: bool) {
        let dir = f.dir;
        let kept = data_written && self.sh.place.keep_partial(&dir.dest(), tmp, f.dst_name);
        if !kept {
            let _ = sys::unlink_at(dir.dst.as_fd(), tmp, false);
        }
        if self.sh.opts.cancel.is_cancelled() {
            // Stopped, not failed: nothing to report.
        } else if matches!(op, Op::Read | Op::Seek) {
            self.src_error(dir, f.name, op, e);
        } else {
            self.dst_error(dir, f.dst_name, op, e);
        }
    }

    /// The file a copy replaces, when it takes that file's metadata: a
    /// regular file that cp would write into. Not with `--backup` (the old
    /// file keeps its own under its backup name, and cp makes a new one),
    /// nor `--remove-destination` (a new file from the source alone).
    /// Nor one we may not write (cp -f then makes a new one).
    pub(crate) fn replaced(&self, dir: &DirNode, name: &Name, old: Option<&Stat>) -> Option<Stat> {
        let opts = self.sh.opts;
        old.filter(|d| {
            d.kind() == FileKind::File
                && opts.backup.is_none()
                && !opts.remove_destination
                && sys::writable_at(dir.dst.as_fd(), name)
        })
        .copied()
    }

    /// The permission bits a new file is created with
    /// ([`meta::create_perm`]): it gets an owner other than ours later when
    /// the owner is kept and is not us. (Decided from the source alone, so
    /// that the same bits are known when its metadata is applied.)
    pub(crate) fn create_perm(&self, st: &Stat, replaced: Option<&Stat>) -> u32 {
        let preserve = &self.sh.opts.preserve;
        let owner_changes = preserve.owner && st.uid != self.sh.euid;
        let before = match replaced {
            Some(old) => meta::Before::Replaced { old, fd: None },
            None => meta::Before::Nothing,
        };
        meta::create_perm(st, before, preserve, owner_changes)
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
        if matches!(method, Method::Clone | Method::Offload)
            && self.sh.latency.server_side(f.dir.dst_dev)
        {
            c.server_side.fetch_add(1, Ordering::Relaxed);
        }
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
        let made = sys::clone_new(src.as_fd(), dir.dst.as_fd(), tmp)
            .and_then(|()| self.sh.place.sync_made(dir.dst.as_fd(), tmp));
        match made {
            Ok(()) => Some(Ok(())),
            Err(e) if opts.method == MethodChoice::Clone => Some(Err(e)),
            Err(_) => None,
        }
    }
}

/// What `--attributes-only` moves of a file's data: nothing.
fn attributes_only() -> data::Moved {
    data::Moved {
        method: Method::Stream,
        bytes: 0,
        why_not: Some("--attributes-only: no data copied".into()),
        source_hash: None,
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

/// A new file, created and open, before its data ([`Worker::create_new`]).
struct NewFile {
    /// The regular file it replaces, whose mode, owner and extended
    /// attributes it takes where the source's are not kept (cp's write
    /// into an existing file keeps them).
    replaced: Option<Stat>,
    /// `None` only until it is created.
    fd: Option<Fd>,
    /// Its data, where creating it copied that too (Windows' `CopyFile2`).
    copied: Option<data::Moved>,
    /// A partial copy continued: its data matches the source's up to here.
    from: u64,
    /// To be cloned from this unchanged basis file (`--clone-dest`).
    basis: Option<Fd>,
    /// Made without a name, named once whole.
    anonymous: bool,
    /// Why `CopyFile2` was not used.
    why: Option<std::sync::Arc<str>>,
    pair: std::sync::Arc<data::PairCaps>,
}

/// A new file written whole ([`Worker::write_new`]).
pub(crate) struct Written {
    pub(crate) moved: data::Moved,
    /// The source's hash as it was read (`--verify`), keyed by the new
    /// file's device and inode.
    pub(crate) hash: Option<SourceHash>,
    /// It has its final name already (made without a name, then named);
    /// else it is under its temporary name.
    pub(crate) named: bool,
}

/// An unchanged file of `--link-dest` or `--clone-dest` ([`Worker::unchanged_basis`]).
enum Basis {
    Link,
    Clone(Fd),
}
