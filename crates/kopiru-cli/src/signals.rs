//! SIGINT, SIGTERM and SIGHUP at the edge: the first one cancels the run
//! (the engine stops at its next check and the command reports what it
//! did), a second one exits at once with [`exit::CANCELLED`].
//!
//! The handler does only async-signal-safe things: atomic loads and stores
//! (the [`kopiru::Cancel`] flag is one `AtomicBool`), `write(2)` of bytes
//! prepared before it was installed, and `_exit(2)`.
//!
//! On Windows the same flag is set from a console control handler
//! (`SetConsoleCtrlHandler`: Ctrl-C, Ctrl-Break, the console closing),
//! which Windows runs on a thread of its own.

use crate::exit;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, Ordering};
use std::sync::OnceLock;

/// The signals that stop a run.
#[cfg(unix)]
const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// The flag the handler sets; made before the handler is installed, so the
/// handler only ever reads an initialised cell.
static CANCEL: OnceLock<kopiru::Cancel> = OnceLock::new();
/// What the handler prints after `kopiru: received SIGxxx` before it
/// exits: made (and leaked, so it is never freed under the handler) before
/// the handler may read it; a command that moves on to another phase
/// installs again with another message.
static EXIT_MESSAGE: AtomicPtr<Vec<u8>> = AtomicPtr::new(std::ptr::null_mut());
/// The first signal received (0: none).
static RECEIVED: AtomicI32 = AtomicI32::new(0);
/// Exit on the first signal, printing [`EXIT_MESSAGE`].
static EXIT_AT_ONCE: AtomicBool = AtomicBool::new(false);

/// What the first signal does.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum OnSignal {
    /// Set the returned cancel flag; the command stops at the engine's next
    /// check, and reports. A second signal exits at once.
    Cancel,
    /// Exit at once: for commands whose engine call cannot be cancelled
    /// (yet).
    Exit,
}

/// Installs the handlers for SIGINT, SIGTERM and SIGHUP, and returns the
/// cancel flag they set. When the handler exits the process (a second
/// signal, or the first with [`OnSignal::Exit`]) it prints
/// `kopiru: received SIGxxx: <exit_message>` and exits
/// [`exit::CANCELLED`]. Call once per process, before the run starts.
pub fn install(on_first: OnSignal, exit_message: &str) -> kopiru::Cancel {
    let cancel = CANCEL.get_or_init(kopiru::Cancel::new).clone();
    let message = Box::leak(Box::new(format!(": {exit_message}\n").into_bytes()));
    EXIT_MESSAGE.store(message, Ordering::SeqCst);
    EXIT_AT_ONCE.store(on_first == OnSignal::Exit, Ordering::SeqCst);
    install_handler();
    cancel
}

#[cfg(unix)]
fn install_handler() {
    // SAFETY: a zeroed sigaction is valid; the handler is an extern "C" fn
    // that only does async-signal-safe things.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler as extern "C" fn(libc::c_int) as libc::sighandler_t;
        // SA_RESTART: reads and writes interrupted by the first signal are
        // restarted, not failed with EINTR; the engine sees the flag.
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        for s in SIGNALS {
            libc::sigaddset(&mut sa.sa_mask, s);
        }
        for s in SIGNALS {
            libc::sigaction(s, &sa, std::ptr::null_mut());
        }
    }
}

#[cfg(windows)]
fn install_handler() {
    use windows_sys::Win32::System::Console::SetConsoleCtrlHandler;
    unsafe extern "system" fn ctrl(ctrl_type: u32) -> windows_sys::core::BOOL {
        // Codes are stored plus one: 0 means "none received".
        handle(ctrl_type as i32 + 1);
        1
    }
    // SAFETY: the handler only touches atomics and stderr.
    unsafe { SetConsoleCtrlHandler(Some(ctrl), 1) };
}

/// The first signal received, if any: `Some("SIGINT")`...
pub fn received() -> Option<&'static str> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        s => Some(name(s)),
    }
}

/// The line a cancelled command prints on stderr (without a newline).
pub fn stopped_line(what: &str) -> String {
    format!(
        "kopiru: received {}: {what}",
        received().unwrap_or(ANY_SIGNAL)
    )
}

#[cfg(unix)]
const ANY_SIGNAL: &str = "SIGINT, SIGTERM or SIGHUP";
#[cfg(windows)]
const ANY_SIGNAL: &str = "Ctrl-C, Ctrl-Break or close";

#[cfg(windows)]
fn name(code: i32) -> &'static str {
    use windows_sys::Win32::System::Console as c;
    match (code - 1) as u32 {
        c::CTRL_C_EVENT => "Ctrl-C",
        c::CTRL_BREAK_EVENT => "Ctrl-Break",
        c::CTRL_CLOSE_EVENT => "close",
        c::CTRL_LOGOFF_EVENT => "logoff",
        c::CTRL_SHUTDOWN_EVENT => "shutdown",
        _ => "a console event",
    }
}

#[cfg(windows)]
fn write_stderr(bytes: &[u8]) {
    use std::io::Write;
    let _ = std::io::stderr().write_all(bytes);
}

#[cfg(windows)]
fn exit_now() -> ! {
    std::process::exit(i32::from(exit::CANCELLED))
}

#[cfg(unix)]
fn exit_now() -> ! {
    // SAFETY: _exit is async-signal-safe; nothing is flushed or unwound.
    unsafe { libc::_exit(libc::c_int::from(exit::CANCELLED)) }
}

#[cfg(unix)]
fn name(sig: libc::c_int) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

/// Writes `bytes` to stderr, ignoring errors (async-signal-safe).
#[cfg(unix)]
fn write_stderr(bytes: &[u8]) {
    // SAFETY: write(2) on a valid buffer; errors are ignored on purpose.
    unsafe {
        libc::write(libc::STDERR_FILENO, bytes.as_ptr().cast(), bytes.len());
    }
}

#[cfg(unix)]
extern "C" fn handler(sig: libc::c_int) {
    handle(sig);
}

fn handle(sig: i32) {
    let first = RECEIVED
        .compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok();
    if first && !EXIT_AT_ONCE.load(Ordering::SeqCst) {
        if let Some(c) = CANCEL.get() {
            c.cancel();
            return;
        }
    }
    // A second signal, or a command that cannot be cancelled: go now.
    write_stderr(b"\nkopiru: received ");
    write_stderr(name(sig).as_bytes());
    if !first {
        write_stderr(b" again");
    }
    // SAFETY: the pointer is null or a leaked Vec that is never freed or
    // changed after it was stored.
    if let Some(m) = unsafe { EXIT_MESSAGE.load(Ordering::SeqCst).as_ref() } {
        write_stderr(m);
    }
    exit_now()
}
