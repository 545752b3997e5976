//! The operations. Each checks its options on the JavaScript thread (a bad
//! option throws at once), then runs on a thread of its own and resolves
//! with `{ kind, ... }`: `kind` is `"done"` (with the summary; the wrapper
//! decides from it whether to resolve or reject), `"refused"` (the request
//! was turned down before anything was written: `errors`), or `"error"`
//! (`error`, probe only).

use crate::json;
use crate::progress::{Counts, ProgressFn, Ticker};
use crate::{off_thread, CancelToken};
#[cfg(unix)]
use kopiru::dedupe::DedupeOptions;
#[cfg(unix)]
use kopiru::flash::{self, Bmap, FlashEvents, FlashOptions};
#[cfg(target_os = "linux")]
use kopiru::image::{check_source, ImageOptions};
use kopiru::progress::{eta, Totals, Window, WINDOW_SECS};
use kopiru::verify::VerifyOptions;
use kopiru::Format;
use kopiru::{
    Basis, BasisKind, Choice, CopyOptions, FileDone, Filter, Follow, MethodChoice, Phase, Preserve,
    Reporter, Rule, RuleKind, SparseMode, SyncMode,
};
#[cfg(unix)]
use kopiru::{DeviceProgress, Error as KError};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

fn invalid(msg: String) -> napi::Error {
    napi::Error::new(Status::InvalidArg, msg)
}

/// Options of `copy`, as the wrapper passes them (already defaulted).
#[napi(object)]
pub struct NativeCopyOptions {
    /// Keep everything (`cp -a`): mode, times, owner, xattrs, links.
    pub archive: Option<bool>,
    /// Metadata to keep: mode, times, owner, xattrs, links, all.
    pub preserve: Option<Vec<String>>,
    /// auto, clone, offload, stream.
    pub method: Option<String>,
    /// none, end, file.
    pub sync: Option<String>,
    /// auto, always, never.
    pub sparse: Option<String>,
    /// never, command-line, always.
    pub follow: Option<String>,
    pub resume: Option<bool>,
    pub no_clobber: Option<bool>,
    pub no_target_directory: Option<bool>,
    pub verify: Option<bool>,
    pub jobs: Option<u32>,
    /// rsync-style patterns, tried after `include`'s (`+ `/`- ` prefixes
    /// as rsync's).
    pub exclude: Option<Vec<String>>,
    /// Patterns whose matches are copied though an `exclude` matches too.
    pub include: Option<Vec<String>>,
    pub delete: Option<bool>,
    pub update: Option<bool>,
    pub link_dest: Option<String>,
    pub clone_dest: Option<String>,
    pub dry_run: Option<bool>,
}

impl NativeCopyOptions {
    fn engine(&self) -> Result<CopyOptions> {
        let mut preserve = match self.archive {
            Some(true) => Preserve::ALL,
            _ => Preserve::DEFAULT,
        };
        if let Some(items) = self.preserve.as_ref().filter(|v| !v.is_empty()) {
            preserve = Preserve::from_names(items.iter().map(String::as_str))
                .map_err(|other| invalid(format!("unknown preserve item '{other}'")))?;
        }
        // The engine's tables of names (kopiru::Choice), as the command
        // line parses them.
        fn choice<T: Choice + Default>(v: &Option<String>, what: &str) -> Result<T> {
            v.as_deref()
                .map_or(Ok(T::default()), T::parse)
                .map_err(|e| invalid(format!("{what}: {e}")))
        }
        let method: MethodChoice = choice(&self.method, "method")?;
        let sync: SyncMode = choice(&self.sync, "sync")?;
        let sparse: SparseMode = choice(&self.sparse, "sparse")?;
        let follow: Follow = choice(&self.follow, "follow")?;
        // Includes first: they are the exceptions to the excludes (as
        // `--include '*.rs' --include '*/' --exclude '*'` on the command
        // line, whose order decides).
        let mut filter = Filter::new();
        let rules = [
            (RuleKind::Include, &self.include),
            (RuleKind::Exclude, &self.exclude),
        ];
        for (kind, patterns) in rules {
            for p in patterns.iter().flatten() {
                filter.push(Rule::parse(kind, p).map_err(|e| invalid(e.to_string()))?);
            }
        }
        let basis = match (&self.link_dest, &self.clone_dest) {
            (Some(_), Some(_)) => {
                return Err(invalid("linkDest and cloneDest: one of them only".into()))
            }
            (Some(dir), None) => Some(Basis {
                dir: dir.into(),
                kind: BasisKind::Link,
            }),
            (None, Some(dir)) => Some(Basis {
                dir: dir.into(),
                kind: BasisKind::Clone,
            }),
            (None, None) => None,
        };
        // The command's options, its copies record included: a rerun of
        // the same copy merges into the tree it made instead of nesting a
        // second one inside.
        let mut o = CopyOptions::new()
            .filter(filter)
            .delete(self.delete.unwrap_or(false))
            .update(self.update.unwrap_or(false))
            .dry_run(self.dry_run.unwrap_or(false))
            .method(method)
            .preserve(preserve)
            .follow(follow)
            .jobs(self.jobs.unwrap_or(0) as usize)
            .sync(sync)
            .resume(self.resume.unwrap_or(false))
            .no_target_directory(self.no_target_directory.unwrap_or(false));
        o.basis = basis;
        o.sparse = sparse;
        o.no_clobber = self.no_clobber.unwrap_or(false);
        o.verify = self.verify.unwrap_or(false);
        Ok(o)
    }
}

/// Counts files and bytes for `onProgress`, and the phase.
struct CopyReporter(Arc<Counts>);

impl Reporter for CopyReporter {
    fn file_done(&self, _: &FileDone) {
        self.0.add_files(1);
    }
    fn bytes(&self, n: u64) {
        self.0.add_bytes(n);
    }
    fn phase(&self, p: Phase) {
        let n = match p {
            Phase::Copying => 0,
            Phase::Flushing => 1,
            Phase::Verifying => 2,
            _ => 0,
        };
        self.0.phase.store(n, Ordering::Relaxed);
    }
}

/// One `onProgress` snapshot of a copy: the counts, the totals once the
/// walk has finished (never below the counts, so a percentage stays at most
/// 100), and the ETA once the rates and the totals are known.
fn copy_progress(
    files: u64,
    bytes: u64,
    phase: u8,
    totals: Option<&Totals>,
    window: &Window,
) -> serde_json::Value {
    let known = totals.filter(|t| t.known());
    let (total_files, total_bytes) = match known {
        Some(t) => (Some(t.files().max(files)), Some(t.bytes().max(bytes))),
        None => (None, None),
    };
    let eta_seconds = match (total_files, total_bytes, window.rates()) {
        (Some(tf), Some(tb), Some(r)) if phase == 0 => eta(tb - bytes, tf - files, r)
            // Tenths: a snapshot is sent only when something changed.
            .map(|s| (s * 10.0).round() / 10.0),
        _ => None,
    };
    json!({
        "files": files,
        "bytes": bytes,
        "totalFiles": total_files,
        "totalBytes": total_bytes,
        "totalsKnown": known.is_some(),
        "etaSeconds": eta_seconds,
        "phase": phase_name(phase),
    })
}

fn phase_name(n: u8) -> &'static str {
    match n {
        1 => "flushing",
        2 => "verifying",
        _ => "copying",
    }
}

/// `copy(sources, dest, options, cancel, onProgress)`.
#[napi(ts_return_type = "Promise<unknown>")]
pub fn copy<'e>(
    env: &'e Env,
    sources: Vec<String>,
    dest: String,
    options: Option<NativeCopyOptions>,
    cancel: &CancelToken,
    #[napi(ts_arg_type = "((progress: any) => void) | undefined | null")] on_progress: Option<
        ProgressFn,
    >,
) -> Result<Object<'e>> {
    let mut opts = match &options {
        Some(o) => o.engine()?,
        None => CopyOptions::default(),
    };
    opts.cancel = cancel.inner.clone();
    let sources: Vec<PathBuf> = sources.into_iter().map(PathBuf::from).collect();
    let dest = PathBuf::from(dest);
    off_thread(env, "copy", move || {
        let counts = Arc::new(Counts::default());
        // The totals are walked only for a caller who shows progress; the
        // walk has its own stop, set when the copy ends.
        let walk_stop = kopiru::Cancel::new();
        let totals = on_progress
            .is_some()
            .then(|| Totals::spawn(sources.clone(), &opts, walk_stop.clone()));
        let c = counts.clone();
        let start = Instant::now();
        let window = Mutex::new(Window::new(WINDOW_SECS));
        let ticker = Ticker::start(on_progress, move || {
            let (files, bytes) = (c.get(&c.files), c.get(&c.bytes));
            let mut window = window.lock().unwrap_or_else(|e| e.into_inner());
            window.push(start.elapsed().as_secs_f64(), bytes, files);
            copy_progress(
                files,
                bytes,
                c.phase.load(Ordering::Relaxed),
                totals.as_deref(),
                &window,
            )
        });
        let reporter = CopyReporter(counts.clone());
        let result = kopiru::copy(&sources, &dest, &opts, &reporter);
        walk_stop.cancel();
        ticker.stop();
        let reported = json!({
            "files": counts.get(&counts.files),
            "bytes": counts.get(&counts.bytes),
        });
        match result {
            // A request that cannot be carried out at all (several sources
            // and a destination that is not a directory).
            Err(e) => {
                let message = json::plan_error(&e);
                json!({
                    "kind": "refused",
                    "message": message,
                    "id": e.id(),
                    "errors": [{
                        "path": json::path(&dest),
                        "side": "destination",
                        "operation": "copy",
                        "reason": message,
                        "errno": null,
                        "refusal": e.id(),
                    }],
                })
            }
            Ok(s) => {
                let refused = s.refused_whole();
                json!({
                    "kind": if refused { "refused" } else { "done" },
                    "summary": json::copy_summary(&s, opts.dry_run),
                    "errors": s.errors.iter().map(json::error).collect::<Vec<_>>(),
                    "reported": reported,
                })
            }
        }
    })
}

/// Options of `verify`.
#[napi(object)]
pub struct NativeVerifyOptions {
    /// Hashing threads; 0 picks from the machine.
    pub jobs: Option<u32>,
    /// Entries only in the destination are not differences.
    pub ignore_extra: Option<bool>,
}

/// `verify(source, dest, options, cancel)`. An abort rejects at once (the
/// comparison writes nothing) and cancels the engine, which stops within a
/// chunk in the background.
#[napi(ts_return_type = "Promise<unknown>")]
pub fn verify<'e>(
    env: &'e Env,
    source: String,
    dest: String,
    options: Option<NativeVerifyOptions>,
    cancel: &CancelToken,
) -> Result<Object<'e>> {
    let mut opts = VerifyOptions::new();
    opts.jobs = options.as_ref().and_then(|o| o.jobs).unwrap_or(0) as usize;
    opts.extra_is_difference = !options
        .as_ref()
        .and_then(|o| o.ignore_extra)
        .unwrap_or(false);
    opts.cancel = cancel.inner.clone();
    let (source, dest) = (PathBuf::from(source), PathBuf::from(dest));
    off_thread(env, "verify", move || {
        let r = kopiru::verify(&source, &dest, &opts, &kopiru::Noop);
        json!({ "kind": "done", "summary": json::verify_report(&r, &dest) })
    })
}

/// Options of `flash` (no prompt: the wrapper's caller has decided).
#[cfg(unix)]
#[napi(object)]
#[derive(Default)]
pub struct NativeFlashOptions {
    /// Read every device back and compare (default true).
    pub verify: Option<bool>,
    /// Allow regular files as targets.
    pub allow_file: Option<bool>,
    /// Write even to a mounted device, a partition, or the one holding the
    /// root filesystem or the image.
    pub force: Option<bool>,
    /// A block map (bmaptool's XML): write only the ranges it lists.
    pub bmap: Option<String>,
    /// The devices already read as zeros.
    pub zeroed: Option<bool>,
    /// Zero each device first (BLKZEROOUT).
    pub zero_first: Option<bool>,
    /// Skip blocks that already hold the image's bytes.
    pub skip_identical: Option<bool>,
    /// `auto` (absent) or a format's name.
    pub format: Option<String>,
    /// The SHA-256 (hex) of the image file as published.
    pub sha256: Option<String>,
    /// For a URL: seconds without a byte before resuming.
    pub stall_timeout: Option<f64>,
}

/// A device operation's counts: bytes written (flash) or read (image),
/// then bytes read back.
#[cfg(unix)]
struct DeviceCounts(Arc<Counts>);

#[cfg(unix)]
impl DeviceProgress for DeviceCounts {
    fn done(&self, n: u64) {
        self.0.add_bytes(n);
    }
    fn verifying(&self, total: u64) {
        self.0.begin_check(total);
    }
    fn verified(&self, n: u64) {
        self.0.add_checked(n);
    }
    fn downloaded(&self, received: u64, total: Option<u64>, resumes: u64) {
        self.0.set_download(received, total, resumes);
    }
}

#[cfg(unix)]
impl FlashEvents for DeviceCounts {}

/// `flash(image, devices, options, cancel, onProgress)`: the targets are
/// checked (the command's refusals) before anything is written.
#[cfg(unix)]
#[napi(ts_return_type = "Promise<unknown>")]
pub fn flash<'e>(
    env: &'e Env,
    image: String,
    devices: Vec<String>,
    options: Option<NativeFlashOptions>,
    cancel: &CancelToken,
    #[napi(ts_arg_type = "((progress: any) => void) | undefined | null")] on_progress: Option<
        ProgressFn,
    >,
) -> Result<Object<'e>> {
    let o = options.unwrap_or_default();
    let cancel = cancel.inner.clone();
    let image = PathBuf::from(image);
    let devices: Vec<PathBuf> = devices.into_iter().map(PathBuf::from).collect();
    off_thread(env, "flash", move || {
        let refused = |e: &KError| json!({ "kind": "refused", "message": json::error_text(e), "errors": [json::error(e)] });
        let mut http = flash::HttpOptions::default();
        if let Some(t) = o.stall_timeout.filter(|t| *t > 0.0) {
            http.stall_timeout = std::time::Duration::from_secs_f64(t);
        }
        let sha256 = match o
            .sha256
            .as_deref()
            .map(|s| s.trim().parse::<kopiru::Sha256>())
        {
            None => None,
            Some(Ok(h)) => Some(h),
            Some(Err(why)) => {
                return json!({ "kind": "refused", "message": format!("sha256: {why}"), "errors": [] });
            }
        };
        let bmap = match o
            .bmap
            .as_deref()
            .map(|p| Bmap::load_with(Path::new(p), &image, &http))
        {
            None | Some(Ok(None)) => None,
            Some(Ok(Some(m))) => Some(m),
            Some(Err(e)) => return refused(&e),
        };
        let mut opts = FlashOptions::new();
        opts.verify = o.verify.unwrap_or(true);
        opts.allow_file = o.allow_file.unwrap_or(false);
        opts.force = o.force.unwrap_or(false);
        opts.bmap = bmap;
        opts.zeroed = o.zeroed.unwrap_or(false);
        opts.zero_first = o.zero_first.unwrap_or(false);
        opts.skip_identical = o.skip_identical.unwrap_or(false);
        opts.sha256 = sha256;
        opts.cancel = cancel;
        let format = match o.format.as_deref() {
            None | Some("auto") => None,
            Some(f) => match f.parse::<Format>() {
                Ok(f) => Some(f),
                // index.js lets only the formats' names through.
                Err(why) => return json!({ "kind": "refused", "message": why, "errors": [] }),
            },
        };
        let image = match flash::Image::open_with(&image, format, &http) {
            Ok(i) => i,
            Err(e) => return refused(&e),
        };
        let targets = match flash::check_targets(&image, &devices, &opts) {
            Ok(t) => t,
            Err(e) => return refused(&e),
        };
        let total = opts.bmap.as_ref().map(|m| m.image_size).or(image.size);
        let counts = Arc::new(Counts::default());
        let c = counts.clone();
        let url = image.is_url();
        let ticker = Ticker::start(on_progress, move || {
            let verify_total = c.get(&c.total2);
            let download_total = c.get(&c.download_total);
            json!({
                "phase": if c.phase.load(Ordering::Relaxed) == 2 { "verifying" } else { "writing" },
                "written": c.get(&c.bytes),
                "total": total,
                "verified": c.get(&c.bytes2),
                "verifyTotal": (verify_total > 0).then_some(verify_total),
                "downloaded": url.then(|| c.get(&c.downloaded)),
                "downloadTotal": (download_total > 0).then_some(download_total),
                "resumes": url.then(|| c.get(&c.resumes)),
            })
        });
        let s = kopiru::flash(&image, &targets, &opts, &DeviceCounts(counts.clone()));
        ticker.stop();
        json!({
            "kind": "done",
            "summary": json::flash_summary(&s),
            "reported": {
                "written": counts.get(&counts.bytes),
                "verified": counts.get(&counts.bytes2),
            },
        })
    })
}

/// Options of `image`.
#[cfg(target_os = "linux")]
#[napi(object)]
#[derive(Default)]
pub struct NativeImageOptions {
    /// Read a regular file, not only a block device.
    pub allow_file: Option<bool>,
    /// Read a device mounted read-write; replace an existing output.
    pub force: Option<bool>,
    /// The compression level (the format's default if absent).
    pub level: Option<i32>,
    /// Compression threads; 0 or absent picks from the machine.
    pub jobs: Option<u32>,
    /// Also write a block map (bmaptool's XML) here.
    pub bmap: Option<String>,
    /// Stop after the end of the last partition (MBR or GPT).
    pub partitions_only: Option<bool>,
    /// Read the image back, decode it and compare hashes (default true).
    pub verify: Option<bool>,
}

/// `image(device, output, options, cancel, onProgress)`: the device is
/// checked (the command's refusals) before anything is written.
#[cfg(target_os = "linux")]
#[napi(ts_return_type = "Promise<unknown>")]
pub fn image<'e>(
    env: &'e Env,
    device: String,
    output: String,
    options: Option<NativeImageOptions>,
    cancel: &CancelToken,
    #[napi(ts_arg_type = "((progress: any) => void) | undefined | null")] on_progress: Option<
        ProgressFn,
    >,
) -> Result<Object<'e>> {
    let o = options.unwrap_or_default();
    let cancel = cancel.inner.clone();
    let (device, output) = (PathBuf::from(device), PathBuf::from(output));
    off_thread(env, "image", move || {
        let format = Format::of_output(&output);
        let refused_text = |m: String| json!({ "kind": "refused", "message": m, "errors": [] });
        if let Some(l) = o.level {
            if let Err(why) = format.check_level(l) {
                return refused_text(format!("level {l}: {why}"));
            }
        }
        let mut opts = ImageOptions::new();
        opts.allow_file = o.allow_file.unwrap_or(false);
        opts.force = o.force.unwrap_or(false);
        opts.format = format;
        opts.level = o.level;
        opts.bmap = o.bmap.map(PathBuf::from);
        opts.partitions_only = o.partitions_only.unwrap_or(false);
        opts.verify = o.verify.unwrap_or(true);
        opts.cancel = cancel;
        if let Some(j) = o.jobs.filter(|&j| j > 0) {
            opts.threads = j;
        }
        let src = match check_source(&device, &output, &opts) {
            Ok(s) => s,
            Err(e) => {
                return json!({ "kind": "refused", "message": json::error_text(&e), "errors": [json::error(&e)] })
            }
        };
        let counts = Arc::new(Counts::default());
        let c = counts.clone();
        let total = src.size;
        let ticker = Ticker::start(on_progress, move || {
            let verify_total = c.get(&c.total2);
            json!({
                "phase": if c.phase.load(Ordering::Relaxed) == 2 { "verifying" } else { "reading" },
                "read": c.get(&c.bytes),
                "total": total,
                "verified": c.get(&c.bytes2),
                "verifyTotal": (verify_total > 0).then_some(verify_total),
            })
        });
        let s = kopiru::image(&src, &output, &opts, &DeviceCounts(counts.clone()));
        ticker.stop();
        json!({
            "kind": "done",
            "summary": json::image_summary(&s, &src, &device, &output, opts.bmap.as_deref()),
            "reported": {
                "read": counts.get(&counts.bytes),
                "verified": counts.get(&counts.bytes2),
            },
        })
    })
}

/// Options of `dedupe`.
#[cfg(unix)]
#[napi(object)]
pub struct NativeDedupeOptions {
    /// Find and report, change nothing.
    pub dry_run: Option<bool>,
    /// Files smaller than this are skipped (default: one block).
    pub min_size: Option<f64>,
    /// Threads; 0 picks from the machine.
    pub jobs: Option<u32>,
}

#[cfg(unix)]
struct HashCounts(Arc<Counts>);

#[cfg(unix)]
impl Reporter for HashCounts {
    fn bytes(&self, n: u64) {
        self.0.add_bytes(n);
    }
}

/// `dedupe(paths, options, cancel, onProgress)`.
#[cfg(unix)]
#[napi(ts_return_type = "Promise<unknown>")]
pub fn dedupe<'e>(
    env: &'e Env,
    paths: Vec<String>,
    options: Option<NativeDedupeOptions>,
    cancel: &CancelToken,
    #[napi(ts_arg_type = "((progress: any) => void) | undefined | null")] on_progress: Option<
        ProgressFn,
    >,
) -> Result<Object<'e>> {
    let min_size = match options.as_ref().and_then(|o| o.min_size) {
        Some(m) if !(m >= 0.0 && m.is_finite()) => {
            return Err(invalid(format!("minSize must be a size in bytes, not {m}")))
        }
        m => m.map(|m| m as u64),
    };
    let dry_run = options.as_ref().and_then(|o| o.dry_run).unwrap_or(false);
    let mut opts = DedupeOptions::new();
    opts.dry_run = dry_run;
    opts.min_size = min_size;
    opts.jobs = options.as_ref().and_then(|o| o.jobs).unwrap_or(0) as usize;
    opts.cancel = cancel.inner.clone();
    let paths: Vec<PathBuf> = paths.into_iter().map(PathBuf::from).collect();
    off_thread(env, "dedupe", move || {
        let counts = Arc::new(Counts::default());
        let c = counts.clone();
        let ticker = Ticker::start(on_progress, move || json!({ "bytes": c.get(&c.bytes) }));
        let s = kopiru::dedupe(&paths, &opts, &HashCounts(counts.clone()));
        ticker.stop();
        json!({
            "kind": "done",
            "summary": json::dedupe_summary(&s, dry_run),
            "reported": { "bytes": counts.get(&counts.bytes) },
        })
    })
}

/// `probe(path, other)`: filesystem types, and whether clone and offload
/// work from `path` to `other` (or within `path`).
#[napi(ts_return_type = "Promise<unknown>")]
pub fn probe<'e>(env: &'e Env, path: String, other: Option<String>) -> Result<Object<'e>> {
    off_thread(env, "probe", move || {
        let other = other.map(PathBuf::from);
        match kopiru::probe(
            Path::new(&path),
            other.as_deref(),
            &kopiru::probe::ProbeOptions::new(),
            &kopiru::Noop,
        ) {
            Err(e) => {
                json!({ "kind": "error", "message": json::error_text(&e), "error": json::error(&e) })
            }
            Ok(p) => {
                let trial =
                    |t: &kopiru::probe::Trial| json!({ "works": t.works, "detail": t.detail });
                json!({
                    "kind": "done",
                    "summary": {
                        "paths": p.paths.iter().map(|(p, fs)| json!({
                            "path": json::path(p),
                            "filesystem": fs,
                        })).collect::<Vec<_>>(),
                        "clone": trial(&p.clone),
                        "offload": trial(&p.offload),
                    },
                })
            }
        }
    })
}
