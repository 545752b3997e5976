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
    if let Err(e) = render(page, &mut buf) {
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
    let mut buf = Vec::new();
    render(cmd, &mut buf)?;
    std::fs::write(dir.join(page_of(cmd).get_filename()), buf)
}

/// The page of `cmd`: clap_mangen's sections (the text after the options
/// as NOTES, not "EXTRA"), then EXAMPLES, EXIT STATUS and SEE ALSO from
/// [`extras`], then the version.
fn render(cmd: &clap::Command, w: &mut dyn Write) -> std::io::Result<()> {
    let man = page_of(cmd);
    let name = cmd.get_display_name().unwrap_or(cmd.get_name());
    let page = extras(name);
    // Each section rendered alone starts with the same preamble (a string
    // definition for apostrophes): kept once, at the top.
    let preamble = roff::Roff::new().render();
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    let mut section = |f: &dyn Fn(&mut Vec<u8>) -> std::io::Result<()>| -> std::io::Result<()> {
        let mut b = Vec::new();
        f(&mut b)?;
        out.extend_from_slice(b.strip_prefix(preamble.as_bytes()).unwrap_or(&b));
        Ok(())
    };
    section(&|b| man.render_name_section(b))?;
    section(&|b| man.render_synopsis_section(b))?;
    section(&|b| man.render_description_section(b))?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        section(&|b| man.render_options_section(b))?;
    }
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        section(&|b| man.render_subcommands_section(b))?;
    }
    let mut r = roff::Roff::new();
    let notes = cmd
        .get_after_long_help()
        .or_else(|| cmd.get_after_help())
        .map(|h| h.to_string());
    // A text that is only examples is the EXAMPLES section's.
    if let Some(notes) = notes.filter(|n| !n.starts_with("Examples:")) {
        r.control("SH", ["NOTES"]);
        for line in notes.lines() {
            r.text([roff::roman(line)]);
        }
    }
    r.control("SH", ["EXAMPLES"]);
    for (command, what) in page.examples {
        r.control("TP", [])
            .text([roff::bold(*command)])
            .text([roff::roman(*what)]);
    }
    r.control("SH", ["EXIT STATUS"]);
    for (code, what) in page.exit {
        match *code {
            // A note on the codes, not one of them.
            "" => r.control("PP", []).text([roff::roman(*what)]),
            code => r
                .control("TP", [])
                .text([roff::bold(code)])
                .text([roff::roman(*what)]),
        };
    }
    r.control("SH", ["SEE ALSO"]);
    r.text([roff::roman(page.see_also.join(", "))]);
    section(&|b| r.to_writer(b))?;
    if cmd
        .get_version()
        .or_else(|| cmd.get_long_version())
        .is_some()
    {
        section(&|b| man.render_version_section(b))?;
    }
    w.write_all(&out)
}

/// What a page adds to clap's sections.
struct Extras {
    /// (command line, what it does)
    examples: &'static [(&'static str, &'static str)],
    /// (exit code, what it means); an empty code: a note after them.
    exit: &'static [(&'static str, &'static str)],
    /// Other pages, as `name(section)`.
    see_also: &'static [&'static str],
}

/// Exit 20, the same for every command.
const SIGNALLED: (&str, &str) = (
    "20",
    "Stopped by SIGINT, SIGTERM or SIGHUP (one line on standard error); a second signal exits at \
     once.",
);

/// The extra sections of the page named `name` ("kopiru", "kopiru-copy",
/// "kopiru-bench-sweep", ...).
fn extras(name: &str) -> Extras {
    const COPIED: (&str, &str) = ("0", "Everything was copied.");
    const PARTIAL: (&str, &str) = (
        "23",
        "Some files failed (each reported as path: operation: reason); the rest was copied.",
    );
    const NOTHING: (&str, &str) = (
        "1",
        "Nothing could be copied: every source was refused or failed.",
    );
    const USAGE: (&str, &str) = ("2", "Usage error: the command line cannot be used.");
    match name {
        "kopiru-copy" => Extras {
            examples: &[
                (
                    "kopiru copy -a ~/photos /mnt/backup/",
                    "Copy the directory photos into /mnt/backup, keeping modes, owners, times, \
                     links, extended attributes and ACLs.",
                ),
                (
                    "kopiru copy -a --delete -T ~/photos /mnt/backup/photos",
                    "Make /mnt/backup/photos a mirror of ~/photos: copy what changed, remove \
                     what ~/photos no longer has.",
                ),
                (
                    "kopiru copy --dry-run -a -T ~/photos /mnt/backup/photos",
                    "List what that copy would create or replace, changing nothing.",
                ),
                (
                    "kopiru copy --resume -a ~/photos /mnt/backup/",
                    "Finish a copy that was interrupted (Ctrl-C, a crash, a full disk).",
                ),
                (
                    "kopiru copy -a --link-dest ../monday ~/photos backups/tuesday",
                    "A snapshot: files unchanged since backups/monday become hard links to it.",
                ),
            ],
            exit: &[
                COPIED,
                PARTIAL,
                NOTHING,
                USAGE,
                SIGNALLED,
                (
                    "",
                    "--dry-run exits as the copy would for the errors it can see (a source that \
                     cannot be read), not for those only writing meets.",
                ),
            ],
            see_also: &[
                "kopiru(1)",
                "kopiru-verify(1)",
                "kopiru-probe(1)",
                "cp(1)",
                "rsync(1)",
            ],
        },
        "kopiru-verify" => Extras {
            examples: &[
                (
                    "kopiru verify ~/photos /mnt/backup/photos",
                    "Compare a copy with its source by content, reading the copy from the \
                     device, not the page cache; each difference on a line.",
                ),
                (
                    "kopiru verify --ignore-extra --json src dst",
                    "The same as JSON, not counting entries only the copy has.",
                ),
            ],
            exit: &[
                ("0", "The trees are identical."),
                ("1", "They differ."),
                (
                    "2",
                    "Trouble: a usage error, or a file that could not be read.",
                ),
                SIGNALLED,
            ],
            see_also: &["kopiru(1)", "kopiru-copy(1)", "diff(1)", "cmp(1)"],
        },
        "kopiru-flash" => Extras {
            examples: &[
                (
                    "kopiru flash os.img.xz /dev/sdX",
                    "Write a compressed image to a USB stick, asking first, and read it back to \
                     compare.",
                ),
                (
                    "kopiru flash --sha256 HEX --bmap auto https://example.org/os.img.xz /dev/sdX",
                    "Stream an image from a URL (resumed if the connection drops), check the \
                     file's published SHA-256, write only the blocks its block map lists.",
                ),
                (
                    "xzcat os.img.xz | kopiru flash - /dev/sdX",
                    "The image on standard input (the question is asked on the terminal).",
                ),
                (
                    "kopiru flash --yes os.img /dev/sdX /dev/sdY",
                    "Two devices from one read of the image, without asking.",
                ),
            ],
            exit: &[
                ("0", "Every device was written and verified."),
                (
                    "23",
                    "Some devices failed; the others are written and verified.",
                ),
                (
                    "1",
                    "Nothing was written correctly (a damaged image, every device failed, or \
                     the answer was no).",
                ),
                (
                    "2",
                    "Usage error, or refused before anything was written: a device mounted, in \
                     use, named twice or too small, an image that is not what its name says, an \
                     HTTP error, no terminal to ask on without --yes.",
                ),
                SIGNALLED,
            ],
            see_also: &[
                "kopiru(1)",
                "kopiru-image(1)",
                "dd(1)",
                "bmaptool(1)",
                "xz(1)",
                "zstd(1)",
            ],
        },
        "kopiru-gui" => Extras {
            examples: &[
                (
                    "kopiru gui",
                    "Open the page in the default browser; each flash or backup asks for the \
                     administrator's password (pkexec).",
                ),
                (
                    "kopiru gui --no-open --port 8470",
                    "Only print the address (with its one-time token), on a port of your \
                     choice.",
                ),
                (
                    "kopiru gui --elevate sudo",
                    "Start each operation's helper with sudo -n (after sudo -v, or with a \
                     NOPASSWD rule for kopiru gui-helper).",
                ),
            ],
            exit: &[
                (
                    "0",
                    "Stopped by Ctrl-C with nothing running, or idle after its last page \
                     closed.",
                ),
                ("2", "Usage error: the port cannot be listened on."),
                (
                    "20",
                    "Stopped by a signal while an operation ran: it was cancelled (a device's \
                     first MiB is then not written).",
                ),
            ],
            see_also: &[
                "kopiru(1)",
                "kopiru-flash(1)",
                "kopiru-image(1)",
                "pkexec(1)",
            ],
        },
        "kopiru-image" => Extras {
            examples: &[
                (
                    "kopiru image /dev/sdX backup.img.zst",
                    "Read a device into a zstd image, verified before it is put in place; its \
                     SHA-256 is printed.",
                ),
                (
                    "kopiru image --partitions-only --bmap backup.bmap /dev/sdX backup.img.xz",
                    "Only up to the end of the last partition, with a block map for flash --bmap.",
                ),
                (
                    "kopiru image --file disk.raw disk.img.gz",
                    "A regular file instead of a device.",
                ),
            ],
            exit: &[
                ("0", "The image was written, verified and put in place."),
                (
                    "1",
                    "A read, write or verification failed: nothing is left under OUTPUT.",
                ),
                (
                    "2",
                    "Usage error, or refused before anything was written: a device mounted \
                     read-write, OUTPUT existing, a symlink or standard output.",
                ),
                SIGNALLED,
            ],
            see_also: &["kopiru(1)", "kopiru-flash(1)", "dd(1)", "bmaptool(1)"],
        },
        "kopiru-dedupe" => Extras {
            examples: &[
                (
                    "kopiru dedupe --dry-run ~/src",
                    "Show which files are identical and how much sharing their blocks would free.",
                ),
                (
                    "kopiru dedupe --min-size 64K /data",
                    "Make identical files of 64 KiB or more share their blocks (XFS with reflink, \
                     Btrfs).",
                ),
            ],
            exit: &[
                ("0", "Done, or nothing to do."),
                ("23", "Some files failed; the others were done."),
                (
                    "1",
                    "Nothing could be done: every file found is on a filesystem that cannot share \
                     blocks, or every one failed.",
                ),
                ("2", "Usage error."),
                SIGNALLED,
            ],
            see_also: &["kopiru(1)", "kopiru-probe(1)", "duperemove(8)", "cp(1)"],
        },
        "kopiru-probe" => Extras {
            examples: &[
                (
                    "kopiru probe /mnt/data",
                    "The filesystem of a path and what it can do.",
                ),
                (
                    "kopiru probe ~/src /mnt/backup",
                    "Whether clone and offload work from one to the other (tried on scratch \
                     files, removed afterwards).",
                ),
            ],
            exit: &[
                ("0", "Probed."),
                ("1", "A path could not be examined."),
                ("2", "Usage error."),
            ],
            see_also: &["kopiru(1)", "kopiru-copy(1)", "kopiru-bench(1)"],
        },
        "kopiru-bench" | "kopiru-bench-sweep" | "kopiru-bench-fsync" => Extras {
            examples: &[
                (
                    "kopiru bench fsync --dir /mnt/data",
                    "What durability costs on that filesystem.",
                ),
                (
                    "kopiru bench sweep --dir /mnt/data --total 64M --plot sweep.svg",
                    "kopiru, cp and rsync on 64 MiB as 1, 16, 256 ... files, with a chart.",
                ),
            ],
            exit: &[
                ("0", "Measured; the tables are printed."),
                (
                    "1",
                    "A measurement failed (what was measured so far is printed).",
                ),
                ("2", "Usage error."),
                SIGNALLED,
            ],
            see_also: &["kopiru(1)", "kopiru-bench(1)", "kopiru-copy(1)"],
        },
        "kopiru-completions" => Extras {
            examples: &[
                (
                    "kopiru completions bash > /etc/bash_completion.d/kopiru",
                    "Completion for bash, for every user.",
                ),
                (
                    "kopiru completions fish > ~/.config/fish/completions/kopiru.fish",
                    "Completion for fish, for you.",
                ),
            ],
            exit: &[("0", "Printed."), ("2", "Usage error (an unknown shell).")],
            see_also: &["kopiru(1)", "kopiru-man(1)"],
        },
        "kopiru-man" => Extras {
            examples: &[
                (
                    "kopiru man copy | man -l -",
                    "Read the page of kopiru copy.",
                ),
                (
                    "kopiru man --dir /usr/local/share/man/man1",
                    "Install every page (kopiru.1, kopiru-copy.1, ...).",
                ),
            ],
            exit: &[
                ("0", "Printed or written."),
                ("1", "The pages could not be written."),
                ("2", "Usage error (no such command)."),
            ],
            see_also: &["kopiru(1)", "kopiru-completions(1)", "man(1)"],
        },
        _ => Extras {
            examples: &[
                (
                    "kopiru cp -a ~/photos /mnt/backup/",
                    "Copy a tree, keeping what cp -a keeps; exit 0 means it is on the disk.",
                ),
                (
                    "kopiru verify ~/photos /mnt/backup/photos",
                    "Compare the copy with its source, reading it from the device.",
                ),
                (
                    "kopiru flash os.img.xz /dev/sdX",
                    "Write an image to a device and check it.",
                ),
                (
                    "kopiru dedupe /data",
                    "Make identical files share their blocks.",
                ),
            ],
            exit: &[
                ("0", "Everything was done."),
                (
                    "23",
                    "Some parts failed (each one reported); the rest was done.",
                ),
                ("1", "Nothing could be done."),
                (
                    "2",
                    "Usage error, or (flash, image) a refusal before anything was written.",
                ),
                SIGNALLED,
                (
                    "",
                    "As rsync's where they overlap. verify exits as diff (0 identical, 1 \
                     different, 2 trouble); each command's page says what its codes mean for it.",
                ),
            ],
            see_also: &[
                "kopiru-copy(1)",
                "kopiru-verify(1)",
                "kopiru-flash(1)",
                "kopiru-image(1)",
                "kopiru-dedupe(1)",
                "kopiru-probe(1)",
                "kopiru-bench(1)",
                "cp(1)",
                "rsync(1)",
            ],
        },
    }
}
