//! The options of `kopiru copy` that choose what is copied or replaced, and
//! how changes are shown (rsync's and cp's): --exclude, --include,
//! --exclude-from and the others, kept out of args.rs.

use clap::{ArgMatches, Args, ValueEnum};
use kopiru::{Backup, Basis, BasisKind, CopyOptions, Filter, Rule, RuleKind};
use std::io::Read;
use std::path::PathBuf;

#[derive(Args, Default)]
pub struct SelectArgs {
    /// Leave out entries matching PATTERN (rsync's rules, repeatable):
    /// matched against the path inside the copied directory; a pattern
    /// starting with / is anchored there; one with another / matches the
    /// path's tail; one without matches the name; a trailing / matches
    /// directories only; * and ? stop at /, ** does not. The first matching
    /// --exclude/--include wins; an excluded directory is not entered.
    /// Unlike rsync, sources named on the command line are always copied.
    #[arg(long, value_name = "PATTERN")]
    pub exclude: Vec<String>,

    /// Copy entries matching PATTERN even if a later --exclude matches
    /// (e.g. --include '*.rs' --include '*/' --exclude '*').
    #[arg(long, value_name = "PATTERN")]
    pub include: Vec<String>,

    /// Read --exclude patterns from FILE (- for standard input), one per
    /// line; blank lines and lines starting with # or ; are ignored; a line
    /// starting with "+ " is an --include, "- " an --exclude.
    #[arg(long, value_name = "FILE")]
    pub exclude_from: Vec<PathBuf>,

    /// Change nothing: print what would be created or replaced, one line
    /// per entry (as rsync --dry-run -v: "dir/", "file", "link -> target",
    /// "name => first name" for a hard link). Exits as the copy would for
    /// what it can see: 0, 23 if a source cannot be read, 1 if nothing
    /// could be copied. No -n: that is --no-clobber, as in cp.
    #[arg(long)]
    pub dry_run: bool,

    /// Replace an existing destination file only when the source is newer
    /// (modification time), as cp -u; missing ones are copied. Unlike
    /// rsync -u, one with the same time is kept even if its size differs.
    #[arg(short = 'u', long)]
    pub update: bool,

    /// Do not enter directories on other filesystems than their source
    /// directory: each mount point is made, empty, with its own metadata
    /// (as cp -x and rsync -x; kopiru has no -xx).
    #[arg(short = 'x', long)]
    pub one_file_system: bool,

    /// Print a line per entry created or replaced, as rsync -i: ">f+++++++
    /// path" a new file, ">f.st.... path" a replaced one whose size and time
    /// differed, "cd+++++++ dir/", "cL+++++++ link -> target", "cD+++++++"
    /// a device or special file, "hf+++++++ name => first name". Only the s
    /// and t columns are filled; paths are destination paths. No -i: that is
    /// cp's --interactive.
    #[arg(long)]
    pub itemize_changes: bool,

    /// Keep an existing destination file only when its content is the
    /// source's (compared byte for byte, where rsync -c compares checksums),
    /// and replace it otherwise: in a merge (without -c every file is
    /// replaced) and with --resume (instead of its size and time test). A
    /// kept file keeps its own times and mode.
    #[arg(short = 'c', long)]
    pub checksum: bool,

    /// After the copy, remove what DEST holds that the source does not
    /// (entries an --exclude matches are kept, as in rsync). Only when DEST
    /// is the copy itself: with -T, or SOURCE/. (its contents); otherwise
    /// exit 2. With --dry-run or --itemize-changes each deletion is listed;
    /// with --sync end (the default) they are on disk when kopiru exits.
    #[arg(long)]
    pub delete: bool,

    /// Before replacing an existing destination entry, keep it under a
    /// backup name (cp's): simple is NAME~, numbered NAME.~N~ (N one more
    /// than the highest there), existing (the default, also for -b)
    /// numbered if NAME has numbered backups already, else simple; none
    /// makes no backup. Unlike cp, the environment's VERSION_CONTROL is not
    /// read, and the old entry keeps its name until the new one replaces
    /// it. With --delete, names ending in ~ are kept.
    #[arg(
        long,
        value_enum,
        value_name = "CONTROL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "existing",
        conflicts_with = "no_clobber"
    )]
    pub backup: Option<BackupArg>,

    /// Like --backup, without an argument (cp's -b).
    #[arg(short = 'b', conflicts_with = "no_clobber")]
    pub backup_default: bool,

    /// Ask before replacing an existing destination entry (cp's -i): the
    /// question "kopiru: overwrite 'DEST'?" on stderr, a line read from
    /// standard input as the answer; one starting with y or Y replaces,
    /// anything else (or the end of the input) keeps it. A later -n
    /// overrides -i, and a later -i overrides -n, as in cp. No question
    /// for a new name, nor for a directory merged into. With -i the copy
    /// runs on one thread, so the questions come in the order of the walk.
    #[arg(short = 'i', long, overrides_with = "no_clobber")]
    pub interactive: bool,

    /// cp's -f. With -l or -s, an existing destination file is replaced
    /// by the link (without -f it is kept and the link refused, 'File
    /// exists', as cp refuses it). A copy needs no -f: kopiru always
    /// replaces a destination file by renaming a complete new file over
    /// it, so one that cannot be opened for writing (read-only) is
    /// replaced anyway, as cp -f replaces it. As in GNU cp, -f does not
    /// cancel -i or -n.
    #[arg(short = 'f', long)]
    pub force: bool,

    /// rsync's --link-dest: a file unchanged against the same path in DIR
    /// (same size and modification time; with -c the same content) is
    /// made a hard link to DIR's file instead of being copied, so each
    /// snapshot costs only what changed. A hard link shares its metadata,
    /// so DIR's file must also have the mode, owner and times being kept.
    /// DIR mirrors DEST; a relative DIR is taken from DEST, as rsync takes
    /// it (--link-dest ../prev is prev beside DEST). One DIR only.
    #[arg(long, value_name = "DIR", conflicts_with = "clone_dest")]
    pub link_dest: Option<PathBuf>,

    /// Like --link-dest, but an unchanged file is cloned from DIR (its
    /// blocks shared, on XFS, Btrfs and other filesystems that can), and
    /// gets the source's own metadata: an independent file that costs no
    /// data space. Where DIR's file cannot be cloned (another filesystem)
    /// the file is copied from the source.
    #[arg(long, value_name = "DIR")]
    pub clone_dest: Option<PathBuf>,

    /// rsync's --partial: a file whose copy is interrupted (Ctrl-C, a read
    /// or write error) keeps the part written so far, hidden beside it as
    /// .kopiru-tmp.part.*, never under its own name. The next run with
    /// --partial or --resume compares that part with the source and
    /// continues after the length that matches; a run with neither removes
    /// it.
    #[arg(long)]
    pub partial: bool,

    /// The rules in command-line order, filled by [`SelectArgs::order`].
    #[arg(skip)]
    pub order: Vec<(RuleKind, Source)>,
}

/// cp's --backup CONTROL values (with cp's other spellings as aliases).
#[derive(Clone, Copy, ValueEnum)]
pub enum BackupArg {
    /// No backup.
    #[value(alias = "off")]
    None,
    /// NAME~.
    #[value(alias = "never")]
    Simple,
    /// NAME.~N~.
    #[value(alias = "t")]
    Numbered,
    /// Numbered if there are numbered backups, else simple.
    #[value(alias = "nil")]
    Existing,
}

/// Where a rule came from.
#[derive(Clone)]
pub enum Source {
    Pattern(String),
    File(PathBuf),
}

impl SelectArgs {
    /// Records the order in which the filter options were given (clap
    /// keeps each option's values apart; rsync's first match needs their
    /// order across options).
    pub fn order(&mut self, m: &ArgMatches) {
        let mut all: Vec<(usize, RuleKind, Source)> = Vec::new();
        for (id, kind) in [
            ("exclude", RuleKind::Exclude),
            ("include", RuleKind::Include),
        ] {
            if let (Some(at), Some(vals)) = (m.indices_of(id), m.get_many::<String>(id)) {
                all.extend(
                    at.zip(vals)
                        .map(|(i, v)| (i, kind, Source::Pattern(v.clone()))),
                );
            }
        }
        if let (Some(at), Some(vals)) = (
            m.indices_of("exclude_from"),
            m.get_many::<PathBuf>("exclude_from"),
        ) {
            all.extend(
                at.zip(vals)
                    .map(|(i, v)| (i, RuleKind::Exclude, Source::File(v.clone()))),
            );
        }
        all.sort_by_key(|r| r.0);
        self.order = all.into_iter().map(|(_, k, s)| (k, s)).collect();
    }

    /// Adds these options to the engine's, or a usage error.
    pub fn apply(&self, opts: &mut CopyOptions) -> Result<(), String> {
        opts.filter = self.filter()?;
        opts.dry_run = self.dry_run;
        opts.update = self.update;
        opts.one_file_system = self.one_file_system;
        opts.report_changes = self.itemize_changes;
        opts.checksum = self.checksum;
        opts.delete = self.delete;
        opts.interactive = self.interactive;
        opts.force = self.force;
        opts.partial = self.partial;
        opts.basis = match (&self.link_dest, &self.clone_dest) {
            (Some(dir), _) => Some(Basis {
                dir: dir.clone(),
                kind: BasisKind::Link,
            }),
            (None, Some(dir)) => Some(Basis {
                dir: dir.clone(),
                kind: BasisKind::Clone,
            }),
            (None, None) => None,
        };
        opts.backup = match (self.backup, self.backup_default) {
            (Some(BackupArg::None), _) => None,
            (Some(BackupArg::Simple), _) => Some(Backup::Simple),
            (Some(BackupArg::Numbered), _) => Some(Backup::Numbered),
            (Some(BackupArg::Existing), _) | (None, true) => Some(Backup::Existing),
            (None, false) => None,
        };
        Ok(())
    }

    fn filter(&self) -> Result<Filter, String> {
        let mut f = Filter::new();
        let fallback: Vec<(RuleKind, Source)>;
        let order = match self.order.is_empty() {
            false => &self.order,
            true => {
                // Not parsed through `order` (a caller building the args
                // by hand): excludes first, as listed.
                let ex = self
                    .exclude
                    .iter()
                    .map(|p| (RuleKind::Exclude, Source::Pattern(p.clone())));
                let inc = self
                    .include
                    .iter()
                    .map(|p| (RuleKind::Include, Source::Pattern(p.clone())));
                let files = self
                    .exclude_from
                    .iter()
                    .map(|p| (RuleKind::Exclude, Source::File(p.clone())));
                fallback = ex.chain(inc).chain(files).collect();
                &fallback
            }
        };
        for (kind, source) in order {
            match source {
                Source::Pattern(p) => f.push(rule(*kind, p)?),
                Source::File(path) => {
                    for line in read_lines(path)? {
                        let line = line.trim_end_matches('\r');
                        if line.trim().is_empty() || line.starts_with(['#', ';']) {
                            continue;
                        }
                        f.push(rule(*kind, line)?);
                    }
                }
            }
        }
        Ok(f)
    }
}

/// One rule; "+ " and "- " in front make it an include or an exclude
/// whatever option it came from (as in rsync).
fn rule(kind: RuleKind, pattern: &str) -> Result<Rule, String> {
    let (kind, pattern) = match pattern.split_at_checked(2) {
        Some(("+ ", rest)) => (RuleKind::Include, rest),
        Some(("- ", rest)) => (RuleKind::Exclude, rest),
        _ => (kind, pattern),
    };
    Rule::new(kind, pattern).map_err(|e| e.to_string())
}

fn read_lines(path: &PathBuf) -> Result<Vec<String>, String> {
    let mut text = String::new();
    let read = match path.as_os_str() == "-" {
        true => std::io::stdin().read_to_string(&mut text),
        false => std::fs::File::open(path).and_then(|mut f| f.read_to_string(&mut text)),
    };
    read.map_err(|e| format!("--exclude-from {}: {e}", crate::render::path(path)))?;
    Ok(text.lines().map(str::to_string).collect())
}
