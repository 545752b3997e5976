//! The `kopiru` command: parses arguments, runs the engine, renders events,
//! and turns the outcome into an exit code.

#[macro_use]
mod out;

mod args;
mod bench;
#[cfg(unix)]
mod bench_fsync;
mod changes;
mod compat;
mod copy;
#[cfg(unix)]
mod dedupe;
mod docs;
mod exit;
#[cfg(unix)]
mod flash;
#[cfg(all(feature = "gui", unix))]
mod gui;
#[cfg(target_os = "linux")]
mod image;
mod plot;
mod probe;
mod progress;
mod render;
mod scale;
mod select;
mod signals;
mod size;
mod verify;

use clap::{CommandFactory, FromArgMatches};
use std::process::ExitCode;

fn main() -> ExitCode {
    let matches = args::Cli::command().get_matches();
    let mut cli = args::Cli::from_arg_matches(&matches)
        .unwrap_or_else(|e| e.format(&mut args::Cli::command()).exit());
    if let (args::Command::Copy(a), Some(("copy", m))) = (&mut cli.command, matches.subcommand()) {
        a.select.order(m); // --exclude/--include in the order given
        a.normalize();
    }
    let code = match cli.command {
        args::Command::Copy(a) => copy::run(*a),
        args::Command::Probe(a) => probe::run(a),
        args::Command::Verify(a) => verify::run(a),
        #[cfg(unix)]
        args::Command::Dedupe(a) => dedupe::run(a),
        #[cfg(unix)]
        args::Command::Flash(a) => flash::run(a),
        #[cfg(target_os = "linux")]
        args::Command::Image(a) => image::run(a),
        #[cfg(not(target_os = "linux"))]
        args::Command::Image(_) => not_here("image"),
        args::Command::Bench(args::BenchCommand::Sweep(a)) => bench::run(a),
        #[cfg(unix)]
        args::Command::Bench(args::BenchCommand::Fsync(a)) => bench_fsync::run(a),
        #[cfg(not(unix))]
        args::Command::Dedupe(_) => not_here("dedupe"),
        #[cfg(not(unix))]
        args::Command::Flash(_) => not_here("flash"),
        #[cfg(not(unix))]
        args::Command::Bench(args::BenchCommand::Fsync(_)) => not_here("bench fsync"),
        #[cfg(all(feature = "gui", unix))]
        args::Command::Gui(a) => gui::run(a),
        #[cfg(all(feature = "gui", unix))]
        args::Command::GuiHelper(a) => gui::helper::run(a),
        #[cfg(all(feature = "gui", not(unix)))]
        args::Command::Gui(_) | args::Command::GuiHelper(_) => not_here("gui"),
        args::Command::Completions(a) => docs::completions(a),
        args::Command::Man(a) => docs::man(a),
    };
    ExitCode::from(code)
}

/// A command this platform does not have yet: says so, exits 2.
#[cfg(not(target_os = "linux"))]
fn not_here(command: &str) -> u8 {
    let os = match std::env::consts::OS {
        "macos" => "macOS",
        "windows" => "Windows",
        other => other,
    };
    errln!("kopiru: {command} is not supported on {os} yet");
    exit::USAGE
}
