//! The engine's results as plain JavaScript objects: the fields of the
//! command's `--json` output, in camelCase.

#[cfg(unix)]
use kopiru::dedupe::DedupeSummary;
#[cfg(unix)]
use kopiru::flash::FlashSummary;
#[cfg(target_os = "linux")]
use kopiru::image::ImageSummary;
use kopiru::verify::VerifyReport;
use kopiru::{Error, Method, Summary};
use serde_json::{json, Value};
use std::path::Path;

/// A path as a JavaScript string: as it is when it is UTF-8 (what `fs`
/// gives back), else with kopiru's lossless escape (`\xHH` for each byte
/// that is not UTF-8, `\\` for a backslash), as the command writes it.
pub fn path(p: &Path) -> String {
    match p.to_str() {
        Some(s) => s.to_owned(),
        None => kopiru::paths::Escaped(p.as_os_str()).to_string(),
    }
}

/// One error: `{ path, side, op, reason, errno }` (`errno` null for a
/// refusal the engine made itself). On Windows `errno` is the Windows error
/// code and `code` its name as Node's `fs` gives it; elsewhere the wrapper
/// names the errno from `os.constants.errno`.
pub fn error(e: &Error) -> Value {
    let mut v = json!({
        "path": path(&e.path),
        "side": e.side.name(),
        "op": e.op.name(),
        "reason": e.reason(),
        "errno": e.errno(),
    });
    if cfg!(windows) {
        v["code"] = e.errno().and_then(windows_code).into();
    }
    v
}

/// The `code` Node's `fs` (libuv's `uv_translate_sys_error`) gives a
/// Windows error, for the codes a copy meets; `None` for the rest. The
/// numbers are stable Win32 error codes (winerror.h).
fn windows_code(code: i32) -> Option<&'static str> {
    Some(match code {
        // FILE_NOT_FOUND, PATH_NOT_FOUND, INVALID_DRIVE, INVALID_NAME,
        // MOD_NOT_FOUND, BAD_PATHNAME, DIRECTORY (a name that is no
        // directory where one was expected)
        2 | 3 | 15 | 123 | 126 | 161 | 267 => "ENOENT",
        1 => "EISDIR", // INVALID_FUNCTION
        // ACCESS_DENIED, PRIVILEGE_NOT_HELD
        5 | 1314 => "EPERM",
        // NOACCESS, CANT_ACCESS_FILE
        998 | 1920 => "EACCES",
        4 => "EMFILE",         // TOO_MANY_OPEN_FILES
        6 => "EBADF",          // INVALID_HANDLE
        8 | 14 => "ENOMEM",    // NOT_ENOUGH_MEMORY, OUTOFMEMORY
        17 => "EXDEV",         // NOT_SAME_DEVICE
        19 => "EROFS",         // WRITE_PROTECT
        32 | 33 => "EBUSY",    // SHARING_VIOLATION, LOCK_VIOLATION
        39 | 112 => "ENOSPC",  // HANDLE_DISK_FULL, DISK_FULL
        50 => "ENOTSUP",       // NOT_SUPPORTED
        80 | 183 => "EEXIST",  // FILE_EXISTS, ALREADY_EXISTS
        87 | 4390 => "EINVAL", // INVALID_PARAMETER, NOT_A_REPARSE_POINT
        145 => "ENOTEMPTY",    // DIR_NOT_EMPTY
        206 => "ENAMETOOLONG", // FILENAME_EXCED_RANGE
        995 => "ECANCELED",    // OPERATION_ABORTED
        1117 => "EIO",         // IO_DEVICE
        1921 => "ELOOP",       // CANT_RESOLVE_FILENAME
        _ => return None,
    })
}

fn errors(v: &[Error]) -> Vec<Value> {
    v.iter().map(error).collect()
}

/// The exit code the command would choose (rsync's where they overlap).
fn outcome(cancelled: bool, failed: bool, did_something: bool) -> u8 {
    match (cancelled, failed, did_something) {
        (true, _, _) => 20,
        (false, false, _) => 0,
        (false, true, true) => 23,
        (false, true, false) => 1,
    }
}

/// `kopiru copy --json`, in camelCase.
pub fn copy_summary(s: &Summary) -> Value {
    let methods: serde_json::Map<String, Value> = Method::ALL
        .iter()
        .map(|m| (m.name().to_string(), s.method_count(*m).into()))
        .collect();
    json!({
        "files": s.files,
        "bytes": s.bytes,
        "directories": s.dirs,
        "symlinks": s.symlinks,
        "specialFiles": s.specials,
        "hardLinks": s.hardlinks,
        "skipped": s.skipped,
        "withdrawn": s.withdrawn,
        "verifiedFiles": s.verified_files,
        "methods": methods,
        "errors": errors(&s.errors),
        "warnings": errors(&s.warnings),
        "elapsedSeconds": s.elapsed.as_secs_f64(),
        "cancelled": s.cancelled,
        "exitCode": outcome(s.cancelled, !s.errors.is_empty(), s.copied_anything()),
    })
}

/// `kopiru verify --json`, in camelCase, with `equal`.
pub fn verify_report(r: &VerifyReport, dest: &Path) -> Value {
    let code = if !r.errors.is_empty() {
        2
    } else if !r.differences.is_empty() {
        1
    } else {
        0
    };
    json!({
        "files": r.files,
        "bytes": r.bytes,
        "equal": code == 0,
        "differences": r.differences.iter().map(|d| json!({
            "path": path(&d.path),
            "destPath": path(&match d.path.as_os_str().is_empty() {
                true => dest.to_path_buf(),
                false => dest.join(&d.path),
            }),
            "what": d.what.to_string(),
        })).collect::<Vec<_>>(),
        "errors": errors(&r.errors),
        "exitCode": code,
    })
}

/// `kopiru dedupe --json`, in camelCase (errors as objects).
#[cfg(unix)]
pub fn dedupe_summary(s: &DedupeSummary, dry_run: bool) -> Value {
    let code = if s.cancelled {
        20
    } else if s.errors.is_empty() && s.files_scanned == 0 && !s.unsupported.is_empty() {
        1
    } else {
        outcome(false, !s.errors.is_empty(), s.files_shared > 0)
    };
    json!({
        "dryRun": dry_run,
        "filesScanned": s.files_scanned,
        "bytesHashed": s.bytes_hashed,
        "groups": s.groups,
        "filesShared": s.files_shared,
        "bytesShared": s.bytes_shared,
        "alreadyShared": s.already_shared,
        "changed": s.changed,
        "spaceFreed": s.space_freed,
        "unsupported": s.unsupported.iter().map(|u| json!({
            "path": path(&u.path),
            "fsType": u.fs_type,
        })).collect::<Vec<_>>(),
        "errors": errors(&s.errors),
        "elapsedSeconds": s.elapsed.as_secs_f64(),
        "cancelled": s.cancelled,
        "exitCode": code,
    })
}

/// `kopiru flash --json`, in camelCase; a device's error is an object
/// with the offset of the failed write (`at`).
#[cfg(unix)]
pub fn flash_summary(s: &FlashSummary) -> Value {
    let good = s
        .devices
        .iter()
        .filter(|d| d.error.is_none() && d.mismatch_at.is_none())
        .count();
    let code = if s.cancelled {
        20
    } else if s.ok() {
        0
    } else if good > 0 && s.source_error.is_none() {
        23
    } else {
        1
    };
    json!({
        "format": s.format,
        "imageBytes": s.image_bytes,
        "writeSeconds": s.write_time.as_secs_f64(),
        "elapsedSeconds": s.elapsed.as_secs_f64(),
        "sourceError": s.source_error.as_ref().map(error),
        "cancelled": s.cancelled,
        "devices": s.devices.iter().map(|d| json!({
            "path": path(&d.path),
            "direct": d.direct,
            "verified": d.verified,
            "mismatchAt": d.mismatch_at,
            "identicalBytes": d.identical_bytes,
            "error": d.error.as_ref().map(|e| {
                let mut v = error(e);
                v["at"] = json!(d.error_at);
                v
            }),
        })).collect::<Vec<_>>(),
        "exitCode": code,
    })
}

/// `kopiru image --json`, in camelCase. The SHA-256 is given only for an
/// image that is complete and in place.
#[cfg(target_os = "linux")]
pub fn image_summary(
    s: &ImageSummary,
    src: &kopiru::image::Source,
    device: &std::path::Path,
    output: &std::path::Path,
    bmap: Option<&std::path::Path>,
) -> Value {
    let code = match (s.cancelled, s.ok()) {
        (true, _) => 20,
        (false, true) => 0,
        (false, false) => 1,
    };
    let errors: Vec<Value> = s.error.iter().map(error).collect();
    json!({
        "device": path(device),
        "output": path(output),
        "bmap": bmap.map(path),
        "format": s.format.name(),
        "level": s.level,
        "imageBytes": s.image_bytes,
        "deviceBytes": src.device_size,
        "partitionsOnly": src.last_partition.map(|(table, n)| json!({
            "table": table, "lastPartition": n,
        })),
        "outputBytes": s.output_bytes,
        "mappedBytes": s.mapped_bytes,
        "sha256": s.sha256.as_ref().filter(|_| s.ok()).map(kopiru::image::hex),
        "verified": s.verified,
        "direct": s.direct,
        "writeSeconds": s.write_time.as_secs_f64(),
        "elapsedSeconds": s.elapsed.as_secs_f64(),
        "errorAt": s.error_at,
        "errors": errors,
        "cancelled": s.cancelled,
        "exitCode": code,
    })
}
