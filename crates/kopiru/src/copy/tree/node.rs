//! Per-directory state ([`DirNode`]), the tasks on the queue, and the
//! entries they carry.

use super::ahead::Ahead;
use crate::copy::place::{self, Deferred, Dest, DestDir};
use crate::sys::{AsFd, Fd, FileKind, Name, NameBuf, Stat, Timespec};
use std::path::PathBuf;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, OnceLock};

/// A directory being copied: both descriptors stay open until its last entry
/// is done and its metadata is applied.
pub(crate) struct DirNode {
    pub(crate) src: Fd,
    pub(crate) dst: Fd,
    pub(crate) src_path: PathBuf,
    pub(crate) dst_path: PathBuf,
    pub(crate) dst_dev: u64,
    /// Its path relative to the copied source directory ("" for that
    /// directory itself), which `--exclude` patterns are matched against.
    pub(crate) rel: PathBuf,
    /// The device of the copied source directory (`-x`).
    pub(crate) root_dev: u64,
    /// The source directory's stat; `None` for the parent directory of a
    /// command-line source, whose metadata is not ours to change.
    pub(crate) stat: Option<Stat>,
    /// Permission bits the destination directory was created with.
    pub(crate) created_perm: u32,
    /// Tasks and subdirectories not finished yet, plus one for the listing.
    pub(crate) pending: AtomicUsize,
    pub(crate) parent: Option<Arc<DirNode>>,
    /// Inside a tree that is built under a temporary name and renamed into
    /// place at the end: nothing in it is visible under its final path yet.
    pub(crate) staged: bool,
    /// Made by this run, so it holds only what this run put there.
    pub(crate) fresh: bool,
    /// Renames of files in a visible directory that wait until their data
    /// is durable (`--sync end`).
    pub(crate) deferred: Deferred,
    /// With `-a`: the owner every entry this run creates here gets (our
    /// fsuid; our group, or the directory's if it is setgid or mounted
    /// `grpid`), learned from the first one, so a chown to that same owner
    /// is skipped (coreutils skips it too, with an fstat per file).
    pub(crate) new_owner: OnceLock<Option<(u32, u32)>>,
    /// `--link-dest`/`--clone-dest`: the basis directory that mirrors this
    /// one, where it exists.
    pub(crate) basis: Option<Fd>,
    /// For the parent of a command-line source: the name in `basis` that
    /// mirrors the source's copy (which need not be its name there).
    pub(crate) basis_top: Option<NameBuf>,
    /// The parent of command-line sources: a new directory made in it is a
    /// top-level tree, built under a staged name and renamed at the end.
    pub(crate) stages: bool,
    /// The partial copies (`--partial`) found here when the directory was
    /// cleaned of leftovers ([`place::partial_name`]s).
    pub(crate) partials: Mutex<Vec<NameBuf>>,
    /// The destination directory has a default ACL, which new entries
    /// inherit instead of the umask: the bits they are made with are not
    /// known, so a kept mode is always set (looked up once, when needed).
    pub(crate) default_acl: OnceLock<bool>,
}

impl DirNode {
    pub(crate) fn new(
        src: Fd,
        dst: Fd,
        src_path: PathBuf,
        dst_path: PathBuf,
        dst_dev: u64,
        parent: Option<Arc<DirNode>>,
    ) -> DirNode {
        DirNode {
            src,
            dst,
            src_path,
            dst_path,
            dst_dev,
            rel: PathBuf::new(),
            root_dev: 0,
            stat: None,
            created_perm: 0,
            pending: AtomicUsize::new(1),
            parent,
            staged: false,
            fresh: false,
            deferred: Deferred::default(),
            new_owner: OnceLock::new(),
            basis: None,
            basis_top: None,
            stages: false,
            partials: Mutex::new(Vec::new()),
            default_acl: OnceLock::new(),
        }
    }

    /// The basis directory and the name in it that mirror the entry
    /// copied here as `dst_name` (`--link-dest`/`--clone-dest`).
    pub(crate) fn basis_of<'n>(&'n self, dst_name: &'n Name) -> Option<(&'n Fd, &'n Name)> {
        let dir = self.basis.as_ref()?;
        Some((dir, self.basis_top.as_deref().unwrap_or(dst_name)))
    }

    /// Whether entries made here inherit a default ACL ([`DirNode::default_acl`]).
    pub(crate) fn inherits_acl(&self) -> bool {
        *self
            .default_acl
            .get_or_init(|| crate::copy::meta::has_default_acl(self.dst.as_fd()))
    }

    /// Takes the partial copy of `dst_name` out of the list: its name, if
    /// there is one.
    pub(crate) fn take_partial(&self, dst_name: &Name) -> Option<NameBuf> {
        let mut partials = self.partials.lock().expect("partials lock");
        if partials.is_empty() {
            return None;
        }
        let name = place::partial_name(dst_name);
        let i = partials.iter().position(|p| *p == name)?;
        Some(partials.swap_remove(i))
    }
}

impl DirNode {
    /// This directory as placement sees it.
    pub(crate) fn dest(&self) -> Dest<'_> {
        Dest {
            fd: self.dst.as_fd(),
            path: &self.dst_path,
            dev: self.dst_dev,
            staged: self.staged,
            fresh: self.fresh,
            deferred: &self.deferred,
        }
    }
}

impl DestDir for DirNode {
    fn dest(&self) -> Dest<'_> {
        DirNode::dest(self)
    }

    fn times(&self) -> Option<(Timespec, Timespec)> {
        self.stat.map(|st| (st.atime, st.mtime))
    }
}

/// A directory whose entries the caller lists ([`super::run_groups`]):
/// made and opened by the caller, no metadata of its own applied.
pub(crate) struct GroupDir {
    pub(crate) src: Fd,
    pub(crate) dst: Fd,
    pub(crate) src_path: PathBuf,
    pub(crate) dst_path: PathBuf,
    pub(crate) dst_dev: u64,
    /// Its path inside the copied source directory.
    pub(crate) rel: PathBuf,
    /// The device of the copied source directory (`-x`).
    pub(crate) root_dev: u64,
    /// Inside (or is) a staged directory, invisible until published.
    pub(crate) staged: bool,
    /// Made by this run (holds only what this run put there).
    pub(crate) fresh: bool,
    /// `--link-dest`/`--clone-dest`: the basis directory that mirrors it.
    pub(crate) basis: Option<Fd>,
}

impl From<GroupDir> for DirNode {
    fn from(g: GroupDir) -> DirNode {
        let mut node = DirNode::new(g.src, g.dst, g.src_path, g.dst_path, g.dst_dev, None);
        node.rel = g.rel;
        node.root_dev = g.root_dev;
        node.staged = g.staged;
        node.fresh = g.fresh;
        node.basis = g.basis;
        node
    }
}

/// What is already at a destination name.
pub(crate) enum Existing {
    Absent,
    /// Complete (`--resume`) or not to be touched (`--no-clobber`).
    Keep,
    /// Refused, already reported.
    Refused,
    /// To be replaced; what is there now.
    Replace(Stat),
}

/// One entry to copy.
pub(crate) struct Item {
    pub(crate) name: NameBuf,
    /// A different destination name (command-line sources only).
    pub(crate) dst_name: Option<NameBuf>,
    pub(crate) kind: Option<FileKind>,
    /// Follow this entry if it is a symlink.
    pub(crate) follow: bool,
    /// A directory listed by itself (`--files-from`, a shard): made, not
    /// entered, its metadata applied by the caller at the end.
    pub(crate) shallow: bool,
    /// A FIFO or device named as a source, read for its data into a
    /// regular file ([`crate::CopyOptions::read_named_specials`]).
    pub(crate) read_data: bool,
    /// Its destination is an existing FIFO or device, written into.
    pub(crate) write_into: bool,
}

pub(crate) enum Task {
    List(Arc<DirNode>),
    Items(Arc<DirNode>, Vec<Item>),
    /// A large directory's entries, claimed a slice at a time by whoever has
    /// nothing better to do (queued at the low-priority end).
    Share(Arc<Shard>),
}

/// The entries of a large directory, shared between its lister and idle
/// workers. Workers in different directories do not contend for a
/// directory's lock; sharing one is only worth it when there is nothing else.
pub(crate) struct Shard {
    pub(crate) dir: Arc<DirNode>,
    pub(crate) items: Vec<Item>,
    pub(crate) next: AtomicUsize,
    pub(crate) left: AtomicUsize,
    /// Set when the directory's files are copied through [`Ahead`]; `items`
    /// then holds its other entries.
    pub(crate) ahead: Option<Ahead>,
}

/// Where the first copy of a multiply-linked inode went.
pub(crate) struct LinkTarget {
    pub(crate) dir: Arc<DirNode>,
    pub(crate) name: NameBuf,
    /// Its final name (`name` may be a temporary one until the end).
    pub(crate) dst_name: NameBuf,
}

pub(crate) type LinkCell = Arc<OnceLock<Option<LinkTarget>>>;

/// Whether `st` is `dir` or one of its ancestors: following a symlink there
/// would copy forever.
pub(crate) fn is_ancestor(dir: &DirNode, st: &Stat) -> bool {
    let mut cur = Some(dir);
    while let Some(d) = cur {
        if d.stat.is_some_and(|s| (s.dev, s.ino) == (st.dev, st.ino)) {
            return true;
        }
        cur = d.parent.as_deref();
    }
    false
}

/// One regular file being copied: its source open and stat'ed, and the
/// name it gets in the destination directory.
pub(crate) struct SourceFile<'a> {
    pub(crate) dir: &'a Arc<DirNode>,
    pub(crate) src: &'a Fd,
    pub(crate) st: &'a Stat,
    /// Its name in the source directory.
    pub(crate) name: &'a Name,
    /// Its name in the destination directory.
    pub(crate) dst_name: &'a Name,
    /// Its destination is an existing FIFO or device, written into
    /// ([`Item::write_into`]).
    pub(crate) write_into: bool,
}
