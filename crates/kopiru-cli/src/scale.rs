//! The options of `kopiru copy` for copies that go past one process:
//! --files-from (and --from0), --shard, --report; and the report's writer.

use crate::render;
use clap::Args;
use kopiru::{Change, ChangeKind, CopyOptions, EntryKind, Error, FileDone, Shard};
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

#[derive(Args, Default)]
pub struct ScaleArgs {
    /// rsync's --files-from: copy exactly the entries FILE lists (one path
    /// per line; - for standard input), paths inside SOURCE, one SOURCE
    /// directory; absolute ones must be under it. DEST is the copy of
    /// SOURCE itself (as with -T), made if missing. Parent directories are
    /// made; a listed directory is made, not entered (-r copies it whole);
    /// every directory touched gets its source's metadata at the end.
    /// Several kopiru processes may copy lists into one DEST at once (as
    /// fpart's jobs do).
    #[arg(long, value_name = "FILE")]
    pub files_from: Option<PathBuf>,

    /// The paths of --files-from end with a NUL byte, not a newline (find
    /// -print0, fpart -0).
    #[arg(long, short = '0', requires = "files_from")]
    pub from0: bool,

    /// Copy one share of the tree, as rank K of N processes started with
    /// the same command (K from 0); auto takes K and N from mpirun
    /// (OMPI_COMM_WORLD_RANK/SIZE), PMI (PMI_RANK/SIZE) or srun
    /// (SLURM_PROCID/NTASKS). Every rank cuts the tree into the same pieces
    /// by entry count and claims them one at a time, so a rank held up by a
    /// large file takes fewer; the ranks meet through DEST's filesystem, and the copy is put in
    /// place once, when every rank is done: exit 0 on every rank means the
    /// whole copy is there and durable. One SOURCE directory; each rank
    /// uses its machine's CPUs divided by the ranks on it (-j to choose).
    #[arg(long, value_name = "K/N|auto")]
    pub shard: Option<String>,

    /// Append one JSON line per entry to FILE: path (in DEST), source,
    /// type, bytes, method, outcome (copied, created, replaced, kept,
    /// failed, deleted) and error; lines are written whole, so several
    /// processes may append to one file.
    #[arg(long, value_name = "FILE.jsonl")]
    pub report: Option<PathBuf>,
}

impl ScaleArgs {
    /// Adds these options to the engine's, or a usage error.
    pub fn apply(&self, opts: &mut CopyOptions, recursive: bool) -> Result<(), String> {
        if let Some(file) = &self.files_from {
            opts.files_from = Some(read_list(file, self.from0)?);
            opts.recursive = recursive;
        }
        opts.shard = match self.shard.as_deref() {
            None => None,
            Some("auto") => Some(Shard::from_env(|k| std::env::var(k).ok())?),
            Some(k_of_n) => Some(Shard::parse(k_of_n)?),
        };
        // The report needs every entry's change, not only files'.
        opts.report_changes |= self.report.is_some();
        Ok(())
    }
}

/// The paths in `file` (- for standard input): one per line (a trailing
/// \r dropped, empty lines skipped), or NUL-terminated with `nul`.
fn read_list(file: &Path, nul: bool) -> Result<Vec<PathBuf>, String> {
    let mut bytes = Vec::new();
    let read = match file.as_os_str() == "-" {
        true => std::io::stdin().read_to_end(&mut bytes),
        false => File::open(file).and_then(|mut f| f.read_to_end(&mut bytes)),
    };
    read.map_err(|e| format!("--files-from {}: {e}", render::path(file)))?;
    let sep = if nul { b'\0' } else { b'\n' };
    Ok(bytes
        .split(|&b| b == sep)
        .map(|l| match nul {
            true => l,
            false => l.strip_suffix(b"\r").unwrap_or(l),
        })
        .filter(|l| !l.is_empty())
        .map(path_of_bytes)
        .collect())
}

#[cfg(unix)]
fn path_of_bytes(b: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    PathBuf::from(std::ffi::OsStr::from_bytes(b))
}

#[cfg(not(unix))]
fn path_of_bytes(b: &[u8]) -> PathBuf {
    PathBuf::from(String::from_utf8_lossy(b).into_owned())
}

/// `--report`: JSON lines, gathered and written a batch of whole lines at a
/// time with one `write` on a file opened for appending (so lines of
/// several processes never mix).
pub struct Report {
    file: File,
    path: PathBuf,
    pending: Mutex<Vec<u8>>,
    failed: Mutex<Option<String>>,
}

/// Bytes gathered before one write.
const BATCH: usize = 64 << 10;

impl Report {
    pub fn open(path: &Path) -> Result<Report, String> {
        let file = File::options()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("--report {}: {e}", render::path(path)))?;
        Ok(Report {
            file,
            path: path.to_path_buf(),
            pending: Mutex::new(Vec::new()),
            failed: Mutex::new(None),
        })
    }

    fn line(&self, v: serde_json::Value) {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let _ = serde_json::to_writer(&mut *p, &v);
        p.push(b'\n');
        if p.len() >= BATCH {
            let batch = std::mem::take(&mut *p);
            drop(p);
            self.write(&batch);
        }
    }

    fn write(&self, batch: &[u8]) {
        // One write of whole lines: with O_APPEND, it lands at the end as
        // one piece.
        if let Err(e) = (&self.file).write_all(batch) {
            let mut f = self.failed.lock().unwrap_or_else(|e| e.into_inner());
            f.get_or_insert_with(|| format!("--report {}: {e}", render::path(&self.path)));
        }
    }

    /// Writes what is left; the first write error, if any.
    pub fn finish(&self) -> Result<(), String> {
        let batch = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()));
        if !batch.is_empty() {
            self.write(&batch);
        }
        match self.failed.lock().unwrap_or_else(|e| e.into_inner()).take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    pub fn file_done(&self, src: &Path, dst: &Path, d: &FileDone) {
        self.line(serde_json::json!({
            "path": render::path(dst),
            "source": render::path(src),
            "type": "file",
            "bytes": d.bytes,
            "method": d.method.name(),
            "outcome": "copied",
        }));
    }

    pub fn change(&self, c: &Change) {
        let kind = match c.kind {
            // A file made is reported by file_done, with its method.
            EntryKind::File if c.change != ChangeKind::Deleted => return,
            EntryKind::File => "file",
            EntryKind::Dir => "dir",
            EntryKind::Symlink => "symlink",
            EntryKind::Special => "special",
            EntryKind::HardLink => "hardlink",
        };
        let outcome = match c.change {
            ChangeKind::Created => "created",
            ChangeKind::Replaced { .. } => "replaced",
            ChangeKind::Deleted => "deleted",
        };
        self.line(serde_json::json!({
            "path": render::path(c.path),
            "type": kind,
            "outcome": outcome,
        }));
    }

    pub fn kept(&self, path: &Path) {
        self.line(serde_json::json!({
            "path": render::path(path),
            "outcome": "kept",
        }));
    }

    pub fn error(&self, e: &Error) {
        self.line(serde_json::json!({
            "path": render::path(&e.path),
            "side": e.side.name(),
            "outcome": "failed",
            "operation": e.op.name(),
            "error": render::reason(e),
            "errno": e.errno(),
        }));
    }
}
