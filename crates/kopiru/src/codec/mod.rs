//! The compressed formats of images, in one table ([`CODECS`]): each
//! format's name, the file names that claim it, its magic number, its
//! decoder (`kopiru flash`, `kopiru image`'s read-back), its encoder where
//! `kopiru image` writes it, and where its decoded size is recorded.
//! `flash` recognises images by it, `image` picks its encoder by it, and
//! the command line and the Node binding take their `--format`/`format`
//! names from it through [`Choice`].

mod decode;
mod encode;
mod gz_pool;
pub(crate) mod size;
mod xz_out;

pub use decode::DEFAULT_MEMORY;
pub(crate) use encode::{Encode, OUT_BUF};

use crate::Choice;
use std::fmt;
use std::path::Path;

/// An image's format (raw, or how it is compressed): the rows of the
/// codec table (`CODECS` in crates/kopiru/src/codec/mod.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// Written as it is.
    Raw,
    /// xz (`.xz`).
    Xz,
    /// gzip (`.gz`).
    Gzip,
    /// zstd (`.zst`).
    Zstd,
    /// bzip2 (`.bz2`).
    Bzip2,
}

/// One format: everything kopiru knows of it.
pub(crate) struct Codec {
    /// The row's format.
    pub format: Format,
    /// As `--format`, `--json` and Node spell it.
    pub name: &'static str,
    /// One line for `--format`'s help.
    pub about: &'static str,
    /// Other names `--format` takes (not listed in its help).
    pub aliases: &'static [&'static str],
    /// File extensions (lower-case) that claim this format for
    /// `kopiru flash`: an image so named must be it (raw's are the usual
    /// names of disk images, a claim the bytes need not prove).
    pub extensions: &'static [&'static str],
    /// Whether an image's first bytes are this format (raw: never, it is
    /// known by what it is not).
    pub magic: fn(&[u8]) -> bool,
    /// The decoder into flash's buffers.
    pub decode: decode::Decoder,
    /// The decoder as a reader (`kopiru image`'s read-back).
    pub read: decode::Reader,
    /// What the format records of its decoded size.
    pub size: size::SizeReader,
    /// How `kopiru image` writes it, if it does (raw: none, written as it
    /// is, with holes).
    pub encoder: Option<Encoder>,
}

/// How `kopiru image` writes a format.
pub(crate) struct Encoder {
    /// The output names (exact extension) that choose it.
    pub extensions: &'static [&'static str],
    /// The levels it takes, least and most.
    pub levels: (i32, i32),
    /// The default level (chosen by measurement: see below).
    pub default_level: i32,
    /// Its constructor.
    pub new: encode::NewEncoder,
}

/// The table. Adding a format touches this folder only:
/// - a variant of [`Format`] and its row here, with its name, `about`
///   (its line in `kopiru flash --help`), `--format` aliases, the file
///   extensions that claim it, and its magic test (the rows are in
///   [`Format`]'s order, which `--help` lists; a compile-time assertion
///   below checks it);
/// - its decoder (into flash's buffers) and its decoding reader (image's
///   read-back) in decode.rs: two small functions over a decoding crate
///   (added to crates/kopiru/Cargo.toml) or sys/;
/// - where it records its decoded size, a reader in size.rs (else
///   `size::unrecorded`);
/// - if `kopiru image` should write it, an [`Encode`] in encode.rs (or a
///   file beside it) and `encoder: Some(..)` with the output extensions
///   that choose it, its levels and default level.
///
/// Everything else reads the table: flash's sniffing and its refusal
/// messages, image's choice of encoder and its `--level` check, the
/// command line's `--format` (names, aliases, help, parser), the Node
/// binding's `choices.format` (which `index.js` checks against), and
/// `kopiru::fuzzing`'s decoder. Not generated, and worth a look: the
/// literal union in bindings/node/index.d.ts (a test there fails until it
/// lists the new name), prose that names formats (`--help` texts in
/// kopiru-cli's args.rs, docs/, the gui page's hint), the fuzz target
/// `decoded_size`'s per-format expectations, and, for a format whose size
/// is only a lower bound, `LeastSize` (error/flash.rs) and flash/targets.rs,
/// which name where that bound comes from.
///
/// Default levels, chosen by measurement (C tools on two threads, `-T2`,
/// on the 2-core machine this was built on; docs/BENCHMARKS.md). Two
/// samples: a 256 MiB tar of /usr/lib and /usr/share (dense files), and
/// 256 MiB from the middle of a 1 GiB ext4 image of such files (what an
/// image looks like: files, metadata, free space).
/// - zstd 3 (zstd's default): tar 420 MB/s, 130.5 MB; ext4 slice 38.3
///   MB. Level 1 is 33 % faster for 6 % more; 9 is 4.6x slower for 5 %
///   (tar) to 14 % (ext4) less. zstd is the format for speed: level 3
///   keeps up with an NVMe drive, and `kopiru image` at 3 matches
///   `dd | zstd -T0 -3` (docs/BENCHMARKS.md).
/// - xz 2: ext4 slice 35.0 MB in 7.2 s (36 MB/s), 9 % smaller than
///   zstd 3. Level 0 is faster (3.9 s) but 42 % larger than level 1,
///   and larger than zstd 3 on both samples; level 1 is zstd 3's size
///   (39.5 MB, 5.0 s), so .xz would buy nothing; 3 is 33.1 MB in 11 s,
///   6 (xz's default) 29.8 MB in 24.8 s and 260 MB of memory. Level 2
///   is the first that makes .xz worth choosing, and still keeps up
///   with an SD card being read. `--level 6` gives xz's usual trade.
/// - gzip 6 (gzip's default): tar 30 MB/s a thread, 138.3 MB; level 1
///   is 54 MB/s a thread for 5 % more. Chunks are compressed in
///   parallel, so two threads give about 60 MB/s.
pub(crate) const CODECS: [Codec; 5] = [
    Codec {
        format: Format::Raw,
        name: "raw",
        about: "Write the bytes as they are, whatever they look like",
        aliases: &[],
        extensions: &[
            "img", "iso", "raw", "bin", "dd", "hdd", "hddimg", "wic", "sdcard", "sdimg", "direct",
            "image",
        ],
        magic: |_| false,
        decode: decode::raw,
        read: decode::read_raw,
        size: size::raw,
        encoder: None,
    },
    Codec {
        format: Format::Xz,
        name: "xz",
        about: "Require xz",
        aliases: &[],
        extensions: &["xz", "txz"],
        magic: |h| h.starts_with(&[0xFD, b'7', b'z', b'X', b'Z', 0]),
        decode: decode::xz,
        read: decode::read_xz,
        size: size::xz,
        encoder: Some(Encoder {
            extensions: &["xz"],
            levels: (0, 9),
            default_level: 2,
            new: encode::new_xz,
        }),
    },
    Codec {
        format: Format::Gzip,
        name: "gzip",
        about: "Require gzip",
        aliases: &["gz"],
        extensions: &["gz", "gzip", "tgz"],
        magic: |h| h.starts_with(&[0x1F, 0x8B]),
        decode: decode::gzip,
        read: decode::read_gzip,
        size: size::gzip,
        encoder: Some(Encoder {
            extensions: &["gz"],
            levels: (1, 9),
            default_level: 6,
            new: encode::new_gzip,
        }),
    },
    Codec {
        format: Format::Zstd,
        name: "zstd",
        about: "Require zstd",
        aliases: &["zst"],
        extensions: &["zst", "zstd", "tzst"],
        magic: |h| h.starts_with(&[0x28, 0xB5, 0x2F, 0xFD]),
        decode: decode::zstd,
        read: decode::read_zstd,
        size: size::zstd,
        encoder: Some(Encoder {
            extensions: &["zst", "zstd"],
            levels: (1, 19),
            default_level: 3,
            new: encode::new_zstd,
        }),
    },
    Codec {
        format: Format::Bzip2,
        name: "bzip2",
        about: "Require bzip2",
        aliases: &["bz2"],
        extensions: &["bz2", "bzip2", "tbz2"],
        magic: |h| matches!(h, [b'B', b'Z', b'h', b'1'..=b'9', ..]),
        decode: decode::bzip2,
        read: decode::read_bzip2,
        size: size::unrecorded,
        encoder: None,
    },
];

/// [`CODECS`]' rows are in [`Format`]'s order: `codec()` indexes by it.
const _: () = {
    let mut i = 0;
    while i < CODECS.len() {
        assert!(
            CODECS[i].format as usize == i,
            "CODECS is in Format's order"
        );
        i += 1;
    }
};

impl Format {
    /// Every format, in the order `--help` lists them.
    pub const ALL: &'static [Format] = &{
        let mut all = [Format::Raw; CODECS.len()];
        let mut i = 0;
        while i < CODECS.len() {
            all[i] = CODECS[i].format;
            i += 1;
        }
        all
    };

    /// Its row of the table.
    pub(crate) fn codec(self) -> &'static Codec {
        &CODECS[self as usize]
    }

    /// Its name, as `--format` and `--json` spell it.
    pub fn name(self) -> &'static str {
        self.codec().name
    }

    /// Other names `--format` takes for it (`gz`, `zst`, `bz2`).
    pub fn aliases(self) -> &'static [&'static str] {
        self.codec().aliases
    }

    /// The compressed format whose magic number `head` starts with.
    pub(crate) fn of_magic(head: &[u8]) -> Option<Format> {
        CODECS.iter().find(|c| (c.magic)(head)).map(|c| c.format)
    }

    /// The format a file name claims by its extension (any case): a
    /// compressed one, or raw for the usual names of disk images.
    pub(crate) fn claimed_by(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        CODECS
            .iter()
            .find(|c| c.extensions.contains(&ext.as_str()))
            .map(|c| c.format)
    }

    /// The format `kopiru image` writes to `output`, by its extension
    /// (`.zst`/`.zstd`, `.xz`, `.gz`): anything else is raw.
    pub fn of_output(output: &Path) -> Format {
        let ext = output.extension().and_then(|e| e.to_str());
        CODECS
            .iter()
            .find(|c| {
                c.encoder
                    .as_ref()
                    .is_some_and(|e| ext.is_some_and(|x| e.extensions.contains(&x)))
            })
            .map_or(Format::Raw, |c| c.format)
    }

    /// The compression levels `kopiru image` takes for it (none for raw).
    pub fn levels(self) -> Option<(i32, i32)> {
        self.codec().encoder.as_ref().map(|e| e.levels)
    }

    /// Whether `kopiru image` takes `level` for this format: the reason
    /// it does not ("zstd takes 1 to 19", "a raw image is not
    /// compressed (...)"), for the front ends to prefix with their
    /// option's name.
    ///
    /// # Errors
    /// The level is out of the format's range, or the format is raw.
    pub fn check_level(self, level: i32) -> Result<(), String> {
        match self.levels() {
            Some((lo, hi)) if (lo..=hi).contains(&level) => Ok(()),
            Some((lo, hi)) => Err(format!("{self} takes {lo} to {hi}")),
            None if self != Format::Raw => Err(format!("images are not written as {self}")),
            None => {
                let exts: Vec<String> = CODECS
                    .iter()
                    .filter_map(|c| c.encoder.as_ref())
                    .flat_map(|e| e.extensions.iter().map(|x| format!(".{x}")))
                    .collect();
                Err(format!(
                    "a raw image is not compressed (the output's extension: {})",
                    exts.join(", ")
                ))
            }
        }
    }

    /// The default compression level (0 for raw).
    pub fn default_level(self) -> i32 {
        self.codec().encoder.as_ref().map_or(0, |e| e.default_level)
    }

    /// The compressed formats' names, "xz, gzip, zstd or bzip2", for
    /// messages (each front end's words for a refused image name them).
    pub fn compressed_names() -> String {
        let names: Vec<&str> = CODECS.iter().skip(1).map(|c| c.name).collect();
        match names.split_last() {
            Some((last, [])) => last.to_string(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        }
    }
}

impl Choice for Format {
    const CHOICES: &'static [(Self, &'static str, &'static str)] = &{
        let mut all = [(Format::Raw, "", ""); CODECS.len()];
        let mut i = 0;
        while i < CODECS.len() {
            all[i] = (CODECS[i].format, CODECS[i].name, CODECS[i].about);
            i += 1;
        }
        all
    };

    fn parse(name: &str) -> Result<Self, String> {
        CODECS
            .iter()
            .find(|c| c.name == name || c.aliases.contains(&name))
            .map(|c| c.format)
            .ok_or_else(|| {
                let names: Vec<&str> = CODECS.iter().map(|c| c.name).collect();
                format!("unknown image format {name:?} ({})", names.join(", "))
            })
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Format, String> {
        <Format as Choice>::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_names() {
        for &f in Format::ALL {
            assert_eq!(f.name().parse::<Format>(), Ok(f));
            assert_eq!(f.codec().format, f);
        }
        assert_eq!("zst".parse::<Format>(), Ok(Format::Zstd));
        assert_eq!("gz".parse::<Format>(), Ok(Format::Gzip));
        assert!("rar".parse::<Format>().is_err());
        assert_eq!(Format::compressed_names(), "xz, gzip, zstd or bzip2");
    }

    #[test]
    fn image_encodes_by_output_extension() {
        for (name, f) in [
            ("a.img.zst", Format::Zstd),
            ("a.zstd", Format::Zstd),
            ("a.xz", Format::Xz),
            ("a.gz", Format::Gzip),
            ("a.img", Format::Raw),
            ("a.bz2", Format::Raw),
            ("a.tgz", Format::Raw),
            ("a.GZ", Format::Raw),
            ("noext", Format::Raw),
        ] {
            assert_eq!(Format::of_output(Path::new(name)), f, "{name}");
        }
        assert_eq!(Format::Bzip2.levels(), None);
        assert_eq!(Format::Zstd.check_level(19), Ok(()));
        assert_eq!(
            Format::Zstd.check_level(20),
            Err("zstd takes 1 to 19".into())
        );
        assert_eq!(
            Format::Raw.check_level(3),
            Err(
                "a raw image is not compressed (the output's extension: .xz, .gz, .zst, .zstd)"
                    .into()
            )
        );
        // A format read but never written has no levels to check.
        assert_eq!(
            Format::Bzip2.check_level(9),
            Err("images are not written as bzip2".into())
        );
        assert_eq!(Format::Zstd.levels(), Some((1, 19)));
    }
}
