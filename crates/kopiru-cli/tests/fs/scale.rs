//! Copies past one process (issue 17): --files-from, --report, --shard
//! under OpenMPI's mpirun, and fpart's live mode with kopiru as its job
//! command.

use super::*;
use crate::durability::no_temporaries;
use std::collections::BTreeMap;
use std::fs;

/// `kopiru copy ARGS...`.
fn copy(args: &[&OsStr]) -> Output {
    let mut all = vec![OsStr::new("copy")];
    all.extend_from_slice(args);
    kopiru(all)
}

/// The lines of a --report file, parsed.
fn report_lines(p: &Path) -> Result<Vec<serde_json::Value>, Failed> {
    fs::read_to_string(p)?
        .lines()
        .map(|l| serde_json::from_str(l).map_err(|e| format!("{e}: {l:?}").into()))
        .collect()
}

/// How many report lines have each (type, outcome).
fn tally(lines: &[serde_json::Value]) -> BTreeMap<(String, String), u64> {
    let mut t = BTreeMap::new();
    for l in lines {
        let key = (
            l["type"].as_str().unwrap_or("").to_string(),
            l["outcome"].as_str().unwrap_or("").to_string(),
        );
        *t.entry(key).or_default() += 1;
    }
    t
}

fn key(t: &str, o: &str) -> (String, String) {
    (t.to_string(), o.to_string())
}

/// `--files-from`: exactly the listed entries (nested paths, absolute
/// ones under SOURCE, a listed directory made but not entered, or with -r
/// copied whole), their parents made, every directory with its source's
/// mode and times; a path outside SOURCE is an error of its own; --from0;
/// --report lines add up to the JSON summary.
pub fn files_from(fs: Fs) -> R {
    let w = fixture::workdir(fs, "files_from")?;
    let src = w.join("src");
    trees::rich(&src)?;
    let list = w.join("list");
    let abs_small = src.canonicalize()?.join("a/small");
    fs::write(
        &list,
        format!(
            "a/b/c/exec\n./a/one\n{}\nempty\nro\n../escape\n",
            abs_small.display()
        ),
    )?;
    let dst = w.join("dst");
    let report = w.join("report.jsonl");
    let o = copy(&[
        "--files-from".as_ref(),
        list.as_os_str(),
        "--report".as_ref(),
        report.as_os_str(),
        "--json".as_ref(),
        src.as_os_str(),
        dst.as_os_str(),
    ]);
    fails_with(
        &o,
        23,
        "../escape: copy: not a path inside the source directory",
    )?;
    let j = json(&o)?;
    // Exactly what was listed, and the directories above it.
    let m = manifest(&dst)?;
    let mut names: Vec<String> = m
        .keys()
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect();
    names.sort();
    let want = [
        "",
        "a",
        "a/b",
        "a/b/c",
        "a/b/c/exec",
        "a/one",
        "a/small",
        "empty",
        "ro",
    ];
    ensure!(names == want, "{names:?}");
    // Each with its source's metadata (directories included, after their
    // entries were made).
    let want_m = manifest(&src)?;
    for (k, e) in &m {
        let diffs = compare(
            &BTreeMap::from([(k.clone(), want_m[k].clone())]),
            &BTreeMap::from([(k.clone(), e.clone())]),
            Fields {
                links: false,
                ..manifest::DEFAULT
            },
        );
        ensure!(diffs.is_empty(), "{diffs:?}");
    }
    let lines = report_lines(&report)?;
    let t = tally(&lines);
    ensure!(
        t.get(&key("file", "copied")).copied() == j["files"].as_u64()
            && j["files"] == 3
            && t.get(&key("dir", "created")).copied() == Some(2)
            && t.get(&key("", "failed")).copied() == Some(1),
        "report {t:?} against {j}"
    );

    // NUL-separated, -r: a listed directory copied whole; run again, it
    // converges (nothing nests, nothing is left).
    let list0 = w.join("list0");
    fs::write(&list0, b"a/b\0setuid\0")?;
    let dst2 = w.join("dst2");
    for _ in 0..2 {
        let o = copy(&[
            "--files-from".as_ref(),
            list0.as_os_str(),
            "--from0".as_ref(),
            "-r".as_ref(),
            src.as_os_str(),
            dst2.as_os_str(),
        ]);
        ensure!(code(&o) == 0 && o.stderr.is_empty(), "{}", show(&o));
        let m = manifest(&dst2)?;
        ensure!(
            m.contains_key(&b"a/b/c/exec"[..]) && m.contains_key(&b"setuid"[..]) && m.len() == 9,
            "{:?}",
            m.keys()
                .map(|k| String::from_utf8_lossy(k))
                .collect::<Vec<_>>()
        );
    }
    no_temporaries(&w)
}

/// `mpirun` as root, oversubscribed (2 cores here), with `args`.
fn mpirun(n: usize) -> Command {
    let mut c = Command::new("mpirun");
    c.args([
        "--allow-run-as-root",
        "--oversubscribe",
        "-n",
        &n.to_string(),
    ]);
    c
}

/// The names in `dir` that kopiru leaves only while it works.
/// Waits (up to 30 s) until no process has `dst` among its arguments.
fn ranks_gone(dst: &Path) -> R {
    let needle = dst.as_os_str().as_encoded_bytes();
    for _ in 0..300 {
        let running = fs::read_dir("/proc")?.flatten().any(|e| {
            fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| c.split(|&b| b == 0).any(|arg| arg == needle))
        });
        if !running {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    Err(format!("ranks copying to {} still run after 30 s", dst.display()).into())
}

fn leftovers(dir: &Path) -> Result<Vec<String>, Failed> {
    Ok(fs::read_dir(dir)?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".kopiru-tmp."))
        .collect())
}

/// `mpirun -n 4 kopiru copy --shard auto -a`: the same copy one process
/// makes (every field, hard links included), nothing left beside it, every
/// rank's --report lines together add up to the tree; and the same command
/// again converges (merges, nests nothing).
pub fn shard_mpirun(fs: Fs) -> R {
    let w = fixture::workdir(fs, "shard_mpirun")?;
    let src = w.join("src");
    trees::rich(&src)?;
    trees::large_dir(&src.join("flat"), 300)?;
    let dst = w.join("dst");
    let report = w.join("report.jsonl");
    let o = mpirun(4)
        .arg(env!("CARGO_BIN_EXE_kopiru"))
        .args(["copy", "--shard", "auto", "-a", "--report"])
        .arg(&report)
        .arg(&src)
        .arg(&dst)
        .output()?;
    ensure!(o.status.success(), "{}", show(&o));
    same_tree(&src, &dst, manifest::ALL)?;
    ensure!(leftovers(&w)?.is_empty(), "left: {:?}", leftovers(&w)?);
    let m = manifest(&src)?;
    let count = |k: char| m.values().filter(|e| e.kind == k).count() as u64;
    // Names of hard-linked files beyond the first of each inode.
    let names = m.values().filter(|e| e.link_group.is_some()).count() as u64;
    let inodes = m
        .values()
        .filter_map(|e| e.link_group.as_ref())
        .collect::<std::collections::BTreeSet<_>>()
        .len() as u64;
    let links = names - inodes;
    let t = tally(&report_lines(&report)?);
    let got = |t2: &str, o: &str| t.get(&key(t2, o)).copied().unwrap_or(0);
    ensure!(
        got("file", "copied") == count('f') - links
            && got("hardlink", "created") == links
            && got("symlink", "created") == count('l')
            && got("dir", "created") == count('d') - 1,
        "report {t:?}; source has {} files ({links} more names), {} links, {} dirs",
        count('f'),
        count('l'),
        count('d')
    );
    let o = mpirun(2)
        .arg(env!("CARGO_BIN_EXE_kopiru"))
        .args(["copy", "--shard", "auto", "-a"])
        .arg(&src)
        .arg(&dst)
        .output()?;
    ensure!(o.status.success(), "again: {}", show(&o));
    ensure!(!dst.join("src").exists(), "the second run nested a copy");
    same_tree(&src, &dst, manifest::ALL)?;
    no_temporaries(&w)
}

/// One of 4 ranks, run under `strace`, is SIGKILLed at its 60th `openat`
/// (mid-copy): rank 0 under mpirun (`--shard auto`; mpirun then stops the
/// others), then rank 2 of four ranks started by hand (`--shard K/4`, so
/// no launcher stops the others): every surviving rank exits non-zero on
/// its own, DEST is never there, and the same command with `--resume`
/// converges to the full copy.
pub fn shard_killed(fs: Fs) -> R {
    let w = fixture::workdir(fs, "shard_killed")?;
    let src = w.join("src");
    trees::rich(&src)?;
    // Enough entries for several pieces per rank (a piece is at least 512),
    // so that each rank has work of its own before taking the others'.
    trees::large_dir(&src.join("flat"), 6000)?;
    let kopiru = env!("CARGO_BIN_EXE_kopiru");

    // Under mpirun: rank 0 (the publisher) dies; a wrapper runs it under
    // strace. Every rank runs under strace, so that none is slowed more
    // than the others: the ranks claim pieces of the tree as they go, and a
    // rank much slower to start than the rest would find none left.
    let dst = w.join("dst-mpi");
    let wrapper = w.join("kill-rank0.sh");
    fs::write(
        &wrapper,
        "#!/bin/sh\nunset LD_LIBRARY_PATH\nkill=\nif [ \"$OMPI_COMM_WORLD_RANK\" = 0 ]; then \
         kill='-e inject=openat:signal=KILL:when=60'; fi\n\
         exec strace -f -qq -o /dev/null -e trace=openat $kill \"$@\"\n",
    )?;
    fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )?;
    let o = mpirun(4)
        .arg(&wrapper)
        .arg(kopiru)
        .args(["copy", "--shard", "auto", "-a"])
        .arg(&src)
        .arg(&dst)
        .output()?;
    ensure!(!o.status.success(), "mpirun exited 0: {}", show(&o));
    ensure!(!dst.exists(), "DEST appeared though rank 0 died");
    // mpirun's abort kills the stracers, which let their ranks go on: they
    // end by themselves once they see rank 0 gone.
    ranks_gone(&dst)?;
    let o = mpirun(4)
        .arg(kopiru)
        .args(["copy", "--shard", "auto", "-a", "--resume"])
        .arg(&src)
        .arg(&dst)
        .output()?;
    ensure!(o.status.success(), "--resume: {}", show(&o));
    same_tree(&src, &dst, manifest::ALL)?;
    ensure!(leftovers(&w)?.is_empty(), "left: {:?}", leftovers(&w)?);

    shard_killed_by_hand(&w, &src)?;
    no_temporaries(&w)
}

/// [`shard_killed`] by hand: rank 2 dies; ranks 0, 1 and 3 must see it
/// themselves (all under strace, as under mpirun).
fn shard_killed_by_hand(w: &Path, src: &Path) -> R {
    let kopiru = env!("CARGO_BIN_EXE_kopiru");
    let dst = w.join("dst-hand");
    let start = |k: usize, resume: bool| {
        let mut c = if !resume {
            let mut c = Command::new("strace");
            c.args(["-f", "-qq", "-o", "/dev/null", "-e", "trace=openat"]);
            if k == 2 {
                c.args(["-e", "inject=openat:signal=KILL:when=60"]);
            }
            c.arg(kopiru)
                // cargo's library path would make the loader's own opens
                // reach the 60th before main: kill it mid-copy instead.
                .env_remove("LD_LIBRARY_PATH");
            c
        } else {
            Command::new(kopiru)
        };
        c.args(["copy", "-a", "--shard", &format!("{k}/4")]);
        if resume {
            c.arg("--resume");
        }
        c.arg(src).arg(&dst);
        c.stdout(std::process::Stdio::piped());
        c.stderr(std::process::Stdio::piped());
        c.spawn()
    };
    let ranks = (0..4)
        .map(|k| start(k, false))
        .collect::<Result<Vec<_>, _>>()?;
    let outs = ranks
        .into_iter()
        .map(|c| c.wait_with_output())
        .collect::<Result<Vec<_>, _>>()?;
    ensure!(!outs[2].status.success(), "the killed rank exited 0");
    for (k, o) in outs.iter().enumerate().filter(|(k, _)| *k != 2) {
        ensure!(
            code(o) != 0 && String::from_utf8_lossy(&o.stderr).contains("rank 2 failed"),
            "rank {k}: {}",
            show(o)
        );
    }
    ensure!(!dst.exists(), "DEST appeared though rank 2 died");
    // It died mid-copy: the staged tree beside DEST holds part of the files.
    let staged: Vec<_> = leftovers(w)?
        .into_iter()
        .filter(|n| n.starts_with(".kopiru-tmp.tree."))
        .collect();
    ensure!(staged.len() == 1, "staged trees: {staged:?}");
    let part = manifest(&w.join(&staged[0]))?;
    let files = |m: &manifest::Manifest| m.values().filter(|e| e.kind == 'f').count();
    let total = files(&manifest(src)?);
    ensure!(
        files(&part) > 0 && files(&part) < total,
        "the staged tree holds {} of {total} files: rank 2 did not die mid-copy",
        files(&part)
    );
    let ranks = (0..4)
        .map(|k| start(k, true))
        .collect::<Result<Vec<_>, _>>()?;
    for (k, c) in ranks.into_iter().enumerate() {
        let o = c.wait_with_output()?;
        ensure!(code(&o) == 0, "--resume, rank {k}: {}", show(&o));
    }
    same_tree(src, &dst, manifest::ALL)?;
    ensure!(leftovers(w)?.is_empty(), "left: {:?}", leftovers(w)?);
    Ok(())
}

/// fpart's live mode with kopiru as the job: `fpart -L -f 50 -W 'kopiru
/// copy --files-from "$FPART_PARTFILENAME" ...'` copies the tree, each job
/// a list of 50 files, into one DEST; a last `kopiru copy -T --resume`
/// then finds nothing to copy and only puts directory times right.
pub fn fpart_live(fs: Fs) -> R {
    let w = fixture::workdir(fs, "fpart_live")?;
    let src = w.join("src");
    trees::large_dir(&src.join("x"), 300)?;
    trees::large_dir(&src.join("y/z"), 120)?;
    let dst = w.join("dst");
    let parts = w.join("parts");
    fs::create_dir(&parts)?;
    let hook = format!(
        "{} copy --files-from \"$FPART_PARTFILENAME\" {} {}",
        env!("CARGO_BIN_EXE_kopiru"),
        src.display(),
        dst.display()
    );
    let o = Command::new("fpart")
        .args(["-L", "-f", "50", "-o"])
        .arg(parts.join("part"))
        .args(["-W", &hook])
        .arg(&src)
        .output()?;
    ensure!(o.status.success(), "{}", show(&o));
    let jobs = fs::read_dir(&parts)?.count();
    ensure!(jobs >= 9, "only {jobs} parts");
    // fpart lists files, not the hard links' shared inode: its jobs copy
    // each name apart. Compare content, modes and file times.
    let fields = Fields {
        links: false,
        ..manifest::DEFAULT
    };
    let a = manifest(&src)?;
    let b = manifest(&dst)?;
    let diffs: Vec<String> = compare(&a, &b, fields)
        .into_iter()
        .filter(|d| !d.contains("time"))
        .collect();
    ensure!(diffs.is_empty(), "{diffs:?}");
    let o = copy(&[
        "-T".as_ref(),
        "--resume".as_ref(),
        "--json".as_ref(),
        src.as_os_str(),
        dst.as_os_str(),
    ]);
    ensure!(code(&o) == 0, "{}", show(&o));
    let j = json(&o)?;
    ensure!(j["files"] == 0, "the last pass copied files: {j}");
    let diffs: Vec<String> = compare(&a, &manifest(&dst)?, fields)
        .into_iter()
        .filter(|d| !d.contains("hard-link"))
        .collect();
    ensure!(diffs.is_empty(), "{diffs:?}");
    no_temporaries(&w)
}

/// `c` (kopiru, or kopiru under strace) made into `copy --sync SYNC
/// EXTRA... --files-from LIST SRC DST`.
fn listed(
    mut c: Command,
    sync: &str,
    extra: &[&str],
    list: &Path,
    ends: (&Path, &Path),
) -> Command {
    c.args(["copy", "--sync", sync])
        .args(extra)
        .arg("--files-from")
        .arg(list)
        .args([ends.0, ends.1]);
    c
}

/// The kopiru under test, as a command to add arguments to.
fn plain() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kopiru"))
}

/// A listed copy into a visible DEST makes each new file without a name
/// (`O_TMPFILE`) and names it once whole. When the name turns out to be
/// taken at that moment (strace makes the first `linkat` fail with
/// EEXIST), the file is named under a temporary name and renamed over it,
/// as before; a file that was there before the run is replaced. Either
/// way: exit 0, the exact files, nothing left over. Also the naming
/// through /proc where `AT_EMPTY_PATH` is refused.
pub fn files_from_name_taken(fs: Fs) -> R {
    let w = fixture::workdir(fs, "files_from_taken")?;
    let src = w.join("src");
    fs::create_dir_all(src.join("d"))?;
    let names: Vec<String> = (0..40).map(|i| format!("d/f{i:02}")).collect();
    for (i, n) in names.iter().enumerate() {
        fs::write(src.join(n), trees::bytes(i * 97, i as u64))?;
    }
    let list = w.join("list");
    fs::write(&list, names.join("\n"))?;
    let dst = w.join("dst");
    // One destination file there already, with other content.
    fs::create_dir_all(dst.join("d"))?;
    fs::write(dst.join(&names[0]), b"old content, replaced")?;
    let inject = kopiru_injected("linkat:error=EEXIST:when=1");
    let o = listed(inject, "none", &[], &list, (&src, &dst)).output()?;
    ensure!(code(&o) == 0, "{}", show(&o));
    same_tree(&src, &dst, manifest::DEFAULT)?;
    // Where `linkat(AT_EMPTY_PATH)` is refused (ENOENT: kernels before 6.10
    // without CAP_DAC_READ_SEARCH), every file is named through its
    // /proc/self/fd link instead.
    let dst2 = w.join("dst2");
    let inject = kopiru_injected("linkat:error=ENOENT:when=1");
    let o = listed(inject, "none", &[], &list, (&src, &dst2)).output()?;
    ensure!(code(&o) == 0, "{}", show(&o));
    same_tree(&src, &dst2, manifest::DEFAULT)?;
    no_temporaries(&w)
}

/// Two listed copies at once that split one directory between them, as
/// fpart's jobs do. A missing directory is made under a staged name and
/// put in place at the end; the first job is held just before that
/// (strace delays its first `renameat2` by 8 s; the test waits until it is
/// held) while the second runs whole: the
/// second finds the staged name locked and makes the directory itself, so
/// the first, released, merges its entries into it. Then a job killed
/// just before putting its staged directory in place leaves it behind, and
/// the same job run again removes it and copies the entries again. Each
/// time: the exact files, nothing left over.
pub fn files_from_split_dir(fs: Fs) -> R {
    let w = fixture::workdir(fs, "files_from_split")?;
    let src = w.join("src");
    fs::create_dir_all(src.join("d/sub"))?;
    let mut names: Vec<String> = (0..60).map(|i| format!("d/f{i:02}")).collect();
    names.extend((0..10).map(|i| format!("d/sub/g{i}")));
    for (i, n) in names.iter().enumerate() {
        fs::write(src.join(n), trees::bytes(i * 113, i as u64))?;
    }
    // Each job has half of d/ and half of d/sub/.
    let (a, b): (Vec<_>, Vec<_>) = names.iter().enumerate().partition(|(i, _)| i % 2 == 0);
    let write_list = |name: &str, v: &[(usize, &String)]| -> Result<std::path::PathBuf, Failed> {
        let p = w.join(name);
        let text: Vec<&str> = v.iter().map(|(_, n)| n.as_str()).collect();
        fs::write(&p, text.join("\n"))?;
        Ok(p)
    };
    let (list_a, list_b) = (write_list("list-a", &a)?, write_list("list-b", &b)?);
    let dst = w.join("dst");
    // The first job flushes each file and directory (`--sync file`), the
    // ones it merges into too.
    let inject = "renameat2:delay_enter=8000000:when=1";
    let trace = crate::fixture::run_root().join(format!("split-dir-{}.trace", fs.name()));
    let mut first = listed(crate::kopiru_held(inject, &trace), "file", &[], &list_a, (&src, &dst))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    // The first job's staged d/ is there and holds its files: it waits.
    let staged = || -> Result<bool, Failed> {
        Ok(dst.exists()
            && fs::read_dir(&dst)?.flatten().any(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.starts_with(".kopiru-tmp.tree.")
                    && fs::read_dir(e.path().join("sub")).is_ok_and(|d| d.count() == 5)
            }))
    };
    crate::wait_held(&trace, inject, &mut first)?;
    ensure!(staged()?, "the first job is held without its staged d/");
    let o = listed(plain(), "none", &[], &list_b, (&src, &dst)).output()?;
    ensure!(code(&o) == 0, "second job: {}", show(&o));
    crate::still_held(&mut first, inject)?;
    ensure!(
        dst.join("d").is_dir() && staged()?,
        "the second job did not make d/ beside the staged one"
    );
    let o = first.wait_with_output()?;
    ensure!(code(&o) == 0, "first job: {}", show(&o));
    same_tree(&src, &dst, manifest::DEFAULT)?;
    no_temporaries(&w)?;

    // Killed just before putting d/ in place: the staged directory stays.
    // The same job with --resume uses it (copies none of its files again);
    // killed again, then d/ made meanwhile by someone else, the same job
    // without --resume removes the staged one and writes into d/.
    let dst2 = w.join("dst2");
    let kill_a = || -> R {
        let kill = kopiru_injected("renameat2:signal=SIGKILL");
        let killed = listed(kill, "none", &[], &list_a, (&src, &dst2)).output()?;
        ensure!(
            killed.status.code().is_none(),
            "not killed: {}",
            show(&killed)
        );
        ensure!(!dst2.join("d").exists(), "the killed job put d/ in place");
        Ok(())
    };
    kill_a()?;
    let resume = ["--resume", "--json"];
    let o = listed(plain(), "none", &resume, &list_a, (&src, &dst2)).output()?;
    ensure!(code(&o) == 0, "--resume: {}", show(&o));
    let j = json(&o)?;
    ensure!(j["files"] == 0, "--resume copied files again: {j}");
    fs::remove_dir_all(&dst2)?;
    kill_a()?;
    fs::create_dir(dst2.join("d"))?;
    let o = listed(plain(), "none", &[], &list_a, (&src, &dst2)).output()?;
    ensure!(code(&o) == 0, "rerun: {}", show(&o));
    let o = listed(plain(), "none", &[], &list_b, (&src, &dst2)).output()?;
    ensure!(code(&o) == 0, "{}", show(&o));
    same_tree(&src, &dst2, manifest::DEFAULT)?;
    no_temporaries(&w)
}

/// Ranks that list the source differently (here: given different
/// `--exclude`s) would cut different pieces: the one that differs from the
/// first copies nothing, and the copy is not put in place. Then a sharded
/// merge into a DEST holding an earlier run's leftovers (a temporary file
/// of a dead process, a partial copy): rank 0 removes them at the end.
pub fn shard_lists_differ(fs: Fs) -> R {
    let w = fixture::workdir(fs, "shard_lists_differ")?;
    let src = w.join("src");
    trees::large_dir(&src.join("flat"), 1500)?;
    let dst = w.join("dst");
    let kopiru = env!("CARGO_BIN_EXE_kopiru");
    let rank = |k: usize, extra: &[&str], dst: &Path| {
        Command::new(kopiru)
            .args(["copy", "--shard", &format!("{k}/2")])
            .args(extra)
            .arg(&src)
            .arg(dst)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
    };
    let a = rank(0, &[], &dst)?;
    let b = rank(1, &["--exclude", "f1*"], &dst)?;
    let (a, b) = (a.wait_with_output()?, b.wait_with_output()?);
    ensure!(
        code(&a) != 0 && code(&b) != 0,
        "a rank exited 0: {} / {}",
        show(&a),
        show(&b)
    );
    let said = |o: &std::process::Output| {
        String::from_utf8_lossy(&o.stderr).contains("listed the source differently")
    };
    ensure!(
        said(&a) || said(&b),
        "no rank said why: {} / {}",
        show(&a),
        show(&b)
    );
    ensure!(!dst.exists(), "DEST put in place though the lists differ");
    // The same options on both, with --resume: the copy is finished.
    let (a, b) = (rank(0, &["--resume"], &dst)?, rank(1, &["--resume"], &dst)?);
    for o in [a.wait_with_output()?, b.wait_with_output()?] {
        ensure!(code(&o) == 0, "--resume: {}", show(&o));
    }
    same_tree(&src, &dst, manifest::DEFAULT)?;

    // A merge (-T) into a DEST with leftovers of dead runs.
    let dst = w.join("dst-merge");
    fs::create_dir_all(dst.join("flat/sub"))?;
    let dead = dst.join("flat/.kopiru-tmp.999999999.7");
    let partial = dst.join("flat/sub/.kopiru-tmp.part.0123456789abcdef");
    fs::write(&dead, "left by a dead run")?;
    fs::write(&partial, "part of a file")?;
    let (a, b) = (rank(0, &["-T"], &dst)?, rank(1, &["-T"], &dst)?);
    for o in [a.wait_with_output()?, b.wait_with_output()?] {
        ensure!(code(&o) == 0, "{}", show(&o));
    }
    same_tree(&src, &dst, manifest::DEFAULT)?;
    ensure!(
        !dead.exists() && !partial.exists(),
        "leftovers kept: {:?}",
        leftovers(&dst.join("flat"))?
    );
    no_temporaries(&w)
}

pub fn trials(add: Add) {
    let need = |cmd: &'static str, pkg: &'static str| {
        move || {
            (!fixture::have(cmd)).then(|| format!("{cmd} not installed (apt-get install {pkg})"))
        }
    };
    for fs in Fs::ALL {
        let (n, why) = (fs.name(), fs.unavailable());
        add(
            format!("files_from::{n}"),
            why.clone(),
            Box::new(move || files_from(fs)),
        );
        add(
            format!("files_from_name_taken::{n}"),
            why.clone().or_else(need("strace", "strace")),
            Box::new(move || files_from_name_taken(fs)),
        );
        add(
            format!("files_from_split_dir::{n}"),
            why.clone().or_else(need("strace", "strace")),
            Box::new(move || files_from_split_dir(fs)),
        );
        add(
            format!("fpart_live::{n}"),
            why.clone().or_else(need("fpart", "fpart")),
            Box::new(move || fpart_live(fs)),
        );
        if fs == Fs::Btrfs {
            continue; // the issue asks for ext4 and XFS; Btrfs adds minutes
        }
        add(
            format!("shard_mpirun::{n}"),
            why.clone().or_else(need("mpirun", "openmpi-bin")),
            Box::new(move || shard_mpirun(fs)),
        );
        add(
            format!("shard_lists_differ::{n}"),
            why.clone(),
            Box::new(move || shard_lists_differ(fs)),
        );
        add(
            format!("shard_killed::{n}"),
            why.clone()
                .or_else(need("mpirun", "openmpi-bin"))
                .or_else(need("strace", "strace")),
            Box::new(move || shard_killed(fs)),
        );
    }
}
