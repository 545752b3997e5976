//! The engine's results as plain JavaScript objects: the command's
//! `--json` output (`kopiru::json`, one form for both), with its keys in
//! camelCase. The binding adds only what Node has and the command line
//! does not: on Windows, each error's `code` as Node's `fs` names it.

#[cfg(unix)]
use kopiru::dedupe::DedupeSummary;
#[cfg(unix)]
use kopiru::flash::FlashSummary;
#[cfg(target_os = "linux")]
use kopiru::image::ImageSummary;
use kopiru::json::Json;
use kopiru::verify::VerifyReport;
use kopiru::{Error, Refusal, Summary};
use serde_json::{Map, Value};
use std::path::Path;

/// The binding's JSON: refusals in its words ([`refusal`]).
const NODE: Json = Json::NODE.with_words(refusal);

/// A refusal in the binding's words: its option names (`force`,
/// `allowFile`, `format: 'raw'`), where the engine's text names settings
/// neutrally; the engine's text for a refusal that names no setting.
pub fn refusal(r: &Refusal) -> String {
    use kopiru::flash::{Found, NotAnImage};
    use kopiru::{image::ImageRefusal as I, DeviceRefusal as D, Refusal as R};
    let force = |what: &str| format!("{what} (force: true writes it anyway)");
    let esc = |p: &Path| kopiru::paths::escape(p.as_os_str());
    match r {
        R::AlreadyCopied { source, dest } => {
            let (s, d) = (esc(source), esc(dest));
            format!(
                "'{d}' is the copy of '{s}' that an earlier kopiru run made: nothing copied, \
                 so nothing changed in it since is overwritten (to update it from '{s}': \
                 noTargetDirectory, copy('{s}', '{d}', {{ noTargetDirectory: true }}))"
            )
        }
        R::Incomplete { staged, failed } => format!(
            "not put in place: {failed} {} in it; what was copied is kept under '{}': run \
             the same copy with resume: true to finish it",
            match failed {
                1 => "failure",
                _ => "failures",
            },
            esc(staged)
        ),
        R::HoldsProtected => {
            "cannot delete non-empty directory: it holds entries an exclude protects".into()
        }
        R::KeptExisting => "kept as it is (noClobber or update)".into(),
        R::CannotClone { why } => {
            format!("cannot clone here ({why}); nothing was copied (method: 'auto' falls back)")
        }
        R::Device(D::NoSuchDevice { under_dev: false }) => {
            "no such device (allowFile: true writes the image to a new file)".into()
        }
        R::Device(D::NotABlockDevice { regular_file: true }) => {
            "not a block device (allowFile: true writes a regular file)".into()
        }
        R::Device(D::Partition) => force("is a partition, not a whole device"),
        R::Device(D::HoldsRootFs) => force("holds the root filesystem"),
        R::Device(D::HoldsImage) => force("holds the image being written"),
        R::Device(D::Mounted { at }) => {
            format!("is mounted (at {at}); unmount it first, or force: true")
        }
        R::Device(D::InUse { chain }) => format!(
            "is in use: {chain}; nothing written (unmount or detach that first, or force: true)"
        ),
        R::NotAnImage(NotAnImage::Mismatch {
            claimed,
            by_name: false,
            found,
        }) => format!(
            "format: '{claimed}' was given, but its bytes are not {claimed}: {found}; nothing \
             written"
        ),
        R::NotAnImage(NotAnImage::Unrecognised(
            found @ (Found::Html | Found::Text | Found::Empty),
        )) => {
            format!("not a disk image: {found}; nothing written (format: 'raw' writes it as it is)")
        }
        R::NotAnImage(NotAnImage::Unrecognised(_)) => format!(
            "not a known image format: no {} header, no partition table or filesystem at its \
             start, and not named as a raw image (.img, .iso, .raw, ...); nothing written \
             (format: 'raw' writes it as it is)",
            kopiru::Format::compressed_names()
        ),
        R::Image(I::NotADevice { regular_file: true }) => {
            "not a block device (allowFile: true reads a regular file)".into()
        }
        R::Image(I::MountedReadWrite { at }) => format!(
            "is mounted read-write (at {at}): its image would not be consistent; unmount it \
             or remount it read-only, or force: true"
        ),
        R::Image(I::OutputExists) => {
            "exists (force: true replaces it, once the new image is complete and verified)".into()
        }
        R::Image(I::NoPartitionTable) => {
            "partitionsOnly: no partition table (MBR or GPT) found".into()
        }
        R::Image(I::PartitionPastEnd {
            table,
            number,
            end,
            device,
        }) => format!(
            "partitionsOnly: {table} partition {number} ends at byte {end}, past the end \
             of the device ({device} bytes): the table was made for a larger device"
        ),
        // The engine's text names no option here.
        _ => r.to_string(),
    }
}

/// An error as `path: operation: reason`, in the binding's words.
pub fn error_text(e: &Error) -> String {
    format!("{}: {}: {}", path(&e.path), e.op, e.reason_with(refusal))
}

/// `exit_code` -> `exitCode`.
fn camel_key(k: &str) -> String {
    let mut out = String::with_capacity(k.len());
    let mut up = false;
    for c in k.chars() {
        match (c, up) {
            ('_', _) => up = true,
            (c, true) => {
                out.extend(c.to_uppercase());
                up = false;
            }
            (c, false) => out.push(c),
        }
    }
    out
}

/// Every object key in camelCase, and each error object (one with `side`
/// and `operation`) given its Node `code` on Windows. Method names (the
/// keys of `methods`) are values, not fields: they stay as they are.
fn camel(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            let is_error = m.contains_key("side") && m.contains_key("operation");
            let mut out: Map<String, Value> = m
                .into_iter()
                .map(|(k, v)| match k.as_str() {
                    "methods" => (k, v),
                    _ => (camel_key(&k), camel(v)),
                })
                .collect();
            if is_error && cfg!(windows) {
                let code = out
                    .get("errno")
                    .and_then(Value::as_i64)
                    .and_then(|n| windows_code(n as i32));
                out.insert("code".into(), code.into());
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.into_iter().map(camel).collect()),
        v => v,
    }
}

/// A path as a JavaScript string: as it is when it is UTF-8 (what `fs`
/// gives back), else with kopiru's lossless escape.
pub fn path(p: &Path) -> String {
    NODE.path(p)
}

/// One error: `{ path, side, operation, reason, errno }` (`errno` null for
/// a refusal the engine made itself). On Windows `errno` is the Windows
/// error code and `code` its name as Node's `fs` gives it; elsewhere the
/// wrapper names the errno from `os.constants.errno`.
pub fn error(e: &Error) -> Value {
    camel(NODE.error(e))
}

/// The `code` Node's `fs` (libuv's `uv_translate_sys_error`) gives a
/// Windows error, for the codes a copy meets; `None` for the rest. The
/// numbers are stable Win32 error codes (winerror.h).
#[cfg_attr(not(windows), allow(dead_code))]
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

/// `kopiru copy --json`, in camelCase.
pub fn copy_summary(s: &Summary, dry_run: bool) -> Value {
    camel(NODE.copy(s, dry_run))
}

/// `kopiru verify --json`, in camelCase.
pub fn verify_report(r: &VerifyReport, dest: &Path) -> Value {
    camel(NODE.verify(r, dest))
}

/// `kopiru dedupe --json`, in camelCase.
#[cfg(unix)]
pub fn dedupe_summary(s: &DedupeSummary, dry_run: bool) -> Value {
    camel(NODE.dedupe(s, dry_run))
}

/// `kopiru flash --json`, in camelCase.
#[cfg(unix)]
pub fn flash_summary(s: &FlashSummary) -> Value {
    camel(NODE.flash(s))
}

/// `kopiru image --json`, in camelCase.
#[cfg(target_os = "linux")]
pub fn image_summary(
    s: &ImageSummary,
    src: &kopiru::image::Source,
    device: &Path,
    output: &Path,
    bmap: Option<&Path>,
) -> Value {
    camel(NODE.image(s, src, device, output, bmap))
}

/// An option as Node spells it.
fn option_name(s: kopiru::Setting) -> &'static str {
    use kopiru::Setting;
    match s {
        Setting::NoTargetDirectory => "noTargetDirectory",
        Setting::Delete => "delete",
        Setting::DryRun => "dryRun",
        Setting::Verify => "verify",
        Setting::NoClobber => "noClobber",
        Setting::LinkDest => "linkDest",
        Setting::CloneDest => "cloneDest",
        Setting::CloneMethod => "method: 'clone'",
        // Not options of the binding: the engine's neutral names.
        _ => s.id(),
    }
}

/// A refused request in the binding's words: its option names
/// (`noTargetDirectory`, `delete`), where the engine's text names
/// settings neutrally.
pub(crate) fn plan_error(e: &kopiru::PlanError) -> String {
    use kopiru::PlanError as P;
    let esc = |p: &Path| kopiru::paths::escape(p.as_os_str());
    match e {
        P::OneSourceAsItself => "noTargetDirectory takes one source and one destination".into(),
        P::DeleteNeedsItself => "delete removes from dest what the source does not have, so \
                                 dest must be the copy itself: set noTargetDirectory, or write \
                                 source/. to copy the contents of source into dest"
            .into(),
        P::DeleteNested {
            source,
            dest,
            source_inside: true,
        } => format!(
            "delete: the source '{}' is '{}' or inside it, so deleting what the source \
             lacks would delete the source itself; nothing was copied",
            esc(source),
            esc(dest)
        ),
        P::DeleteNested { source, dest, .. } => format!(
            "delete: the destination '{}' is inside the source '{}'; nothing was copied",
            esc(dest),
            esc(source)
        ),
        P::BasisNotADirectory {
            setting,
            given,
            looked,
        } => format!(
            "{} {}: {} is not a directory{}",
            option_name(*setting),
            esc(given),
            esc(looked),
            match given.is_relative() {
                true => " (a relative directory is taken from dest, as rsync takes it)",
                false => "",
            }
        ),
        P::Excludes { first, second } => format!(
            "{} and {} exclude each other: use one of them",
            option_name(*first),
            option_name(*second)
        ),
        // The engine's text names no option here.
        _ => e.to_string(),
    }
}
