//! Real filesystems on loop devices, made once per test run and shared by the
//! tests (each works in its own directory), torn down at the end.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fs {
    Ext4,
    Xfs,
    Btrfs,
}

impl Fs {
    pub const ALL: [Fs; 3] = [Fs::Ext4, Fs::Xfs, Fs::Btrfs];

    pub fn name(self) -> &'static str {
        match self {
            Fs::Ext4 => "ext4",
            Fs::Xfs => "xfs",
            Fs::Btrfs => "btrfs",
        }
    }

    pub fn can_clone(self) -> bool {
        self != Fs::Ext4
    }

    fn mkfs(self) -> &'static str {
        match self {
            Fs::Ext4 => "mkfs.ext4",
            Fs::Xfs => "mkfs.xfs",
            Fs::Btrfs => "mkfs.btrfs",
        }
    }

    /// Why this filesystem cannot be tested here, if it cannot.
    pub fn unavailable(self) -> Option<String> {
        if let Some(why) = loop_unavailable() {
            return Some(why);
        }
        if !have(self.mkfs()) {
            return Some(format!(
                "{} not installed (apt-get install {})",
                self.mkfs(),
                match self {
                    Fs::Ext4 => "e2fsprogs",
                    Fs::Xfs => "xfsprogs",
                    Fs::Btrfs => "btrfs-progs",
                }
            ));
        }
        None
    }
}

pub fn have(cmd: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {cmd}"))
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Why loop-mounted filesystems cannot be made here, if they cannot.
pub fn loop_unavailable() -> Option<String> {
    // SAFETY: a plain libc call without arguments.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root: loop devices and mount need root".into());
    }
    if !Path::new("/dev/loop-control").exists() {
        return Some("no /dev/loop-control: the kernel has no loop devices here".into());
    }
    if !have("losetup") || !have("mount") {
        return Some("losetup or mount missing".into());
    }
    None
}

pub fn run_root() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        let p = PathBuf::from(format!("/tmp/kopiru-test-{}", std::process::id()));
        std::fs::create_dir_all(&p).expect("create test root");
        p
    })
}

struct Mounted {
    image: PathBuf,
    mnt: PathBuf,
}

static MOUNTED: Mutex<Vec<Mounted>> = Mutex::new(Vec::new());

/// Makes and mounts a filesystem of `size_mib` (sparse backing file) with
/// `mkfs_args`, returning its mount point. Each call makes a new one.
pub fn make_fs(fs: Fs, tag: &str, size_mib: u64, extra_mkfs: &[&str]) -> Result<PathBuf, String> {
    let image = PathBuf::from(format!(
        "/var/tmp/kopiru-test-{}-{tag}.img",
        std::process::id()
    ));
    make_fs_at(
        fs,
        image,
        &run_root().join(format!("mnt-{tag}")),
        size_mib,
        extra_mkfs,
    )
}

/// Makes a filesystem in the image file `image` (replaced if it exists) and
/// mounts it on `mnt`.
pub fn make_fs_at(
    fs: Fs,
    image: PathBuf,
    mnt: &Path,
    size_mib: u64,
    extra_mkfs: &[&str],
) -> Result<PathBuf, String> {
    let _ = std::fs::remove_file(&image);
    let f = std::fs::File::create(&image).map_err(|e| format!("create image: {e}"))?;
    f.set_len(size_mib << 20)
        .map_err(|e| format!("size image: {e}"))?;
    drop(f);
    let mut mkfs = Command::new(fs.mkfs());
    match fs {
        Fs::Ext4 => mkfs.args(["-q", "-F"]),
        Fs::Xfs => mkfs.args(["-q", "-f", "-m", "reflink=1"]),
        Fs::Btrfs => mkfs.args(["-q", "-f"]),
    };
    sh(mkfs.args(extra_mkfs).arg(&image))?;
    mount_image(fs, image, mnt)
}

/// Mounts an image file (through a loop device that goes away on unmount).
/// XFS refuses a second filesystem with a UUID it has seen mounted; snapshots
/// have the same one, so XFS gets `nouuid`.
pub fn mount_image(fs: Fs, image: PathBuf, mnt: &Path) -> Result<PathBuf, String> {
    std::fs::create_dir_all(mnt).map_err(|e| format!("mkdir {}: {e}", mnt.display()))?;
    let opts = match fs {
        Fs::Xfs => "loop,nouuid",
        _ => "loop",
    };
    sh(Command::new("mount")
        .args(["-o", opts])
        .arg(&image)
        .arg(mnt))?;
    MOUNTED.lock().unwrap().push(Mounted {
        image,
        mnt: mnt.to_path_buf(),
    });
    Ok(mnt.to_path_buf())
}

/// Unmounts one filesystem made here and deletes its image (teardown no
/// longer knows of it: kept, it was left behind in /var/tmp by every run).
pub fn unmount(mnt: &Path) -> Result<(), String> {
    let image = unmount_keeping_image(mnt)?;
    std::fs::remove_file(&image).map_err(|e| format!("rm {}: {e}", image.display()))
}

/// Unmounts one filesystem made here and returns its image file.
fn unmount_keeping_image(mnt: &Path) -> Result<PathBuf, String> {
    let image = MOUNTED
        .lock()
        .unwrap()
        .iter()
        .find(|m| m.mnt == mnt)
        .map(|m| m.image.clone())
        .ok_or_else(|| format!("{} was not mounted here", mnt.display()))?;
    sh(Command::new("umount").arg(mnt))?;
    MOUNTED.lock().unwrap().retain(|m| m.mnt != mnt);
    Ok(image)
}

/// Unmounts one filesystem made here and mounts its image again.
pub fn remount(fs: Fs, mnt: &Path) -> Result<(), String> {
    let image = unmount_keeping_image(mnt)?;
    mount_image(fs, image, mnt).map(drop)
}

/// Grows an ext4 made here to `size_mib`, offline (unmounted, its image
/// grown, `resize2fs`), and mounts it again.
pub fn grow_ext4(mnt: &Path, size_mib: u64) -> Result<(), String> {
    let image = unmount_keeping_image(mnt)?;
    let grown = std::fs::OpenOptions::new()
        .write(true)
        .open(&image)
        .and_then(|f| f.set_len(size_mib << 20));
    grown.map_err(|e| format!("grow {}: {e}", image.display()))?;
    sh(Command::new("e2fsck").args(["-f", "-y"]).arg(&image))?;
    sh(Command::new("resize2fs").arg(&image))?;
    mount_image(Fs::Ext4, image, mnt).map(drop)
}

/// The shared filesystem of each kind, made on first use.
pub fn shared(fs: Fs) -> Result<&'static Path, String> {
    static CELLS: [OnceLock<Result<PathBuf, String>>; 3] =
        [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let i = Fs::ALL.iter().position(|f| *f == fs).unwrap();
    CELLS[i]
        .get_or_init(|| make_fs(fs, fs.name(), 8192, &[]))
        .as_deref()
        .map_err(|e| e.clone())
}

/// A fresh, empty directory for one test on filesystem `fs`.
pub fn workdir(fs: Fs, test: &str) -> Result<PathBuf, String> {
    let d = shared(fs)?.join(test);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).map_err(|e| format!("mkdir {}: {e}", d.display()))?;
    Ok(d)
}

/// Unmounts and deletes everything the run made.
pub fn teardown() {
    // Newest first: images of later filesystems can live on earlier ones.
    for m in MOUNTED.lock().unwrap().drain(..).rev() {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(&m.mnt)
            .stderr(std::process::Stdio::null())
            .status();
        let _ = std::fs::remove_file(&m.image);
    }
    let _ = std::fs::remove_dir_all(run_root());
}

pub fn sh(cmd: &mut Command) -> Result<String, String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
