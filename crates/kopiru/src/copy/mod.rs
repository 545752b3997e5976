//! The public copy entry: plan the request, refuse what cannot be done
//! before anything is written, run the tree copy (or, with `dry_run`, the
//! preview), delete what the source lacks (`delete`), then verify it if
//! asked.

// The copy's rooms: the request planned and refused (plan, precheck,
// record), the walk (tree, listed, shard), one entry's bytes (data) and
// metadata (meta), placement and durability (place), --delete and the
// dry run (delete, preview).
pub(crate) mod data;
pub(crate) mod delete;
mod kept;
pub(crate) mod listed;
pub(crate) mod meta;
pub(crate) mod place;
pub(crate) mod plan;
pub(crate) mod precheck;
pub(crate) mod preview;
pub(crate) mod record;
pub(crate) mod shard;
pub(crate) mod tree;

use crate::error::{Error, Op, Refusal, Side};
use crate::events::{Phase, Reporter, Summary};
use crate::options::CopyOptions;
use crate::paths::join_name;
use crate::sys::AsFd;
use crate::{sys, verify};
use plan::PlanError;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Copies `sources` to `dest` with cp's destination rules: one source to a new
/// name or into an existing directory; several sources into an existing
/// directory. Per-file failures are collected in the returned [`Summary`] and
/// reported as they happen; the rest of the tree is still copied.
///
/// # Errors
/// [`PlanError`] when the request itself is unusable (several sources and a
/// destination that is not a directory); nothing is copied then.
pub fn copy(
    sources: &[PathBuf],
    dest: &Path,
    opts: &CopyOptions,
    reporter: &dyn Reporter,
) -> Result<Summary, PlanError> {
    let start = Instant::now();
    opts.check()?;
    if let Some(summary) = listed_copy(sources, dest, opts, reporter)? {
        return Ok(Summary {
            elapsed: start.elapsed(),
            ..summary
        });
    }
    let (mut jobs, refused) = plan::plan(sources, dest, opts)?;
    // Copies an earlier run completed: left alone, with a word.
    let (done, mut refused) = kept::left_alone(refused);
    let mut pairs: Vec<(PathBuf, PathBuf)> = jobs
        .iter()
        .map(|j| {
            (
                join_name(&j.src_parent, &j.src_name),
                join_name(&j.dst_parent, &j.dst_name),
            )
        })
        .collect();
    // --verify reads each source again: a followed symlink by what it
    // names; a FIFO or device read for its data (or one written into)
    // cannot be read again, and is not verified (a warning says so).
    let mut unverified = Vec::new();
    let checks: Vec<(PathBuf, PathBuf)> = match opts.verify {
        false => Vec::new(),
        true => jobs
            .iter()
            .zip(&pairs)
            .filter_map(
                |(j, (src, dst))| match (j.read_data || j.write_into, j.follow) {
                    (true, _) => {
                        unverified.push(dst.clone());
                        None
                    }
                    (false, true) => Some((
                        std::fs::canonicalize(src).unwrap_or(src.clone()),
                        dst.clone(),
                    )),
                    (false, false) => Some((src.clone(), dst.clone())),
                },
            )
            .collect(),
    };
    if opts.dry_run {
        let refusals = refused.len() as u64;
        let mut summary = preview::run(jobs, opts, reporter, refused);
        summary.refused = refusals;
        kept::already_copied(done, reporter, &mut summary);
        if opts.delete && !summary.cancelled {
            delete::run(&pairs, opts, reporter, &mut summary);
        }
        summary.elapsed = start.elapsed();
        return Ok(summary);
    }
    if let Some(e) = precheck::clone_possible(&jobs, opts) {
        // One refusal for the whole request, before anything is created.
        refused.push(e);
        jobs.clear();
        pairs.clear();
    }
    let refusals = refused.len() as u64;
    let parents_made: Vec<plan::ParentMade> = jobs
        .iter_mut()
        .flat_map(|j| j.parents_made.drain(..))
        .collect();
    let (mut summary, hashes) = run_rounds(jobs, opts, reporter, refused);
    parents_meta(parents_made, opts, &mut summary);
    summary.refused = refusals;
    kept::already_copied(done, reporter, &mut summary);
    if opts.delete && !summary.cancelled {
        delete::run(&pairs, opts, reporter, &mut summary);
    }
    if opts.verify && !summary.cancelled {
        reporter.phase(Phase::Verifying);
        for (src, dst) in &checks {
            verify_copy(src, dst, opts, &hashes, reporter, &mut summary);
        }
        for dst in unverified {
            let e = std::io::Error::other(
                "not verified: its source, a FIFO or device, cannot be read again",
            );
            let w = Error::dst(dst, Op::Verify, &e);
            reporter.warning(&w);
            summary.warnings.push(w);
        }
    }
    summary.elapsed = start.elapsed();
    Ok(summary)
}

/// Runs the tree copy of each round of jobs in turn ([`plan::Job::round`]:
/// a later round copies onto a name an earlier one made), stopping at a
/// cancel.
fn run_rounds(
    mut jobs: Vec<plan::Job>,
    opts: &CopyOptions,
    reporter: &dyn Reporter,
    refused: Vec<Error>,
) -> (Summary, verify::SourceHashes) {
    let later: Vec<plan::Job> = match jobs.iter().any(|j| j.round > 0) {
        true => {
            let (now, later) = jobs.into_iter().partition(|j| j.round == 0);
            jobs = now;
            later
        }
        false => Vec::new(),
    };
    let (mut summary, mut hashes) = tree::run(jobs, opts, reporter, refused);
    if later.is_empty() || summary.cancelled {
        return (summary, hashes);
    }
    let later = later
        .into_iter()
        .map(|mut j| {
            j.round -= 1;
            j
        })
        .collect();
    let (rest, more) = run_rounds(later, opts, reporter, Vec::new());
    summary.absorb(rest);
    hashes = hashes.merged(more);
    (summary, hashes)
}

/// `--parents`: the directories made on the way get their sources'
/// metadata once the copies inside them are done (deepest first, as their
/// times change while entries are made in them).
fn parents_meta(made: Vec<plan::ParentMade>, opts: &CopyOptions, summary: &mut Summary) {
    let umask = sys::umask();
    for p in made.iter().rev() {
        let open = |path: &Path| {
            let (dir, name) = sys::open_parent(path)?;
            sys::open_dir(dir.as_fd(), &name)
        };
        let (src, dst) = match (open(&p.src), open(&p.dst)) {
            (Ok(s), Ok(d)) => (s, d),
            (Err(e), _) => {
                summary.warnings.push(Error::src(&p.src, Op::Open, &e));
                continue;
            }
            (_, Err(e)) => {
                summary.warnings.push(Error::dst(&p.dst, Op::Open, &e));
                continue;
            }
        };
        let st = match sys::fstat(src.as_fd()) {
            Ok(st) => st,
            Err(e) => {
                summary.warnings.push(Error::src(&p.src, Op::Stat, &e));
                continue;
            }
        };
        let (perm, before) = match p.existed {
            true => (p.mode, meta::Before::Same),
            false => (p.mode & !umask, meta::Before::Nothing),
        };
        let now = meta::Now { perm, owner: None };
        let w = meta::apply(
            meta::Target::Fd(dst.as_fd()),
            (Some(src.as_fd()), &st),
            before,
            now,
            &opts.preserve,
            umask,
        );
        summary
            .warnings
            .extend(w.into_iter().map(|(op, e)| Error::dst(&p.dst, op, &e)));
    }
}

/// `--files-from` and `--shard`: copies of listed entries (`None`: neither).
fn listed_copy(
    sources: &[PathBuf],
    dest: &Path,
    opts: &CopyOptions,
    reporter: &dyn Reporter,
) -> Result<Option<Summary>, PlanError> {
    // What does not go with these was refused by CopyOptions::check.
    if let Some(list) = &opts.files_from {
        return listed::copy(sources, dest, list, opts, reporter).map(Some);
    }
    match opts.shard {
        Some(shard) => shard::copy(sources, dest, shard, opts, reporter).map(Some),
        None => Ok(None),
    }
}

/// `--verify`: compares what is now at `dst` with `src`, the destination
/// read from the device; each difference is an error of that file.
fn verify_copy(
    src: &Path,
    dst: &Path,
    opts: &CopyOptions,
    hashes: &verify::SourceHashes,
    reporter: &dyn Reporter,
    summary: &mut Summary,
) {
    let vopts = verify::VerifyOptions {
        jobs: opts.jobs,
        extra_is_difference: false,
        cancel: opts.cancel.clone(),
    };
    // The read-back's bytes are not the copy's: the reporter hears none.
    let report = verify::verify_copy(src, dst, &vopts, hashes, opts, &crate::Noop);
    summary.cancelled |= report.cancelled;
    summary.verified_files += report.files;
    for d in report.differences {
        let path = match d.path.as_os_str().is_empty() {
            true => dst.to_path_buf(),
            false => dst.join(&d.path),
        };
        let e = Error::refused(
            Side::Destination,
            path,
            Op::Verify,
            Refusal::Differs(d.what),
        );
        reporter.error(&e);
        summary.errors.push(e);
    }
    for e in report.errors {
        reporter.error(&e);
        summary.errors.push(e);
    }
}
