//! A flash's refusal data: a block map that cannot be used, an image that
//! is not one, and the target device's refusals.

use std::fmt;
use std::path::PathBuf;

/// Where a size that an image has at least came from (its format keeps
/// no exact size where it can be read before writing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeastSize {
    /// A gzip trailer: the last member's size modulo 4 GiB.
    GzipTrailer,
    /// A zstd file's first frame header (over HTTP the later frames are
    /// not walked: a request each).
    ZstdFrameHeader,
}

/// Why a block map cannot be used, or why the image does not match it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BmapError {
    /// No `<bmap version="...">`.
    NotBmap,
    /// A version other than 2.x.
    Version(String),
    /// Checksums other than SHA-256.
    ChecksumType,
    /// A required element is missing or not a number (its name).
    Missing(&'static str),
    /// The file's own checksum does not match: damaged or edited.
    OwnChecksum,
    /// A checksum that is not 64 hex digits.
    BadChecksum(String),
    /// A `<Range` without `>` or without `</Range>`.
    Malformed,
    /// A range that is not `a-b` or `a` (block numbers).
    BadRange(String),
    /// A range before or overlapping the previous one, or past the image.
    RangeOrder(String),
    /// The image's bytes [start, end) do not match their range's checksum.
    RangeChecksum {
        /// First byte.
        start: u64,
        /// One past the last byte.
        end: u64,
    },
    /// The image's size is not the one the map gives.
    SizeDiffers {
        /// Bytes in the image.
        image: u64,
        /// Bytes the map says.
        bmap: u64,
    },
}

impl fmt::Display for BmapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BmapError::NotBmap => f.write_str("not a bmap file"),
            BmapError::Version(v) => write!(f, "bmap version {v} is not supported (2.x is)"),
            BmapError::ChecksumType => f.write_str("only sha256 bmap checksums are supported"),
            BmapError::Missing(name) => write!(f, "no <{name}>"),
            BmapError::OwnChecksum => {
                f.write_str("the bmap file's own checksum does not match: damaged or edited")
            }
            BmapError::BadChecksum(s) => write!(f, "bad checksum '{s}'"),
            BmapError::Malformed => f.write_str("unterminated or bad <Range>"),
            BmapError::BadRange(s) => write!(f, "bad range '{s}'"),
            BmapError::RangeOrder(s) => {
                write!(f, "range '{s}' is out of order or past the image")
            }
            BmapError::RangeChecksum { start, end } => write!(
                f,
                "bytes {start}-{end} do not match the checksum in the bmap file"
            ),
            BmapError::SizeDiffers { image, bmap } => {
                write!(f, "the image has {image} bytes, its bmap says {bmap}")
            }
        }
    }
}

impl std::error::Error for BmapError {}

/// What the bytes of an image that is not what it claims look like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    /// A web page.
    Html,
    /// Text of another kind (an error message, JSON, a checksum list).
    Text,
    /// Another compressed format (its name).
    Format(&'static str),
    /// Binary data of no known format.
    Unknown,
    /// Nothing at all.
    Empty,
}

impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Found::Html => f.write_str("it looks like HTML (a web page: a failed download?)"),
            Found::Text => f.write_str("it looks like text"),
            Found::Format(x) => write!(f, "it is {x}"),
            Found::Unknown => f.write_str("it is binary data of no known format"),
            Found::Empty => f.write_str("it is empty"),
        }
    }
}

/// Why an image is refused before anything is written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotAnImage {
    /// Its name (or the format given) says `claimed`; its bytes are not that.
    Mismatch {
        /// The format claimed (its name: `xz`, `gzip`, ...).
        claimed: &'static str,
        /// The claim is the name's extension (else the format given).
        by_name: bool,
        /// What the bytes look like.
        found: Found,
    },
    /// No known format, and not named or given as raw; or text or a web
    /// page, which no disk image is.
    Unrecognised(Found),
}

impl std::error::Error for NotAnImage {}

impl fmt::Display for NotAnImage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotAnImage::Mismatch {
                claimed,
                by_name: true,
                found,
            } => write!(
                f,
                "its name says {claimed}, but its bytes are not {claimed}: {found}; nothing written"
            ),
            NotAnImage::Mismatch { claimed, found, .. } => write!(
                f,
                "the {claimed} format was given, but its bytes are not {claimed}: {found}; nothing written"
            ),
            NotAnImage::Unrecognised(found @ (Found::Html | Found::Text | Found::Empty)) => {
                write!(
                    f,
                    "not a disk image: {found}; nothing written (the raw format writes it as it is)"
                )
            }
            // The codec table names the formats (codec imports no command
            // module, so error/ may use it).
            NotAnImage::Unrecognised(_) => write!(
                f,
                "not a known image format: no {} header, no partition table or filesystem at \
                 its start, and not named as a raw image (.img, .iso, .raw, ...); nothing \
                 written (the raw format writes it as it is)",
                crate::codec::Format::compressed_names()
            ),
        }
    }
}

/// `DeviceRefusal::NoSuchDevice`'s text.
fn no_such_device(under_dev: bool) -> &'static str {
    match under_dev {
        false => "no such device (allow a file target to write the image to a new file)",
        true => "no such device (kopiru never creates files under /dev)",
    }
}

/// `DeviceRefusal::NotABlockDevice`'s text.
fn not_a_block_device(regular_file: bool) -> &'static str {
    match regular_file {
        false => "not a block device",
        true => "not a block device (allow a file target to write a regular file)",
    }
}

/// `DeviceRefusal::TooSmall`'s text.
fn too_small(
    f: &mut fmt::Formatter<'_>,
    image: u64,
    at_least: Option<LeastSize>,
    device: u64,
) -> fmt::Result {
    match at_least {
        None => write!(
            f,
            "too small: the image is {image} bytes, the device {device} bytes; \
             nothing written"
        ),
        // A gzip trailer is only the size modulo 4 GiB, and a truncated
        // file's last bytes are not a trailer at all.
        Some(LeastSize::GzipTrailer) => write!(
            f,
            "too small: the gzip trailer says the image is at least {image} bytes, the \
             device is {device} bytes; nothing written (a truncated or damaged file has \
             no true trailer: `gzip -t` checks it)"
        ),
        Some(LeastSize::ZstdFrameHeader) => write!(
            f,
            "too small: the zstd frame header says the image is at least {image} bytes, \
             the device is {device} bytes; nothing written"
        ),
    }
}

/// `kopiru flash`: why a target is refused before anything is written
/// (`kopiru image` refuses a device that does not exist with
/// [`DeviceRefusal::NoSuchDevice`] too).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeviceRefusal {
    /// `kopiru flash`: the target does not exist (and is not created: not
    /// without `allow_file`, never under `/dev`).
    NoSuchDevice {
        /// It is under `/dev` and `allow_file` was given.
        under_dev: bool,
    },
    /// `kopiru flash`: the target is not a block device.
    NotABlockDevice {
        /// It is a regular file (`allow_file` would allow it).
        regular_file: bool,
    },
    /// `kopiru flash`: the target file is the image itself.
    IsTheImage,
    /// `kopiru flash`: the target is a partition, not a whole device.
    Partition,
    /// `kopiru flash`: the target holds the root filesystem.
    HoldsRootFs,
    /// `kopiru flash`: the target holds the image being written.
    HoldsImage,
    /// `kopiru flash`: the target (or one of its partitions) is mounted.
    Mounted {
        /// Where.
        at: String,
    },
    /// `kopiru flash`: something built on the target (or on one of its
    /// partitions) is mounted or holds it.
    InUse {
        /// The chain, as a sentence: "/dev/loop3 is mounted on /mnt/x and
        /// is backed by /dev/sdb".
        chain: String,
    },
    /// `kopiru flash`: the kernel will not open the target exclusively
    /// (EBUSY): a filesystem, a device-mapper or RAID set, or another
    /// program holds it.
    DeviceBusy,
    /// `kopiru flash`: the target was named already, under this name or
    /// another (a symlink such as `/dev/disk/by-id/...`), or it is a
    /// partition of a device named too.
    DeviceNamedTwice {
        /// The name given first.
        first: PathBuf,
        /// It is a partition of `first` (else the same device).
        partition: bool,
    },
    /// `kopiru flash`: the target is smaller than the image.
    TooSmall {
        /// The image's size in bytes.
        image: u64,
        /// `image` is only a size it has at least, and where it came from
        /// (`None`: it is the image's size).
        at_least: Option<LeastSize>,
        /// The device's size in bytes.
        device: u64,
    },
}

impl DeviceRefusal {
    /// A stable kebab-case name ([`crate::Refusal::id`]).
    pub fn id(&self) -> &'static str {
        match self {
            DeviceRefusal::NoSuchDevice { .. } => "no-such-device",
            DeviceRefusal::NotABlockDevice { .. } => "not-a-block-device",
            DeviceRefusal::IsTheImage => "is-the-image",
            DeviceRefusal::Partition => "partition",
            DeviceRefusal::HoldsRootFs => "holds-root-filesystem",
            DeviceRefusal::HoldsImage => "holds-image",
            DeviceRefusal::Mounted { .. } => "mounted",
            DeviceRefusal::InUse { .. } => "in-use",
            DeviceRefusal::DeviceBusy => "device-busy",
            DeviceRefusal::DeviceNamedTwice { .. } => "device-named-twice",
            DeviceRefusal::TooSmall { .. } => "too-small",
        }
    }
}

impl fmt::Display for DeviceRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceRefusal::NoSuchDevice { under_dev } => f.write_str(no_such_device(*under_dev)),
            DeviceRefusal::NotABlockDevice { regular_file } => {
                f.write_str(not_a_block_device(*regular_file))
            }
            DeviceRefusal::IsTheImage => f.write_str("is the image itself"),
            DeviceRefusal::Partition => {
                f.write_str("is a partition, not a whole device (force writes it anyway)")
            }
            DeviceRefusal::HoldsRootFs => {
                f.write_str("holds the root filesystem (force writes it anyway)")
            }
            DeviceRefusal::HoldsImage => {
                f.write_str("holds the image being written (force writes it anyway)")
            }
            DeviceRefusal::Mounted { at } => {
                write!(f, "is mounted (at {at}); unmount it first, or force")
            }
            DeviceRefusal::InUse { chain } => write!(
                f,
                "is in use: {chain}; nothing written (unmount or detach that first, or force)"
            ),
            DeviceRefusal::DeviceBusy => f.write_str(
                "is in use: the kernel will not open it exclusively (Device or resource \
                 busy): a filesystem, a device-mapper or RAID set, or another program \
                 holds it; nothing written",
            ),
            DeviceRefusal::DeviceNamedTwice { first, partition } => write!(
                f,
                "{} '{}'; nothing written",
                match partition {
                    false => "is named twice: it is the same device as",
                    true => "is named twice over: it is a partition of",
                },
                crate::paths::Escaped(first.as_os_str())
            ),
            DeviceRefusal::TooSmall {
                image,
                at_least,
                device,
            } => too_small(f, *image, *at_least, *device),
        }
    }
}

impl std::error::Error for DeviceRefusal {}
