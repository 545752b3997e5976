//! The targets, checked before anything is written: whole block devices
//! (or regular files with `--file`), not mounted, not holding the root
//! filesystem or the image, big enough; and their write size, from the
//! device's topology.

use super::input::Image;
use super::{FlashOptions, HEAD, VERIFY_BLOCK};
use crate::sys::AsFd;
use crate::sys::{self, FileKind, Stat, Use};
use crate::Format;
use crate::{DeviceRefusal, Error, LeastSize, Op, Refusal, Side};
use std::path::{Path, PathBuf};

/// A target, checked and described, ready to be written.
#[derive(Clone, Debug)]
pub struct Target {
    /// As given.
    pub path: PathBuf,
    /// The device it names, resolved once when it was checked (a
    /// `/dev/disk/by-id/...` or `/dev/mapper/...` name is a symlink): what
    /// is opened, written and read back.
    pub device: PathBuf,
    /// The device number it had then (0 for a regular file): the opened
    /// device must still be it.
    pub rdev: u64,
    /// A block device (else a regular file, with `--file`).
    pub is_block: bool,
    /// Bytes it holds (0 for a new file).
    pub size: u64,
    /// Vendor and model, or what backs a loop device.
    pub model: String,
    /// O_DIRECT alignment.
    pub align: usize,
    /// Bytes per write, from the device's topology.
    pub chunk: usize,
}

/// A target refused before anything is written.
fn refuse(dev: &Path, why: DeviceRefusal) -> Error {
    Error::refused(Side::Destination, dev, Op::Flash, Refusal::Device(why))
}

/// An OS error checking a target.
fn failed(dev: &Path, op: Op, e: std::io::Error) -> Error {
    Error::io(Side::Destination, dev, op, e)
}

/// What every target is checked against.
pub(super) struct Context {
    /// The image file's stat (`None`: standard input).
    pub(super) image: Option<Stat>,
    /// The size the image has, or at least has, when known before
    /// writing; if only a least size, where it came from.
    pub(super) image_size: Option<(u64, Option<LeastSize>)>,
    /// The device of the root filesystem.
    pub(super) root_dev: Option<u64>,
    /// Mounted devices and where.
    pub(super) mounts: Vec<(u64, String)>,
}

/// Checks each target: a whole block device (or, with `--file`, a regular
/// file) that is not mounted, does not hold the root filesystem or the
/// image, and is big enough for an image of `image_size` (when known).
///
/// # Errors
/// The first target refused ([`Op::Flash`] and a [`Refusal`]) or that
/// could not be examined (an OS error); or the image's stat failing
/// ([`Side::Source`]).
pub fn check_targets(
    image: &Image,
    devices: &[PathBuf],
    opts: &FlashOptions,
) -> Result<Vec<Target>, Error> {
    if let Err(e) = sys::available(sys::Feature::Flash) {
        let at = devices.first().cloned().unwrap_or_default();
        return Err(Error::io(Side::Destination, at, Op::Flash, e));
    }
    let least = match image.format {
        Format::Zstd => LeastSize::ZstdFrameHeader,
        _ => LeastSize::GzipTrailer,
    };
    let image_size = match (&opts.bmap, image.size, image.at_least) {
        (Some(m), _, _) => Some((m.image_size, None)),
        (None, Some(n), _) => Some((n, None)),
        (None, None, Some(n)) => Some((n, Some(least))),
        (None, None, None) => None,
    };
    let cx = Context {
        image: image.stat,
        image_size,
        root_dev: sys::stat_path(Path::new("/"), true).map(|s| s.dev).ok(),
        mounts: sys::mounts(),
    };
    // Named twice is told by the names alone, before any is opened
    // exclusively (the second open of one device would only say "busy").
    named_twice(devices)?;
    let targets = devices
        .iter()
        .map(|d| check_one(d, &cx, opts))
        .collect::<Result<Vec<_>, _>>()?;
    check_distinct(&targets)?;
    Ok(targets)
}

/// Refuses one block device named twice, by the device numbers the names
/// lead to (a symlink such as `/dev/disk/by-id/...` included), or a
/// partition of another named; [`check_distinct`] does the same for the
/// checked targets (files too).
fn named_twice(devices: &[PathBuf]) -> Result<(), Error> {
    let rdev = |d: &PathBuf| {
        sys::stat_path(d, true)
            .ok()
            .filter(|st| st.kind() == FileKind::BlockDevice)
            .map(|st| st.rdev)
    };
    let devs: Vec<Option<u64>> = devices.iter().map(rdev).collect();
    for (i, a) in devs.iter().enumerate() {
        for (j, b) in devs[..i].iter().enumerate() {
            let (Some(a), Some(b)) = (a, b) else {
                continue;
            };
            let part = sys::partitions(*b).contains(a) || sys::partitions(*a).contains(b);
            if a == b || part {
                let why = DeviceRefusal::DeviceNamedTwice {
                    first: devices[j].clone(),
                    partition: a != b,
                };
                return Err(refuse(&devices[i], why));
            }
        }
    }
    Ok(())
}

/// Refuses a device named twice (by one name twice, or through a symlink
/// such as `/dev/disk/by-id/...`), or a partition of another target: it
/// would be written twice at once. Compared by device number (a file by
/// its inode, or a new one by its path).
fn check_distinct(targets: &[Target]) -> Result<(), Error> {
    let identity = |t: &Target| -> (u64, u64, PathBuf) {
        match (t.is_block, sys::stat_path(&t.device, true)) {
            (true, _) => (t.rdev, 0, PathBuf::new()),
            (false, Ok(st)) => (st.dev, st.ino, PathBuf::new()),
            (false, Err(_)) => {
                let parent = t
                    .device
                    .parent()
                    .and_then(|p| std::fs::canonicalize(p).ok());
                let name = t.device.file_name().unwrap_or_default();
                (0, 0, parent.unwrap_or_default().join(name))
            }
        }
    };
    let ids: Vec<_> = targets.iter().map(identity).collect();
    for (i, t) in targets.iter().enumerate() {
        for (j, first) in targets[..i].iter().enumerate() {
            let partition = |a: &Target, b: &Target| {
                a.is_block && b.is_block && sys::partitions(b.rdev).contains(&a.rdev)
            };
            let same = ids[i] == ids[j];
            if same || partition(t, first) || partition(first, t) {
                let why = DeviceRefusal::DeviceNamedTwice {
                    first: first.path.clone(),
                    partition: !same,
                };
                return Err(refuse(&t.path, why));
            }
        }
    }
    Ok(())
}

/// Checks one target.
fn check_one(dev: &Path, cx: &Context, opts: &FlashOptions) -> Result<Target, Error> {
    let file = |size: u64, model: &str| Target {
        path: dev.to_path_buf(),
        device: dev.to_path_buf(),
        rdev: 0,
        is_block: false,
        size,
        model: model.into(),
        align: sys::DIRECT_ALIGN,
        chunk: 4 << 20,
    };
    let st = match sys::stat_path(dev, true) {
        Ok(st) => st,
        Err(e) if sys::is_not_found(&e) && opts.allow_file => {
            if dev.starts_with("/dev") {
                return Err(refuse(dev, DeviceRefusal::NoSuchDevice { under_dev: true }));
            }
            return Ok(file(0, "new file"));
        }
        Err(e) if sys::is_not_found(&e) => {
            let under_dev = dev.starts_with("/dev");
            return Err(refuse(dev, DeviceRefusal::NoSuchDevice { under_dev }));
        }
        Err(e) => return Err(failed(dev, Op::Stat, e)),
    };
    match st.kind() {
        FileKind::BlockDevice => {}
        FileKind::File if opts.allow_file => {
            if cx.image.is_some_and(|i| (i.dev, i.ino) == (st.dev, st.ino)) {
                return Err(refuse(dev, DeviceRefusal::IsTheImage));
            }
            return Ok(file(st.size, "regular file"));
        }
        FileKind::File => {
            return Err(refuse(
                dev,
                DeviceRefusal::NotABlockDevice { regular_file: true },
            ))
        }
        _ => {
            return Err(refuse(
                dev,
                DeviceRefusal::NotABlockDevice {
                    regular_file: false,
                },
            ))
        }
    }
    if !opts.force {
        check_unused(dev, &st, cx)?;
    }
    // The name, resolved once: every later open uses the device it named
    // now, and is checked to be that device.
    let device = std::fs::canonicalize(dev).map_err(|e| failed(dev, Op::Stat, e))?;
    // Opened exclusively, as it will be written: a device the kernel has
    // claimed (mounted, in a device-mapper or RAID set, or held open so
    // by another program) is refused now, not when it is opened to write.
    let fd = match sys::open_path_mode(&device, sys::O_RDONLY | sys::O_EXCLUSIVE_PROBE, 0) {
        Ok(fd) => fd,
        Err(e) if sys::is_busy(&e) => return Err(refuse(dev, DeviceRefusal::DeviceBusy)),
        Err(e) => return Err(failed(dev, Op::Open, e)),
    };
    let now = sys::fstat(fd.as_fd()).map_err(|e| failed(dev, Op::Stat, e))?;
    if now.kind() != FileKind::BlockDevice || now.rdev != st.rdev {
        let e = std::io::Error::other("the device changed while it was being checked");
        return Err(failed(dev, Op::Open, e));
    }
    let info = sys::block_info(fd.as_fd(), st.rdev).map_err(|e| failed(dev, Op::Stat, e))?;
    if let Some((n, at_least)) = cx.image_size {
        if n > info.size {
            let why = DeviceRefusal::TooSmall {
                image: n,
                at_least,
                device: info.size,
            };
            return Err(refuse(dev, why));
        }
    }
    let align = (info.logical.max(512) as usize).max(sys::DIRECT_ALIGN);
    let chunk = chunk_size(&info, align);
    Ok(Target {
        path: dev.to_path_buf(),
        device,
        rdev: st.rdev,
        is_block: true,
        size: info.size,
        model: info.model,
        align,
        chunk,
    })
}

/// Refuses (unless `--force`) a partition, and a device holding the root
/// filesystem, the image, or anything mounted.
pub(super) fn check_unused(dev: &Path, st: &Stat, cx: &Context) -> Result<(), Error> {
    let mut ours = vec![st.rdev];
    ours.extend(sys::partitions(st.rdev));
    if sys::is_partition(st.rdev) {
        return Err(refuse(dev, DeviceRefusal::Partition));
    }
    if cx.root_dev.is_some_and(|r| ours.contains(&r)) {
        return Err(refuse(dev, DeviceRefusal::HoldsRootFs));
    }
    if cx.image.is_some_and(|i| ours.contains(&i.dev)) {
        return Err(refuse(dev, DeviceRefusal::HoldsImage));
    }
    if let Some((_, at)) = cx.mounts.iter().find(|(d, _)| ours.contains(d)) {
        return Err(refuse(dev, DeviceRefusal::Mounted { at: at.clone() }));
    }
    if let Some(chain) = used_through(dev, st.rdev, &cx.mounts, 0) {
        return Err(refuse(dev, DeviceRefusal::InUse { chain }));
    }
    Ok(())
}

/// What is built on device `rdev` (named `name`) or on one of its
/// partitions and is in use: a device mounted (or with a partition
/// mounted), or one that holds it; said as a chain, from the top:
/// "/dev/loop3 is mounted on /mnt/x and is backed by /dev/sdb". `None`:
/// nothing (a loop device over it that nothing uses is left alone).
fn used_through(name: &Path, rdev: u64, mounts: &[(u64, String)], depth: u32) -> Option<String> {
    // Loop devices can be stacked in a loop only by mistake; stop anyway.
    if depth > 8 {
        return None;
    }
    let mut devs = vec![(rdev, name.to_path_buf())];
    for p in sys::partitions(rdev) {
        let pname = sys::block_name(p).unwrap_or_else(|| name.to_path_buf());
        devs.push((p, pname));
    }
    for (below, below_name) in &devs {
        for up in sys::built_on(*below) {
            let below_name = below_name.display();
            let how = match &up.how {
                Use::Holds => format!("is built on {below_name}"),
                Use::LoopOnDevice => format!("is backed by {below_name}"),
                Use::LoopOnFile(f) => {
                    format!("is backed by {}, a file on {below_name}", f.display())
                }
            };
            let up_name = up.name.display();
            let mut up_devs = sys::partitions(up.dev);
            up_devs.push(up.dev);
            if let Some((d, at)) = mounts.iter().find(|(d, _)| up_devs.contains(d)) {
                return Some(match *d == up.dev {
                    true => format!("{up_name} is mounted on {at} and {how}"),
                    false => format!("{up_name} has a partition mounted on {at} and {how}"),
                });
            }
            if let Some(above) = used_through(&up.name, up.dev, mounts, depth + 1) {
                return Some(format!("{above}, which {how}"));
            }
            if up.how == Use::Holds {
                return Some(format!("{up_name} {how}"));
            }
        }
    }
    None
}

/// Bytes per write: four of the largest requests the device takes, 1 to
/// 4 MiB, in whole physical blocks; the optimal I/O size when it says one.
pub(crate) fn chunk_size(info: &sys::BlockInfo, align: usize) -> usize {
    let unit = (info.physical as usize).max(align).max(VERIFY_BLOCK);
    let want = if info.optimal as usize >= HEAD {
        info.optimal as usize
    } else {
        (info.max_request as usize).saturating_mul(4)
    };
    let chunk = want.clamp(HEAD, 4 << 20) / unit * unit;
    chunk.max(unit)
}
