//! `kopiru completions SHELL` and `kopiru man`: generated from the same
//! argument definitions as `--help`, so they cannot drift from it.

use crate::args::{Cli, CompletionsArgs, ManArgs};
use crate::exit;
use clap::CommandFactory;
use std::io::Write;

pub fn completions(args: CompletionsArgs) -> u8 {
    let mut cmd = Cli::command();
    let mut buf = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "kopiru", &mut buf);
    // A closed stdout ends the output quietly.
    let _ = std::io::stdout().lock().write_all(&buf);
    exit::OK
}

pub fn man(args: ManArgs) -> u8 {
    let mut cmd = Cli::command().disable_help_subcommand(true);
    // Building names each subcommand's page (kopiru-copy, ...).
    cmd.build();
    if let Some(dir) = &args.dir {
        return match write_pages(&cmd, dir) {
            Ok(()) => exit::OK,
            Err(e) => {
                errln!("kopiru: man: {}: {e}", crate::render::path(dir));
                exit::FAILED
            }
        };
    }
    let mut page = &cmd;
    for name in &args.command {
        match page.find_subcommand(name) {
            Some(sub) => page = sub,
            None => {
                errln!(
                    "kopiru: man: no command '{name}' (try: kopiru man, kopiru man copy, kopiru man bench sweep)"
                );
                return exit::USAGE;
            }
        }
    }
    let mut buf = Vec::new();
    if let Err(e) = page_of(page).render(&mut buf) {
        errln!("kopiru: man: {e}");
        return exit::FAILED;
    }
    let _ = std::io::stdout().lock().write_all(&buf);
    exit::OK
}

/// The page of `cmd` (built), its source line naming kopiru and its version.
fn page_of(cmd: &clap::Command) -> clap_mangen::Man {
    clap_mangen::Man::new(cmd.clone()).source(format!("kopiru {}", env!("CARGO_PKG_VERSION")))
}

/// Writes the page of `cmd` and of each of its subcommands into `dir`.
fn write_pages(cmd: &clap::Command, dir: &std::path::Path) -> std::io::Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, dir)?;
    }
    page_of(cmd).generate_to(dir).map(|_| ())
}
