//! The summaries as JSON, in one form for every front end: the command
//! line prints these (`--json`), and the Node binding returns the same
//! objects with their keys in camelCase. A field added here reaches both.
//! (Behind the `json` feature, so that the engine alone needs no serde.)

use crate::paths::Escaped;
use crate::verify::VerifyReport;
use crate::{Error, Method, Refusal, Summary};
use serde_json::{json, Map, Value};
use std::path::Path;

/// How paths are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Paths {
    /// Always with kopiru's lossless escape (`\xHH` for each byte that is
    /// not UTF-8, `\\` for a backslash): text that is read back.
    Escaped,
    /// As they are when they are UTF-8 (what Node's `fs` gives back), else
    /// escaped.
    Utf8,
}

/// The JSON writer of a front end.
#[derive(Clone, Copy, Debug)]
pub struct Json {
    /// How paths are written.
    paths: Paths,
    /// A refusal's `reason` (and a device's `message`) in the front end's
    /// words: its flags or option names where the engine names a setting
    /// neutrally. The `refusal` id is the same for every front end.
    words: fn(&Refusal) -> String,
}

/// A refusal in the engine's neutral words.
fn neutral(r: &Refusal) -> String {
    r.to_string()
}

impl Json {
    /// The command line's `--json`.
    pub const COMMAND_LINE: Json = Json {
        paths: Paths::Escaped,
        words: neutral,
    };
    /// The Node binding (whose keys it turns to camelCase).
    pub const NODE: Json = Json {
        paths: Paths::Utf8,
        words: neutral,
    };

    /// This writer with refusals in a front end's words (each front end
    /// spells the settings a refusal names as its user gives them:
    /// `--force`, `force`).
    pub const fn with_words(self, words: fn(&Refusal) -> String) -> Json {
        Json { words, ..self }
    }

    /// A path, as the front end shows it.
    pub fn path(&self, p: &Path) -> String {
        match (self.paths, p.to_str()) {
            (Paths::Utf8, Some(s)) => s.to_owned(),
            _ => Escaped(p.as_os_str()).to_string(),
        }
    }

    /// One error: `{ path, side, operation, reason, errno }` (`errno` null for
    /// a refusal the engine made itself; the Windows error code on Windows).
    pub fn error(&self, e: &Error) -> Value {
        json!({
            "path": self.path(&e.path),
            "side": e.side.name(),
            "operation": e.op.name(),
            "reason": e.reason_with(self.words),
            "errno": e.errno(),
            // The refusal's stable name (null: the OS said no).
            "refusal": e.refusal().map(|r| r.id()),
        })
    }

    fn errors(&self, v: &[Error]) -> Vec<Value> {
        v.iter().map(|e| self.error(e)).collect()
    }

    /// `kopiru copy --json`.
    pub fn copy(&self, s: &Summary, dry_run: bool) -> Value {
        let methods: Map<String, Value> = Method::ALL
            .iter()
            .map(|m| (m.name().to_string(), s.method_count(*m).into()))
            .collect();
        json!({
            "files": s.files,
            "bytes": s.bytes,
            "directories": s.dirs,
            "symlinks": s.symlinks,
            "special_files": s.specials,
            "hard_links": s.hardlinks,
            "skipped": s.skipped,
            "withdrawn": s.withdrawn,
            "directories_not_made": s.dirs_not_made,
            "entries_not_copied": s.not_copied,
            "deleted": s.deleted,
            "refused": s.refused,
            "verified_files": s.verified_files,
            "methods": methods,
            "workers": s.workers,
            "round_trip_filesystem": s.round_trips,
            "server_side_files": s.server_side_files,
            "worker_steps": s.worker_steps.iter().map(|w| json!({
                "workers": w.workers,
                "entries_per_second": w.entries_per_second,
            })).collect::<Vec<_>>(),
            "errors": self.errors(&s.errors),
            "warnings": self.errors(&s.warnings),
            "elapsed_seconds": s.elapsed.as_secs_f64(),
            "cancelled": s.cancelled,
            "dry_run": dry_run,
            "exit_code": s.outcome().code(),
        })
    }

    /// `kopiru verify --json`: each difference with its path in the trees and
    /// in DEST.
    pub fn verify(&self, r: &VerifyReport, dest: &Path) -> Value {
        let code = r.outcome().code();
        json!({
            "files": r.files,
            "bytes": r.bytes,
            "equal": r.outcome() == crate::Outcome::Done,
            "differences": r.differences.iter().map(|d| json!({
                "path": self.path(&d.path),
                "dest_path": self.path(&match d.path.as_os_str().is_empty() {
                    true => dest.to_path_buf(),
                    false => dest.join(&d.path),
                }),
                "what": d.what.to_string(),
            })).collect::<Vec<_>>(),
            "errors": self.errors(&r.errors),
            "cancelled": r.cancelled,
            "exit_code": code,
        })
    }

    /// `kopiru dedupe --json`.
    pub fn dedupe(&self, s: &crate::dedupe::DedupeSummary, dry_run: bool) -> Value {
        json!({
            "dry_run": dry_run,
            "files_scanned": s.files_scanned,
            "bytes_hashed": s.bytes_hashed,
            "groups": s.groups,
            "files_shared": s.files_shared,
            "bytes_shared": s.bytes_shared,
            "already_shared": s.already_shared,
            "changed": s.changed,
            "space_freed": s.space_freed,
            "unsupported": s.unsupported.iter().map(|u| json!({
                "path": self.path(&u.path),
                "fs_type": u.fs_type,
                "mount_point": u.mount_point,
                "files": u.files,
            })).collect::<Vec<_>>(),
            "errors": self.errors(&s.errors),
            "elapsed_seconds": s.elapsed.as_secs_f64(),
            "cancelled": s.cancelled,
            "exit_code": s.outcome().code(),
        })
    }

    /// `kopiru flash --json`. A device's error is an error object with the
    /// offset of the failed write (`at`) and what it means (`message`: "too
    /// small: ...", "the device disappeared ..."). The image's SHA-256 is
    /// given once every device read it back the same. For an image from
    /// a URL, `downloaded_bytes` and `resumes` (else null).
    pub fn flash(&self, s: &crate::flash::FlashSummary) -> Value {
        let sha256 = s.sha256.filter(|_| s.ok()).and_then(|sum| {
            s.devices
                .iter()
                .all(|d| d.verified == Some(true))
                .then(|| sum.to_string())
        });
        json!({
            "format": s.format,
            "image_bytes": s.image_bytes,
            "write_seconds": s.write_time.as_secs_f64(),
            "elapsed_seconds": s.elapsed.as_secs_f64(),
            "source_error": s.source_error.as_ref().map(|e| self.error(e)),
            "cancelled": s.cancelled,
            "sha256": sha256,
            "downloaded_bytes": s.downloaded,
            "resumes": s.resumes,
            "devices": s.devices.iter().map(|d| json!({
                "path": self.path(&d.path),
                "direct": d.direct,
                "verified": d.verified,
                "mismatch_at": d.mismatch_at,
                "identical_bytes": d.identical_bytes,
                "written_to": d.written_to,
                "first_mib_written": d.head_written,
                "error": d.error.as_ref().map(|e| {
                    let mut v = self.error(e);
                    v["at"] = json!(d.error_at);
                    v["message"] = json!(d.error_text_with(self.words));
                    v
                }),
            })).collect::<Vec<_>>(),
            "exit_code": s.outcome().code(),
        })
    }

    /// `kopiru image --json`. The SHA-256 is given only for an image that is
    /// complete and in place.
    pub fn image(
        &self,
        s: &crate::image::ImageSummary,
        src: &crate::image::Source,
        device: &Path,
        output: &Path,
        bmap: Option<&Path>,
    ) -> Value {
        json!({
            "device": self.path(device),
            "output": self.path(output),
            "bmap": bmap.map(|p| self.path(p)),
            "format": s.format.name(),
            "level": s.level,
            "image_bytes": s.image_bytes,
            "device_bytes": src.device_size,
            "partitions_only": src.last_partition.map(|(table, n)| json!({
                "table": table, "last_partition": n,
            })),
            "output_bytes": s.output_bytes,
            "mapped_bytes": s.mapped_bytes,
            "sha256": s.sha256.filter(|_| s.ok()).map(|sum| sum.to_string()),
            "verified": s.verified,
            "direct": s.direct,
            "write_seconds": s.write_time.as_secs_f64(),
            "elapsed_seconds": s.elapsed.as_secs_f64(),
            "error_at": s.error_at,
            "errors": s.error.iter().map(|e| self.error(e)).collect::<Vec<_>>(),
            "cancelled": s.cancelled,
            "exit_code": s.outcome().code(),
        })
    }
}
