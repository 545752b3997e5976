//! `kopiru gui`: a page in the user's own browser, served on 127.0.0.1 by
//! this process, which runs as the user and never touches a device: each
//! flash or backup is a `kopiru gui-helper` child started through an
//! elevation command ([`jobs`]), spoken to over pipes.
//!
//! The parts: [`http`] (requests and responses on std's sockets),
//! [`security`] (token, cookie, Host, Origin, headers), [`api`] (what each
//! path answers), [`jobs`] (the helpers and their state), [`drives`] (the
//! drive list, kept current), [`helper`] (the child's side), [`assets`]
//! (the page's files, built in).

mod api;
mod assets;
mod drives;
pub mod helper;
mod http;
mod jobs;
mod security;

use crate::args::GuiArgs;
use crate::exit;
use serde_json::{json, Value};
use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Connections served at once, at most (one browser needs a few).
const MAX_CONNECTIONS: usize = 32;
/// An event stream says something this often at least: a closed page is
/// found by the failed write.
const KEEP_ALIVE: Duration = Duration::from_secs(5);
/// Between two events of one stream, at least: progress is sent four
/// times a second, not for every line.
const EVENT_GAP: Duration = Duration::from_millis(200);

/// What the page is shown, and what changes it.
pub struct State {
    /// Counts every change.
    pub version: u64,
    /// Counts the changes a page must see at once (a job started or
    /// ended, a result): they are not held back by [`EVENT_GAP`].
    pub urgent: u64,
    pub drives: Value,
    pub jobs: Vec<jobs::Job>,
    pub next_job: u64,
    /// Event streams open now.
    pub pages: usize,
    /// When the last one closed, or the server started.
    pub quiet_since: Instant,
    /// Whether a page has opened yet.
    pub opened: bool,
}

/// What every connection's thread shares.
pub struct Shared {
    state: Mutex<State>,
    change: Condvar,
    pub guard: security::Guard,
    pub elevate: crate::args::Elevate,
    pub home: PathBuf,
}

impl Shared {
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Something changed: every event stream sends the new state.
    pub fn changed(&self) {
        self.lock().version += 1;
        self.change.notify_all();
    }

    /// As [`Shared::changed`], sent at once, even right after another event.
    pub fn changed_now(&self) {
        {
            let mut st = self.lock();
            st.version += 1;
            st.urgent += 1;
        }
        self.change.notify_all();
    }

    /// Runs `f` on job `id`; false if there is none.
    pub fn with_job(&self, id: u64, f: impl FnOnce(&mut jobs::Job)) -> bool {
        let mut st = self.lock();
        match st.jobs.iter_mut().find(|j| j.id == id) {
            Some(j) => {
                f(j);
                true
            }
            None => false,
        }
    }

    /// (version, the state as the page gets it).
    pub fn snapshot(&self) -> (u64, Value) {
        let st = self.lock();
        let busy = |path: &str| {
            st.jobs
                .iter()
                .find(|j| j.running() && j.devices.iter().any(|d| d == path))
                .map(|j| j.id)
        };
        let mut drives = st.drives.clone();
        for d in drives.as_array_mut().into_iter().flatten() {
            let id = busy(d["path"].as_str().unwrap_or(""));
            d["busy"] = json!(id);
        }
        let v = json!({
            "version": st.version,
            "drives": drives,
            "drives_listed": cfg!(target_os = "linux"),
            "jobs": st.jobs.iter().map(jobs::Job::to_json).collect::<Vec<_>>(),
            "home": self.home.to_string_lossy(),
            "root": is_root(),
            "elevate": format!("{:?}", self.elevate).to_lowercase(),
        });
        (st.version, v)
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

pub fn run(args: GuiArgs) -> u8 {
    let listener = match TcpListener::bind((Ipv4Addr::LOCALHOST, args.port.unwrap_or(0))) {
        Ok(l) => l,
        Err(e) => {
            errln!(
                "kopiru: gui: cannot listen on 127.0.0.1:{}: {}",
                args.port.unwrap_or(0),
                kopiru::reason(&e)
            );
            return exit::USAGE;
        }
    };
    let port = match listener.local_addr() {
        Ok(a) => a.port(),
        Err(e) => {
            errln!("kopiru: gui: {}", kopiru::reason(&e));
            return exit::FAILED;
        }
    };
    let guard = match security::Guard::new(port) {
        Ok(g) => g,
        Err(e) => {
            errln!("kopiru: gui: no random token: {}", kopiru::reason(&e));
            return exit::FAILED;
        }
    };
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/"), PathBuf::from);
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            version: 1,
            urgent: 0,
            drives: drives::list(),
            jobs: Vec::new(),
            next_job: 0,
            pages: 0,
            quiet_since: Instant::now(),
            opened: false,
        }),
        change: Condvar::new(),
        guard,
        elevate: args.elevate,
        home,
    });
    let url = shared.guard.url();
    let stop = crate::signals::install(crate::signals::OnSignal::Cancel, "stopped");
    if args.json {
        outln!(
            "{}",
            json!({"url": url, "address": format!("127.0.0.1:{port}"), "port": port,
                   "pid": std::process::id()})
        );
    } else {
        errln!("kopiru: the page is at {url}");
        errln!("kopiru: (its token works once; Ctrl-C stops the server)");
    }
    if !args.no_open {
        open_browser(&url);
    }
    drives::watch(shared.clone());
    accept(shared.clone(), listener);
    wait_until_done(&shared, &stop, Duration::from_secs(args.idle_timeout))
}

/// Serves every connection on a thread of its own (at most
/// [`MAX_CONNECTIONS`] at once; more are closed at once).
fn accept(shared: Arc<Shared>, listener: TcpListener) {
    let open = Arc::new(AtomicUsize::new(0));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            if open.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
                open.fetch_sub(1, Ordering::SeqCst);
                continue;
            }
            let (sh, open) = (shared.clone(), open.clone());
            std::thread::spawn(move || {
                api::serve(&sh, stream);
                open.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
}

/// Serves an event stream: the whole state now, then whenever it changes
/// (at most every [`EVENT_GAP`]), and a comment every [`KEEP_ALIVE`].
/// While it is open, the page counts as open.
fn events(shared: &Arc<Shared>, stream: &std::net::TcpStream) {
    if http::start_events(stream, &security::HEADERS).is_err() {
        return;
    }
    {
        let mut st = shared.lock();
        st.pages += 1;
        st.opened = true;
    }
    let mut seen = 0;
    loop {
        let urgent = shared.lock().urgent;
        let (version, v) = shared.snapshot();
        let sent = match version != seen {
            true => http::write_event(stream, Some(&v.to_string())),
            false => http::write_event(stream, None),
        };
        if sent.is_err() {
            break;
        }
        seen = version;
        // A pause between events, cut short by an urgent change; then a
        // wait for any change, or the keep-alive.
        let st = shared.lock();
        let st = wait(shared, st, EVENT_GAP, |s| s.urgent == urgent);
        if st.version == seen {
            drop(wait(shared, st, KEEP_ALIVE, |s| s.version == seen));
        }
    }
    let mut st = shared.lock();
    st.pages -= 1;
    if st.pages == 0 {
        st.quiet_since = Instant::now();
    }
}

/// Waits on the state's condition variable while `busy` holds, at most
/// `limit`.
fn wait<'a>(
    shared: &'a Shared,
    st: MutexGuard<'a, State>,
    limit: Duration,
    busy: impl FnMut(&mut State) -> bool,
) -> MutexGuard<'a, State> {
    shared
        .change
        .wait_timeout_while(st, limit, busy)
        .map(|(g, _)| g)
        .unwrap_or_else(|e| e.into_inner().0)
}

/// Waits for Ctrl-C (then cancels what runs, waits for it, and exits 20),
/// or for `idle` after the last page closed with nothing running (before
/// a first page: ten minutes at least).
fn wait_until_done(shared: &Arc<Shared>, stop: &kopiru::Cancel, idle: Duration) -> u8 {
    loop {
        std::thread::sleep(Duration::from_millis(200));
        if stop.is_cancelled() {
            let mut st = shared.lock();
            let running = st.jobs.iter().any(jobs::Job::running);
            if !running {
                errln!("kopiru: gui: stopped");
                return exit::OK;
            }
            errln!(
                "kopiru: gui: stopping: cancelling what runs (the devices keep their first MiB)"
            );
            for j in st.jobs.iter_mut().filter(|j| j.running()) {
                j.cancel();
            }
            drop(st);
            // The helpers stop within a chunk; a download stalled in a read
            // within its stall timeout.
            let deadline = Instant::now() + Duration::from_secs(60);
            while Instant::now() < deadline && shared.lock().jobs.iter().any(jobs::Job::running) {
                std::thread::sleep(Duration::from_millis(100));
            }
            return exit::CANCELLED;
        }
        let st = shared.lock();
        let busy = st.pages > 0 || st.jobs.iter().any(jobs::Job::running);
        let limit = match st.opened {
            true => idle,
            false => idle.max(Duration::from_secs(600)),
        };
        if !busy && st.quiet_since.elapsed() >= limit {
            errln!(
                "kopiru: gui: no page open for {} s: stopped",
                limit.as_secs()
            );
            return exit::OK;
        }
    }
}

/// Opens `url` in the default browser, without waiting for it; says so
/// if none can be started (the address is printed anyway). The address
/// is on the opener's command line, which other local users may read:
/// its token works once, so a page opened by someone else first leaves
/// this one refused, visibly (docs/gui.md).
fn open_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let started = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    match started {
        // Reaped on its own thread: it exits once the browser has the URL.
        Ok(mut c) => {
            std::thread::spawn(move || c.wait());
        }
        Err(e) => errln!(
            "kopiru: gui: cannot start {opener} ({}): open the address above yourself",
            kopiru::reason(&e)
        ),
    }
}
