//! The image command's refusals: the device, or its output, refused
//! before anything is written.

use std::fmt;

/// Why an image is refused before anything is written.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ImageRefusal {
    /// DEVICE is not a block device.
    NotADevice {
        /// It is a regular file (`allow_file` would allow it).
        regular_file: bool,
    },
    /// DEVICE, or one of its partitions, is mounted read-write.
    MountedReadWrite {
        /// Where.
        at: String,
    },
    /// OUTPUT (or the block map) would go on a filesystem of DEVICE.
    OutputOnDevice,
    /// OUTPUT is the file being read (`allow_file`).
    OutputIsSource,
    /// OUTPUT (or the block map) exists.
    OutputExists,
    /// OUTPUT (or the block map) exists and is not a regular file.
    OutputNotAFile,
    /// OUTPUT (or the block map) is a symlink: the image, renamed into
    /// place, would replace the link, not the file it names.
    OutputIsSymlink,
    /// The block map's path is OUTPUT's.
    MapIsOutput,
    /// `partitions_only` on a device with no partition table.
    NoPartitionTable,
    /// `partitions_only`: a partition ends past the device's end.
    PartitionPastEnd {
        /// "GPT" or "MBR".
        table: &'static str,
        /// Its number.
        number: u32,
        /// One past its last byte.
        end: u64,
        /// The device's size in bytes.
        device: u64,
    },
    /// The format asked for has no encoder (it is read, by flash, but
    /// images are not written in it).
    CannotEncode {
        /// The format's name.
        format: &'static str,
    },
}

impl ImageRefusal {
    /// A stable kebab-case name ([`crate::Refusal::id`]).
    pub fn id(&self) -> &'static str {
        match self {
            ImageRefusal::NotADevice { .. } => "not-a-device",
            ImageRefusal::MountedReadWrite { .. } => "mounted-read-write",
            ImageRefusal::OutputOnDevice => "output-on-device",
            ImageRefusal::OutputIsSource => "output-is-source",
            ImageRefusal::OutputExists => "output-exists",
            ImageRefusal::OutputNotAFile => "output-not-a-file",
            ImageRefusal::OutputIsSymlink => "output-is-symlink",
            ImageRefusal::MapIsOutput => "map-is-output",
            ImageRefusal::NoPartitionTable => "no-partition-table",
            ImageRefusal::PartitionPastEnd { .. } => "partition-past-end",
            ImageRefusal::CannotEncode { .. } => "cannot-encode",
        }
    }
}

impl fmt::Display for ImageRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImageRefusal::CannotEncode { format } => write!(
                f,
                "images are not written as {format} (it is read, but has no encoder here)"
            ),
            ImageRefusal::NotADevice { regular_file: true } => {
                f.write_str("not a block device (allow a file source to read a regular file)")
            }
            ImageRefusal::NotADevice {
                regular_file: false,
            } => f.write_str("not a block device"),
            ImageRefusal::MountedReadWrite { at } => write!(
                f,
                "is mounted read-write (at {at}): its image would not be consistent; \
                 unmount it or remount it read-only, or force"
            ),
            ImageRefusal::OutputOnDevice => {
                f.write_str("is on the device being read: write the image to another disk")
            }
            ImageRefusal::OutputIsSource => f.write_str("is the file being read"),
            ImageRefusal::OutputExists => f.write_str(
                "exists (force replaces it, once the new image is complete and verified)",
            ),
            ImageRefusal::OutputNotAFile => f.write_str("exists and is not a regular file"),
            ImageRefusal::OutputIsSymlink => f.write_str(
                "is a symlink: the image is renamed into place, which would replace the \
                 link, not the file it names; give that file's own name",
            ),
            ImageRefusal::MapIsOutput => f.write_str("the block map would overwrite the image"),
            ImageRefusal::NoPartitionTable => {
                f.write_str("partitions only: no partition table (MBR or GPT) found")
            }
            ImageRefusal::PartitionPastEnd {
                table,
                number,
                end,
                device,
            } => write!(
                f,
                "partitions only: {table} partition {number} ends at byte {end}, past the \
                 end of the device ({device} bytes): the table was made for a larger device"
            ),
        }
    }
}

impl std::error::Error for ImageRefusal {}
