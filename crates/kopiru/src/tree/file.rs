//! One regular file: its data through the method ladder, its metadata, and
//! its placement under its final name (through [`crate::durable`]).

use super::node::*;
use super::worker::Worker;
use super::*;
use crate::data::{self};
use crate::error::Op;
use crate::events::{EntryKind, FileDone, Method};
use crate::meta::{self, Target};
use crate::options::SyncMode;
use crate::sys::AsFd;
use crate::sys::{self, Fd};
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
        let tmp = self.write_name(dir, f.dst_name);
        let cloned = match created {
            Some(_) => None,
            None => self.clone_new(dir, f.src, &tmp),
        };
        let (moved, hashed) = match cloned {
            Some(Ok(())) => {
                let moved = data::Moved {
                    method: Method::Clone,
                    bytes: f.st.size,
                    why_not: None,
                    source_hash: None,
                };
                (moved, None)
            }
            Some(Err(e)) => {
                self.dst_error(dir, f.dst_name, Op::Clone, &e);
                return None;
            }
            None => self.write_new(f, &tmp, created)?,
        };
        let placed = self.place(dir, tmp, f.dst_name)?;
        if let Some(h) = hashed {
            self.sh.source_hashes.lock().expect("hashes lock").push(h);
        }
        self.file_done(f, moved.bytes, moved.method, moved.why_not.as_deref());
        self.changed(dir, f.dst_name, EntryKind::File, old, f.st, None);
        Some(placed)
    }

    /// Creates `tmp` (a new name) and fills it with the source's data and
    /// metadata, times last (which `--resume` relies on), flushed as
    /// `--sync` asks ([`Worker::sync_written`]). Also returns the source's
    /// hash, when it was hashed, keyed by the new file's device and inode.
    /// `None`: failed (reported) or cancelled, and `tmp` removed. `created`:
    /// `tmp` was already created, with the source's permissions.
    pub(crate) fn write_new(
        &mut self,
        f: &SourceFile,
        tmp: &Name,
        created: Option<io::Result<Fd>>,
    ) -> Option<(data::Moved, Option<SourceHash>)> {
        let (dir, st) = (f.dir, f.st);
        let opts = self.sh.opts;
        let pair = self.pair_caps(st.dev, dir.dst_dev);
        let perm = st.perm() & 0o777;
        let created_perm = perm & !self.sh.umask;
        let created = created.unwrap_or_else(|| sys::create_new(dir.dst.as_fd(), tmp, perm));
        let dst = match created {
            Ok(fd) => fd,
            Err(e) => {
                self.dst_error(dir, f.dst_name, Op::Create, &e);
                return None;
            }
        };
        let fail = |w: &Self, op: Op, e: &io::Error| {
            let _ = sys::unlink_at(dir.dst.as_fd(), tmp, false);
            if opts.cancel.is_cancelled() {
                // Stopped, not failed: nothing to report.
            } else if matches!(op, Op::Read | Op::Seek) {
                w.src_error(dir, f.name, op, e);
            } else {
                w.dst_error(dir, f.dst_name, op, e);
            }
        };
        let moved = data::copy_data(
            f.src.as_fd(),
            st,
            dst.as_fd(),
            &pair,
            opts,
            &mut self.buf,
            self.sh.reporter,
        );
        let moved = match moved {
            Ok(m) => m,
            Err((op, e)) => {
                drop(dst);
                fail(self, op, &e);
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
            fail(self, Op::Sync, &e);
            return None;
        }
        if let Err(e) = sys::close(dst) {
            fail(self, Op::Close, &e);
            return None;
        }
        if !warnings.is_empty() {
            self.warnings(&join(&dir.dst_path, sys::os_str(f.dst_name)), warnings);
        }
        Some((moved, hashed))
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
