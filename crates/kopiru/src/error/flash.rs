//! A flash's refusal data: a block map that cannot be used, an image that
//! is not one, and the words of the device refusals.

use std::fmt;

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

/// `Refusal::NoSuchDevice`'s text.
pub(super) fn no_such_device(under_dev: bool) -> &'static str {
    match under_dev {
        false => "no such device (allow a file target to write the image to a new file)",
        true => "no such device (kopiru never creates files under /dev)",
    }
}

/// `Refusal::NotABlockDevice`'s text.
pub(super) fn not_a_block_device(regular_file: bool) -> &'static str {
    match regular_file {
        false => "not a block device",
        true => "not a block device (allow a file target to write a regular file)",
    }
}

/// `Refusal::TooSmall`'s text.
pub(super) fn too_small(
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
