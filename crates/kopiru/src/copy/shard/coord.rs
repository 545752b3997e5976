//! The coordination directory of a sharded copy (see the module above):
//! joining it, the marks the ranks leave there (`member.K` locks, pieces
//! claimed, `done.K`, `published` or `failed`), waiting on them, leaving.

use super::Shard;
use crate::copy::place::{remove_tree, TMP_PREFIX};
use crate::error::{Error, Op, Refusal, Side};
use crate::options::CopyOptions;
use crate::paths::join_name;
use crate::sys::{self, AsFd, Fd, Name, NameBuf};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How often a waiting rank looks at the coordination directory: soon at
/// first (the wait is often short, and every rank's exit waits on it), then
/// less often, up to `POLL_MAX` (so a long wait does not load a shared
/// filesystem's metadata server).
const POLL_FIRST: Duration = Duration::from_millis(1);
const POLL_MAX: Duration = Duration::from_millis(32);

/// A poll's sleeps, doubling from `POLL_FIRST` to `POLL_MAX`.
struct Backoff(Duration);

impl Backoff {
    fn new() -> Backoff {
        Backoff(POLL_FIRST)
    }

    fn sleep(&mut self) {
        std::thread::sleep(self.0);
        self.0 = (self.0 * 2).min(POLL_MAX);
    }
}

/// How long a waiting rank waits for a rank that has not joined at all
/// (not started, or died before its first step) before it gives up.
/// Launchers may start ranks seconds apart; a minute covers that.
const JOIN_GRACE: Duration = Duration::from_secs(60);

/// How the run ended, as this rank learns it.
pub(super) enum Outcome {
    /// In place and durable; `errors`: entries that failed, on all ranks.
    Published { errors: u64 },
    /// Not published: a rank failed (`Some`, when known) or stopped.
    Failed { rank: Option<usize> },
    /// This rank was stopped (Ctrl-C) while waiting.
    Cancelled,
}

/// This rank's place in the coordination directory.
pub(super) struct Coordination {
    pub(super) dir: Fd,
    pub(super) path: PathBuf,
    /// The lock file beside it, which serialises joining and clean-up
    /// (opened anew to take it: a copy of a locked descriptor would hold
    /// the lock).
    pub(super) lock_name: NameBuf,
    pub(super) parent: Fd,
    pub(super) name: NameBuf,
    pub(super) shard: Shard,
    /// The staged tree was made new by this run (not resumed).
    pub(super) fresh: bool,
    pub(super) cancel: crate::Cancel,
    /// Held (flock) for as long as this rank runs.
    pub(super) _member: Fd,
}

impl Coordination {
    /// Joins the run's coordination directory beside DEST (under the join
    /// lock): one that no live rank holds is an earlier run's, and is reset,
    /// and `prepare(true)` readies the staged tree; otherwise
    /// `prepare(false)`. Then this rank's member lock is taken.
    pub(super) fn join(
        parent: &Fd,
        parent_path: &Path,
        dst_name: &Name,
        shard: Shard,
        opts: &CopyOptions,
        prepare: impl FnOnce(bool) -> Result<(), Error>,
    ) -> Result<Coordination, Error> {
        let h = crate::copy::place::names::name_hash(dst_name);
        let name = sys::name(&format!("{TMP_PREFIX}shard.{h:016x}"));
        let lock_name = sys::name(&format!("{TMP_PREFIX}shardlock.{h:016x}"));
        let path = join_name(parent_path, &name);
        let io_err = |op, e: io::Error| Error::dst(&path, op, &e);
        let lock = open_lock_file(parent.as_fd(), &lock_name).map_err(|e| io_err(Op::Open, e))?;
        wait_lock(&lock, &opts.cancel).map_err(|e| io_err(Op::Lock, e))?;
        let made = match sys::mkdir_at(parent.as_fd(), &name, 0o700) {
            Ok(()) => true,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
            Err(e) => return Err(io_err(Op::Mkdir, e)),
        };
        let dir = sys::open_dir(parent.as_fd(), &name).map_err(|e| io_err(Op::Open, e))?;
        let reset = made || !anyone_alive(&dir).map_err(|e| io_err(Op::ReadDirectory, e))?;
        if reset {
            for e in sys::read_dir(dir.as_fd()).map_err(|e| io_err(Op::ReadDirectory, e))? {
                let _ = sys::unlink_at(dir.as_fd(), &e.name, false);
            }
        }
        prepare(reset)?;
        let member_name = sys::name(&format!("member.{}", shard.index));
        let member = open_lock_file(dir.as_fd(), &member_name).map_err(|e| io_err(Op::Open, e))?;
        if !sys::try_lock(member.as_fd()).map_err(|e| io_err(Op::Lock, e))? {
            return Err(Error::refused(
                Side::Destination,
                &path,
                Op::Copy,
                Refusal::Busy,
            ));
        }
        let parent = parent.try_clone().map_err(|e| io_err(Op::Open, e))?;
        let mut c = Coordination {
            dir,
            path: path.clone(),
            lock_name,
            parent,
            name,
            shard,
            fresh: false,
            cancel: opts.cancel.clone(),
            _member: member,
        };
        if reset && !opts.resume {
            c.mark("fresh", b"").map_err(|e| io_err(Op::Write, e))?;
        }
        c.fresh = c.read("fresh").is_some();
        // Joined: let the next rank in.
        sys::close(lock).map_err(|e| io_err(Op::Lock, e))?;
        Ok(c)
    }

    /// Writes the mark `name` (a small file) whole: under a temporary name,
    /// then renamed. Not flushed: the marks only matter to a live run (after
    /// a crash, `--resume` starts the coordination over).
    pub(super) fn mark(&self, name: &str, content: &[u8]) -> io::Result<()> {
        let tmp = self.write_temporary(name, content)?;
        sys::rename_at(self.dir.as_fd(), &tmp, self.dir.as_fd(), &sys::name(name))
    }

    /// Writes `content` whole to a new temporary file for the mark `name`
    /// and returns the temporary's name.
    pub(super) fn write_temporary(&self, name: &str, content: &[u8]) -> io::Result<NameBuf> {
        let tmp = sys::name(&format!(".t.{name}.{}", std::process::id()));
        let _ = sys::unlink_at(self.dir.as_fd(), &tmp, false);
        let fd = sys::create_new(self.dir.as_fd(), &tmp, 0o600)?;
        let mut f = std::fs::File::from(fd);
        f.write_all(content)?;
        Ok(tmp)
    }

    /// Leaves `fingerprint` as the run's if no rank has left one (written
    /// whole, then linked to its name: the link fails if the name is
    /// taken); `true` if the run's is this one.
    pub(super) fn agree(&self, fingerprint: &[u8]) -> io::Result<bool> {
        // The rank in the name too: ranks on other hosts may share a pid.
        let tmp = self.write_temporary(&format!("walk.{}", self.shard.index), fingerprint)?;
        let name = sys::name("walk");
        let linked = sys::link_at(self.dir.as_fd(), &tmp, self.dir.as_fd(), &name);
        let _ = sys::unlink_at(self.dir.as_fd(), &tmp, false);
        match linked {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                Ok(self.read_bytes("walk")? == fingerprint)
            }
            Err(e) => Err(e),
        }
    }

    /// Claims piece `p` of the walk for this rank: `true` if no rank had.
    pub(super) fn claim(&self, p: usize) -> io::Result<bool> {
        let name = sys::name(&format!("piece.{p}"));
        match sys::create_new(self.dir.as_fd(), &name, 0o600) {
            Ok(_claimed) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(e),
        }
    }

    pub(super) fn read(&self, name: &str) -> Option<String> {
        String::from_utf8(self.read_bytes(name).ok()?).ok()
    }

    pub(super) fn read_bytes(&self, name: &str) -> io::Result<Vec<u8>> {
        let fd = sys::open_source(self.dir.as_fd(), &sys::name(name), false, false, false)?;
        let mut s = Vec::new();
        io::Read::read_to_end(&mut std::fs::File::from(fd), &mut s)?;
        Ok(s)
    }

    /// The hard-linked files every rank set aside (`links.K`), sorted (so
    /// that the entries of one directory come together).
    pub(super) fn deferred_links(&self) -> io::Result<Vec<PathBuf>> {
        let mut all = Vec::new();
        for r in 0..self.shard.count {
            let list = match self.read_bytes(&format!("links.{r}")) {
                Ok(l) => l,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            let paths = list.split(|&b| b == 0).filter(|p| !p.is_empty());
            all.extend(paths.map(|p| PathBuf::from(sys::bytes_os_str(p))));
        }
        all.sort();
        Ok(all)
    }

    /// Whether rank `r` runs now: `None` if it has not joined yet.
    pub(super) fn alive(&self, r: usize) -> Option<bool> {
        let name = sys::name(&format!("member.{r}"));
        let fd = sys::open_source(self.dir.as_fd(), &name, false, false, false).ok()?;
        // Getting its lock means nobody holds it (closing the file drops it).
        Some(!sys::try_lock(fd.as_fd()).unwrap_or(false))
    }

    /// Every rank but 0: waits for rank 0 to publish the copy or give up.
    pub(super) fn wait_published(&self, opts: &CopyOptions) -> Outcome {
        let start = Instant::now();
        let mut poll = Backoff::new();
        loop {
            if let Some(n) = self.read("published") {
                return Outcome::Published {
                    errors: n.trim().parse().unwrap_or(0),
                };
            }
            if let Some(r) = self.read("failed") {
                return Outcome::Failed {
                    rank: r.trim().parse().ok(),
                };
            }
            match self.alive(0) {
                Some(false) => return Outcome::Failed { rank: Some(0) },
                None if start.elapsed() > JOIN_GRACE => return Outcome::Failed { rank: Some(0) },
                _ => {}
            }
            if opts.cancel.is_cancelled() {
                return Outcome::Cancelled;
            }
            poll.sleep();
        }
    }

    /// Rank 0: waits until every rank has written `done.K`. `Err`: the rank
    /// that stopped, died or never joined (within `JOIN_GRACE`) first
    /// (`None`: this one was stopped).
    pub(super) fn wait_done(&self) -> Result<u64, Option<usize>> {
        let start = Instant::now();
        let mut poll = Backoff::new();
        let mut errors = 0;
        let mut next = 0;
        while next < self.shard.count {
            match self.read(&format!("done.{next}")) {
                Some(d) => match d.trim().parse::<u64>() {
                    Ok(n) => {
                        errors += n;
                        next += 1;
                        continue;
                    }
                    Err(_) => return Err(Some(next)),
                },
                None => match self.alive(next) {
                    Some(false) => return Err(Some(next)),
                    None if start.elapsed() > JOIN_GRACE => return Err(Some(next)),
                    _ => {}
                },
            }
            if self.cancel.is_cancelled() {
                return Err(None);
            }
            poll.sleep();
        }
        Ok(errors)
    }

    /// Every rank, at the very end: lets go of its member lock, and the
    /// last to leave (under the join lock, it finds no live member) removes
    /// the coordination directory and its lock file. No rank waits for
    /// another to exit.
    pub(super) fn leave(self) {
        let Coordination {
            parent,
            lock_name,
            name,
            _member,
            dir,
            ..
        } = self;
        drop(_member);
        drop(dir);
        let Ok(lock) = open_lock_file(parent.as_fd(), &lock_name) else {
            return;
        };
        if wait_lock(&lock, &crate::Cancel::new()).is_err() {
            return;
        }
        let Ok(dir) = sys::open_dir(parent.as_fd(), &name) else {
            return; // another rank left last and removed it
        };
        if anyone_alive(&dir).unwrap_or(true) {
            return;
        }
        let _ = remove_tree(parent.as_fd(), &name, &mut 0);
        let _ = sys::unlink_at(parent.as_fd(), &lock_name, false);
    }
}

/// Opens (making it if needed) a file used only for its `flock`.
pub(super) fn open_lock_file(dir: sys::FdRef, name: &Name) -> io::Result<Fd> {
    sys::open_raw(
        dir,
        name,
        sys::O_RDWR | sys::O_CREAT | sys::O_NOFOLLOW,
        0o600,
    )
}

/// Waits for the lock on `fd` (polling, so a cancel is seen).
pub(super) fn wait_lock(fd: &Fd, cancel: &crate::Cancel) -> io::Result<()> {
    let mut poll = Backoff::new();
    while !sys::try_lock(fd.as_fd())? {
        cancel.check()?;
        poll.sleep();
    }
    Ok(())
}

/// Whether a rank holds any member lock in `dir`.
pub(super) fn anyone_alive(dir: &Fd) -> io::Result<bool> {
    for e in sys::read_dir(dir.as_fd())? {
        if !sys::name_bytes(&e.name).starts_with(b"member.") {
            continue;
        }
        if let Ok(fd) = sys::open_source(dir.as_fd(), &e.name, false, false, false) {
            if !sys::try_lock(fd.as_fd())? {
                return Ok(true);
            }
        }
    }
    Ok(false)
}
