//! `kopiru gui` and its hidden helper, `kopiru gui-helper`.

use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;

pub const GUI_AFTER_HELP: &str = "\
The page is served on 127.0.0.1 only, from files built into kopiru (nothing is
downloaded). The address carries a one-time token, exchanged for a cookie
(HttpOnly, SameSite=Strict); requests with another Host than 127.0.0.1:PORT or
localhost:PORT, without the cookie, or that change anything from another
Origin are refused. The server runs as you and never writes a device itself:
each flash or backup runs `kopiru gui-helper` through the --elevate command
(one password prompt per operation), which checks everything again as `kopiru
flash` and `kopiru image` do. Run as root, the helper is a plain child.

The server exits on Ctrl-C (cancelling what runs: a device's first MiB is then
not written), or --idle-timeout seconds after the last page closed, when nothing
runs.

Exit codes: 0 stopped with nothing running; 2 usage error (the port is taken);
20 stopped by a signal while an operation ran (it was cancelled).";

#[derive(Args)]
pub struct GuiArgs {
    /// The port on 127.0.0.1 [default: a free one].
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,

    /// Do not open the browser (xdg-open, open); only print the address.
    #[arg(long)]
    pub no_open: bool,

    /// How each flash or backup gets the right to write or read a device:
    /// a child `kopiru gui-helper` started through this command. Not used
    /// when kopiru runs as root.
    #[arg(long, value_enum, value_name = "COMMAND", default_value = "pkexec")]
    pub elevate: Elevate,

    /// Exit this many seconds after the last page closed, when no operation
    /// runs (before a page first opens: ten minutes at least).
    #[arg(long, value_name = "SECS", default_value = "60")]
    pub idle_timeout: u64,

    /// Print one JSON line with the address (url, port, pid) on stdout, for
    /// scripts.
    #[arg(long)]
    pub json: bool,
}

/// The command a helper is started through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Elevate {
    /// polkit's pkexec: a password dialog from the desktop's agent.
    Pkexec,
    /// systemd's run0 (polkit too, no set-uid binary).
    Run0,
    /// sudo -n: no prompt (needs a NOPASSWD rule, or credentials cached by
    /// an earlier `sudo -v`).
    Sudo,
    /// OpenBSD's doas -n: no prompt (needs a nopass rule, or persist).
    Doas,
}

/// What the page runs, as root: one operation, reported as JSON lines on
/// stdout; a line "cancel" on stdin (or its end) stops it.
#[derive(Args)]
pub struct GuiHelperArgs {
    #[command(subcommand)]
    pub op: HelperOp,
}

#[derive(Subcommand)]
pub enum HelperOp {
    /// `kopiru flash --yes IMAGE DEVICE...`, with its progress as JSON lines.
    Flash(HelperFlashArgs),
    /// `kopiru image --bmap OUTPUT.bmap DEVICE OUTPUT`, likewise.
    Image(HelperImageArgs),
}

#[derive(Args)]
pub struct HelperFlashArgs {
    /// The SHA-256 of the image file as published; a local file is hashed
    /// before anything is written.
    #[arg(long, value_name = "HEX", value_parser = |s: &str| s.trim().parse::<kopiru::Sha256>())]
    pub sha256: Option<kopiru::Sha256>,

    /// The image: a file or an http(s) URL.
    pub image: PathBuf,

    /// Whole block devices.
    #[arg(required = true)]
    pub devices: Vec<PathBuf>,
}

#[derive(Args)]
pub struct HelperImageArgs {
    /// The device to read.
    pub device: PathBuf,

    /// The image to write (.zst, .xz, ...), with its block map beside it
    /// (OUTPUT.bmap).
    pub output: PathBuf,
}
