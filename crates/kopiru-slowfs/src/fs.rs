//! The passthrough (Linux). Inodes are the backing files' inode numbers
//! (ROOT's is FUSE's 1), each remembered with its backing path; open files
//! are their backing descriptors.

use crate::backing::{cpath, errno, kind, last_errno, open_fd, set_times, time, with_fd};
use fuser::{
    FileAttr, FileType, Filesystem, KernelConfig, MountOption, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow,
};
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirEntryExt, FileExt, MetadataExt, PermissionsExt};
use std::os::unix::io::FromRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

type Job = Box<dyn FnOnce(&State) + Send>;

/// A directory's entries as opendir read them: inode, kind, name.
type Listing = Vec<(u64, FileType, OsString)>;

struct State {
    root_ino: u64,
    delay: Duration,
    ttl: Duration,
    paths: Mutex<HashMap<u64, PathBuf>>,
    dirs: Mutex<HashMap<u64, Listing>>,
    next_dir: AtomicU64,
}

struct SlowFs {
    state: Arc<State>,
    pool: mpsc::Sender<(bool, Job)>,
}

impl State {
    fn ino(&self, backing: u64) -> u64 {
        match backing == self.root_ino {
            true => fuser::FUSE_ROOT_ID,
            false => backing,
        }
    }

    fn path(&self, ino: u64) -> Result<PathBuf, i32> {
        let paths = self.paths.lock().expect("paths lock");
        paths.get(&ino).cloned().ok_or(libc::ESTALE)
    }

    fn child(&self, parent: u64, name: &OsStr) -> Result<PathBuf, i32> {
        Ok(self.path(parent)?.join(name))
    }

    /// The attributes of `path`, which is remembered under its inode.
    fn attr(&self, path: PathBuf) -> Result<FileAttr, i32> {
        let md = fs::symlink_metadata(&path).map_err(|e| errno(&e))?;
        let ino = self.ino(md.ino());
        self.paths.lock().expect("paths lock").insert(ino, path);
        Ok(FileAttr {
            ino,
            size: md.size(),
            blocks: md.blocks(),
            atime: time(md.atime(), md.atime_nsec()),
            mtime: time(md.mtime(), md.mtime_nsec()),
            ctime: time(md.ctime(), md.ctime_nsec()),
            crtime: UNIX_EPOCH,
            kind: kind(md.file_type()),
            perm: (md.mode() & 0o7777) as u16,
            nlink: md.nlink() as u32,
            uid: md.uid(),
            gid: md.gid(),
            rdev: md.rdev() as u32,
            blksize: md.blksize() as u32,
            flags: 0,
        })
    }

    fn entry(&self, path: PathBuf, reply: ReplyEntry) {
        match self.attr(path) {
            Ok(a) => reply.entry(&self.ttl, &a, 0),
            Err(e) => reply.error(e),
        }
    }

    /// After a rename: `to` is remembered, and so is every path below it.
    fn renamed(&self, from: &Path, to: &Path) {
        let mut paths = self.paths.lock().expect("paths lock");
        for p in paths.values_mut() {
            if let Ok(rest) = p.strip_prefix(from) {
                *p = match rest.as_os_str().is_empty() {
                    true => to.to_path_buf(),
                    false => to.join(rest),
                };
            }
        }
    }
}

impl SlowFs {
    /// Runs `f` on the pool, after the delay when `slow` (a round trip).
    fn run(&self, slow: bool, f: impl FnOnce(&State) + Send + 'static) {
        self.pool.send((slow, Box::new(f))).expect("pool alive");
    }
}

impl Filesystem for SlowFs {
    fn init(&mut self, _req: &Request<'_>, config: &mut KernelConfig) -> Result<(), i32> {
        let _ = config.set_max_write(1 << 20);
        let _ = config.set_max_background(256);
        // Lookups and listings in one directory run in parallel (creates,
        // renames and unlinks there still take the directory's lock in the
        // VFS, as on an NFS client).
        let _ = config.add_capabilities(fuser::consts::FUSE_PARALLEL_DIROPS);
        Ok(())
    }

    fn lookup(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        let name = name.to_owned();
        // A name that is not there is answered at once: FUSE creates with
        // LOOKUP then CREATE, both under the directory's lock, where an NFS
        // client sends one OPEN; the round trip is CREATE's.
        self.run(false, move |st| match st.child(parent, &name) {
            Ok(p) if p.symlink_metadata().is_ok() => {
                std::thread::sleep(st.delay);
                st.entry(p, reply)
            }
            Ok(_) => reply.error(libc::ENOENT),
            Err(e) => reply.error(e),
        });
    }

    fn getattr(&mut self, _req: &Request<'_>, ino: u64, _fh: Option<u64>, reply: ReplyAttr) {
        self.run(true, move |st| {
            match st.path(ino).and_then(|p| st.attr(p)) {
                Ok(a) => reply.attr(&st.ttl, &a),
                Err(e) => reply.error(e),
            }
        });
    }

    fn setattr(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<u64>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<u32>,
        reply: ReplyAttr,
    ) {
        self.run(true, move |st| {
            let r = (|| {
                let path = st.path(ino)?;
                if let Some(m) = mode {
                    fs::set_permissions(&path, fs::Permissions::from_mode(m & 0o7777))
                        .map_err(|e| errno(&e))?;
                }
                if uid.is_some() || gid.is_some() {
                    std::os::unix::fs::lchown(&path, uid, gid).map_err(|e| errno(&e))?;
                }
                if let Some(n) = size {
                    match fh {
                        Some(fh) => with_fd(fh, |f| f.set_len(n)),
                        None => fs::OpenOptions::new()
                            .write(true)
                            .open(&path)
                            .and_then(|f| f.set_len(n)),
                    }
                    .map_err(|e| errno(&e))?;
                }
                if atime.is_some() || mtime.is_some() {
                    set_times(&path, atime, mtime)?;
                }
                st.attr(path)
            })();
            match r {
                Ok(a) => reply.attr(&st.ttl, &a),
                Err(e) => reply.error(e),
            }
        });
    }

    fn readlink(&mut self, _req: &Request<'_>, ino: u64, reply: ReplyData) {
        self.run(true, move |st| {
            match st
                .path(ino)
                .and_then(|p| fs::read_link(p).map_err(|e| errno(&e)))
            {
                Ok(t) => reply.data(t.as_os_str().as_bytes()),
                Err(e) => reply.error(e),
            }
        });
    }

    fn mknod(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let name = name.to_owned();
        self.run(true, move |st| {
            let r = st.child(parent, &name).and_then(|p| {
                let c = cpath(&p)?;
                // SAFETY: `c` is a NUL-terminated path alive for the call.
                match unsafe { libc::mknod(c.as_ptr(), mode, rdev as libc::dev_t) } {
                    0 => Ok(p),
                    _ => Err(last_errno()),
                }
            });
            match r {
                Ok(p) => st.entry(p, reply),
                Err(e) => reply.error(e),
            }
        });
    }

    fn mkdir(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let name = name.to_owned();
        self.run(true, move |st| {
            let r = st.child(parent, &name).and_then(|p| {
                std::os::unix::fs::DirBuilderExt::mode(&mut fs::DirBuilder::new(), mode)
                    .create(&p)
                    .map(|_| p)
                    .map_err(|e| errno(&e))
            });
            match r {
                Ok(p) => st.entry(p, reply),
                Err(e) => reply.error(e),
            }
        });
    }

    fn unlink(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        let name = name.to_owned();
        self.run(true, move |st| {
            match st
                .child(parent, &name)
                .and_then(|p| fs::remove_file(p).map_err(|e| errno(&e)))
            {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(e),
            }
        });
    }

    fn rmdir(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        let name = name.to_owned();
        self.run(true, move |st| {
            match st
                .child(parent, &name)
                .and_then(|p| fs::remove_dir(p).map_err(|e| errno(&e)))
            {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(e),
            }
        });
    }

    fn symlink(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let (name, target) = (link_name.to_owned(), target.to_owned());
        self.run(true, move |st| {
            let r = st.child(parent, &name).and_then(|p| {
                std::os::unix::fs::symlink(&target, &p)
                    .map(|_| p)
                    .map_err(|e| errno(&e))
            });
            match r {
                Ok(p) => st.entry(p, reply),
                Err(e) => reply.error(e),
            }
        });
    }

    fn rename(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
        reply: ReplyEmpty,
    ) {
        let (name, newname) = (name.to_owned(), newname.to_owned());
        self.run(true, move |st| {
            let r = (|| {
                let from = st.child(parent, &name)?;
                let to = st.child(newparent, &newname)?;
                let (cf, ct) = (cpath(&from)?, cpath(&to)?);
                // SAFETY: both paths are NUL-terminated and alive for the call.
                let r = unsafe {
                    libc::renameat2(
                        libc::AT_FDCWD,
                        cf.as_ptr(),
                        libc::AT_FDCWD,
                        ct.as_ptr(),
                        flags,
                    )
                };
                if r != 0 {
                    return Err(last_errno());
                }
                if flags & libc::RENAME_EXCHANGE != 0 {
                    // Both remembered anew by their inodes.
                    let _ = st.attr(from);
                    let _ = st.attr(to);
                } else {
                    st.renamed(&from, &to);
                }
                Ok(())
            })();
            match r {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(e),
            }
        });
    }

    fn link(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        newparent: u64,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let newname = newname.to_owned();
        self.run(true, move |st| {
            let r = (|| {
                let from = st.path(ino)?;
                let to = st.child(newparent, &newname)?;
                fs::hard_link(&from, &to).map_err(|e| errno(&e))?;
                Ok(to)
            })();
            match r {
                Ok(p) => st.entry(p, reply),
                Err(e) => reply.error(e),
            }
        });
    }

    fn open(&mut self, _req: &Request<'_>, ino: u64, flags: i32, reply: ReplyOpen) {
        self.run(true, move |st| {
            match st.path(ino).and_then(|p| open_fd(&p, flags, 0)) {
                Ok(fh) => reply.opened(fh, 0),
                Err(e) => reply.error(e),
            }
        });
    }

    fn read(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        offset: i64,
        size: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyData,
    ) {
        self.run(false, move |_| {
            let mut buf = vec![0; size as usize];
            match with_fd(fh, |f| f.read_at(&mut buf, offset as u64)) {
                Ok(n) => reply.data(&buf[..n]),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn write(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        offset: i64,
        data: &[u8],
        _write_flags: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyWrite,
    ) {
        let data = data.to_vec();
        self.run(false, move |_| {
            match with_fd(fh, |f| f.write_all_at(&data, offset as u64)) {
                Ok(()) => reply.written(data.len() as u32),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    /// What `close` waits for: one round trip (NFS commits on close).
    fn flush(&mut self, _req: &Request<'_>, _ino: u64, _fh: u64, _lock: u64, reply: ReplyEmpty) {
        self.run(true, move |_| reply.ok());
    }

    fn release(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        _flags: i32,
        _lock_owner: Option<u64>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        // SAFETY: `fh` was opened by create or open and is released once.
        drop(unsafe { fs::File::from_raw_fd(fh as i32) });
        reply.ok();
    }

    fn fsync(&mut self, _req: &Request<'_>, _ino: u64, fh: u64, datasync: bool, reply: ReplyEmpty) {
        self.run(true, move |_| {
            let r = with_fd(fh, |f| match datasync {
                true => f.sync_data(),
                false => f.sync_all(),
            });
            match r {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn opendir(&mut self, _req: &Request<'_>, ino: u64, _flags: i32, reply: ReplyOpen) {
        self.run(true, move |st| {
            let r = (|| {
                let path = st.path(ino)?;
                let mut list = vec![
                    (ino, FileType::Directory, OsString::from(".")),
                    (
                        fuser::FUSE_ROOT_ID,
                        FileType::Directory,
                        OsString::from(".."),
                    ),
                ];
                for e in fs::read_dir(&path).map_err(|e| errno(&e))? {
                    let e = e.map_err(|e| errno(&e))?;
                    let t = e.file_type().map_err(|e| errno(&e))?;
                    list.push((st.ino(e.ino()), kind(t), e.file_name()));
                }
                let fh = st.next_dir.fetch_add(1, Ordering::Relaxed);
                st.dirs.lock().expect("dirs lock").insert(fh, list);
                Ok(fh)
            })();
            match r {
                Ok(fh) => reply.opened(fh, 0),
                Err(e) => reply.error(e),
            }
        });
    }

    fn readdir(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        offset: i64,
        mut reply: ReplyDirectory,
    ) {
        let dirs = self.state.dirs.lock().expect("dirs lock");
        let Some(list) = dirs.get(&fh) else {
            return reply.error(libc::EBADF);
        };
        for (i, (ino, kind, name)) in list.iter().enumerate().skip(offset as usize) {
            if reply.add(*ino, (i + 1) as i64, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        _flags: i32,
        reply: ReplyEmpty,
    ) {
        self.state.dirs.lock().expect("dirs lock").remove(&fh);
        reply.ok();
    }

    fn fsyncdir(&mut self, _req: &Request<'_>, _ino: u64, _fh: u64, _ds: bool, reply: ReplyEmpty) {
        self.run(true, move |_| reply.ok());
    }

    fn statfs(&mut self, _req: &Request<'_>, _ino: u64, reply: ReplyStatfs) {
        self.run(true, move |st| {
            let r = st.path(fuser::FUSE_ROOT_ID).and_then(|p| {
                let c = cpath(&p)?;
                // SAFETY: zeroed is a valid statvfs; `c` is NUL-terminated and
                // `s` writable, both alive for the call.
                let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
                match unsafe { libc::statvfs(c.as_ptr(), &mut s) } {
                    0 => Ok(s),
                    _ => Err(last_errno()),
                }
            });
            match r {
                Ok(s) => reply.statfs(
                    s.f_blocks,
                    s.f_bfree,
                    s.f_bavail,
                    s.f_files,
                    s.f_ffree,
                    s.f_bsize as u32,
                    s.f_namemax as u32,
                    s.f_frsize as u32,
                ),
                Err(e) => reply.error(e),
            }
        });
    }

    fn create(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let name = name.to_owned();
        self.run(true, move |st| {
            let r = (|| {
                let p = st.child(parent, &name)?;
                let fh = open_fd(&p, flags | libc::O_CREAT, mode)?;
                match st.attr(p) {
                    Ok(a) => Ok((a, fh)),
                    Err(e) => {
                        // SAFETY: `fh` was just opened here and is not kept.
                        drop(unsafe { fs::File::from_raw_fd(fh as i32) });
                        Err(e)
                    }
                }
            })();
            match r {
                Ok((a, fh)) => reply.created(&st.ttl, &a, 0, fh, 0),
                Err(e) => reply.error(e),
            }
        });
    }

    /// A server-side copy: one round trip, whatever the length.
    fn copy_file_range(
        &mut self,
        _req: &Request<'_>,
        _ino_in: u64,
        fh_in: u64,
        offset_in: i64,
        _ino_out: u64,
        fh_out: u64,
        offset_out: i64,
        len: u64,
        _flags: u32,
        reply: ReplyWrite,
    ) {
        self.run(true, move |_| {
            let (mut oi, mut oo) = (offset_in, offset_out);
            let len = len.min(1 << 30) as usize;
            // SAFETY: both descriptors are open backing files (see with_fd);
            // the offsets are locals alive for the call.
            let n = unsafe {
                libc::copy_file_range(fh_in as i32, &mut oi, fh_out as i32, &mut oo, len, 0)
            };
            match n < 0 {
                true => reply.error(last_errno()),
                false => reply.written(n as u32),
            }
        });
    }
}

/// Mounts ROOT at MNT and serves it until MNT is unmounted: each metadata
/// operation waits `delay` on one of `threads` workers; the kernel keeps
/// lookups and attributes for `ttl`. Returns the exit code.
pub(crate) fn mount(
    root: &Path,
    mnt: &Path,
    delay: Duration,
    ttl: Duration,
    threads: usize,
) -> i32 {
    let root = match fs::canonicalize(root) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("kopiru-slowfs: {}: {e}", root.display());
            return 1;
        }
    };
    let root_ino = match fs::metadata(&root) {
        Ok(m) => m.ino(),
        Err(e) => {
            eprintln!("kopiru-slowfs: {}: {e}", root.display());
            return 1;
        }
    };
    let state = Arc::new(State {
        root_ino,
        delay,
        ttl,
        paths: Mutex::new(HashMap::from([(fuser::FUSE_ROOT_ID, root.clone())])),
        dirs: Mutex::new(HashMap::new()),
        next_dir: AtomicU64::new(1),
    });
    let (tx, rx) = mpsc::channel::<(bool, Job)>();
    let rx = Arc::new(Mutex::new(rx));
    for _ in 0..threads {
        let (rx, st) = (rx.clone(), state.clone());
        std::thread::spawn(move || loop {
            let job = rx.lock().expect("pool lock").recv();
            let Ok((slow, job)) = job else { return };
            if slow && !st.delay.is_zero() {
                std::thread::sleep(st.delay);
            }
            job(&st);
        });
    }
    let options = [
        MountOption::FSName("kopiru-slowfs".into()),
        MountOption::Subtype("slowfs".into()),
        MountOption::AllowOther,
        MountOption::RW,
    ];
    let fs = SlowFs { state, pool: tx };
    let mut session = match fuser::Session::new(fs, mnt, &options) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("kopiru-slowfs: mount {}: {e}", mnt.display());
            return 1;
        }
    };
    println!(
        "kopiru-slowfs: {} at {}, {} ms per metadata operation (a simulation)",
        root.display(),
        mnt.display(),
        delay.as_secs_f64() * 1000.0
    );
    let _ = io::Write::flush(&mut io::stdout());
    match session.run() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("kopiru-slowfs: {e}");
            1
        }
    }
}
