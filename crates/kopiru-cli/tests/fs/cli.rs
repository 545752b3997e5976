//! The command's edges: signals (exit 20), output to a closed pipe, and
//! (below) completions, the man page, dedupe without `-n`, the summary line,
//! and cp's spellings of copy's options.

use crate::fixture::{self, Fs};
use crate::{code, json, same_tree, show, trees, Add, R};
use libtest_mimic::Failed;
use std::ffi::OsStr;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn kopiru_cmd() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kopiru"))
}

/// A pipe whose read end is already closed: every write to the other end
/// fails with EPIPE (kopiru, like every Rust program, ignores SIGPIPE).
fn closed_pipe() -> Result<Stdio, Failed> {
    let mut fds = [0; 2];
    // SAFETY: pipe(2) fills two new descriptors, which we then own.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(format!("pipe: {}", std::io::Error::last_os_error()).into());
    }
    // SAFETY: both descriptors are new and owned by nobody else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    Ok(Stdio::from(write))
}

/// A command with stdout going into a closed pipe: same exit code as with a
/// working stdout, nothing on stderr about it, and never a panic.
fn quiet_on_closed_stdout(args: &[&OsStr], want: i32) -> R {
    let o = kopiru_cmd()
        .args(args)
        .stdout(closed_pipe()?)
        .stderr(Stdio::piped())
        .output()?;
    let stderr = String::from_utf8_lossy(&o.stderr);
    ensure!(
        code(&o) == want && !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
        "{args:?} into a closed pipe: want exit {want} and no panic: {}",
        show(&o)
    );
    Ok(())
}

/// `kopiru copy --json … | head -c1`, `kopiru verify … | head -c1` and the
/// others end quietly with their usual exit code. Needs no root: works in
/// the test run's directory under /tmp.
pub fn closed_stdout() -> R {
    let w = fixture::run_root().join("closed-stdout");
    let _ = std::fs::remove_dir_all(&w);
    std::fs::create_dir_all(&w)?;
    let src = w.join("src");
    std::fs::create_dir(&src)?;
    for i in 0..200 {
        std::fs::write(src.join(format!("f{i}")), format!("file {i}\n"))?;
    }
    let dst = w.join("dst");
    let other = w.join("other");
    std::fs::create_dir(&other)?;
    for i in 0..200 {
        std::fs::write(other.join(format!("f{i}")), format!("other {i}\n"))?;
    }
    let s = src.as_os_str();
    quiet_on_closed_stdout(
        &[OsStr::new("copy"), OsStr::new("--json"), s, dst.as_os_str()],
        0,
    )?;
    same_tree(&src, &dst, crate::manifest::DEFAULT)?;
    let dst2 = w.join("dst2");
    quiet_on_closed_stdout(
        &[
            OsStr::new("copy"),
            OsStr::new("--explain"),
            s,
            dst2.as_os_str(),
        ],
        0,
    )?;
    // 200 lines of differences, then exit 1 as diff does.
    quiet_on_closed_stdout(&[OsStr::new("verify"), s, other.as_os_str()], 1)?;
    quiet_on_closed_stdout(
        &[
            OsStr::new("verify"),
            OsStr::new("--json"),
            s,
            other.as_os_str(),
        ],
        1,
    )?;
    quiet_on_closed_stdout(&[OsStr::new("probe"), OsStr::new("--json"), s], 0)?;
    quiet_on_closed_stdout(&[OsStr::new("probe"), s], 0)?;
    // Whatever dedupe makes of /tmp here, the exit code must not change.
    let dd = kopiru_cmd()
        .args(["dedupe", "--dry-run"])
        .arg(&src)
        .output()?;
    quiet_on_closed_stdout(
        &[OsStr::new("dedupe"), OsStr::new("--dry-run"), s],
        code(&dd),
    )?;
    quiet_on_closed_stdout(&[OsStr::new("--help")], 0)?;
    quiet_on_closed_stdout(&[OsStr::new("completions"), OsStr::new("bash")], 0)?;
    quiet_on_closed_stdout(&[OsStr::new("man")], 0)?;
    Ok(())
}

/// A tree that takes a few seconds to copy with `--sync file` (every file
/// fsynced with its directory).
fn slow_tree(src: &Path) -> R {
    std::fs::create_dir_all(src)?;
    for d in 0..8 {
        let dir = src.join(format!("d{d}"));
        std::fs::create_dir(&dir)?;
        for i in 0..400 {
            std::fs::write(dir.join(format!("f{i}")), trees::bytes(4096, i))?;
        }
    }
    Ok(())
}

/// Starts a copy of `src` to `dst` with `--sync file --json`, and waits
/// until it has started writing (its staged tree exists).
fn start_slow_copy(w: &Path, src: &Path, dst: &Path, extra: &[&str]) -> Result<Child, Failed> {
    let child = kopiru_cmd()
        .args(["copy", "--json", "--sync", "file"])
        .args(extra)
        .arg(src)
        .arg(dst)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(120) {
        let staged = std::fs::read_dir(w)?
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(".kopiru-tmp"));
        if staged {
            std::thread::sleep(Duration::from_millis(100));
            return Ok(child);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Err("the copy did not start within 120 s".into())
}

/// Waits (up to 120 s) until process `pid` has `file` open: a command
/// that reads it has started its work (and set its signal handlers).
fn wait_open(pid: u32, file: &Path) -> R {
    let start = Instant::now();
    loop {
        let open = std::fs::read_dir(format!("/proc/{pid}/fd"))?
            .flatten()
            .any(|e| std::fs::read_link(e.path()).is_ok_and(|t| t == file));
        if open {
            return Ok(());
        }
        ensure!(
            start.elapsed() < Duration::from_secs(120),
            "{} was not opened in 120 s",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(child.id() as libc::pid_t, sig);
    }
}

/// Waits for `child`: its output, and how long that took.
fn wait_timed(child: Child) -> Result<(Output, Duration), Failed> {
    let start = Instant::now();
    let o = child.wait_with_output()?;
    Ok((o, start.elapsed()))
}

/// One SIGTERM stops a copy: exit 20, one line on stderr naming the signal
/// and --resume, the JSON summary with `"cancelled": true`; the same
/// command with --resume finishes it.
pub fn signal_cancels_copy(fs: Fs) -> R {
    let w = fixture::workdir(fs, "signal-cancels")?;
    let src = w.join("src");
    slow_tree(&src)?;
    let dst = w.join("dst");
    let child = start_slow_copy(&w, &src, &dst, &["-T"])?;
    signal(&child, libc::SIGTERM);
    let (o, took) = wait_timed(child)?;
    ensure!(code(&o) == 20, "want exit 20: {}", show(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    ensure!(
        stderr.lines().count() == 1
            && stderr.contains("kopiru: received SIGTERM: stopped")
            && stderr.contains("--resume"),
        "want one line naming SIGTERM and --resume: {}",
        show(&o)
    );
    let j = json(&o)?;
    ensure!(j["cancelled"] == true && j["exit_code"] == 20, "JSON: {j}");
    // Stopped part-way: the resume below has something left to do.
    ensure!(
        j["files"].as_u64().is_some_and(|n| n < 3200),
        "finished first: {j}"
    );
    // Promptly, not at the end: the files count above is the evidence; a
    // loaded machine may take seconds for the writes in flight.
    ensure!(took < Duration::from_secs(30), "took {took:?} to stop");
    let o = kopiru_cmd()
        .args(["copy", "--resume", "-T"])
        .arg(&src)
        .arg(&dst)
        .output()?;
    ensure!(code(&o) == 0, "--resume: {}", show(&o));
    same_tree(&src, &dst, crate::manifest::DEFAULT)?;
    Ok(())
}

/// A second signal exits at once with 20, whether or not the engine has
/// seen the first; one signal stops `verify` at its next check, with 20.
pub fn second_signal_exits(fs: Fs) -> R {
    let w = fixture::workdir(fs, "second-signal")?;
    let src = w.join("src");
    slow_tree(&src)?;
    let dst = w.join("dst");
    // Stopped, then sent two signals, then continued: both are pending
    // when it runs again, so the second is handled right after the first
    // has only set the cancel flag. Which of the two is handled first is
    // not fixed: each may be taken by a different thread of the process
    // (it was SIGINT's turn to be second on a loaded machine).
    let child = start_slow_copy(&w, &src, &dst, &[])?;
    signal(&child, libc::SIGSTOP);
    signal(&child, libc::SIGINT);
    signal(&child, libc::SIGTERM);
    signal(&child, libc::SIGCONT);
    let (o, took) = wait_timed(child)?;
    ensure!(code(&o) == 20, "want exit 20: {}", show(&o));
    // Only the second signal's handler exits, and says so, once.
    let err = String::from_utf8_lossy(&o.stderr);
    let again = ["SIGINT", "SIGTERM"]
        .map(|s| err.matches(&format!("kopiru: received {s} again")).count());
    ensure!(again[0] + again[1] == 1, "{}", show(&o));
    ensure!(took < Duration::from_secs(30), "took {took:?} to exit");

    // verify of 512 MiB against itself, read from the device: long enough
    // for a signal sent once it has the file open to find it running.
    let big = w.join("big");
    std::fs::create_dir(&big)?;
    let chunk = trees::bytes(1 << 20, 3);
    let mut f = std::fs::File::create(big.join("f"))?;
    for _ in 0..512 {
        std::io::Write::write_all(&mut f, &chunk)?;
    }
    f.sync_all()?;
    let child = kopiru_cmd()
        .args(["verify", "-j", "1"])
        .arg(&big)
        .arg(&big)
        .stderr(Stdio::piped())
        .spawn()?;
    wait_open(child.id(), &big.join("f"))?;
    signal(&child, libc::SIGHUP);
    let (o, took) = wait_timed(child)?;
    ensure!(code(&o) == 20, "verify: want exit 20: {}", show(&o));
    ensure!(
        String::from_utf8_lossy(&o.stderr)
            .contains("kopiru: received SIGHUP: stopped; nothing was changed"),
        "verify: {}",
        show(&o)
    );
    ensure!(
        took < Duration::from_secs(30),
        "verify took {took:?} to stop"
    );
    Ok(())
}

/// `kopiru completions SHELL` for bash, zsh and fish: a script that knows
/// the commands and their options; bash's (and zsh's and fish's, where
/// installed) parses.
pub fn completions() -> R {
    for shell in ["bash", "zsh", "fish"] {
        let o = kopiru_cmd().args(["completions", shell]).output()?;
        let script = String::from_utf8_lossy(&o.stdout);
        ensure!(
            code(&o) == 0 && o.stderr.is_empty(),
            "completions {shell}: {}",
            show(&o)
        );
        let long = |name: &str| match shell {
            "fish" => format!("-l {name}"),
            _ => format!("--{name}"),
        };
        for word in [
            "copy".into(),
            "dedupe".into(),
            long("sync"),
            long("no-clobber"),
        ] {
            ensure!(script.contains(&word), "{shell} completions lack {word}");
        }
        let check: &[&str] = match shell {
            "bash" => &["bash", "-n"],
            "zsh" => &["zsh", "-n"],
            _ => &["fish", "--no-execute"],
        };
        if !fixture::have(check[0]) {
            ensure!(shell != "bash", "bash is not installed");
            eprintln!("!!!!!!!! completions: {shell} not installed: its script not parsed");
            continue;
        }
        let path = fixture::run_root().join(format!("completions.{shell}"));
        std::fs::write(&path, script.as_bytes())?;
        let o = Command::new(check[0])
            .args(&check[1..])
            .arg(&path)
            .output()?;
        ensure!(
            o.status.success() && o.stderr.is_empty(),
            "{check:?} on the {shell} completions: {}",
            show(&o)
        );
    }
    let o = kopiru_cmd().args(["completions", "tcsh"]).output()?;
    ensure!(
        code(&o) == 2,
        "an unknown shell is a usage error: {}",
        show(&o)
    );
    Ok(())
}

/// `text` without grotty's overstriking (`X\x08X` for bold, `_\x08X` for
/// underline).
fn unbold(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c == '\x08' {
            out.pop();
        } else {
            out.push(c);
        }
    }
    out
}

/// Why [`man_page`] cannot run here, if it cannot.
pub fn groff_unavailable() -> Option<String> {
    (!fixture::have("groff")).then(|| "groff not installed (apt-get install groff-base)".into())
}

/// `kopiru man` (and each command's page) is roff that groff renders
/// without a warning, and names the options; `--dir` writes every page.
pub fn man_page() -> R {
    for page in [&[][..], &["copy"], &["bench", "sweep"], &["flash"]] {
        let o = kopiru_cmd().arg("man").args(page).output()?;
        ensure!(
            code(&o) == 0 && !o.stdout.is_empty(),
            "man {page:?}: {}",
            show(&o)
        );
        let roff = fixture::run_root().join("page.1");
        std::fs::write(&roff, &o.stdout)?;
        let g = Command::new("groff")
            .args(["-man", "-Tutf8", "-ww"])
            .arg(&roff)
            .output()?;
        let text = unbold(&String::from_utf8_lossy(&g.stdout));
        ensure!(
            g.status.success() && g.stderr.is_empty() && !text.trim().is_empty(),
            "groff on `kopiru man {}`: {}",
            page.join(" "),
            show(&g)
        );
        let want = match page {
            [] => "kopiru-copy",
            ["copy"] => "--no-clobber",
            ["flash"] => "--zero-first",
            _ => "--counts",
        };
        // groff may hyphenate or use Unicode hyphens: compare letters only.
        let letters = |s: &str| {
            s.chars()
                .filter(|c| c.is_alphanumeric())
                .collect::<String>()
        };
        ensure!(
            letters(&text).contains(&letters(want)),
            "`kopiru man {}` does not mention {want}:\n{text}",
            page.join(" ")
        );
    }
    let dir = fixture::run_root().join("man1");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let o = kopiru_cmd().arg("man").arg("--dir").arg(&dir).output()?;
    ensure!(code(&o) == 0, "man --dir: {}", show(&o));
    for f in [
        "kopiru.1",
        "kopiru-copy.1",
        "kopiru-bench-sweep.1",
        "kopiru-flash.1",
    ] {
        ensure!(dir.join(f).is_file(), "man --dir wrote no {f}");
    }
    // Every page has examples, its exit status and where to look next,
    // and groff reads it without a warning.
    let mut pages = 0;
    for e in std::fs::read_dir(&dir)? {
        let page = e?.path();
        let roff = std::fs::read_to_string(&page)?;
        for section in [".SH EXAMPLES\n", ".SH \"EXIT STATUS\"\n", ".SH \"SEE ALSO\"\n"] {
            ensure!(
                roff.contains(section),
                "{}: no {section:?} section",
                page.display()
            );
        }
        let g = Command::new("groff")
            .args(["-man", "-Tutf8", "-ww"])
            .arg(&page)
            .output()?;
        ensure!(
            g.status.success() && g.stderr.is_empty(),
            "groff on {}: {}",
            page.display(),
            show(&g)
        );
        pages += 1;
    }
    ensure!(pages >= 11, "man --dir wrote {pages} pages");
    let o = kopiru_cmd().args(["man", "flash"]).output()?;
    let roff = String::from_utf8_lossy(&o.stdout);
    ensure!(
        roff.contains("kopiru flash os.img.xz /dev/sdX") && roff.contains("some devices failed"),
        "kopiru man flash: no example or exit status of its own:\n{roff}"
    );
    let o = kopiru_cmd().args(["man", "teleport"]).output()?;
    ensure!(code(&o) == 2, "man of an unknown command: {}", show(&o));
    Ok(())
}

/// `-n` means --no-clobber in copy (as in cp), and nothing in dedupe, where
/// it used to mean the opposite (--dry-run).
pub fn dedupe_has_no_short_n() -> R {
    let w = fixture::run_root().join("dedupe-n");
    std::fs::create_dir_all(&w)?;
    let o = kopiru_cmd().args(["dedupe", "-n"]).arg(&w).output()?;
    ensure!(
        code(&o) == 2 && String::from_utf8_lossy(&o.stderr).contains("'-n'"),
        "dedupe -n: want a usage error: {}",
        show(&o)
    );
    let o = kopiru_cmd().args(["dedupe", "--help"]).output()?;
    ensure!(
        String::from_utf8_lossy(&o.stdout).contains("--dry-run"),
        "{}",
        show(&o)
    );
    Ok(())
}

/// With a progress display (a terminal, or --progress) a copy ends with a
/// one-line summary on stderr; in a pipe, nothing unless asked.
pub fn summary_line() -> R {
    let w = fixture::run_root().join("summary-line");
    let _ = std::fs::remove_dir_all(&w);
    let src = w.join("src");
    std::fs::create_dir_all(&src)?;
    for i in 0..5 {
        std::fs::write(src.join(format!("f{i}")), vec![b'x'; 1000])?;
    }
    let o = kopiru_cmd()
        .args(["copy", "--progress"])
        .arg(&src)
        .arg(w.join("a"))
        .output()?;
    let stderr = String::from_utf8_lossy(&o.stderr);
    let last = stderr.lines().last().unwrap_or_default();
    ensure!(
        code(&o) == 0 && last.starts_with("kopiru: copied 5 files, 4.9 KiB in "),
        "want a summary line last: {}",
        show(&o)
    );
    let o = kopiru_cmd()
        .arg("copy")
        .arg(&src)
        .arg(w.join("b"))
        .output()?;
    ensure!(
        code(&o) == 0 && o.stderr.is_empty() && o.stdout.is_empty(),
        "nothing in a pipe: {}",
        show(&o)
    );
    Ok(())
}

/// cp's spellings of copy's options, on a real filesystem: -t DIR, -p, -v
/// and --reflink[=auto|always|never].
pub fn cp_spellings(fs: Fs) -> R {
    let w = fixture::workdir(fs, "cp-spellings")?;
    let src = w.join("src");
    std::fs::create_dir_all(src.join("sub"))?;
    let (a, b) = (src.join("a"), src.join("sub/b"));
    trees::write_random(&a, 3 << 20, 7)?;
    std::fs::write(&b, b"bee")?;
    let quote = w.join("it's");
    std::fs::write(&quote, b"q")?;

    spelling_t(&w, &a, &src)?;
    spelling_p(&w, &b)?;
    spelling_v(&w, &quote)?;
    spelling_reflink(fs, &w, &a)?;
    Ok(())
}

/// `-t DIR`: every path is a source.
fn spelling_t(w: &Path, a: &Path, src: &Path) -> R {
    let t = w.join("t");
    std::fs::create_dir(&t)?;
    let o = kopiru_cmd()
        .args(["copy", "-t"])
        .arg(&t)
        .arg(a)
        .arg(src.join("sub"))
        .output()?;
    ensure!(code(&o) == 0, "-t: {}", show(&o));
    ensure!(
        std::fs::read(t.join("a"))? == std::fs::read(a)?
            && std::fs::read(t.join("sub/b"))? == b"bee",
        "-t did not copy into DIR"
    );
    let missing = w.join("missing");
    let o = kopiru_cmd()
        .args(["copy", "-t"])
        .arg(&missing)
        .arg(a)
        .output()?;
    ensure!(
        code(&o) == 2 && !missing.exists(),
        "-t into a missing directory: want exit 2 and nothing made: {}",
        show(&o)
    );

    Ok(())
}

/// `-p`: mode, times and owner, as cp -p; without it the owner is ours.
fn spelling_p(w: &Path, b: &Path) -> R {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    std::os::unix::fs::chown(b, Some(4242), Some(4343))?;
    std::fs::set_permissions(b, std::fs::Permissions::from_mode(0o640))?;
    let old = std::fs::FileTimes::new()
        .set_modified(std::time::UNIX_EPOCH + Duration::from_secs(1_000_000_000));
    std::fs::File::options()
        .write(true)
        .open(b)?
        .set_times(old)?;
    let o = kopiru_cmd()
        .args(["copy", "-p"])
        .arg(b)
        .arg(w.join("p"))
        .output()?;
    ensure!(code(&o) == 0, "-p: {}", show(&o));
    let (m, n) = (std::fs::metadata(b)?, std::fs::metadata(w.join("p"))?);
    ensure!(
        (n.uid(), n.gid(), n.mode() & 0o7777, n.mtime()) == (m.uid(), m.gid(), 0o640, m.mtime()),
        "-p kept uid {} gid {} mode {:o} mtime {}",
        n.uid(),
        n.gid(),
        n.mode() & 0o7777,
        n.mtime()
    );
    let o = kopiru_cmd()
        .arg("copy")
        .arg(b)
        .arg(w.join("no-p"))
        .output()?;
    ensure!(code(&o) == 0, "{}", show(&o));
    ensure!(
        std::fs::metadata(w.join("no-p"))?.uid() == 0,
        "the owner was kept without -p"
    );

    Ok(())
}

/// -v: 'SOURCE' -> 'DEST' per entry on stdout (directories, symlinks
/// and hard links too), quoted as cp quotes, newline and control
/// characters included: the very lines GNU cp -rv prints for the same
/// tree (in another order: kopiru copies in parallel).
fn spelling_v(w: &Path, quote: &Path) -> R {
    let vsrc = w.join("vsrc");
    std::fs::create_dir_all(vsrc.join("sub"))?;
    std::fs::write(vsrc.join("sub/b"), b"b")?;
    std::fs::write(vsrc.join("new\nline"), b"n")?;
    std::fs::write(vsrc.join("bell\x07and\ttab"), b"t")?;
    std::fs::copy(quote, vsrc.join("it's"))?;
    std::os::unix::fs::symlink("sub/b", vsrc.join("link"))?;
    let o = kopiru_cmd()
        .args(["copy", "-v"])
        .arg(&vsrc)
        .arg(w.join("v-kopiru"))
        .output()?;
    ensure!(code(&o) == 0, "-v: {}", show(&o));
    let cp = Command::new("cp")
        .arg("-rv")
        .arg(&vsrc)
        .arg(w.join("v-cp"))
        .output()?;
    ensure!(cp.status.success(), "cp -rv: {}", show(&cp));
    let lines = |b: &[u8]| -> Vec<String> {
        let mut l: Vec<String> = String::from_utf8_lossy(b)
            .lines()
            .map(String::from)
            .collect();
        l.sort();
        l
    };
    let got = lines(&o.stdout);
    let want = lines(
        &String::from_utf8_lossy(&cp.stdout)
            .replace("v-cp", "v-kopiru")
            .into_bytes(),
    );
    ensure!(want.len() == 7, "cp -rv printed {want:#?}");
    ensure!(got == want, "-v printed {got:#?}, cp -rv {want:#?}");

    Ok(())
}

/// `--reflink`: always (also with no value) clones or fails; never
/// streams; auto climbs the ladder.
fn spelling_reflink(fs: Fs, w: &Path, a: &Path) -> R {
    for (flag, name) in [
        ("--reflink", "r-bare"),
        ("--reflink=always", "r-always"),
        ("--reflink=never", "r-never"),
        ("--reflink=auto", "r-auto"),
    ] {
        let dst = w.join(name);
        let o = kopiru_cmd()
            .args(["copy", "--json", flag])
            .arg(a)
            .arg(&dst)
            .output()?;
        let clones = flag != "--reflink=never" && fs.can_clone();
        let j = json(&o)?;
        if flag.ends_with("never") || flag.ends_with("auto") || fs.can_clone() {
            ensure!(code(&o) == 0, "{flag}: {}", show(&o));
            ensure!(
                j["methods"]["clone"] == u64::from(clones)
                    && crate::shares_extents(&dst)? == clones,
                "{flag} on {}: {j}",
                fs.name()
            );
            if flag.ends_with("never") {
                ensure!(j["methods"]["stream"] == 1, "{flag}: {j}");
            }
        } else {
            ensure!(code(&o) == 1, "{flag} where nothing clones: {}", show(&o));
        }
    }
    let o = kopiru_cmd()
        .args(["copy", "--reflink=always", "--method", "stream"])
        .arg(a)
        .arg(w.join("both"))
        .output()?;
    ensure!(code(&o) == 2, "--reflink with --method: {}", show(&o));
    Ok(())
}

/// Registers this module's trials.
pub fn trials(add: Add) {
    for fs in Fs::ALL {
        add(
            format!("cp_spellings::{}", fs.name()),
            fs.unavailable(),
            Box::new(move || cp_spellings(fs)),
        );
    }
    let ext4 = Fs::Ext4.unavailable();
    add(
        "signal_cancels_copy::ext4".into(),
        ext4.clone(),
        Box::new(|| signal_cancels_copy(Fs::Ext4)),
    );
    add(
        "second_signal_exits::ext4".into(),
        ext4,
        Box::new(|| second_signal_exits(Fs::Ext4)),
    );
    add("closed_stdout".into(), None, Box::new(closed_stdout));
    add("completions".into(), None, Box::new(completions));
    add("summary_line".into(), None, Box::new(summary_line));
    add(
        "dedupe_has_no_short_n".into(),
        None,
        Box::new(dedupe_has_no_short_n),
    );
    add("man_page".into(), groff_unavailable(), Box::new(man_page));
}
