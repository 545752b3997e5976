//! Command-line arguments, converted into the engine's options.

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};
use kopiru::{Choice, CopyOptions, Follow, MethodChoice, Preserve, SparseMode, SyncMode};

/// An option's choices from the engine's table (`kopiru::Choice`), with
/// their help: the Node binding parses the same names.
fn choices<T: Choice + Send + Sync + Clone>() -> impl TypedValueParser<Value = T> {
    PossibleValuesParser::new(
        T::CHOICES
            .iter()
            .map(|&(_, name, about)| PossibleValue::new(name).help(about)),
    )
    .map(|name| T::parse(&name).expect("clap checked the name"))
}
use std::path::PathBuf;

mod bench;
pub use bench::*;
#[cfg(feature = "gui")]
mod gui;
#[cfg(feature = "gui")]
pub use gui::*;

/// Copies files, directory trees and disk images as fast as the filesystem
/// allows, without losing data.
#[derive(Parser)]
#[command(name = "kopiru", version, about, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Copy files and directory trees (cp-like destination rules).
    #[command(
        visible_alias = "cp",
        infer_long_args = true,
        args_override_self = true,
        override_usage = "kopiru copy [OPTIONS] <SOURCE>... <DEST>\n       \
                          kopiru copy [OPTIONS] -t <DIR> <SOURCE>...",
        after_help = COPY_AFTER_HELP
    )]
    Copy(Box<CopyArgs>),
    /// Compare two trees (or files) by content: every file hashed (BLAKE3)
    /// on both sides, the destination read from the device, not the cache.
    /// Prints each difference; exits 0 if identical, 1 if not, 2 on errors,
    /// 20 if stopped by a signal.
    Verify(VerifyArgs),
    /// Write a disk image (raw, or xz/gzip/zstd/bzip2, decompressed as a
    /// stream; - for standard input) to one or more whole block devices,
    /// then read each back around the cache and compare.
    #[command(after_help = FLASH_AFTER_HELP)]
    Flash(FlashArgs),
    /// Read a block device (or, with --file, a regular file) into an image:
    /// raw, or compressed by OUTPUT's extension (.zst, .xz, .gz), with a
    /// block map if asked; verified, then put in place under OUTPUT.
    #[command(after_help = IMAGE_AFTER_HELP)]
    Image(ImageArgs),
    /// Flash images to cards and back cards up from a page in your browser,
    /// served by kopiru on 127.0.0.1 (nothing to install, nothing
    /// downloaded).
    #[cfg(feature = "gui")]
    #[command(after_help = GUI_AFTER_HELP)]
    Gui(GuiArgs),
    /// What `kopiru gui` runs as root for one operation (not for use by hand).
    #[cfg(feature = "gui")]
    #[command(name = "gui-helper", hide = true)]
    GuiHelper(GuiHelperArgs),
    /// Make identical files share their blocks (XFS with reflink, Btrfs;
    /// APFS on macOS), freeing the space of every duplicate. Contents,
    /// permissions, owners and times do not change; each file stays
    /// independent.
    #[command(after_help = DEDUPE_AFTER_HELP)]
    Dedupe(DedupeArgs),
    /// Show a path's filesystem and whether clone and offload work from one
    /// path to another (tried on scratch files, removed afterwards).
    #[command(override_usage = "kopiru probe [OPTIONS] <PATH> [<PATH>]")]
    Probe(ProbeArgs),
    /// Measure copying on this machine.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Print a shell completion script on stdout (see the README's
    /// Install section for where to put it).
    #[command(after_help = COMPLETIONS_AFTER_HELP)]
    Completions(CompletionsArgs),
    /// Print the man page (roff) of kopiru or of one command on stdout, or
    /// write every page into a directory.
    #[command(after_help = MAN_AFTER_HELP)]
    Man(ManArgs),
}

const COMPLETIONS_AFTER_HELP: &str = "\
Examples:
  kopiru completions bash > /etc/bash_completion.d/kopiru
  kopiru completions zsh > \"${fpath[1]}/_kopiru\"
  kopiru completions fish > ~/.config/fish/completions/kopiru.fish";

const MAN_AFTER_HELP: &str = "\
Examples:
  kopiru man | man -l -
  kopiru man copy | man -l -
  kopiru man --dir /usr/local/share/man/man1   (kopiru.1, kopiru-copy.1, ...)";

#[derive(Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Args)]
pub struct ManArgs {
    /// The command whose page to print (e.g. copy, or bench sweep)
    /// [default: kopiru's own page].
    #[arg(value_name = "COMMAND")]
    pub command: Vec<String>,

    /// Write every page (kopiru.1, kopiru-copy.1, ...) into this directory
    /// instead of printing one.
    #[arg(long, value_name = "DIR", conflicts_with = "command")]
    pub dir: Option<PathBuf>,
}

const COPY_AFTER_HELP: &str = "\
Methods, tried per file in this order with --method auto: clone (share blocks:
FICLONE on Linux, clonefile on macOS), offload (copy_file_range: the kernel
copies), stream (read/write through one reused buffer). What failed is
remembered per pair of devices.

Where cp and rsync differ, kopiru follows cp: -n is --no-clobber (rsync's
-n is --dry-run, long form only here); SOURCE/ is the same as SOURCE, the directory itself
(write SOURCE/. for its contents, which rsync spells SOURCE/); -u is cp's
--update (use --resume to finish an interrupted copy). cp's spellings work
too: -t DIR, -p, -v, -u, -x, -b, -i, -f, --reflink[=auto|always|never]; and
rsync's --exclude/--include/--exclude-from, --dry-run, --itemize-changes, -c,
--delete, --partial and --link-dest (long forms where cp's short ones
differ), and --clone-dest, --link-dest's clone twin.

Nothing is ever half-written under its final name: a new directory tree is
built under a temporary name (.kopiru-tmp.tree.*) beside its destination and
renamed into place at the end; every file is written under a temporary name
(.kopiru-tmp.*) and renamed when whole. With --sync end (the default) the
renames wait until the data is on disk, so after a crash a name holds either
the complete new file or what was there before. Run the same command with
--resume to finish an interrupted copy.

Exit codes: 0 everything copied; 23 some files failed, the rest was copied;
1 nothing could be copied; 2 usage error; 20 stopped by SIGINT, SIGTERM or
SIGHUP (run the same command with --resume to finish; a second signal exits
at once).";

#[derive(Clone, Copy, ValueEnum)]
pub enum ReflinkArg {
    /// Clone where possible, else copy (--method auto).
    Auto,
    /// Clone or fail (--method clone).
    Always,
    /// Never share blocks (--method stream).
    Never,
}

/// The progress-bar switches every long-running command takes.
#[derive(Args)]
pub struct ProgressArgs {
    /// Show a progress bar even when stderr is not a terminal.
    #[arg(long, overrides_with = "no_progress")]
    pub progress: bool,

    /// Never show a progress bar.
    #[arg(long)]
    pub no_progress: bool,
}

impl ProgressArgs {
    /// Whether to draw a bar: forced, or on a terminal when `tty_ok`, never
    /// with --no-progress.
    pub fn wanted(&self, tty_ok: bool) -> bool {
        use std::io::IsTerminal;
        !self.no_progress && (self.progress || (tty_ok && std::io::stderr().is_terminal()))
    }
}

#[derive(Args)]
pub struct CopyArgs {
    /// Sources, then the destination (with -t: sources only).
    #[arg(required = true, num_args = 1.., value_name = "PATH")]
    pub paths: Vec<PathBuf>,

    /// Copy every PATH into DIR, an existing directory (cp's -t).
    #[arg(
        short = 't',
        long,
        value_name = "DIR",
        conflicts_with = "no_target_directory"
    )]
    pub target_directory: Option<PathBuf>,

    /// cp's -R: directories are copied whole with or without it, but as with
    /// cp, a symbolic link named as a source is then copied as a link (not
    /// followed), and a FIFO or device named as a source is made again as
    /// a node (not read for its data). With --files-from (as rsync's -r), a
    /// listed directory is copied whole instead of only made.
    #[arg(short = 'r', short_alias = 'R', long = "recursive", action = ArgAction::SetTrue)]
    pub recursive: bool,

    /// Keep everything: also owner, group and extended attributes (ACLs
    /// included); as cp's -a, implies -R and -P. What cannot be kept is
    /// reported as a warning.
    #[arg(short = 'a', long)]
    pub archive: bool,

    /// Metadata to keep besides the default's (or -a's, -p's),
    /// comma-separated (cp's words, and shorter ones): mode, ownership
    /// (owner), timestamps (times), links, xattr (xattrs), all; alone,
    /// mode,ownership,timestamps. --no-preserve leaves pieces out
    /// [default: timestamps,links].
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "mode,ownership,timestamps"
    )]
    pub preserve: Vec<String>,

    /// Also keep mode, times and owner: cp's -p, the same as adding
    /// --preserve=mode,ownership,timestamps.
    #[arg(short = 'p')]
    pub preserve_basic: bool,

    /// Follow every symbolic link in the sources (copy what they point to).
    #[arg(short = 'L', long = "dereference", overrides_with_all = ["follow_args", "no_dereference"])]
    pub dereference: bool,

    /// Follow symbolic links given on the command line only (the default
    /// without -r and -a, as cp's).
    #[arg(short = 'H', id = "follow_args", overrides_with_all = ["dereference", "no_dereference"])]
    pub follow_args: bool,

    /// How file data is moved.
    #[arg(long, value_parser = choices::<MethodChoice>(), default_value = "auto")]
    pub method: MethodChoice,

    /// cp's spelling of --method: auto is --method auto, always (the
    /// default when WHEN is left out) is --method clone, never is --method
    /// stream.
    #[arg(
        long,
        value_enum,
        value_name = "WHEN",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "always",
        conflicts_with = "method"
    )]
    pub reflink: Option<ReflinkArg>,

    /// How holes in sparse files are kept.
    #[arg(long, value_parser = choices::<SparseMode>(), default_value = "auto")]
    pub sparse: SparseMode,

    /// When copied data is made durable.
    #[arg(long, value_parser = choices::<SyncMode>(), default_value = "end")]
    pub sync: SyncMode,

    /// Finish an interrupted copy (same command again): complete files are
    /// kept, leftover temporary files removed, the rest copied. A DEST the
    /// first run made as the copy of a directory is merged into when kopiru
    /// can prove it is that copy (its record of copies); where it cannot
    /// (no record kept, another user), cp's rule copies into DEST: give -T
    /// both times then.
    #[arg(long)]
    pub resume: bool,

    /// Treat DEST as the copy itself, even if it is an existing directory
    /// (merge into it) rather than copying into it.
    #[arg(short = 'T', long)]
    pub no_target_directory: bool,

    /// After the copy is on disk, read every copied file back from the
    /// device (not the cache) and compare it with its source (BLAKE3),
    /// hashed as it was read for the copy. Differences are errors.
    #[arg(long)]
    pub verify: bool,

    /// Never replace an existing destination file (a later -i overrides
    /// it, and it overrides an earlier -i).
    #[arg(short = 'n', long, overrides_with = "interactive")]
    pub no_clobber: bool,

    /// Print 'SOURCE' -> 'DEST' on stdout for each file, directory, symlink
    /// and hard link made, quoted as cp -v quotes.
    #[arg(short = 'v', long)]
    pub verbose: bool,

    /// Worker threads [default: the number of CPUs; where the source or
    /// destination is a share (NFS, SMB, FUSE, ...), 32, doubled while
    /// each doubling makes the copy faster, up to 256].
    #[arg(short = 'j', long, value_name = "N")]
    pub jobs: Option<usize>,

    #[command(flatten)]
    pub select: crate::select::SelectArgs,

    #[command(flatten)]
    pub compat: crate::compat::CompatArgs,

    #[command(flatten)]
    pub scale: crate::scale::ScaleArgs,

    #[command(flatten)]
    pub bar: ProgressArgs,

    /// Print, per file, the method used and why a faster one was not.
    #[arg(long)]
    pub explain: bool,

    /// Print a JSON summary on stdout at the end.
    #[arg(long)]
    pub json: bool,
}

/// `--format`: `auto` (`None`: known by its bytes) or a format.
#[derive(Clone, Copy, Debug)]
#[cfg_attr(not(unix), allow(dead_code))] // flash is Unix-only
pub struct FormatChoice(pub Option<kopiru::Format>);

/// `--format`'s names and their help: `auto`, then the engine's codec
/// table (`kopiru::Choice`), as the Node binding's `choices.format`.
fn format_choices() -> impl TypedValueParser<Value = FormatChoice> {
    use kopiru::Format;
    let auto = PossibleValue::new("auto").help("Known by its bytes (and checked against its name)");
    let formats = Format::CHOICES.iter().map(|&(f, name, about)| {
        PossibleValue::new(name)
            .help(about)
            .aliases(f.aliases().iter().copied())
    });
    PossibleValuesParser::new(std::iter::once(auto).chain(formats)).map(|name| {
        match name.as_str() {
            "auto" => FormatChoice(None),
            name => FormatChoice(Some(Format::parse(name).expect("clap checked the name"))),
        }
    })
}

const FLASH_AFTER_HELP: &str = "\
Writes go through O_DIRECT in chunks sized from the device's topology, with
two buffers allocated once (the image is read and decoded while the previous
chunk is written), so progress counts bytes the device has acknowledged. The
first MiB is written last, after everything else is flushed, so a device
whose writing fails part-way (a damaged or truncated image, one larger than
the device whose format does not record its size) keeps its old first MiB.
Refused before anything is written: an image that is not what its name says
(see --format), a device smaller than the image where its size is known
(raw, xz, zstd with frame sizes; gzip's trailer gives a least size); a device
named twice (by any names) or that the kernel will not open exclusively; unless
--force, a mounted device (or one with a mounted partition), one in use
through what is built on it (a mounted loop device over it, device-mapper),
the device holding the root filesystem or the image. On a terminal kopiru
shows the device's size and model and asks before writing (--yes to skip).
Once every device is verified, the SHA-256 of the written image
(decompressed) ends the summary line shown on a terminal, and is in --json,
to compare with the publisher's.

Exit codes: 0 every device written and verified; 23 some devices failed, the
others are good; 1 nothing was written correctly; 2 usage error or refusal;
20 stopped by SIGINT, SIGTERM or SIGHUP.";

const DEDUPE_AFTER_HELP: &str = "\
Files are grouped by filesystem and size, then by their extent maps (files
already sharing all their blocks are one), then by a BLAKE3 of three 4 KiB
samples, then by a BLAKE3 of the whole file: each file is read in full at most
once. The kernel's verified dedupe (FIDEDUPERANGE) then compares the bytes
under lock, so a file changed after hashing is left alone. Symlinks are never
followed; hard links count once. Files on filesystems that cannot share blocks
are left alone, and kopiru says so.

Exit codes: 0 done (or nothing to do); 23 some files failed; 1 nothing could
be done; 2 usage error; 20 stopped by SIGINT, SIGTERM or SIGHUP.";

#[derive(Args)]
pub struct FlashArgs {
    /// The image: a file, - for standard input, or an http:// or https://
    /// URL (streamed: decoded as it arrives, never stored; a dropped or
    /// stalled connection is resumed with Range and If-Range).
    pub image: PathBuf,

    /// Whole block devices to write (several: one read of the image). A
    /// symlink (/dev/disk/by-id/..., /dev/mapper/...) is resolved once,
    /// and the device it names is checked, written and read back.
    #[arg(required = true, value_name = "DEVICE")]
    pub devices: Vec<PathBuf>,

    /// The image's format. auto: known by its bytes (a compressed format
    /// by its header; raw by a partition table or filesystem at its
    /// start, or by a raw image's name: .img, .iso, .raw, .bin, .wic, ...).
    /// An image named as a compressed format that its bytes are not, text,
    /// a web page, or bytes of no known format under another name are
    /// refused before anything is written.
    #[arg(long, value_name = "FORMAT", default_value = "auto", value_parser = format_choices())]
    pub format: FormatChoice,

    /// Do not read the devices back to compare.
    #[arg(long)]
    pub no_verify: bool,

    /// Write only the ranges this block map lists (bmaptool's format,
    /// version 2, SHA-256): its own checksum and each range's are checked.
    /// A file or a URL; auto: the image's URL with .bmap added, if the
    /// server has it (else every byte is written).
    #[arg(long, value_name = "FILE|URL|auto")]
    pub bmap: Option<PathBuf>,

    /// The SHA-256 of the image file as published (compressed, as a
    /// SHA256SUMS lists it), checked as it is read: on a mismatch the
    /// flash fails and the devices' first MiB is not written.
    #[arg(long, value_name = "HEX", value_parser = |s: &str| s.trim().parse::<kopiru::Sha256>())]
    pub sha256: Option<kopiru::Sha256>,

    /// For a URL: a connection that brings nothing for this many seconds
    /// is dropped and resumed (up to 8 tries in a row).
    #[arg(long, value_name = "SECS", default_value = "30")]
    pub stall_timeout: f64,

    /// The devices already read as zeros: do not write the image's all-zero
    /// 64 KiB blocks.
    #[arg(long, conflicts_with = "zero_first")]
    pub zeroed: bool,

    /// Zero each device first (BLKZEROOUT, which guarantees zeros on read),
    /// then skip the image's all-zero 64 KiB blocks.
    #[arg(long)]
    pub zero_first: bool,

    /// Read each block before writing it, and leave it alone if it already
    /// holds the image's bytes (re-flashing a device that mostly has them).
    #[arg(long)]
    pub skip_identical: bool,

    /// Memory that decoding an xz image on several threads may take,
    /// kopiru's own buffers counted (a block's buffers per thread, e.g.
    /// 256M, 1G; 0: one thread). Threads: one per CPU but one, the
    /// writer's (so one on two CPUs). An image of one block, or whose
    /// blocks do not fit, is decoded on one thread in its dictionary's
    /// memory and 16 MiB.
    #[arg(long, value_name = "SIZE", default_value = "256M", value_parser = crate::size::parse_size)]
    pub memory: u64,

    /// Allow a regular file as a target (created if missing, never under /dev).
    #[arg(long)]
    pub file: bool,

    /// Write even to a mounted device, or the one holding the root
    /// filesystem or the image.
    #[arg(long)]
    pub force: bool,

    /// Do not ask for confirmation.
    #[arg(short = 'y', long)]
    pub yes: bool,

    /// Print a JSON summary on stdout.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub bar: ProgressArgs,
}

const IMAGE_AFTER_HELP: &str = "\
The device is read with O_DIRECT in chunks sized from its topology, into three
buffers allocated once; memory stays bounded whatever its size. All-zero 4 KiB
blocks become holes in a raw OUTPUT. OUTPUT (and the block map) are written
under a temporary name beside them (.NAME.kopiru-image.PID), flushed, read back
around the page cache, decoded and compared by SHA-256 with what was read, and
only then renamed into place: an error or Ctrl-C leaves nothing under their
names. The SHA-256 of the image (uncompressed) ends the summary line shown on a
terminal, and is in --json.

Default levels (measured; see docs/BENCHMARKS.md): zstd 3, xz 2, gzip 6.

Refused (exit 2, nothing written): a device mounted read-write, or with a
partition mounted read-write (unless --force; read-only mounts are fine);
OUTPUT or the map on a filesystem of the device; an existing OUTPUT or map
(unless --force); with --partitions-only, no partition table, or a partition
that ends past the end of the device.

Exit codes: 0 image written (and verified); 1 a read, write or verification
failed (nothing left under OUTPUT); 2 usage error or refusal; 20 stopped by
SIGINT, SIGTERM or SIGHUP (nothing left under OUTPUT).";

#[derive(Args)]
pub struct ImageArgs {
    /// The block device to read (a regular file with --file).
    pub device: PathBuf,

    /// The image to write; its extension chooses the format: .zst (or
    /// .zstd), .xz, .gz, anything else raw.
    pub output: PathBuf,

    /// Also write a block map here (bmaptool's format 2.0, SHA-256): the
    /// 4 KiB blocks that are not all zeros, for `kopiru flash --bmap` and
    /// `bmaptool copy`.
    #[arg(long, value_name = "FILE")]
    pub bmap: Option<PathBuf>,

    /// Read only up to the end of the last partition (MBR or GPT), not the
    /// whole device. (A GPT's backup copy, at the device's end, is left out.)
    #[arg(long)]
    pub partitions_only: bool,

    /// Compression level [default: zstd 3, xz 2, gzip 6; zstd 1-19, xz 0-9,
    /// gzip 1-9].
    #[arg(long, value_name = "N", allow_negative_numbers = false)]
    pub level: Option<i32>,

    /// Compression threads [default: the number of CPUs].
    #[arg(short = 'j', long, value_name = "N")]
    pub jobs: Option<u32>,

    /// Do not read the image back to compare it with the device.
    #[arg(long)]
    pub no_verify: bool,

    /// Allow a regular file as DEVICE.
    #[arg(long)]
    pub file: bool,

    /// Read even a device mounted read-write; replace an existing OUTPUT (and
    /// map), once the new one is complete and verified.
    #[arg(long)]
    pub force: bool,

    /// Print a JSON summary on stdout.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub bar: ProgressArgs,
}

#[derive(Args)]
pub struct DedupeArgs {
    /// Files and directories to search.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,

    /// Report what would be shared and how much, change nothing. (No -n:
    /// in `kopiru copy`, as in cp, -n means --no-clobber.)
    #[arg(long)]
    pub dry_run: bool,

    /// Skip files smaller than this (K, M, G suffixes) [default: one
    /// filesystem block].
    #[arg(long, value_name = "SIZE")]
    pub min_size: Option<String>,

    /// Threads for hashing and sharing [default: the number of CPUs].
    #[arg(short = 'j', long, value_name = "N")]
    pub jobs: Option<usize>,

    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub bar: ProgressArgs,
}

#[derive(Args)]
pub struct VerifyArgs {
    /// The original.
    pub source: PathBuf,
    /// The copy to check.
    pub dest: PathBuf,

    /// Do not report entries that exist only in DEST.
    #[arg(long)]
    pub ignore_extra: bool,

    /// Reading and hashing threads [default: two per CPU, as uncached reads
    /// wait for the device].
    #[arg(short = 'j', long, value_name = "N")]
    pub jobs: Option<usize>,

    /// Print a JSON report on stdout instead of one line per difference.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct ProbeArgs {
    /// The path to probe, and optionally a second one to copy to.
    #[arg(required = true, num_args = 1..=2, value_name = "PATH")]
    pub paths: Vec<PathBuf>,

    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

impl CopyArgs {
    /// The sources and the destination: the last path, or -t's DIR (which
    /// must be an existing directory, as with cp). A usage error otherwise.
    pub fn sources_and_dest(&self) -> Result<(&[PathBuf], PathBuf), String> {
        match &self.target_directory {
            Some(dir) => {
                if !dir.is_dir() {
                    return Err(format!(
                        "-t {}: not an existing directory",
                        crate::render::path(dir)
                    ));
                }
                Ok((&self.paths, dir.clone()))
            }
            None => match self.paths.split_last() {
                Some((dest, sources)) if !sources.is_empty() => Ok((sources, dest.clone())),
                _ => Err("a SOURCE and a DEST are needed (or -t DIR and a SOURCE); \
                    see kopiru copy --help"
                    .into()),
            },
        }
    }

    /// cp's and rsync's spellings of other options, applied once parsed:
    /// --debug is --explain, --info=progress2 is --progress, and
    /// --strip-trailing-slashes takes them off each path.
    pub fn normalize(&mut self) {
        self.explain |= self.compat.debug;
        self.bar.progress |= self.compat.info_progress();
        if self.compat.strip_trailing_slashes {
            for p in &mut self.paths {
                let s = p.as_os_str().as_encoded_bytes();
                let keep = s.len() - s.iter().rev().take_while(|&&b| b == b'/').count();
                if keep > 0 && keep < s.len() {
                    // SAFETY: cut before ASCII '/' bytes only, so the rest is
                    // a valid encoded string, as from_encoded_bytes asks.
                    let cut = unsafe { std::ffi::OsStr::from_encoded_bytes_unchecked(&s[..keep]) };
                    *p = PathBuf::from(cut);
                }
            }
        }
    }

    /// Whether cp's -R rules hold (-r, -R or -a).
    fn recursive(&self) -> bool {
        self.recursive || self.archive
    }

    /// The engine's options, or a usage error.
    pub fn options(&self) -> Result<CopyOptions, String> {
        let mut preserve = if self.archive {
            Preserve::ALL
        } else {
            Preserve::DEFAULT
        };
        // cp's --preserve adds to what is kept (-a's, -p's or the default).
        if !self.preserve.is_empty() {
            let more = crate::compat::preserve_list(self.preserve.iter().map(String::as_str))
                .map_err(|other| format!("unknown --preserve item '{other}'"))?;
            preserve.mode |= more.mode;
            preserve.times |= more.times;
            preserve.owner |= more.owner;
            preserve.xattrs |= more.xattrs;
            preserve.links |= more.links;
        }
        if self.preserve_basic {
            preserve.mode = true;
            preserve.times = true;
            preserve.owner = true;
        }
        let mut opts = CopyOptions::new();
        opts.method = match (self.reflink, self.method) {
            (Some(ReflinkArg::Auto), _) => MethodChoice::Auto,
            (Some(ReflinkArg::Always), _) => MethodChoice::Clone,
            (Some(ReflinkArg::Never), _) => MethodChoice::Stream,
            (None, m) => m,
        };
        opts.sparse = self.sparse;
        opts.preserve = preserve;
        // cp's: -L, -H, -P as given; else -P with -a (cp's -dR), and
        // with -R unless -l; -L with -rl (cp's manual: "cp follows
        // symbolic links ... when --link (-l) is used"); -H without -R.
        opts.follow = if self.dereference {
            Follow::Always
        } else if self.follow_args {
            Follow::CommandLine
        } else if self.compat.never_follow() || self.archive {
            Follow::Never
        } else if self.recursive && self.compat.link {
            Follow::Always
        } else if self.recursive {
            Follow::Never
        } else {
            Follow::CommandLine
        };
        opts.jobs = self.jobs.unwrap_or(0);
        opts.sync = self.sync;
        opts.resume = self.resume;
        opts.no_clobber = self.no_clobber;
        opts.no_target_directory = self.no_target_directory;
        opts.verify = self.verify;
        self.select.apply(&mut opts)?;
        self.compat.apply(&mut opts, self.recursive())?;
        // cp's -S asks for backups too (existing's kind, as a bare -b).
        if self.compat.suffix.is_some() && self.select.backup.is_none() {
            opts.backup = Some(kopiru::Backup::Existing);
        }
        self.scale.apply(&mut opts, self.recursive)?;
        // The engine decides what excludes what; the words are ours.
        match opts.check() {
            Ok(()) => Ok(opts),
            Err(kopiru::PlanError::Excludes {
                first: kopiru::Setting::Partial,
                second: kopiru::Setting::CloneMethod,
            }) => {
                let clone = match self.reflink {
                    Some(_) => "--reflink=always",
                    None => "--method clone",
                };
                Err(format!(
                    "--partial cannot be used with {clone}: a clone is made whole or not at \
                     all, so there is never a part to keep"
                ))
            }
            Err(e) => Err(crate::render::plan_error(&e)),
        }
    }
}
