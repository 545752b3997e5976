//! The options of `kopiru copy` that are cp's and rsync's spellings of
//! what kopiru does (`-P`, `-d`, `-l`, `-s`, `--parents`, `--no-preserve`,
//! `--inplace`, `--info=progress2`, ...), and the one-line answers for
//! those that do not map onto kopiru. Kept out of args.rs.

use clap::Args;
use kopiru::{CopyOptions, LinkFiles, Preserve};
use std::ffi::OsString;

#[derive(Args, Default)]
pub struct CompatArgs {
    /// Never follow symbolic links in the sources, not even those named on
    /// the command line: copy them as links (cp's -P; the default with -r
    /// or -a).
    #[arg(short = 'P', long = "no-dereference", overrides_with_all = ["dereference", "follow_args"])]
    pub no_dereference: bool,

    /// cp's -d: --no-dereference --preserve=links.
    #[arg(short = 'd')]
    pub no_deref_links: bool,

    /// With -r: read FIFOs and devices inside the copied trees for their
    /// data too, as those named as sources are (a FIFO with no writer
    /// waits for one), instead of making them again (cp's --copy-contents).
    #[arg(long)]
    pub copy_contents: bool,

    /// Make a hard link to each source file (each entry that is not a
    /// directory) instead of copying it; directories are made (cp's -l).
    /// No metadata is applied: a hard link is the source's own inode.
    #[arg(short = 'l', long = "link", conflicts_with = "symbolic_link")]
    pub link: bool,

    /// Make a symbolic link to each source file instead of copying it,
    /// naming the source's path as given; directories are made (cp's -s).
    /// A relative source works only into the current directory.
    #[arg(short = 's', long)]
    pub symbolic_link: bool,

    /// Replace each existing destination file by a new one made from the
    /// source alone (cp's): it does not take the replaced file's mode,
    /// owner or attributes, and a symlink, FIFO or device named as DEST is
    /// replaced instead of written through or into.
    #[arg(long)]
    pub remove_destination: bool,

    /// Copy each SOURCE to DEST/SOURCE, its whole path as given (cp's):
    /// kopiru copy --parents a/b/c dir makes dir/a/b/c, the directories on
    /// the way made as copies of a and a/b. DEST must be a directory.
    #[arg(long)]
    pub parents: bool,

    /// Copy the metadata only, no data (cp's): a new file is empty, an
    /// existing one keeps its data and takes the metadata asked for.
    #[arg(long)]
    pub attributes_only: bool,

    /// Metadata not to keep, comma-separated (cp's): mode, ownership,
    /// timestamps, links, xattr, all. Applied after -a, -p and --preserve.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub no_preserve: Vec<String>,

    /// The suffix of a simple backup name [default: ~]; as in cp, -S alone
    /// makes backups as -b does.
    #[arg(short = 'S', long, value_name = "SUFFIX")]
    pub suffix: Option<OsString>,

    /// Remove trailing slashes from each SOURCE (cp's): "link/" is then the
    /// link itself, not the directory it points to.
    #[arg(long)]
    pub strip_trailing_slashes: bool,

    /// Write into an existing destination file instead of replacing it by
    /// a new one renamed over it (rsync's): its other hard links see the
    /// new data. Not atomic: a reader or a crash can see it half-written,
    /// and an interrupted copy leaves it so.
    #[arg(long)]
    pub inplace: bool,

    /// With --delete, also delete destination entries an --exclude matches
    /// (rsync's; without it they are protected).
    #[arg(long)]
    pub delete_excluded: bool,

    /// rsync's --info: progress2 shows the progress bar (--progress), stats
    /// prints --stats at the end; no other flag maps onto kopiru.
    #[arg(long, value_name = "FLAGS", value_delimiter = ',')]
    pub info: Vec<String>,

    /// Print rsync-style statistics at the end, on stdout (rsync's):
    /// entries, files copied, bytes, deletions, time.
    #[arg(long)]
    pub stats: bool,

    /// Refused, with what to use instead: rsync's -z compresses its network
    /// stream; kopiru copies through the filesystem, where there is no stream
    /// to compress.
    #[arg(short = 'z', long, hide = true)]
    pub compress: bool,

    /// cp's --debug: the same as --explain (how each file was copied).
    #[arg(long)]
    pub debug: bool,

    /// Refused: SELinux contexts are extended attributes here (-a or
    /// --preserve=xattr keeps security.selinux); cp's -Z is not taken.
    #[arg(short = 'Z', long, value_name = "CTX", num_args = 0..=1, require_equals = true, hide = true)]
    pub context: Option<Option<String>>,
}

impl CompatArgs {
    /// Adds these options to the engine's (`recursive`: -r, -R or -a, which
    /// decide cp's default for symlinks and special files named as
    /// sources), or a usage error that names what to use.
    pub fn apply(&self, opts: &mut CopyOptions, recursive: bool) -> Result<(), String> {
        if self.compress {
            return Err(
                "-z (--compress) is rsync's compression of its network stream; \
                        kopiru copies through the filesystem, so there is nothing to \
                        compress: leave -z out"
                    .into(),
            );
        }
        if self.context.is_some() {
            return Err("-Z/--context is not taken: SELinux contexts are extended \
                        attributes here, kept by -a or --preserve=xattr"
                .into());
        }
        for flag in &self.info {
            if ![
                "progress2",
                "progress1",
                "progress",
                "stats",
                "stats1",
                "stats2",
            ]
            .contains(&flag.as_str())
            {
                return Err(format!(
                    "--info={flag}: only rsync's progress2 (the progress bar) and stats \
                     (--stats) map onto kopiru; for what each file did use --itemize-changes \
                     or --explain"
                ));
            }
        }
        opts.read_named_specials = !recursive;
        opts.copy_contents = self.copy_contents && recursive;
        opts.link_files = match (self.link, self.symbolic_link) {
            (true, _) => Some(LinkFiles::Hard),
            (_, true) => Some(LinkFiles::Symbolic),
            _ => None,
        };
        opts.remove_destination = self.remove_destination;
        opts.parents = self.parents;
        opts.attributes_only = self.attributes_only;
        opts.inplace = self.inplace;
        opts.delete_excluded = self.delete_excluded;
        opts.backup_suffix = self.suffix.clone();
        if self.no_deref_links {
            opts.preserve.links = true;
        }
        if !self.no_preserve.is_empty() {
            let off = preserve_list(self.no_preserve.iter().map(String::as_str))
                .map_err(|other| format!("unknown --no-preserve item '{other}'"))?;
            let p = &mut opts.preserve;
            // cp's --no-preserve=mode: new entries get the default bits.
            p.plain_mode = off.mode;
            p.mode &= !off.mode;
            p.times &= !off.times;
            p.owner &= !off.owner;
            p.xattrs &= !off.xattrs;
            p.links &= !off.links;
        }
        Ok(())
    }

    /// Whether symbolic links are never followed, by -P or -d.
    pub fn never_follow(&self) -> bool {
        self.no_dereference || self.no_deref_links
    }

    /// Whether --info asks for the progress bar.
    pub fn info_progress(&self) -> bool {
        self.info.iter().any(|f| f.starts_with("progress"))
    }

    /// Whether --stats (or --info=stats) asks for the statistics.
    pub fn wants_stats(&self) -> bool {
        self.stats || self.info.iter().any(|f| f.starts_with("stats"))
    }
}

/// The items of cp's `--preserve=LIST` and `--no-preserve=LIST` (cp's
/// words, and kopiru's own): mode, ownership (owner), timestamps (times),
/// links (link), xattr (xattrs; context, SELinux's, is one), all.
///
/// # Errors
/// The first name that is none of these.
pub fn preserve_list<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Preserve, &'a str> {
    Preserve::from_names(names.into_iter().map(|n| match n {
        "link" => "links",
        "context" => "xattrs",
        n => n,
    }))
}

/// The note for an rsync user whose cluster of short options holds -P
/// beside rsync's usual -a or -v (`-avP`): -P is cp's here.
pub fn rsync_p_note(args: impl IntoIterator<Item = OsString>) -> Option<&'static str> {
    let clustered = args.into_iter().any(|a| {
        let a = a.as_encoded_bytes().to_vec();
        a.len() > 2
            && a[0] == b'-'
            && a[1] != b'-'
            && a.contains(&b'P')
            && (a.contains(&b'a') || a.contains(&b'v'))
    });
    clustered.then_some(
        "kopiru: note: -P here is cp's --no-dereference (symbolic links copied as links); \
         rsync's -P (keep partial files, show progress) is --partial --progress",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_rsync_cluster_with_p_gets_a_note() {
        let args = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        assert!(rsync_p_note(args(&["kopiru", "cp", "-avP", "a", "b"])).is_some());
        assert!(rsync_p_note(args(&["kopiru", "cp", "-P", "a", "b"])).is_none());
        assert!(rsync_p_note(args(&["kopiru", "cp", "-rP", "a", "b"])).is_none());
        assert!(rsync_p_note(args(&["kopiru", "cp", "--partial", "a", "b"])).is_none());
    }

    #[test]
    fn cp_preserve_words() {
        let p = preserve_list(["mode", "ownership", "timestamps", "link", "context"]).unwrap();
        assert!(p.mode && p.owner && p.times && p.links && p.xattrs);
        assert_eq!(preserve_list(["bogus"]), Err("bogus"));
    }
}
