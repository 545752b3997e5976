//! What the caller asks of a copy.

mod builder;

/// Which data-moving method to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum MethodChoice {
    /// The fastest that works: clone, then offload, then stream.
    #[default]
    Auto,
    /// Clone (share blocks) or fail, like `cp --reflink=always`.
    Clone,
    /// In-kernel copy (`copy_file_range`) or fail; the kernel may still share
    /// blocks on filesystems that can.
    Offload,
    /// Read and write through a buffer; never shares blocks.
    Stream,
}

/// How holes in sparse files are treated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SparseMode {
    /// Keep holes of files whose allocated size shows they have some.
    #[default]
    Auto,
    /// Also turn runs of zeros into holes.
    Always,
    /// Write every byte, holes included (disables clone and offload, which
    /// could keep holes).
    Never,
}

/// Whether symbolic links are followed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Follow {
    /// Copy symlinks as symlinks.
    #[default]
    Never,
    /// Follow symlinks named on the command line only (`-H`).
    CommandLine,
    /// Follow every symlink (`-L`).
    Always,
}

/// Which metadata is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Preserve {
    /// Permission bits, including sticky, set-uid and set-gid (those two
    /// only where the copy keeps the owner and group they were set for).
    pub mode: bool,
    /// Access and modification times, to the nanosecond.
    pub times: bool,
    /// Owner and group (needs privilege for other users' files).
    pub owner: bool,
    /// Extended attributes, which include POSIX ACLs.
    pub xattrs: bool,
    /// Hard links inside the copied tree stay hard links.
    pub links: bool,
    /// cp's `--no-preserve=mode`: with `mode` off, a new file gets 0666
    /// and a new directory 0777 less the umask, nothing of the source's
    /// bits (otherwise the source's bits less the umask).
    pub plain_mode: bool,
}

impl Preserve {
    /// The default: times and hard links. The mode is cp's without `-p`:
    /// the source's permission bits less the umask, without set-uid,
    /// set-gid and sticky; a file that replaces another keeps that one's.
    pub const DEFAULT: Preserve = Preserve {
        mode: false,
        times: true,
        owner: false,
        xattrs: false,
        links: true,
        plain_mode: false,
    };
    /// Everything (`-a`).
    pub const ALL: Preserve = Preserve {
        mode: true,
        times: true,
        owner: true,
        xattrs: true,
        links: true,
        plain_mode: false,
    };
}

impl Preserve {
    /// Every name [`Preserve::from_names`] takes (cp's, with rsync's and
    /// cp's longer spellings).
    pub const NAMES: &'static [&'static str] = &[
        "mode",
        "times",
        "timestamps",
        "owner",
        "ownership",
        "xattrs",
        "xattr",
        "links",
        "all",
    ];

    /// Exactly the pieces named (cp's and rsync's words: `mode`, `times`
    /// or `timestamps`, `owner` or `ownership`, `xattrs` or `xattr`,
    /// `links`, `all`: [`Preserve::NAMES`]).
    ///
    /// # Errors
    /// The first name that is none of these.
    pub fn from_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Preserve, &'a str> {
        let mut p = Preserve {
            mode: false,
            times: false,
            owner: false,
            xattrs: false,
            links: false,
            plain_mode: false,
        };
        for name in names {
            match name {
                "mode" => p.mode = true,
                "times" | "timestamps" => p.times = true,
                "owner" | "ownership" => p.owner = true,
                "xattrs" | "xattr" => p.xattrs = true,
                "links" => p.links = true,
                "all" => p = Preserve::ALL,
                other => return Err(other),
            }
        }
        Ok(p)
    }
}

impl Default for Preserve {
    fn default() -> Self {
        Preserve::DEFAULT
    }
}

/// When copied data is made durable (survives a crash or power cut).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SyncMode {
    /// Never flushed by kopiru: data may still be in the page cache at exit
    /// (like `cp`).
    None,
    /// Everything is durable when the copy returns: write-back is started
    /// per file while copying and one flush per destination filesystem waits
    /// for it at the end, before anything appears under its final name.
    #[default]
    End,
    /// Each file (data and name) is durable before the next is reported.
    File,
}

/// An option with named choices (`--method auto`, `{ sync: 'file' }`):
/// one table of names and their one-line help, which the command line and
/// the Node binding both parse and list from.
pub trait Choice: Sized + Copy + PartialEq + 'static {
    /// Every choice, its name, and what it does (the command's `--help`).
    const CHOICES: &'static [(Self, &'static str, &'static str)];

    /// This choice's name.
    fn name(self) -> &'static str {
        Self::CHOICES
            .iter()
            .find(|(c, _, _)| *c == self)
            .map(|&(_, n, _)| n)
            .expect("every choice is in its table")
    }

    /// The choice of that name.
    ///
    /// # Errors
    /// "unknown NAME; one of a, b, c".
    fn parse(name: &str) -> Result<Self, String> {
        Self::CHOICES
            .iter()
            .find(|(_, n, _)| *n == name)
            .map(|&(c, _, _)| c)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::CHOICES.iter().map(|&(_, n, _)| n).collect();
                format!("unknown '{name}'; one of {}", names.join(", "))
            })
    }
}

impl Choice for MethodChoice {
    const CHOICES: &'static [(Self, &'static str, &'static str)] = &[
        (
            MethodChoice::Auto,
            "auto",
            "Fastest that works: clone, then offload, then stream",
        ),
        (
            MethodChoice::Clone,
            "clone",
            "Clone or fail (like cp --reflink=always)",
        ),
        (
            MethodChoice::Offload,
            "offload",
            "copy_file_range or fail (the kernel may still share blocks)",
        ),
        (
            MethodChoice::Stream,
            "stream",
            "Read and write only: never shares blocks",
        ),
    ];
}

impl Choice for SparseMode {
    const CHOICES: &'static [(Self, &'static str, &'static str)] = &[
        (
            SparseMode::Auto,
            "auto",
            "Keep the holes of files that have some",
        ),
        (
            SparseMode::Always,
            "always",
            "Also turn blocks of zeros into holes",
        ),
        (
            SparseMode::Never,
            "never",
            "Write every byte (also rules out clone and offload)",
        ),
    ];
}

impl Choice for SyncMode {
    const CHOICES: &'static [(Self, &'static str, &'static str)] = &[
        (
            SyncMode::None,
            "none",
            "Do not flush: data may still be in memory at exit (like cp)",
        ),
        (
            SyncMode::End,
            "end",
            "Everything is on disk when kopiru exits 0 (write-back starts while copying; one \
             flush per filesystem at the end)",
        ),
        (
            SyncMode::File,
            "file",
            "Each file is on disk before the next one is reported (slow)",
        ),
    ];
}

impl Choice for Follow {
    const CHOICES: &'static [(Self, &'static str, &'static str)] = &[
        (Follow::Never, "never", "Copy symbolic links as links"),
        (
            Follow::CommandLine,
            "command-line",
            "Follow symbolic links given as sources only (-H)",
        ),
        (Follow::Always, "always", "Follow every symbolic link (-L)"),
    ];
}

/// cp's `--backup`: the name a replaced destination entry keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backup {
    /// `name~` (replacing an older one).
    Simple,
    /// `name.~N~`, N one more than the highest there.
    Numbered,
    /// Numbered if `name` has numbered backups already, else simple.
    Existing,
}

/// cp's `-l` and `-s`: links to the source made instead of copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LinkFiles {
    /// A hard link to each source entry that is not a directory (`cp -l`).
    Hard,
    /// A symbolic link to each, naming the source's path as given (`cp -s`).
    Symbolic,
}

/// What `--link-dest` and `--clone-dest` do with an unchanged file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BasisKind {
    /// Hard-link it from the basis directory (rsync's `--link-dest`).
    Link,
    /// Clone its blocks from the basis directory, with the source's
    /// metadata (`--clone-dest`); another copy method where that fails.
    Clone,
}

/// An earlier copy that unchanged files are taken from instead of the
/// source (rsync's `--link-dest DIR`, and `--clone-dest DIR`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Basis {
    /// The directory that mirrors the destination. A relative path is
    /// relative to the destination (as rsync's): `../prev` beside it.
    pub dir: std::path::PathBuf,
    /// Link or clone.
    pub kind: BasisKind,
}

/// Options of one copy.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct CopyOptions {
    /// Data method.
    pub method: MethodChoice,
    /// Hole handling.
    pub sparse: SparseMode,
    /// Metadata to keep.
    pub preserve: Preserve,
    /// Symlink following.
    pub follow: Follow,
    /// A FIFO or device named as a source (not one inside a copied tree)
    /// is read for its data, which becomes a regular file (cp without
    /// `-R`): `/dev/stdin`, a process substitution, a disk. Otherwise it
    /// is made again as a node (cp `-R`).
    pub read_named_specials: bool,
    /// Worker threads; 0 picks from the machine.
    pub jobs: usize,
    /// Durability.
    pub sync: SyncMode,
    /// Finish an interrupted copy: reuse its staged tree, keep destination
    /// files that are already complete, remove leftover temporary files.
    pub resume: bool,
    /// Never replace an existing destination entry (`-n`).
    pub no_clobber: bool,
    /// The destination is the copy itself even if it is an existing
    /// directory (`-T`), so running a command again names the same copy.
    pub no_target_directory: bool,
    /// After copying (and flushing), compare every file with its source,
    /// reading the destination from the device (BLAKE3 of both).
    pub verify: bool,
    /// `--exclude`/`--include`: entries inside the copied directories that
    /// are left out (an excluded directory is not descended into).
    pub filter: crate::Filter,
    /// Write nothing: report through [`crate::Reporter::change`] what a
    /// copy would create or replace, and count it in the summary.
    pub dry_run: bool,
    /// Replace an existing destination entry only when the source is newer
    /// (by modification time), as `cp -u`.
    pub update: bool,
    /// Do not enter directories on another filesystem than the copied
    /// source directory; they are made, empty (`cp -x`).
    pub one_file_system: bool,
    /// An existing destination file is kept when its content is the
    /// source's (compared byte for byte), and replaced otherwise, instead
    /// of the size and time test of `resume` (and the replacement of every
    /// file of a merge).
    pub checksum: bool,
    /// After the copy, remove what the destination holds that the source
    /// does not (entries the filter excludes are kept). Only when the
    /// destination is the copy itself: `no_target_directory` or sources
    /// without a name of their own (`SOURCE/.`).
    pub delete: bool,
    /// rsync's `--inplace`: an existing destination file is written into
    /// (truncated, then filled) instead of replaced by a new file renamed
    /// over it, so its other hard links see the new data. Not atomic: a
    /// reader (or a crash) can see it half-written.
    pub inplace: bool,
    /// cp's `--remove-destination`: an existing destination entry is
    /// replaced by a new one made from the source alone (a file does not
    /// take the replaced file's mode, owner or attributes, and a symlink
    /// or device named as DEST is replaced, not written through).
    pub remove_destination: bool,
    /// cp's `-f`: with `link_files` (`-l`, `-s`), an existing destination
    /// file is replaced by the link; without it (or `remove_destination`,
    /// a backup, or `interactive` answered yes) such a file is kept and the
    /// link refused (`File exists`), as cp refuses it. A copy replaces a
    /// file either way.
    pub force: bool,
    /// rsync's `--delete-excluded`: with `delete`, entries the filter
    /// excludes are deleted too instead of protected.
    pub delete_excluded: bool,
    /// Before an existing destination entry is replaced, it gets a backup
    /// name (`cp --backup`).
    pub backup: Option<Backup>,
    /// The suffix of a simple backup name (`cp -S`; `~` when `None`).
    pub backup_suffix: Option<std::ffi::OsString>,
    /// cp's `-l`/`-s`: every entry that is not a directory becomes a link to
    /// its source instead of a copy; directories are made as usual.
    pub link_files: Option<LinkFiles>,
    /// cp's `--parents`: each source is copied into DEST (a directory) under
    /// its whole path as given (`a/b/c` to `DEST/a/b/c`), the directories on
    /// the way made as copies of the source's.
    pub parents: bool,
    /// cp's `--attributes-only`: files get their metadata and no data (a
    /// new one is empty; an existing one keeps its data).
    pub attributes_only: bool,
    /// cp's `--copy-contents`: FIFOs and devices inside copied trees are read
    /// for their data too (a FIFO with no writer waits for one), as those
    /// named as sources are ([`CopyOptions::read_named_specials`]).
    pub copy_contents: bool,
    /// Report every entry created or replaced through
    /// [`crate::Reporter::change`] (`--itemize-changes`); off by default, as
    /// it costs a path per entry.
    pub report_changes: bool,
    /// Stops the copy when cancelled: checked between entries and between
    /// chunks of a large file. Files in flight are removed, nothing
    /// half-written keeps a final name, a staged tree is kept for
    /// `--resume`, and the summary says `cancelled`.
    pub cancel: crate::Cancel,
    /// A file where the copies this run makes as new trees are recorded,
    /// and looked up: a source copied again to a destination recorded as its
    /// copy merges into it instead of nesting (see the `record` module).
    /// `None`: cp's rule only.
    pub copies_record: Option<std::path::PathBuf>,
    /// A file whose source is unchanged against the same path in this
    /// directory (same size and modification time, or the same content
    /// with `checksum`) is linked or cloned from there instead of copied.
    pub basis: Option<Basis>,
    /// rsync's `--partial`: a file whose copy is interrupted (cancel, or a
    /// read or write error) keeps its written part under a hidden name
    /// beside it, and a later run with `partial` or `resume` checks that
    /// part against the source and continues after the length that
    /// matches. Without either, such leftovers are removed.
    pub partial: bool,
    /// rsync's `--files-from`: copy exactly these entries of the one source
    /// directory, named by paths relative to it, to the same paths under
    /// the destination, which is the copy of the source itself (as with
    /// `no_target_directory`) and is made if missing. Parent directories
    /// are made; a listed directory is made but not entered unless
    /// `recursive`; directory metadata is applied at the end, deepest
    /// first. Several processes may copy lists into one destination at
    /// once (fpart's jobs).
    pub files_from: Option<Vec<std::path::PathBuf>>,
    /// With `files_from`: a listed directory is copied whole (rsync's `-r`).
    pub recursive: bool,
    /// Copy one share of the tree, coordinated with the processes copying
    /// the others through the destination's filesystem (see the `shard`
    /// module): the result is what one process would make.
    pub shard: Option<crate::Shard>,
    /// cp's `-i`: ask [`crate::Reporter::confirm_replace`] before an
    /// existing destination entry is replaced. The copy then runs on one
    /// worker, so the questions come in a predictable order.
    pub interactive: bool,
}

impl Default for CopyOptions {
    fn default() -> Self {
        CopyOptions {
            method: MethodChoice::Auto,
            sparse: SparseMode::Auto,
            preserve: Preserve::DEFAULT,
            follow: Follow::Never,
            read_named_specials: false,
            jobs: 0,
            sync: SyncMode::End,
            resume: false,
            no_clobber: false,
            no_target_directory: false,
            verify: false,
            filter: crate::Filter::new(),
            dry_run: false,
            update: false,
            one_file_system: false,
            checksum: false,
            delete: false,
            inplace: false,
            remove_destination: false,
            force: false,
            delete_excluded: false,
            backup: None,
            backup_suffix: None,
            link_files: None,
            parents: false,
            attributes_only: false,
            copy_contents: false,
            report_changes: false,
            cancel: crate::Cancel::new(),
            copies_record: None,
            basis: None,
            partial: false,
            interactive: false,
            files_from: None,
            recursive: false,
            shard: None,
        }
    }
}

impl CopyOptions {
    /// Whether `-n`, or `-u` (the destination's `dst` not older than the
    /// source's `src`), keeps what is at a destination name.
    pub(crate) fn skips(&self, dst: &crate::sys::Stat, src: &crate::sys::Stat) -> bool {
        self.no_clobber || (self.update && dst.mtime >= src.mtime)
    }

    /// The suffix of a simple backup name: `-S`'s, else `~`.
    pub(crate) fn backup_suffix(&self) -> &std::ffi::OsStr {
        self.backup_suffix
            .as_deref()
            .unwrap_or(std::ffi::OsStr::new("~"))
    }

    pub(crate) fn worker_count(&self) -> usize {
        // Questions come in the order of the walk, one worker's.
        let per_node = self.shard.and_then(|s| s.per_node);
        match (self.interactive, per_node) {
            (true, _) => 1,
            // Ranks on one machine share its CPUs.
            (false, Some(n)) if self.jobs == 0 => (crate::par::workers(0) / n).max(1),
            (false, _) => crate::par::workers(self.jobs),
        }
    }
}
