//! Helpers written once for every platform, on top of its own calls.

use super::{
    cstring, fs_type, on_local_device, open_path, remote_share, Fd, FdRef, OPEN_DIR_FLAGS,
};
use std::ffi::CString;
use std::io;
use std::path::Path;

/// What a filesystem's type and device say of where its operations go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backing {
    /// To a server or a daemon: each is a round trip (the type's name).
    RoundTrip(String),
    /// To a local disk (or memory): its type is a local one, or a local
    /// device is behind it, however slow that device is.
    Local,
    /// Neither says: only timing its operations can tell.
    Unknown,
}

/// Where the operations on the filesystem of `fd` go, by what the OS says
/// of its share ([`remote_share`]), its type ([`fs_type`]) and its device
/// ([`on_local_device`]). The device is asked only where the type does not
/// settle it: a FUSE filesystem on a disk (fuseblk: NTFS-3G) is a local
/// daemon's, not a server's.
pub fn backing(fd: FdRef) -> Backing {
    if let Some(p) = remote_share(fd) {
        return Backing::RoundTrip(p);
    }
    let t = fs_type(fd).ok();
    match t {
        Some(t) if local_type(&t) => Backing::Local,
        _ if on_local_device(fd) => Backing::Local,
        Some(t) if round_trip_type(&t) => Backing::RoundTrip(t),
        _ => Backing::Unknown,
    }
}

/// The type of the filesystem `fd` is on when its operations are round
/// trips to a server or a daemon (NFS, SMB, FUSE, Ceph, Lustre, GPFS, AFS,
/// 9p...), as [`fs_type`] names it on Linux and macOS, or as Windows names
/// a share's protocol ([`remote_share`]: "smb"); `None` for a local one
/// and where neither type nor device says ([`backing`]).
pub fn round_trip_fs(fd: FdRef) -> Option<String> {
    if let Some(p) = remote_share(fd) {
        return Some(p);
    }
    // The device is asked only of a round-trip type (once per directory
    // of a source: a `statfs` alone on a local disk, as before).
    let t = fs_type(fd).ok()?;
    (round_trip_type(&t) && !on_local_device(fd)).then_some(t)
}

/// Types whose operations go to a server or a daemon.
fn round_trip_type(t: &str) -> bool {
    matches!(
        t,
        // Linux (statfs f_type, named in linux.rs)
        "nfs" | "smb" | "fuse" | "ceph" | "lustre" | "gpfs" | "afs" | "beegfs" | "orangefs"
            | "9p"
            // macOS (statfs f_fstypename)
            | "smbfs" | "afpfs" | "webdav" | "macfuse" | "osxfuse" | "fuse-t" | "cifs"
    ) || t.starts_with("fuse.")
        || t.starts_with("nfs")
}

/// Types of local disk (and memory) filesystems, wherever their device
/// numbers point: Btrfs gives each subvolume an anonymous one, ZFS and
/// bcachefs name no single device, tmpfs and ramfs have none.
fn local_type(t: &str) -> bool {
    matches!(
        t,
        // Linux (named in linux.rs)
        "ext4" | "xfs" | "btrfs" | "bcachefs" | "zfs" | "f2fs" | "tmpfs" | "ramfs" | "vfat"
            | "exfat" | "ntfs" | "iso9660" | "udf" | "hfsplus" | "squashfs" | "erofs" | "jfs"
            | "reiserfs" | "nilfs2"
            // macOS
            | "apfs" | "hfs" | "msdos"
            // Windows (a share's volume names its own filesystem, but
            // remote_share has told those already)
            | "refs" | "fat" | "fat32" | "cdfs"
    )
}

/// Alignment of buffers, offsets and lengths for uncached reads: 4096 covers
/// every logical block size in use.
pub const DIRECT_ALIGN: usize = 4096;

/// A buffer aligned to [`DIRECT_ALIGN`] for uncached (O_DIRECT, unbuffered)
/// reads and writes, allocated once and reused.
pub struct Aligned {
    raw: Vec<u8>,
    off: usize,
    /// Usable length.
    pub len: usize,
}

impl Aligned {
    /// A zeroed buffer of `len` usable bytes.
    pub fn new(len: usize) -> Aligned {
        let raw = vec![0u8; len + DIRECT_ALIGN];
        let off = raw.as_ptr().align_offset(DIRECT_ALIGN);
        Aligned { raw, off, len }
    }

    /// The aligned bytes, to fill.
    pub fn buf(&mut self) -> &mut [u8] {
        &mut self.raw[self.off..self.off + self.len]
    }

    /// The aligned bytes.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))] // read by image/, Linux only
    pub fn get(&self) -> &[u8] {
        &self.raw[self.off..self.off + self.len]
    }
}

/// Opens the parent directory of a command-line path and returns it with
/// the path's last name; a root, "." and ".." give the directory itself and
/// ".".
pub fn open_parent(path: &Path) -> io::Result<(Fd, CString)> {
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => {
            let parent = match parent.as_os_str().is_empty() {
                true => Path::new("."),
                false => parent,
            };
            Ok((open_path(parent, OPEN_DIR_FLAGS)?, cstring(name)?))
        }
        _ => Ok((open_path(path, OPEN_DIR_FLAGS)?, CString::from(c"."))),
    }
}

/// Free space on a filesystem ([`fs_space`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Space {
    /// Free bytes.
    pub free: u64,
    /// The block size.
    pub block: u64,
}

/// A mounted filesystem ([`mount_modes`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    /// Its device number.
    pub dev: u64,
    /// Where it is mounted.
    pub dir: String,
    /// Its superblock is read-only.
    pub read_only: bool,
}

/// One extent of a file, as FIEMAP reports it (Linux).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    /// Offset in the file.
    pub logical: u64,
    /// Address on the device (filesystem-specific units of bytes).
    pub physical: u64,
    /// Length in bytes.
    pub length: u64,
    /// Shared with another file or snapshot.
    pub shared: bool,
    /// Where the data is not a plain block range (delayed, inline, encoded,
    /// unknown): such maps cannot be compared.
    pub opaque: bool,
    /// The data lives inside the filesystem's metadata (small Btrfs files):
    /// it cannot share blocks.
    pub inline: bool,
}

/// What the kernel did with a request to share blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(windows, allow(dead_code))] // no block sharing on Windows yet
pub enum Shared {
    /// The destination now shares the source's blocks.
    Done,
    /// The contents differ (checked by the kernel under lock): untouched.
    Differs,
}

/// A block device built directly on another ([`built_on`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuiltOn {
    /// Its device number.
    pub dev: u64,
    /// Its name: `/dev/NAME`, `/dev/mapper/NAME` for device-mapper.
    pub name: std::path::PathBuf,
    /// How it uses the device below.
    pub how: Use,
}

/// How a [`BuiltOn`] device uses the one below it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))] // only Linux finds them yet
pub enum Use {
    /// It holds it (sysfs `holders`: device-mapper, md RAID): the kernel
    /// has claimed the device below.
    Holds,
    /// A loop device whose backing file is the device itself.
    LoopOnDevice,
    /// A loop device whose backing file is this file, on the device's
    /// filesystem.
    LoopOnFile(std::path::PathBuf),
}

/// What kopiru needs to know of a block device before writing it.
#[derive(Clone, Debug, Default)]
pub struct BlockInfo {
    /// Size in bytes.
    pub size: u64,
    /// Smallest write the device takes (O_DIRECT alignment).
    pub logical: u32,
    /// The device's internal block size.
    pub physical: u32,
    /// Optimal I/O size (often 0: unknown).
    pub optimal: u32,
    /// Largest single request, in bytes (`queue/max_sectors_kb`).
    pub max_request: u64,
    /// Vendor and model, or what a loop device is backed by.
    pub model: String,
}

/// A whole disk the system knows of ([`disks`]), for a list to choose
/// from: its partitions, and what kind of bus it is on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))] // only Linux lists them yet
pub struct Disk {
    /// Its name under /dev (`sdb`, `mmcblk0`, `loop3`).
    pub name: String,
    /// Its device number.
    pub rdev: u64,
    /// Size in bytes.
    pub size: u64,
    /// Removable media, or a drive on USB or an SD/MMC slot.
    pub removable: bool,
    /// "usb", "mmc", "loop", "nvme", "virtio", or "" (another bus).
    pub bus: &'static str,
    /// Vendor and model, or what a loop device is backed by.
    pub model: String,
    /// Its partitions: name, device number, size in bytes.
    pub partitions: Vec<(String, u64, u64)>,
}
