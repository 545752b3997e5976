//! The public copy entry: plan the request, refuse what cannot be done
//! before anything is written, run the tree copy (or, with `dry_run`, the
//! preview), delete what the source lacks (`delete`), then verify it if
//! asked.

use crate::error::{Error, Op, Refusal, Side};
use crate::events::{Phase, Reporter, Summary};
use crate::options::CopyOptions;
use crate::plan::{self, PlanError};
use crate::{delete, precheck, preview, sys, tree, verify};
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
    if let Some(summary) = listed_copy(sources, dest, opts, reporter)? {
        return Ok(Summary {
            elapsed: start.elapsed(),
            ..summary
        });
    }
    let (mut jobs, mut refused) = plan::plan(sources, dest, opts)?;
    let mut pairs: Vec<(PathBuf, PathBuf)> = jobs
        .iter()
        .map(|j| {
            (
                tree::join(&j.src_parent, sys::os_str(&j.src_name)),
                tree::join(&j.dst_parent, sys::os_str(&j.dst_name)),
            )
        })
        .collect();
    if opts.dry_run {
        let refusals = refused.len() as u64;
        let mut summary = preview::run(jobs, opts, reporter, refused);
        summary.refused = refusals;
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
    let (mut summary, hashes) = tree::run(jobs, opts, reporter, refused);
    summary.refused = refusals;
    if opts.delete && !summary.cancelled {
        delete::run(&pairs, opts, reporter, &mut summary);
    }
    if opts.verify && !summary.cancelled {
        reporter.phase(Phase::Verifying);
        for (src, dst) in &pairs {
            verify_copy(src, dst, opts, &hashes, reporter, &mut summary);
        }
    }
    summary.elapsed = start.elapsed();
    Ok(summary)
}

/// `--files-from` and `--shard`: copies of listed entries (`None`: neither).
fn listed_copy(
    sources: &[PathBuf],
    dest: &Path,
    opts: &CopyOptions,
    reporter: &dyn Reporter,
) -> Result<Option<Summary>, PlanError> {
    if opts.files_from.is_none() && opts.shard.is_none() {
        return Ok(None);
    }
    let what = match opts.shard {
        Some(_) => "--shard",
        None => "--files-from",
    };
    for (on, other) in [
        (opts.dry_run, "--dry-run"),
        (opts.delete, "--delete"),
        (opts.verify, "--verify"),
        (
            opts.files_from.is_some() && opts.shard.is_some(),
            "--files-from",
        ),
    ] {
        if on {
            return Err(PlanError::NotWith { what, other });
        }
    }
    if let Some(list) = &opts.files_from {
        return crate::listed::copy(sources, dest, list, opts, reporter).map(Some);
    }
    match opts.shard {
        Some(_) if sys::available(sys::Feature::Shard).is_err() => {
            Err(PlanError::NotOnWindows { what: "--shard" })
        }
        Some(shard) => crate::shard::copy(sources, dest, shard, opts, reporter).map(Some),
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
    let report = verify::verify_copy(src, dst, &vopts, hashes, opts);
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
