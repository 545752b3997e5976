//! The checks made before anything is written: what DEVICE is and how
//! much of it is read, where OUTPUT (and the block map) may go.

use super::parts::last_partition;
use super::{ImageOptions, ImageRefusal};
use crate::sys::AsFd;
use crate::sys::FileExt;
use crate::sys::{self, FileKind, Stat};
use crate::{DeviceRefusal, Error, Format, Op, Refusal, Side};
use std::path::{Path, PathBuf};

/// The device (or file) to read, checked and described.
#[derive(Clone, Debug)]
pub struct Source {
    /// As given.
    pub path: PathBuf,
    /// A block device (else a regular file, with `--file`).
    pub is_block: bool,
    /// Bytes the device (or file) holds.
    pub device_size: u64,
    /// Bytes read into the image: the whole device, or up to the end of
    /// its last partition (`--partitions-only`).
    pub size: u64,
    /// With `--partitions-only`: the table ("GPT", "MBR") and the number of
    /// the partition that ends last.
    pub last_partition: Option<(&'static str, u32)>,
    /// Vendor and model, or what backs a loop device.
    pub model: String,
    /// Logical sector size.
    pub sector: u32,
    /// Bytes per read, from the device's topology.
    pub chunk: usize,
}

fn refuse(path: &Path, why: ImageRefusal) -> Error {
    Error::refused(Side::Source, path, Op::Image, Refusal::Image(why))
}

fn refuse_output(path: &Path, why: ImageRefusal) -> Error {
    Error::refused(Side::Destination, path, Op::Image, Refusal::Image(why))
}

/// Checks DEVICE, OUTPUT and the block map's path before anything is
/// written; reads the partition table with `--partitions-only`.
///
/// Refused: a format with no encoder (bzip2: read by flash, never
/// written); DEVICE missing, or not a block device (a regular file only with
/// `--file`); DEVICE, or one of its partitions, mounted read-write (unless
/// `--force`); OUTPUT (or the map) on a filesystem of DEVICE, or DEVICE
/// itself; OUTPUT (or the map) existing, unless `--force`, and never when it
/// is not a regular file; with `--partitions-only`, no partition table, or a
/// partition that ends past the device's end.
///
/// # Errors
/// The first refusal ([`Op::Image`] and [`Refusal::Image`]), or an OS error
/// examining the paths.
pub fn check_source(device: &Path, output: &Path, opts: &ImageOptions) -> Result<Source, Error> {
    sys::available(sys::Feature::Image)
        .map_err(|e| Error::io(Side::Source, device, Op::Image, e))?;
    if opts.format != Format::Raw && opts.format.codec().encoder.is_none() {
        let format = opts.format.name();
        return Err(refuse_output(output, ImageRefusal::CannotEncode { format }));
    }
    let st = match sys::stat_path(device, true) {
        Ok(st) => st,
        Err(e) if sys::is_not_found(&e) => {
            return Err(Error::refused(
                Side::Source,
                device,
                Op::Image,
                Refusal::Device(DeviceRefusal::NoSuchDevice { under_dev: false }),
            ))
        }
        Err(e) => return Err(Error::io(Side::Source, device, Op::Stat, e)),
    };
    let is_block = match st.kind() {
        FileKind::BlockDevice => true,
        FileKind::File if opts.allow_file => false,
        k => {
            let regular_file = k == FileKind::File;
            return Err(refuse(device, ImageRefusal::NotADevice { regular_file }));
        }
    };
    // The device and its partitions (a file: the file itself).
    let ours: Vec<u64> = match is_block {
        true => std::iter::once(st.rdev)
            .chain(sys::partitions(st.rdev))
            .collect(),
        false => Vec::new(),
    };
    if is_block && !opts.force {
        let rw = sys::mount_modes()
            .into_iter()
            .find(|m| ours.contains(&m.dev) && !m.read_only);
        if let Some(m) = rw {
            return Err(refuse(device, ImageRefusal::MountedReadWrite { at: m.dir }));
        }
    }
    check_output(output, &st, &ours, opts)?;
    if let Some(map) = &opts.bmap {
        if map == output {
            return Err(refuse_output(map, ImageRefusal::MapIsOutput));
        }
        check_output(map, &st, &ours, opts)?;
    }
    let failed = |op: Op| move |e| Error::io(Side::Source, device, op, e);
    let fd = sys::open_path(device, sys::O_RDONLY).map_err(failed(Op::Open))?;
    let (device_size, sector, chunk, model) = match is_block {
        true => {
            let info = sys::block_info(fd.as_fd(), st.rdev).map_err(failed(Op::Stat))?;
            let align = (info.logical.max(512) as usize).max(sys::DIRECT_ALIGN);
            let chunk = crate::flash::targets::chunk_size(&info, align);
            (info.size, info.logical.max(512), chunk, info.model)
        }
        false => (st.size, 512, 4 << 20, "regular file".to_string()),
    };
    let mut src = Source {
        path: device.to_path_buf(),
        is_block,
        device_size,
        size: device_size,
        last_partition: None,
        model,
        sector,
        chunk,
    };
    if opts.partitions_only {
        let file = std::fs::File::from(fd);
        let mut read_at = |off: u64, buf: &mut [u8]| file.read_exact_at(buf, off);
        // A regular file holding a GPT made for 4 KiB sectors has its
        // header at 4096: tried when 512 finds none.
        let mut found = last_partition(&mut read_at, u64::from(sector));
        if !is_block && found.is_err() {
            if let Ok(f) = last_partition(&mut read_at, 4096) {
                found = Ok(f);
            }
        }
        let last = found
            .map_err(failed(Op::Read))?
            .ok_or_else(|| refuse(device, ImageRefusal::NoPartitionTable))?;
        if last.end > device_size {
            return Err(refuse(
                device,
                ImageRefusal::PartitionPastEnd {
                    table: last.table,
                    number: last.number,
                    end: last.end,
                    device: device_size,
                },
            ));
        }
        src.size = last.end;
        src.last_partition = Some((last.table, last.number));
    }
    Ok(src)
}

/// OUTPUT (or the block map) may be written: not on a filesystem of the
/// device, not the source file, not an existing file unless `--force`,
/// never something that is not a regular file.
fn check_output(out: &Path, src: &Stat, ours: &[u64], opts: &ImageOptions) -> Result<(), Error> {
    // The image is renamed into place: over a symlink it would replace the
    // link, not what it names (over /dev/stdout, the system's link).
    if sys::stat_path(out, false).is_ok_and(|o| o.kind() == FileKind::Symlink) {
        return Err(refuse_output(out, ImageRefusal::OutputIsSymlink));
    }
    match sys::stat_path(out, true) {
        Ok(o) if o.kind() != FileKind::File => {
            return Err(refuse_output(out, ImageRefusal::OutputNotAFile))
        }
        Ok(o) if !ours.is_empty() && ours.contains(&o.dev) => {
            return Err(refuse_output(out, ImageRefusal::OutputOnDevice))
        }
        Ok(o) if (o.dev, o.ino) == (src.dev, src.ino) => {
            return Err(refuse_output(out, ImageRefusal::OutputIsSource))
        }
        Ok(_) if !opts.force => return Err(refuse_output(out, ImageRefusal::OutputExists)),
        Ok(_) => {}
        Err(e) if sys::is_not_found(&e) => {}
        Err(e) => return Err(Error::io(Side::Destination, out, Op::Stat, e)),
    }
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = sys::stat_path(parent, true)
        .map_err(|e| Error::io(Side::Destination, parent, Op::Stat, e))?;
    if ours.contains(&dir.dev) {
        return Err(refuse_output(out, ImageRefusal::OutputOnDevice));
    }
    Ok(())
}
