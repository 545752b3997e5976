//! The library's examples (crates/kopiru/examples), run as a user runs
//! them: `copy_tree` on a scratch tree, `flash_image` onto a loop device
//! (a zstd image, byte for byte; then cancelled by a time limit of zero,
//! which leaves the first MiB as it was), and `image_device` of that
//! device into a zstd image that decodes to the device's bytes.

use crate::fixture;
use crate::flash::{device_bytes, image, Loop};
use crate::{code, show, Add, R};
use libtest_mimic::Failed;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// An example's binary, beside the kopiru binary under test (cargo test
/// builds the examples with the tests); built here when missing (`cargo
/// test --test fs` alone does not build them).
fn example(name: &str) -> Result<PathBuf, Failed> {
    let exe = Path::new(env!("CARGO_BIN_EXE_kopiru"));
    let dir = exe.parent().ok_or("the kopiru binary has no directory")?;
    let path = dir.join("examples").join(name);
    if !path.exists() {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut build = Command::new(cargo);
        build.args(["build", "-q", "-p", "kopiru", "--example", name]);
        if dir.ends_with("release") {
            build.arg("--release");
        }
        fixture::sh(build.current_dir(env!("CARGO_MANIFEST_DIR")))?;
    }
    ensure!(path.exists(), "{} was not built", path.display());
    Ok(path)
}

fn run(name: &str, args: &[&Path]) -> Result<Output, Failed> {
    Ok(Command::new(example(name)?).args(args).output()?)
}

/// A fresh, empty directory for one test.
fn dir(name: &str) -> Result<PathBuf, Failed> {
    let d = fixture::run_root().join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d)?;
    Ok(d)
}

/// `copy_tree SRC DST --exclude /target`: the tree without `target`.
pub fn copy_tree() -> R {
    let d = dir("example-copy-tree")?;
    let src = d.join("project");
    std::fs::create_dir_all(src.join("src"))?;
    std::fs::create_dir_all(src.join("target/debug"))?;
    std::fs::write(src.join("src/main.rs"), "fn main() {}\n")?;
    std::fs::write(src.join("Cargo.toml"), "[package]\n")?;
    std::fs::write(src.join("target/debug/app"), vec![7u8; 100_000])?;
    let dst = d.join("copy");
    let o = Command::new(example("copy_tree")?)
        .arg(&src)
        .arg(&dst)
        .args(["--exclude", "/target"])
        .output()?;
    ensure!(o.status.success(), "{}", show(&o));
    ensure!(
        std::fs::read(dst.join("src/main.rs"))? == b"fn main() {}\n"
            && std::fs::read(dst.join("Cargo.toml"))? == b"[package]\n"
            && !dst.join("target").exists(),
        "the copy is not the tree without target: {}",
        show(&o)
    );
    ensure!(
        String::from_utf8_lossy(&o.stdout).starts_with("2 files,"),
        "{}",
        show(&o)
    );
    Ok(())
}

/// `flash_image` of a zstd image onto a loop device, then `image_device`
/// of that device into a zstd image: both byte for byte. And a flash
/// stopped by a time limit of zero: exit 20, the first MiB not written.
pub fn flash_and_image() -> R {
    let d = dir("example-flash-image")?;
    let (raw, data) = image(&d)?;
    let zst = d.join("image.raw.zst");
    fixture::sh(Command::new("zstd").args(["-q", "-f"]).arg(&raw).arg("-o").arg(&zst))?;

    let target = Loop::new("example-flash", 8, 512, true)?;
    let o = run("flash_image", &[&zst, &target.dev])?;
    ensure!(o.status.success(), "{}", show(&o));
    ensure!(
        device_bytes(&target.dev, data.len())? == data,
        "the device does not hold the image: {}",
        show(&o)
    );
    ensure!(
        String::from_utf8_lossy(&o.stdout).contains(", verified"),
        "{}",
        show(&o)
    );

    let stopped = Loop::new("example-flash-stopped", 8, 512, true)?;
    let o = Command::new(example("flash_image")?)
        .arg(&raw)
        .arg(&stopped.dev)
        .args(["--timeout", "0"])
        .output()?;
    ensure!(code(&o) == 20, "want exit 20 (cancelled): {}", show(&o));
    ensure!(
        device_bytes(&stopped.dev, 1 << 20)?.iter().all(|&b| b == 0),
        "a stopped flash wrote the first MiB: {}",
        show(&o)
    );

    let out = d.join("device.img.zst");
    let o = run("image_device", &[&target.dev, &out])?;
    ensure!(o.status.success(), "{}", show(&o));
    let decoded = Command::new("zstd").arg("-dc").arg(&out).output()?;
    ensure!(decoded.status.success(), "zstd -dc: {}", show(&decoded));
    let mut want = data;
    want.resize(8 << 20, 0);
    ensure!(
        decoded.stdout == want,
        "the image does not decode to the device's bytes ({} bytes, want {}): {}",
        decoded.stdout.len(),
        want.len(),
        show(&o)
    );
    Ok(())
}

/// Registers this module's trials.
pub fn trials(add: Add) {
    add("examples::copy_tree".into(), None, Box::new(copy_tree));
    let needs = fixture::loop_unavailable().or_else(|| {
        (!fixture::have("zstd")).then(|| "zstd not installed (scripts/test.sh installs it)".into())
    });
    add(
        "examples::flash_and_image".into(),
        needs,
        Box::new(flash_and_image),
    );
}
