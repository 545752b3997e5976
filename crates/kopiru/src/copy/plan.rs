//! cp's destination rules and the refusals that protect the user's data,
//! decided before anything is written.

use crate::error::{Error, Op, Refusal, Side};
use crate::options::{BasisKind, CopyOptions, Follow};
use crate::sys::{self, AsFd, Fd, FileKind, Stat};
use std::ffi::{CString, OsStr};
use std::fmt;
use std::path::{Component, Path, PathBuf};

/// A request that cannot be carried out at all (a usage error): nothing
/// is copied. The command line exits 2; the Node binding rejects with
/// `KOPIRU_REFUSED`. [`PlanError::id`] names it stably; the text
/// ([`Display`](fmt::Display)) names settings by [`Setting`]'s neutral
/// words, and each front end spells them its own way (`-T` on the command
/// line, `noTargetDirectory` in Node).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PlanError {
    /// No source (only a destination).
    MissingDestination,
    /// [`CopyOptions::no_target_directory`] with several sources.
    OneSourceAsItself,
    /// [`CopyOptions::delete`] where DEST would hold the copy inside it
    /// (not the copy itself, and a source that ends in a name).
    DeleteNeedsItself,
    /// [`CopyOptions::delete`] where SOURCE is DEST or lies inside it (it
    /// would delete the source's own entries), or DEST lies inside SOURCE,
    /// by any name.
    DeleteNested {
        /// SOURCE as given.
        source: PathBuf,
        /// DEST as given.
        dest: PathBuf,
        /// SOURCE is at or below DEST (else DEST is below SOURCE).
        source_inside: bool,
    },
    /// [`CopyOptions::parents`] with a destination that is not a directory.
    ParentsNeedDirectory {
        /// The destination as given.
        dest: PathBuf,
    },
    /// Several sources and a destination that is not a directory.
    NotADirectory {
        /// The destination as given.
        dest: PathBuf,
    },
    /// The basis directory ([`CopyOptions::basis`]) is not a directory.
    BasisNotADirectory {
        /// [`Setting::LinkDest`] or [`Setting::CloneDest`].
        setting: Setting,
        /// DIR as given.
        given: PathBuf,
        /// Where it was looked for.
        looked: PathBuf,
    },
    /// A list of files ([`Setting::FilesFrom`], [`Setting::Shard`]) with
    /// more than one SOURCE.
    ListedNeedsOneSource {
        /// The setting.
        what: Setting,
    },
    /// Two settings that exclude each other (say what to drop).
    Excludes {
        /// The one set first (in [`CopyOptions`]' order of checks).
        first: Setting,
        /// The other.
        second: Setting,
    },
    /// Two settings that do not work together yet.
    NotWith {
        /// [`Setting::FilesFrom`] or [`Setting::Shard`].
        what: Setting,
        /// The other setting.
        other: Setting,
    },
    /// A setting this platform does not have yet ([`Setting::Shard`] on
    /// Windows).
    NotOnThisPlatform {
        /// The setting.
        what: Setting,
    },
}

impl PlanError {
    /// A stable kebab-case name of the refusal, the same in every front
    /// end and in `--json`; the text may change, this does not.
    pub fn id(&self) -> &'static str {
        match self {
            PlanError::MissingDestination => "missing-destination",
            PlanError::OneSourceAsItself => "one-source-as-itself",
            PlanError::DeleteNeedsItself => "delete-needs-itself",
            PlanError::DeleteNested { .. } => "delete-nested",
            PlanError::ParentsNeedDirectory { .. } => "parents-need-directory",
            PlanError::NotADirectory { .. } => "not-a-directory",
            PlanError::BasisNotADirectory { .. } => "basis-not-a-directory",
            PlanError::ListedNeedsOneSource { .. } => "listed-needs-one-source",
            PlanError::Excludes { .. } => "settings-exclude-each-other",
            PlanError::NotWith { .. } => "settings-not-together-yet",
            PlanError::NotOnThisPlatform { .. } => "not-on-this-platform",
        }
    }
}

/// The settings a [`PlanError`] names, by neutral names ([`Setting::id`]):
/// the command line spells them as its flags, Node as its option names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Setting {
    /// [`CopyOptions::no_target_directory`].
    NoTargetDirectory,
    /// [`CopyOptions::delete`].
    Delete,
    /// [`CopyOptions::dry_run`].
    DryRun,
    /// [`CopyOptions::verify`].
    Verify,
    /// [`CopyOptions::files_from`].
    FilesFrom,
    /// [`CopyOptions::shard`].
    Shard,
    /// [`CopyOptions::no_clobber`].
    NoClobber,
    /// [`CopyOptions::backup`].
    Backup,
    /// [`CopyOptions::partial`].
    Partial,
    /// [`CopyOptions::method`] [`MethodChoice::Clone`](crate::MethodChoice::Clone).
    CloneMethod,
    /// [`CopyOptions::basis`] of kind [`BasisKind::Link`].
    LinkDest,
    /// [`CopyOptions::basis`] of kind [`BasisKind::Clone`].
    CloneDest,
    /// [`CopyOptions::parents`].
    Parents,
}

impl Setting {
    /// Its stable kebab-case name.
    pub fn id(self) -> &'static str {
        match self {
            Setting::NoTargetDirectory => "no-target-directory",
            Setting::Delete => "delete",
            Setting::DryRun => "dry-run",
            Setting::Verify => "verify",
            Setting::FilesFrom => "files-from",
            Setting::Shard => "shard",
            Setting::NoClobber => "no-clobber",
            Setting::Backup => "backup",
            Setting::Partial => "partial",
            Setting::CloneMethod => "clone-method",
            Setting::LinkDest => "link-dest",
            Setting::CloneDest => "clone-dest",
            Setting::Parents => "parents",
        }
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanError::MissingDestination => f.write_str("missing destination operand"),
            PlanError::OneSourceAsItself => f.write_str(
                "no-target-directory (DEST is the copy itself) takes one source and one \
                 destination",
            ),
            PlanError::DeleteNeedsItself => f.write_str(
                "delete removes from DEST what the source does not have, so DEST must be \
                 the copy itself: set no-target-directory (SOURCE DEST), or write SOURCE/. \
                 to copy the contents of SOURCE into DEST",
            ),
            PlanError::DeleteNested {
                source,
                dest,
                source_inside,
            } => {
                let (s, d) = (
                    crate::paths::escape(source.as_os_str()),
                    crate::paths::escape(dest.as_os_str()),
                );
                match source_inside {
                    true => write!(
                        f,
                        "delete: the source '{s}' is '{d}' or inside it, so deleting what \
                         the source lacks would delete the source itself; nothing was copied"
                    ),
                    false => write!(
                        f,
                        "delete: the destination '{d}' is inside the source '{s}'; nothing \
                         was copied"
                    ),
                }
            }
            PlanError::ParentsNeedDirectory { dest } => write!(
                f,
                "with parents, the destination must be a directory: '{}' is not one",
                crate::paths::escape(dest.as_os_str())
            ),
            PlanError::NotADirectory { dest } => write!(
                f,
                "target '{}' is not a directory (needed for several sources)",
                dest.display()
            ),
            PlanError::BasisNotADirectory {
                setting,
                given,
                looked,
            } => write!(
                f,
                "{setting} {}: {} is not a directory{}",
                crate::paths::escape(given.as_os_str()),
                crate::paths::escape(looked.as_os_str()),
                match given.is_relative() {
                    true => " (a relative DIR is taken from DEST, as rsync takes it)",
                    false => "",
                }
            ),
            PlanError::ListedNeedsOneSource { what } => write!(
                f,
                "{what} copies from one SOURCE directory (the paths are inside it) to DEST"
            ),
            PlanError::Excludes { first, second } => {
                write!(
                    f,
                    "{first} and {second} exclude each other: use one of them"
                )
            }
            PlanError::NotWith { what, other } => {
                write!(f, "{what} does not work with {other} yet")
            }
            PlanError::NotOnThisPlatform { what } => {
                write!(f, "{what} is not supported on this platform yet")
            }
        }
    }
}

impl std::error::Error for PlanError {}

/// One command-line source and where it goes.
pub(crate) struct Job {
    pub src_dir: Fd,
    pub src_name: CString,
    pub dst_dir: Fd,
    pub dst_name: CString,
    /// Display paths of the two parent directories.
    pub src_parent: PathBuf,
    pub dst_parent: PathBuf,
    /// Follow the source if it is a symlink (`-H`/`-L`).
    pub follow: bool,
    /// A FIFO or device read for its data into a regular file
    /// ([`CopyOptions::read_named_specials`]).
    pub read_data: bool,
    /// DEST is an existing FIFO or device (named, or reached through a
    /// symlink): the data is written into it, as cp writes, never replacing it.
    pub write_into: bool,
    /// `--parents`: the directories made on the way to the copy, whose
    /// metadata is applied once it is done.
    pub parents_made: Vec<ParentMade>,
    /// DEST as named, where the copy goes elsewhere (a symlink written
    /// through, a FIFO or device written into).
    pub named: Option<PathBuf>,
    /// The jobs of one round run together; a job of round N+1 copies onto
    /// the same name as one of round N (two directories merged, or with
    /// `--backup` a file replacing the first one's copy), after it.
    pub round: usize,
    /// `--link-dest`/`--clone-dest`: the path in the basis directory that
    /// mirrors this job's copy.
    pub basis: Option<PathBuf>,
}

/// Decides every job, or refuses a source with a per-source error.
pub(crate) fn plan(
    sources: &[PathBuf],
    dest: &Path,
    opts: &CopyOptions,
) -> Result<(Vec<Job>, Vec<Error>), PlanError> {
    if sources.is_empty() {
        return Err(PlanError::MissingDestination);
    }
    if opts.no_target_directory && sources.len() > 1 {
        return Err(PlanError::OneSourceAsItself);
    }
    if opts.parents && !sys::stat_path(dest, true).is_ok_and(|st| st.kind() == FileKind::Dir) {
        return Err(PlanError::ParentsNeedDirectory {
            dest: dest.to_path_buf(),
        });
    }
    if opts.delete && !opts.no_target_directory && sources.iter().any(|s| ends_in_name(s)) {
        return Err(PlanError::DeleteNeedsItself);
    }
    if opts.delete {
        for src in sources {
            if let Some(source_inside) = delete_nested(src, dest) {
                return Err(PlanError::DeleteNested {
                    source: src.clone(),
                    dest: dest.to_path_buf(),
                    source_inside,
                });
            }
        }
    }
    // With -T the destination is the copy itself, never a directory to copy
    // into.
    let dest_is_dir = !opts.no_target_directory
        && sys::stat_path(dest, true).is_ok_and(|st| st.kind() == FileKind::Dir);
    if sources.len() > 1 && !dest_is_dir {
        return Err(PlanError::NotADirectory {
            dest: dest.to_path_buf(),
        });
    }
    let basis = match &opts.basis {
        Some(b) => Some(basis_dir(b, dest)?),
        None => None,
    };
    let mut jobs: Vec<Job> = Vec::new();
    let mut refused = Vec::new();
    let mut targets: Vec<Target> = Vec::new();
    for src in sources {
        match plan_one(src, dest, dest_is_dir, opts, basis.as_deref()) {
            Ok(mut job) => {
                let dir = sys::fstat(job.dst_dir.as_fd()).map(|st| (st.dev, st.ino));
                let src_st = sys::stat_path(src, job.follow).ok();
                // The name given, as well as where it leads (a symlink
                // named as DEST is written through): a later source must
                // not write through a symlink an earlier one just made.
                let named = job.named.as_deref().and_then(named_key);
                let taken = dir.as_ref().ok().and_then(|d| {
                    targets.iter().rev().find(|t| {
                        (t.dir == *d && t.name == job.dst_name)
                            || named
                                .as_ref()
                                .is_some_and(|(nd, nn)| t.dir == *nd && t.name == *nn)
                    })
                });
                let is_dir = |st: Option<Stat>| st.is_some_and(|s| s.kind() == FileKind::Dir);
                match (taken, dir) {
                    // The same source named twice: cp warns and copies it once.
                    (Some(t), _) if t.src_st.is_some() && t.src_st.map(id) == src_st.map(id) => {
                        let why = Refusal::NamedTwice {
                            first: t.src.to_path_buf(),
                        };
                        refused.push(Error::refused(Side::Source, src, Op::Copy, why));
                    }
                    // Two directories onto one name merge, and with --backup
                    // a file replaces the first one's copy (keeping it as its
                    // backup), as in cp: in a later round, after the first.
                    (Some(t), Ok(d))
                        if opts.backup.is_some() || (is_dir(t.src_st) && is_dir(src_st)) =>
                    {
                        job.round = t.round + 1;
                        targets.push(Target::of(d, &job, src, src_st));
                        jobs.push(job);
                    }
                    // cp: "will not overwrite just-created".
                    (Some(t), _) => refused.push(Error::refused(
                        Side::Source,
                        src,
                        Op::Copy,
                        Refusal::SameDestination {
                            first: t.src.to_path_buf(),
                        },
                    )),
                    (None, Ok(d)) => {
                        targets.push(Target::of(d, &job, src, src_st));
                        jobs.push(job);
                    }
                    (None, Err(e)) => refused.push(Error::dst(&job.dst_parent, Op::Stat, &e)),
                }
            }
            Err(e) => refused.push(e),
        }
    }
    Ok((jobs, refused))
}

/// With `--delete`: whether the directory `src` is `dest` or inside it
/// (`Some(true)`: deleting what the source lacks would delete in the
/// source itself), or `dest` is inside `src` (`Some(false)`), by identity
/// (device and inode, walking `..`), so `..`, symlinks and bind mounts are
/// seen through. A `dest` that does not exist yet is placed by its nearest
/// existing ancestor.
fn delete_nested(src: &Path, dest: &Path) -> Option<bool> {
    let s = sys::stat_path(src, true).ok()?;
    if s.kind() != FileKind::Dir {
        return None;
    }
    let src_dir = sys::open_path(src, sys::OPEN_DIR_FLAGS).ok()?;
    let mut at = dest.to_path_buf();
    let (dest_dir, exists) = loop {
        match sys::open_path(&at, sys::OPEN_DIR_FLAGS) {
            Ok(fd) => break (fd, at == dest),
            Err(_) => match at.parent() {
                Some(p) if !p.as_os_str().is_empty() => at = p.to_path_buf(),
                Some(_) => at = PathBuf::from("."),
                None => return None,
            },
        }
    };
    let d = sys::fstat(dest_dir.as_fd()).ok()?;
    if exists && is_at_or_below(&src_dir, (d.dev, d.ino)) {
        return Some(true);
    }
    is_at_or_below(&dest_dir, (s.dev, s.ino)).then_some(false)
}

/// Where a job of [`plan`] copies to, to find two onto one name.
struct Target<'a> {
    /// The destination directory's identity, and the name in it.
    dir: (u64, u64),
    name: CString,
    src: &'a Path,
    src_st: Option<Stat>,
    round: usize,
}

impl<'a> Target<'a> {
    fn of(dir: (u64, u64), job: &Job, src: &'a Path, src_st: Option<Stat>) -> Self {
        Target {
            dir,
            name: job.dst_name.clone(),
            src,
            src_st,
            round: job.round,
        }
    }
}

/// A file's identity: device and inode.
fn id(st: Stat) -> (u64, u64) {
    (st.dev, st.ino)
}

/// The directory of `--link-dest`/`--clone-dest`, which must exist. A
/// relative one is taken from DEST, as rsync takes it (`--link-dest ../prev`
/// names `prev` beside DEST), lexically, since DEST may not exist yet.
pub(crate) fn basis_dir(basis: &crate::options::Basis, dest: &Path) -> Result<PathBuf, PlanError> {
    let mut dir = PathBuf::new();
    if basis.dir.is_relative() {
        for c in dest.join(&basis.dir).components() {
            match c {
                Component::CurDir => {}
                Component::ParentDir
                    if matches!(dir.components().next_back(), Some(Component::Normal(_))) =>
                {
                    dir.pop();
                }
                c => dir.push(c),
            }
        }
        if dir.as_os_str().is_empty() {
            dir.push(".");
        }
    } else {
        dir.clone_from(&basis.dir);
    }
    if sys::stat_path(&dir, true).is_ok_and(|st| st.kind() == FileKind::Dir) {
        return Ok(dir);
    }
    let setting = match basis.kind {
        BasisKind::Link => Setting::LinkDest,
        BasisKind::Clone => Setting::CloneDest,
    };
    Err(PlanError::BasisNotADirectory {
        setting,
        given: basis.dir.clone(),
        looked: dir,
    })
}

/// Whether a path ends in a name of its own: not `.`, `..` or `/`. (Rust's
/// `components()` drops a trailing `.`, so "dir/." is checked by hand: cp
/// copies the contents of "dir/." into the destination itself.)
fn ends_in_name(path: &Path) -> bool {
    let bytes = path.as_os_str().as_encoded_bytes();
    matches!(path.components().next_back(), Some(Component::Normal(_)))
        && !(bytes.ends_with(b".") && bytes.len() >= 2 && separator(bytes[bytes.len() - 2]))
}

/// Whether `b` (a byte of a path's encoded form) is a path separator: `/`,
/// and on Windows `\` too.
fn separator(b: u8) -> bool {
    b.is_ascii() && std::path::is_separator(b as char)
}

/// Whether a path ends in a separator ("link/"): resolving it then follows
/// a symlink at its end, as the kernel's path walk does.
fn ends_in_separator(path: &Path) -> bool {
    let bytes = path.as_os_str().as_encoded_bytes();
    bytes.last().is_some_and(|&b| separator(b))
}

fn split(path: &Path) -> std::io::Result<(PathBuf, std::ffi::OsString)> {
    let path = if ends_in_name(path) {
        path.to_path_buf()
    } else {
        path.canonicalize()?
    };
    let name = path
        .file_name()
        .map_or_else(|| OsStr::new(".").to_owned(), |n| n.to_owned());
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        Some(_) => PathBuf::from("."),
        None => PathBuf::from("/"),
    };
    Ok((parent, name))
}

/// Whether `dest` is a directory kopiru made earlier as the copy of the
/// directory `src`, and holds no `dest/name` of its own: then the same
/// command run again merges into it rather than nesting a second copy.
fn is_recorded_copy(dest: &Path, src: &Path, src_st: &sys::Stat, opts: &CopyOptions) -> bool {
    let Some(file) = &opts.copies_record else {
        return false;
    };
    let Some(name) = src.file_name() else {
        return false;
    };
    if src_st.kind() != FileKind::Dir || sys::stat_path(&dest.join(name), false).is_ok() {
        return false;
    }
    let (Some(s), Some(d), Ok(real)) = (
        crate::copy::record::identity_of(src),
        crate::copy::record::identity_of(dest),
        dest.canonicalize(),
    ) else {
        return false;
    };
    crate::copy::record::is_copy_of(file, &s, &d, &real)
}

fn plan_one(
    src: &Path,
    dest: &Path,
    dest_is_dir: bool,
    opts: &CopyOptions,
    basis: Option<&Path>,
) -> Result<Job, Error> {
    // "link/" names the directory the link points to, for cp and rsync
    // alike: the source is followed, whatever -P says.
    let follow = opts.follow != Follow::Never || ends_in_separator(src);
    let src_st = sys::stat_path(src, follow).map_err(|e| Error::src(src, Op::Stat, &e))?;
    let src_is_dir = src_st.kind() == FileKind::Dir;

    // cp: into an existing directory under the source's name; "." and ".."
    // (no name of their own) merge into the directory itself. A DEST that
    // is this source's copy made by an earlier run is left alone: the same
    // command run again neither nests a second copy in it nor overwrites
    // what changed in it since.
    let named = ends_in_name(src);
    if dest_is_dir && named && is_recorded_copy(dest, src, &src_st, opts) {
        let why = Refusal::AlreadyCopied {
            source: src.to_path_buf(),
            dest: dest.to_path_buf(),
        };
        return Err(Error::refused(Side::Destination, dest, Op::Copy, why));
    }
    let mut parents_made = Vec::new();
    let dst_path = match (dest_is_dir, named) {
        _ if opts.parents => {
            let keep = opts.preserve.mode || opts.preserve.owner;
            parents_path(src, dest, keep, &mut parents_made)?
        }
        (true, true) => dest.join(src.file_name().expect("named")),
        // SOURCE/. into a symlink to a directory: into that directory, as
        // cp and rsync write.
        (true, false)
            if sys::stat_path(dest, false).is_ok_and(|l| l.kind() == FileKind::Symlink) =>
        {
            std::fs::canonicalize(dest).map_err(|e| Error::dst(dest, Op::Resolve, &e))?
        }
        _ => dest.to_path_buf(),
    };
    let trailing_sep = ends_in_separator(&dst_path);
    if trailing_sep && !dest_is_dir && !src_is_dir {
        return Err(Error::refused(
            Side::Destination,
            &dst_path,
            Op::Create,
            Refusal::NotADirectory,
        ));
    }

    check_existing(src, &src_st, &dst_path, opts)?;
    // cp reads a FIFO or device named as a source (without -R), and writes
    // a file's data through a symlinked DEST and into a FIFO or device.
    let read_data = opts.read_named_specials && reads_as_data(src_st.kind());
    let copies_data = src_st.kind() == FileKind::File || read_data;
    let named = dst_path.clone();
    let replace_links = opts.backup.is_some() || opts.link_files.is_some();
    let (dst_path, write_into) = match copies_data && !opts.remove_destination {
        true => data_destination(src, dst_path, replace_links)?,
        false => (dst_path, false),
    };
    let named = (named != dst_path).then_some(named);

    let (src_parent, src_name) = split(src).map_err(|e| Error::src(src, Op::Resolve, &e))?;
    let (dst_parent, dst_name) =
        split(&dst_path).map_err(|e| Error::dst(&dst_path, Op::Resolve, &e))?;

    let dir_flags = sys::OPEN_DIR_FLAGS;
    // The source's parent is only searched: one that may not be read
    // (mode 0311) still lets its entry be opened, as for cp.
    let src_dir = sys::open_path(&src_parent, dir_flags)
        .or_else(|_| sys::open_path(&src_parent, sys::SEARCH_DIR_FLAGS))
        .map_err(|e| Error::src(&src_parent, Op::Open, &e))?;
    let dst_dir = sys::open_path(&dst_parent, dir_flags)
        .map_err(|e| Error::dst(&dst_parent, Op::Open, &e))?;

    // The destination must not be the source directory or lie anywhere below
    // it, or the copy would never end. Its parent is compared by identity
    // (device and inode) with each directory above it as the kernel walks
    // `..`, so a symlinked parent, a `..` path or a bind mount of the source
    // is seen for what it is.
    if src_is_dir && is_at_or_below(&dst_dir, (src_st.dev, src_st.ino)) {
        return Err(Error::refused(
            Side::Source,
            src,
            Op::Copy,
            Refusal::IntoItself {
                dest: Some(dst_path.clone()),
            },
        ));
    }
    let cname = |n: &OsStr, p: &Path| sys::cstring(n).map_err(|e| Error::dst(p, Op::Name, &e));
    // The basis mirrors DEST: a directory copied as DEST itself is the
    // basis directory; anything copied into DEST (or a file copied to a
    // new name) is the same name there.
    let basis = basis.map(|b| match src_is_dir && dst_path == dest {
        true => b.to_path_buf(),
        false => b.join(&dst_name),
    });
    Ok(Job {
        basis,
        src_name: cname(&src_name, src)?,
        dst_name: cname(&dst_name, &dst_path)?,
        src_dir,
        dst_dir,
        src_parent,
        dst_parent,
        follow,
        read_data,
        write_into,
        parents_made,
        named,
        round: 0,
    })
}

/// The directory (by identity) and name a path names.
fn named_key(path: &Path) -> Option<((u64, u64), CString)> {
    let (parent, name) = split(path).ok()?;
    let st = sys::stat_path(&parent, true).ok()?;
    Some(((st.dev, st.ino), sys::cstring(&name).ok()?))
}

/// `--parents`: SOURCE's copy is `DEST/SOURCE` (a leading `/` and `.`
/// components left out); the directories on the way that are missing are
/// made, each writable by us until the copy ends (`made`: the source
/// directory, the one made, and the bits it was made with, for its
/// metadata then).
///
/// With `-p` (`keep`: the mode or owner kept) those that were there get
/// their sources' metadata too, as cp -p gives it.
fn parents_path(
    src: &Path,
    dest: &Path,
    keep: bool,
    made: &mut Vec<ParentMade>,
) -> Result<PathBuf, Error> {
    let rel: PathBuf = src
        .components()
        .filter(|c| matches!(c, Component::Normal(_) | Component::ParentDir))
        .collect();
    let mut src_at = PathBuf::new();
    for c in src.components() {
        if matches!(c, Component::RootDir | Component::Prefix(_)) {
            src_at.push(c);
        }
    }
    let mut at = dest.to_path_buf();
    let parents: Vec<_> = rel.components().collect();
    for c in parents.iter().take(parents.len().saturating_sub(1)) {
        at.push(c);
        src_at.push(c);
        if *c == Component::ParentDir {
            continue;
        }
        let st = sys::stat_path(&src_at, true).map_err(|e| Error::src(&src_at, Op::Stat, &e))?;
        match sys::stat_path(&at, true) {
            Ok(d) if d.kind() == FileKind::Dir => {
                if keep {
                    made.push(ParentMade {
                        src: src_at.clone(),
                        dst: at.clone(),
                        mode: d.perm(),
                        existed: true,
                    });
                }
                continue;
            }
            Ok(_) => {
                let why = Refusal::NotADirectory;
                return Err(Error::refused(Side::Destination, &at, Op::Mkdir, why));
            }
            Err(_) => {}
        }
        let perm = st.perm() & 0o777;
        let mode = if perm & 0o300 == 0o300 { perm } else { 0o700 };
        let (dir, name) = sys::open_parent(&at).map_err(|e| Error::dst(&at, Op::Open, &e))?;
        sys::mkdir_at(dir.as_fd(), &name, mode).map_err(|e| Error::dst(&at, Op::Mkdir, &e))?;
        made.push(ParentMade {
            src: src_at.clone(),
            dst: at.clone(),
            mode,
            existed: false,
        });
    }
    Ok(dest.join(rel))
}

/// A directory `--parents` made on the way to a source's copy.
pub(crate) struct ParentMade {
    /// The source directory it copies.
    pub src: PathBuf,
    /// The directory made.
    pub dst: PathBuf,
    /// The permission bits it was made with (before the umask), or has.
    pub mode: u32,
    /// It was there already (`-p` gives it the source's metadata).
    pub existed: bool,
}

/// Whether an entry of this kind named as a source is read for its data
/// ([`CopyOptions::read_named_specials`]): a FIFO or a device, and a
/// socket, which has no data: opening it fails, as in cp, rather than
/// making a socket node in the place of DEST.
fn reads_as_data(kind: FileKind) -> bool {
    matches!(
        kind,
        FileKind::Fifo | FileKind::CharDevice | FileKind::BlockDevice | FileKind::Socket
    )
}

/// Where a file's data named for `dst` goes, as cp writes it: through a
/// symlink to the file it points to (the path of that file: the copy
/// replaces it there, keeping its mode and owner); into an existing FIFO
/// or device (`true`: written into, never replaced). Refused: a symlink
/// that points nowhere, or to a directory; a block device in use.
///
/// With `replace_links` (`--backup`, which keeps it as the backup; `-l` or
/// `-s`, which make a link in its place as `cp -f` does), a symlink is not
/// written through but replaced.
fn data_destination(
    src: &Path,
    dst: PathBuf,
    replace_links: bool,
) -> Result<(PathBuf, bool), Error> {
    let Ok(entry) = sys::stat_path(&dst, false) else {
        return Ok((dst, false));
    };
    let is_link = entry.kind() == FileKind::Symlink;
    if is_link && replace_links {
        return Ok((dst, false));
    }
    let st = match is_link {
        false => entry,
        true => match sys::stat_path(&dst, true) {
            Ok(st) => st,
            Err(e) if sys::is_not_found(&e) => {
                let why = Refusal::DanglingDestination;
                return Err(Error::refused(Side::Destination, &dst, Op::Copy, why));
            }
            Err(e) => return Err(Error::dst(&dst, Op::Stat, &e)),
        },
    };
    match st.kind() {
        FileKind::File if is_link => match std::fs::canonicalize(&dst) {
            Ok(real) => Ok((real, false)),
            Err(e) => Err(Error::dst(&dst, Op::Resolve, &e)),
        },
        FileKind::File => Ok((dst, false)),
        FileKind::Dir => {
            let why = Refusal::NonDirOverDir {
                source: Some(src.to_path_buf()),
            };
            Err(Error::refused(Side::Destination, &dst, Op::Copy, why))
        }
        FileKind::BlockDevice => match device_in_use(&st) {
            Some(at) => {
                let why = Refusal::DeviceInUse { at };
                Err(Error::refused(Side::Destination, &dst, Op::Copy, why))
            }
            None => Ok((dst, true)),
        },
        _ => Ok((dst, true)),
    }
}

/// Where the block device `st`, or one of its partitions, is mounted.
fn device_in_use(st: &Stat) -> Option<String> {
    let mut ours = vec![st.rdev];
    ours.extend(sys::partitions(st.rdev));
    sys::mounts()
        .into_iter()
        .find(|(d, _)| ours.contains(d))
        .map(|(_, at)| at)
}

/// Refuses a destination that already exists and is the source itself, or
/// is a directory where the source is not (or the other way round).
///
/// Another name of a file (a symlink to it, a hard link) is no refusal
/// with `--backup`, which keeps that name as the backup before the copy
/// replaces it (cp's), nor for `-l`, whose link may be there already.
fn check_existing(
    src: &Path,
    src_st: &Stat,
    dst_path: &Path,
    opts: &CopyOptions,
) -> Result<(), Error> {
    let src_is_dir = src_st.kind() == FileKind::Dir;
    let dst_lst = sys::stat_path(dst_path, false).ok();
    if let Some(dst_lst) = &dst_lst {
        // -l where DEST is already the very link (not a symlink to it:
        // linking that symlink over its target would lose the target).
        let linked = opts.link_files == Some(crate::options::LinkFiles::Hard)
            && (dst_lst.dev, dst_lst.ino) == (src_st.dev, src_st.ino);
        // --remove-destination takes a symlink away, never writes through it.
        let removed = opts.remove_destination && dst_lst.kind() == FileKind::Symlink;
        let waived = !src_is_dir
            && (opts.backup.is_some() || linked || removed)
            && !same_entry(src, dst_path);
        if !waived && same_file(src, src_st, dst_path, dst_lst) {
            return Err(Error::refused(
                Side::Source,
                src,
                Op::Copy,
                Refusal::SameFile {
                    source: src.to_path_buf(),
                    dest: dst_path.to_path_buf(),
                },
            ));
        }
    }
    if let Some(dst_st) = dst_lst {
        let dst_is_dir = dst_st.kind() == FileKind::Dir;
        if src_is_dir && !dst_is_dir {
            return Err(Error::refused(
                Side::Destination,
                dst_path,
                Op::Copy,
                Refusal::DirOverNonDir {
                    source: Some(src.to_path_buf()),
                },
            ));
        }
        // -n keeps it, and -u when it is not older than the source: cp
        // leaves it without a word.
        if !src_is_dir && dst_is_dir && opts.skips(&dst_st, src_st) {
            return Err(Error::refused(
                Side::Destination,
                dst_path,
                Op::Copy,
                Refusal::KeptExisting,
            ));
        }
        if !src_is_dir && dst_is_dir {
            return Err(Error::refused(
                Side::Destination,
                dst_path,
                Op::Copy,
                Refusal::NonDirOverDir {
                    source: Some(src.to_path_buf()),
                },
            ));
        }
    }
    Ok(())
}

/// Whether `a` and `b` name the same directory entry: the same name in the
/// same directory (compared by identity), not merely the same file.
fn same_entry(a: &Path, b: &Path) -> bool {
    let (Ok((ap, an)), Ok((bp, bn))) = (split(a), split(b)) else {
        return false;
    };
    let id = |p: &Path| sys::stat_path(p, true).ok().map(|st| (st.dev, st.ino));
    an == bn && id(&ap).is_some() && id(&ap) == id(&bp)
}

/// Whether copying `src` (whose followed or not followed stat, as the copy
/// will read it, is `src_st`) to `dst` (whose own entry is `dst_lst`) would
/// write over the source itself, by any name: the same entry or a hard link
/// of it (also through `..`, a symlinked parent or a bind mount, which all
/// end at the same device and inode); a symlink copied over the file it
/// points to (which would leave a symlink to itself and lose the file); or
/// a destination that is a symlink to the source (cp refuses both: "are the
/// same file"). A symlink copied over another symlink to the same target
/// replaces only a link, and is allowed.
fn same_file(src: &Path, src_st: &sys::Stat, dst: &Path, dst_lst: &sys::Stat) -> bool {
    let id = |st: &sys::Stat| (st.dev, st.ino);
    if id(src_st) == id(dst_lst) {
        return true;
    }
    let src_is_link = src_st.kind() == FileKind::Symlink;
    let dst_is_link = dst_lst.kind() == FileKind::Symlink;
    if src_is_link && dst_is_link {
        return false;
    }
    // What each side resolves to: the source's target when it is copied as
    // a symlink, the destination's target when it is one.
    let src_real = match src_is_link {
        true => sys::stat_path(src, true).ok().map(|st| id(&st)),
        false => Some(id(src_st)),
    };
    let dst_real = match dst_is_link {
        true => sys::stat_path(dst, true).ok().map(|st| id(&st)),
        false => Some(id(dst_lst)),
    };
    src_real.is_some() && src_real == dst_real
}

/// Whether the directory `dir`, or any directory above it, is the
/// directory `id` (device, inode). The walk is by `..` paths from `dir`
/// (only search permission is needed), ending at the root, whose `..` is
/// itself. A directory that cannot be reached counts as "no": the copy's
/// walk still refuses to enter its own destination.
fn is_at_or_below(dir: &Fd, id: (u64, u64)) -> bool {
    use crate::sys::AsFd;
    let mut up = String::from(".");
    let mut last = None;
    // PATH_MAX bounds the walk: 1,365 levels of "../".
    while up.len() < 4096 {
        let Ok(name) = CString::new(up.as_str()) else {
            return false;
        };
        let Ok(st) = sys::stat_at(dir.as_fd(), &name, true) else {
            return false;
        };
        let here = (st.dev, st.ino);
        if here == id {
            return true;
        }
        if last == Some(here) {
            return false;
        }
        last = Some(here);
        up = match up.as_str() {
            "." => String::from(".."),
            _ => up + "/..",
        };
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Refusal;

    /// A scratch directory with a file `f` and a directory `d`.
    fn scratch(tag: &str) -> PathBuf {
        let w = std::env::temp_dir().join(format!("kopiru-plan-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&w);
        std::fs::create_dir_all(w.join("d")).unwrap();
        std::fs::write(w.join("f"), b"x").unwrap();
        w
    }

    /// (destination parent, destination name) of each job.
    fn targets(jobs: &[Job]) -> Vec<(PathBuf, String)> {
        jobs.iter()
            .map(|j| {
                let name = j.dst_name.to_string_lossy().into_owned();
                (j.dst_parent.clone(), name)
            })
            .collect()
    }

    #[test]
    fn names_of_their_own() {
        assert!(ends_in_name(Path::new("a/b")));
        assert!(ends_in_name(Path::new("a/b/")));
        assert!(!ends_in_name(Path::new("a/.")));
        assert!(!ends_in_name(Path::new("a/..")));
        assert!(!ends_in_name(Path::new("/")));
        assert!(!ends_in_name(Path::new(".")));
    }

    #[test]
    fn cp_destination_rules() {
        let w = scratch("rules");
        // The jobs hold the directories open: Windows removes an open
        // directory only once it is closed.
        {
            let opts = CopyOptions::default();
            // A file to a new name; a file into an existing directory.
            let (jobs, refused) = plan(&[w.join("f")], &w.join("g"), &opts).unwrap();
            assert!(refused.is_empty());
            assert_eq!(targets(&jobs), [(w.clone(), "g".into())]);
            let (jobs, _) = plan(&[w.join("f")], &w.join("d"), &opts).unwrap();
            assert_eq!(targets(&jobs), [(w.join("d"), "f".into())]);
            // A directory's contents ("d/.") merge into the destination itself.
            let (jobs, _) = plan(&[w.join("d/.")], &w.join("e"), &opts).unwrap();
            assert_eq!(targets(&jobs), [(w.clone(), "e".into())]);
            // -T: the existing directory is the copy itself.
            let t = CopyOptions {
                no_target_directory: true,
                ..CopyOptions::default()
            };
            let (jobs, _) = plan(&[w.join("d")], &w.join("d2"), &t).unwrap();
            assert_eq!(targets(&jobs), [(w.clone(), "d2".into())]);
        }
        std::fs::remove_dir_all(&w).unwrap();
    }

    #[test]
    fn unusable_requests() {
        let w = scratch("usage");
        let opts = CopyOptions::default();
        // Several sources need an existing directory.
        assert!(plan(&[w.join("f"), w.join("d")], &w.join("new"), &opts).is_err());
        assert!(plan(&[w.join("f"), w.join("d")], &w.join("f"), &opts).is_err());
        let t = CopyOptions {
            no_target_directory: true,
            ..CopyOptions::default()
        };
        assert!(plan(&[w.join("f"), w.join("d")], &w.join("d"), &t).is_err());
        assert!(plan(&[], &w.join("d"), &opts).is_err());
        std::fs::remove_dir_all(&w).unwrap();
    }

    #[test]
    fn refusals_before_anything_is_written() {
        let w = scratch("refuse");
        let opts = CopyOptions::default();
        let refusal = |src: PathBuf, dst: PathBuf| {
            let (jobs, refused) = plan(&[src], &dst, &opts).unwrap();
            assert!(jobs.is_empty());
            refused[0].refusal().cloned()
        };
        // A missing source is an OS error (stat: not found), not a refusal.
        assert!(refusal(w.join("missing"), w.join("d")).is_none());
        assert!(matches!(
            refusal(w.join("f"), w.join("f")),
            Some(Refusal::SameFile { .. })
        ));
        assert!(matches!(
            refusal(w.join("d"), w.join("d/sub")),
            Some(Refusal::IntoItself { .. })
        ));
        // Windows makes symlinks only with a privilege.
        if cfg!(unix) {
            use crate::sys::{self, AsFd};
            let (dir, name) = sys::open_parent(&w.join("link")).unwrap();
            sys::symlink_at(c"f", dir.as_fd(), &name).unwrap();
            assert!(matches!(
                refusal(w.join("link"), w.join("f")),
                Some(Refusal::SameFile { .. })
            ));
        }
        std::fs::write(w.join("d/f"), b"y").unwrap();
        assert!(matches!(
            refusal(w.join("d"), w.join("f")),
            Some(Refusal::DirOverNonDir { .. })
        ));
        std::fs::remove_dir_all(&w).unwrap();
    }
}
