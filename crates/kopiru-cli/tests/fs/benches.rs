//! `kopiru bench sweep` and `kopiru bench fsync` run and report.

use super::*;

/// `bench sweep` times every count, like with like (kopiru --sync none
/// beside cp -r and rsync -a; kopiru's default beside cp -r && sync -f),
/// prints the table, draws the chart and removes its corpora.
pub fn bench_sweep() -> R {
    let dir = fixture::run_root().join("sweep");
    std::fs::create_dir_all(&dir)?;
    let svg = dir.join("chart.svg");
    let o = kopiru([
        OsStr::new("bench"),
        OsStr::new("sweep"),
        OsStr::new("--dir"),
        dir.as_os_str(),
        OsStr::new("--total"),
        OsStr::new("256K"),
        OsStr::new("--counts"),
        OsStr::new("1,16,64"),
        OsStr::new("--runs"),
        OsStr::new("1"),
        OsStr::new("--plot"),
        svg.as_os_str(),
    ]);
    ensure!(code(&o) == 0, "{}", show(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let rows: Vec<&str> = out.lines().skip(1).collect();
    let header = out.lines().next().unwrap_or("");
    let tools = ["kopiru --sync none", "cp -r", "kopiru", "cp -r && sync -f"];
    ensure!(
        tools.iter().all(|t| header.contains(t)) && rows.len() == 3,
        "table: {out}"
    );
    let columns = if header.contains("rsync -a") { 5 } else { 4 };
    for (row, count) in rows.iter().zip(["1", "16", "64"]) {
        let cells: Vec<&str> = row.split_whitespace().collect();
        ensure!(
            cells[0] == count && cells.len() == 3 + columns,
            "row {row:?}"
        );
        for cell in &cells[3..] {
            let secs: f64 = cell
                .trim_end_matches('s')
                .parse()
                .map_err(|_| format!("no time in {row:?}"))?;
            ensure!(secs > 0.0 && secs < 60.0, "row {row:?}");
        }
    }
    let chart = std::fs::read_to_string(&svg)?;
    ensure!(
        chart.starts_with("<svg")
            && chart.matches("<polyline").count() >= 1
            && chart.contains("<title>kopiru</title>"),
        "chart: {chart}"
    );
    let left: Vec<_> = std::fs::read_dir(&dir)?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("kopiru-sweep"))
        .collect();
    ensure!(left.is_empty(), "corpora left behind");
    Ok(())
}

/// `kopiru bench fsync`: both tables, every cell a time, the fsync column
/// slower than the buffered one, and nothing left behind.
pub fn bench_fsync() -> R {
    let dir = fixture::workdir(Fs::Ext4, "bench-fsync")?;
    let o = kopiru([
        OsStr::new("bench"),
        OsStr::new("fsync"),
        OsStr::new("--dir"),
        dir.as_os_str(),
        OsStr::new("--writes"),
        OsStr::new("200"),
        OsStr::new("--files"),
        OsStr::new("300"),
        OsStr::new("--runs"),
        OsStr::new("1"),
    ]);
    ensure!(code(&o) == 0, "{}", show(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = out.lines().collect();
    let num = |s: &str| {
        s.parse::<f64>()
            .map_err(|_| format!("not a time: {s:?} in\n{out}"))
    };
    for label in ["1 B", "100 kB"] {
        let row = lines
            .iter()
            .find(|l| l.starts_with(label))
            .ok_or_else(|| format!("no {label} row in\n{out}"))?;
        let cells: Vec<f64> = row[label.len()..]
            .split_whitespace()
            .map(num)
            .collect::<Result<_, _>>()?;
        ensure!(cells.len() == 3, "{row}");
        ensure!(
            cells[2].total_cmp(&cells[0]).is_gt(),
            "fsync each not slower than buffered: {row}"
        );
    }
    for mode in [
        "--sync none (not",
        "--sync none, then",
        "--sync end",
        "--sync file",
    ] {
        let row = lines
            .iter()
            .find(|l| l.starts_with(mode))
            .ok_or_else(|| format!("no {mode} row in\n{out}"))?;
        let t = num(row.split_whitespace().last().unwrap_or(""))?;
        ensure!(t > 0.0 && t < 60.0, "{row}");
    }
    ensure!(
        std::fs::read_dir(&dir)?.next().is_none(),
        "files left behind in {}",
        dir.display()
    );
    Ok(())
}

/// On a filesystem too small for them: `bench fsync` says so before
/// writing, with the path, what is free and what it needs; `bench sweep`
/// keeps the rows it measured before the disk filled, and says where it
/// stopped and why. Both exit 1 and leave nothing behind.
pub fn benches_on_a_full_disk() -> R {
    let mnt = fixture::make_fs(Fs::Ext4, "bench-full", 32, &["-N", "256"])?;
    let start = std::time::Instant::now();
    let o = kopiru([
        OsStr::new("bench"),
        OsStr::new("fsync"),
        OsStr::new("--dir"),
        mnt.as_os_str(),
    ]);
    fails_with(&o, 1, "free, the benchmark needs about")?;
    fails_with(&o, 1, &mnt.display().to_string())?;
    // It checks before writing anything; the margin is for a loaded
    // machine.
    ensure!(
        start.elapsed().as_secs() < 60,
        "bench fsync took {:?} to say it does not fit",
        start.elapsed()
    );
    let o = kopiru([
        OsStr::new("bench"),
        OsStr::new("sweep"),
        OsStr::new("--dir"),
        mnt.as_os_str(),
        OsStr::new("--total"),
        OsStr::new("1M"),
        OsStr::new("--counts"),
        OsStr::new("1,16,4096"),
        OsStr::new("--runs"),
        OsStr::new("1"),
    ]);
    fails_with(&o, 1, "stopped before 4096 files")?;
    fails_with(&o, 1, "No space left on device")?;
    let out = String::from_utf8_lossy(&o.stdout);
    let rows: Vec<&str> = out.lines().skip(1).collect();
    ensure!(
        rows.len() == 2 && rows[0].starts_with("1 ") && rows[1].starts_with("16 "),
        "the measured rows were not printed: {out}"
    );
    let left: Vec<_> = std::fs::read_dir(&mnt)?
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n != "lost+found")
        .collect();
    ensure!(left.is_empty(), "left behind: {left:?}");
    Ok(())
}

/// Registers this module's trials.
pub fn trials(add: Add) {
    add("bench_sweep".into(), None, Box::new(bench_sweep));
    add(
        "benches_on_a_full_disk::ext4".into(),
        Fs::Ext4.unavailable(),
        Box::new(benches_on_a_full_disk),
    );
    add(
        "bench_fsync::ext4".into(),
        Fs::Ext4.unavailable(),
        Box::new(bench_fsync),
    );
}
