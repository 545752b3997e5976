//! The drives an image could be written to, for a program that lets its
//! user choose (`kopiru gui`): each with its model, size, partitions and
//! their labels, and why it may not be written now, by the same checks as
//! [`super::check_targets`]. The disk holding the system is left out.
//! Everything here reads sysfs and the mount table: no privilege needed.

use super::targets::{check_unused, Context};
use crate::sys::{self, FileKind};
use crate::Refusal;
use std::path::{Path, PathBuf};

/// A whole disk, as [`drives`] lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Drive {
    /// `/dev/NAME`.
    pub path: PathBuf,
    /// Size in bytes.
    pub size: u64,
    /// Vendor and model, or what backs a loop device.
    pub model: String,
    /// Removable media, or on USB or an SD/MMC slot: a card or a stick.
    pub removable: bool,
    /// "usb", "mmc", "loop", "nvme", "virtio", or "" (another bus).
    pub bus: &'static str,
    /// Its partitions.
    pub partitions: Vec<DrivePartition>,
    /// Why [`super::check_targets`] would refuse it now without
    /// `--force` (mounted, in use through a device built on it); `None`:
    /// it may be written.
    pub unavailable: Option<Refusal>,
}

/// A partition of a [`Drive`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DrivePartition {
    /// `/dev/NAME`.
    pub path: PathBuf,
    /// Size in bytes.
    pub size: u64,
    /// Its filesystem's label (udev's, or read from the filesystem where
    /// this process may read the device), or its GPT name.
    pub label: Option<String>,
    /// Where it is mounted, if it is.
    pub mounted_at: Option<String>,
}

/// Mount points that make a disk the system's: it is never listed.
const SYSTEM_MOUNTS: [&str; 5] = ["/", "/boot", "/boot/efi", "/efi", "/usr"];

/// Every whole disk (not the system's: the one holding `/`, `/boot` or
/// `/usr`, directly or through what is built on it), sorted by name.
/// Linux only for now; elsewhere the list is empty.
pub fn drives() -> Vec<Drive> {
    let cx = Context {
        image: None,
        image_size: None,
        root_dev: sys::stat_path(Path::new("/"), true).map(|s| s.dev).ok(),
        mounts: sys::mounts(),
    };
    let mut out = Vec::new();
    for d in sys::disks() {
        let path = Path::new("/dev").join(&d.name);
        let Ok(st) = sys::stat_path(&path, true) else {
            continue; // no /dev entry (a container): nothing to write to
        };
        if st.kind() != FileKind::BlockDevice || st.rdev != d.rdev {
            continue;
        }
        let mut through = Vec::new();
        mounted_through(d.rdev, &cx.mounts, 0, &mut through);
        let holds_system = cx
            .root_dev
            .is_some_and(|r| r == d.rdev || d.partitions.iter().any(|&(_, p, _)| p == r))
            || through.iter().any(|m| SYSTEM_MOUNTS.contains(&m.as_str()));
        if holds_system {
            continue;
        }
        let unavailable = check_unused(&path, &st, &cx)
            .err()
            .and_then(|e| e.refusal().cloned());
        let partitions = d
            .partitions
            .iter()
            .map(|(name, rdev, size)| {
                let p = Path::new("/dev").join(name);
                DrivePartition {
                    label: sys::udev_label(&p).or_else(|| read_label(&p)),
                    mounted_at: cx
                        .mounts
                        .iter()
                        .find(|(m, _)| m == rdev)
                        .map(|(_, at)| at.clone()),
                    path: p,
                    size: *size,
                }
            })
            .collect();
        out.push(Drive {
            path,
            size: d.size,
            model: d.model,
            removable: d.removable,
            bus: d.bus,
            partitions,
            unavailable,
        });
    }
    out
}

/// Every mount point on device `rdev`, its partitions, and the devices
/// built on them (device-mapper, RAID, loop devices over them), into `out`.
fn mounted_through(rdev: u64, mounts: &[(u64, String)], depth: u32, out: &mut Vec<String>) {
    if depth > 8 {
        return;
    }
    let mut ours = sys::partitions(rdev);
    ours.push(rdev);
    for d in &ours {
        out.extend(
            mounts
                .iter()
                .filter(|(m, _)| m == d)
                .map(|(_, at)| at.clone()),
        );
        for up in sys::built_on(*d) {
            mounted_through(up.dev, mounts, depth + 1, out);
        }
    }
}

/// The label of the filesystem on `dev`, read from its superblock (ext2/3/4,
/// XFS, Btrfs, FAT, ISO 9660); `None` if it cannot be read (no permission)
/// or has none.
fn read_label(dev: &Path) -> Option<String> {
    use crate::sys::FileExt;
    let f = std::fs::File::open(dev).ok()?;
    let at = |off: u64, n: usize| -> Option<Vec<u8>> {
        let mut b = vec![0u8; n];
        f.read_exact_at(&mut b, off).ok()?;
        Some(b)
    };
    label_of(&at)
}

/// [`read_label`] on bytes read through `at(offset, length)`.
fn label_of(at: &dyn Fn(u64, usize) -> Option<Vec<u8>>) -> Option<String> {
    let text = |b: &[u8]| -> Option<String> {
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        let s = String::from_utf8_lossy(&b[..end]).trim().to_string();
        (!s.is_empty()).then_some(s)
    };
    let head = at(0, 4096)?;
    if head.get(..4) == Some(b"XFSB") {
        return text(&head[108..120]);
    }
    if let Some(sb) = at(1024, 1024) {
        if sb[56..58] == [0x53, 0xEF] {
            return text(&sb[120..136]);
        }
    }
    if let Some(sb) = at(65536, 4096) {
        if &sb[64..72] == b"_BHRfS_M" {
            return text(&sb[299..299 + 256]);
        }
    }
    if head[510..512] == [0x55, 0xAA] {
        let fat = |id: usize, label: usize| {
            (head.get(id..id + 3) == Some(&b"FAT"[..]))
                .then(|| text(&head[label..label + 11]))
                .flatten()
                .filter(|l| l != "NO NAME")
        };
        if let Some(l) = fat(82, 71).or_else(|| fat(54, 43)) {
            return Some(l);
        }
    }
    if let Some(pvd) = at(32768, 2048) {
        if &pvd[1..6] == b"CD001" {
            return text(&pvd[40..72]);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each filesystem's label at its place; none on a blank device.
    #[test]
    fn labels_from_superblocks() {
        let image = |patch: &dyn Fn(&mut Vec<u8>)| {
            let mut b = vec![0u8; 70 << 10];
            patch(&mut b);
            b
        };
        let reader = |b: Vec<u8>| {
            move |off: u64, n: usize| -> Option<Vec<u8>> {
                b.get(off as usize..off as usize + n).map(<[u8]>::to_vec)
            }
        };
        let ext = image(&|b| {
            b[1024 + 56..1024 + 58].copy_from_slice(&[0x53, 0xEF]);
            b[1024 + 120..1024 + 127].copy_from_slice(b"rootfs\0");
        });
        assert_eq!(label_of(&reader(ext)).as_deref(), Some("rootfs"));
        let fat32 = image(&|b| {
            b[510..512].copy_from_slice(&[0x55, 0xAA]);
            b[82..87].copy_from_slice(b"FAT32");
            b[71..82].copy_from_slice(b"BOOT       ");
        });
        assert_eq!(label_of(&reader(fat32)).as_deref(), Some("BOOT"));
        let fat16 = image(&|b| {
            b[510..512].copy_from_slice(&[0x55, 0xAA]);
            b[54..59].copy_from_slice(b"FAT16");
            b[43..54].copy_from_slice(b"NO NAME    ");
        });
        assert_eq!(label_of(&reader(fat16)), None);
        let iso = image(&|b| {
            b[32768 + 1..32768 + 6].copy_from_slice(b"CD001");
            b[32768 + 40..32768 + 50].copy_from_slice(b"DEBIAN 12 ");
        });
        assert_eq!(label_of(&reader(iso)).as_deref(), Some("DEBIAN 12"));
        assert_eq!(label_of(&reader(image(&|_| {}))), None);
    }
}
