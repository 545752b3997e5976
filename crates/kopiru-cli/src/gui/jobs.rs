//! The operations the page started: each a `kopiru gui-helper` child,
//! started through the elevation command (or as a plain child when the
//! server is root), spoken to over its stdin and stdout pipes only. Its
//! JSON lines become the job's state, which the event stream sends.

use super::Shared;
use crate::args::Elevate;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

/// What a job is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Flash,
    Backup,
}

/// One operation, as the page sees it.
pub struct Job {
    pub id: u64,
    pub kind: Kind,
    /// The image (flash) or the output (backup).
    pub source: String,
    /// The devices it writes (flash) or reads (backup).
    pub devices: Vec<String>,
    /// starting, checking, hashing, writing, verifying, done.
    pub phase: &'static str,
    pub started: Instant,
    pub ended: Option<Instant>,
    /// The last progress line's counters.
    pub done: u64,
    pub total: Option<u64>,
    pub verified: u64,
    pub verify_total: u64,
    pub download: Value,
    /// (seconds since start, done, verified, downloaded) of recent lines,
    /// for rates over the last few seconds.
    samples: Vec<(f64, u64, u64, u64)>,
    /// What `checked` said: each target's size and model.
    pub targets: Value,
    /// Refused before writing, or the helper could not be started.
    pub refused: Option<String>,
    /// The helper's `result` line.
    pub result: Option<Value>,
    /// The helper's stderr (the elevation command's complaints).
    pub stderr: String,
    pub cancel_asked: bool,
    stdin: Option<ChildStdin>,
    /// The helper's peak RSS, KiB.
    pub peak_rss_kib: Option<u64>,
}

impl Job {
    pub fn running(&self) -> bool {
        self.ended.is_none()
    }

    /// Asks the helper to stop (a line on its stdin).
    pub fn cancel(&mut self) {
        self.cancel_asked = true;
        if let Some(s) = self.stdin.as_mut() {
            let _ = s.write_all(b"cancel\n");
            let _ = s.flush();
        }
    }

    /// Bytes per second of the field `pick` over the last 3 s of samples.
    fn rate(&self, pick: fn(&(f64, u64, u64, u64)) -> u64) -> Option<f64> {
        let last = self.samples.last()?;
        let first = self.samples.iter().find(|s| last.0 - s.0 <= 3.0)?;
        let dt = last.0 - first.0;
        (dt > 0.2).then(|| (pick(last).saturating_sub(pick(first))) as f64 / dt)
    }

    /// The job for the page.
    pub fn to_json(&self) -> Value {
        let elapsed = self
            .ended
            .unwrap_or_else(Instant::now)
            .duration_since(self.started)
            .as_secs_f64();
        let (rate, verify_rate) = (self.rate(|s| s.1), self.rate(|s| s.2));
        let eta = |left: u64, r: Option<f64>| r.filter(|&r| r > 0.0).map(|r| left as f64 / r);
        let eta = match self.phase {
            "verifying" => eta(self.verify_total.saturating_sub(self.verified), verify_rate),
            _ => self
                .total
                .and_then(|t| eta(t.saturating_sub(self.done), rate)),
        };
        let mut download = self.download.clone();
        if let Some(d) = download.as_object_mut() {
            d.insert("rate".into(), json!(self.rate(|s| s.3)));
        }
        json!({
            "id": self.id,
            "kind": match self.kind { Kind::Flash => "flash", Kind::Backup => "backup" },
            "source": self.source,
            "devices": self.devices,
            "phase": self.phase,
            "running": self.running(),
            "elapsed": elapsed,
            "done": self.done,
            "total": self.total,
            "rate": rate,
            "verified": self.verified,
            "verify_total": self.verify_total,
            "verify_rate": verify_rate,
            "eta": eta,
            "download": download,
            "targets": self.targets,
            "refused": self.refused,
            "result": self.result,
            "cancel_asked": self.cancel_asked,
        })
    }
}

/// The command that runs `kopiru gui-helper ARGS` as root: the helper
/// itself when already root, else through `elevate`. Always this very
/// binary, by its absolute path (pkexec wants one).
fn helper_command(elevate: Elevate, args: &[String]) -> std::io::Result<Command> {
    let exe = std::env::current_exe()?;
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let mut c = match (root, elevate) {
        (true, _) => Command::new(&exe),
        (false, Elevate::Pkexec) => {
            let mut c = Command::new("pkexec");
            c.arg(&exe);
            c
        }
        (false, Elevate::Run0) => {
            let mut c = Command::new("run0");
            c.arg("--").arg(&exe);
            c
        }
        (false, Elevate::Sudo) => {
            let mut c = Command::new("sudo");
            c.args(["-n", "--"]).arg(&exe);
            c
        }
        (false, Elevate::Doas) => {
            let mut c = Command::new("doas");
            c.args(["-n", "--"]).arg(&exe);
            c
        }
    };
    c.arg("gui-helper").args(args);
    c.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    Ok(c)
}

/// Starts a job: the helper with `args`; a thread reads its lines into
/// the job. Returns the job's id.
pub fn start(
    shared: &Arc<Shared>,
    kind: Kind,
    source: String,
    devices: Vec<String>,
    args: Vec<String>,
) -> u64 {
    let mut st = shared.lock();
    st.next_job += 1;
    let id = st.next_job;
    let mut job = Job {
        id,
        kind,
        source,
        devices,
        phase: "starting",
        started: Instant::now(),
        ended: None,
        done: 0,
        total: None,
        verified: 0,
        verify_total: 0,
        download: Value::Null,
        samples: Vec::new(),
        targets: Value::Null,
        refused: None,
        result: None,
        stderr: String::new(),
        cancel_asked: false,
        stdin: None,
        peak_rss_kib: None,
    };
    let child = helper_command(shared.elevate, &args).and_then(|mut c| c.spawn());
    match child {
        Ok(mut child) => {
            job.stdin = child.stdin.take();
            let out = child.stdout.take();
            let err = child.stderr.take();
            st.jobs.push(job);
            drop(st);
            let sh = shared.clone();
            std::thread::spawn(move || follow(&sh, id, child, out, err));
        }
        Err(e) => {
            job.refused = Some(format!(
                "cannot start the helper through {}: {}",
                format!("{:?}", shared.elevate).to_lowercase(),
                kopiru::reason(&e)
            ));
            job.phase = "done";
            job.ended = Some(Instant::now());
            st.jobs.push(job);
            drop(st);
        }
    }
    shared.changed_now();
    id
}

/// Reads the helper's lines into job `id` until it exits.
fn follow(
    shared: &Arc<Shared>,
    id: u64,
    mut child: Child,
    out: Option<std::process::ChildStdout>,
    err: Option<std::process::ChildStderr>,
) {
    // The elevation command's complaints (no polkit agent, no sudo rule).
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(mut e) = err {
            let _ = e.by_ref().take(64 << 10).read_to_string(&mut s);
            // Drain the rest, so the helper never blocks on a full pipe.
            let _ = std::io::copy(&mut e, &mut std::io::sink());
        }
        s
    });
    if let Some(out) = out {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            let urgent = shared.with_job(id, |j| apply(j, &v))
                && !matches!(v.get("event").and_then(Value::as_str), Some("progress"));
            match urgent {
                true => shared.changed_now(),
                false => shared.changed(),
            }
        }
    }
    let status = child.wait();
    let stderr = stderr.join().unwrap_or_default();
    shared.with_job(id, |j| {
        j.stdin = None;
        j.ended = Some(Instant::now());
        j.phase = "done";
        j.stderr = stderr.trim().to_string();
        if j.result.is_none() && j.refused.is_none() {
            let code = status.map(|s| s.to_string()).unwrap_or_default();
            let said = match j.stderr.is_empty() {
                true => String::new(),
                false => format!(": {}", j.stderr),
            };
            j.refused = Some(format!("the helper stopped ({code}){said}"));
        }
    });
    shared.changed_now();
}

/// One line of the helper's into the job.
fn apply(j: &mut Job, v: &Value) {
    let num = |k: &str| v.get(k).and_then(Value::as_u64);
    match v.get("event").and_then(Value::as_str) {
        Some("started") => j.phase = "checking",
        Some("checked") => {
            j.targets = v.get("targets").cloned().unwrap_or(Value::Null);
            j.phase = "writing";
        }
        Some("progress") => {
            j.phase = match v.get("phase").and_then(Value::as_str) {
                Some("hash") => "hashing",
                Some("verify") => "verifying",
                _ => match j.kind {
                    Kind::Flash => "writing",
                    Kind::Backup => "reading",
                },
            };
            j.done = num("done").unwrap_or(0);
            j.total = num("total");
            j.verified = num("verified").unwrap_or(0);
            j.verify_total = num("verify_total").unwrap_or(0);
            j.download = v.get("download").cloned().unwrap_or(Value::Null);
            let received = j
                .download
                .get("received")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            let t = j.started.elapsed().as_secs_f64();
            // A new phase starts its rates afresh.
            if j.samples.last().is_some_and(|s| s.1 > j.done) {
                j.samples.clear();
            }
            j.samples.push((t, j.done, j.verified, received));
            j.samples.retain(|s| t - s.0 <= 5.0);
        }
        Some("refused") => {
            j.refused = Some(
                v.get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("refused")
                    .to_string(),
            );
        }
        Some("result") => {
            j.peak_rss_kib = num("peak_rss_kib");
            j.result = Some(v.clone());
        }
        _ => {}
    }
}
