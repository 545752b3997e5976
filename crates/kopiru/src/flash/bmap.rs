//! Block maps (bmaptool's XML format, version 2): parsing, the file's own
//! checksum, and each range's SHA-256 checked as the image streams past.

use crate::{Error, Op, Refusal, Sha256, Side};
use std::path::Path;

pub use crate::error::BmapError;

/// A block map (bmaptool's XML format, version 2): the image's size and
/// the byte ranges that hold data, each with its SHA-256.
#[derive(Clone, Debug)]
pub struct Bmap {
    /// Bytes in the (uncompressed) image.
    pub image_size: u64,
    /// Mapped ranges, ascending, as byte offsets [start, end), with the
    /// SHA-256 of their bytes when the file gives one.
    pub ranges: Vec<(u64, u64, Option<[u8; 32]>)>,
}

impl Bmap {
    /// Reads a bmap file and parses it ([`Bmap::parse`]). The error is on
    /// the source side: an OS error reading `path`, or a refusal
    /// ([`Refusal::Bmap`]).
    pub fn load(path: &Path) -> Result<Bmap, Error> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::io(Side::Source, path, Op::Read, e))?;
        Bmap::parse(&text)
            .map_err(|e| Error::refused(Side::Source, path, Op::Read, Refusal::Bmap(e)))
    }

    /// [`Bmap::load`] for `--bmap`: `what` is a file, an `http://` or
    /// `https://` URL, or `auto`: `image`'s URL with `.bmap` added,
    /// `Ok(None)` where the server has none (404, 410), or where the image
    /// is not a URL.
    ///
    /// # Errors
    /// As [`Bmap::load`]; a URL that cannot be fetched.
    pub fn load_with(
        what: &Path,
        image: &Path,
        http: &super::HttpOptions,
    ) -> Result<Option<Bmap>, Error> {
        let url = match what == Path::new("auto") {
            true if super::is_url(image) => format!("{}.bmap", image.to_string_lossy()),
            true => return Ok(None),
            false if super::is_url(what) => what.to_string_lossy().into_owned(),
            false => return Bmap::load(what).map(Some),
        };
        let failed = |e| Error::io(Side::Source, Path::new(&url), Op::Read, e);
        let text = match super::http::get_text(&url, http).map_err(failed)? {
            Some(t) => t,
            None if what == Path::new("auto") => return Ok(None),
            None => return Err(failed(std::io::Error::other("HTTP 404 Not Found"))),
        };
        Bmap::parse(&text)
            .map(Some)
            .map_err(|e| Error::refused(Side::Source, Path::new(&url), Op::Read, Refusal::Bmap(e)))
    }

    /// Parses a bmap file and checks its own checksum.
    pub fn parse(text: &str) -> Result<Bmap, BmapError> {
        let tag = |name: &str| tag(text, name);
        let num = |name: &'static str| -> Result<u64, BmapError> {
            tag(name)
                .and_then(|v| v.parse().ok())
                .ok_or(BmapError::Missing(name))
        };
        let version = text
            .find("<bmap version=\"")
            .map(|i| &text[i + 15..])
            .and_then(|v| v.split('"').next())
            .ok_or(BmapError::NotBmap)?;
        if !version.starts_with("2.") {
            return Err(BmapError::Version(version.into()));
        }
        if tag("ChecksumType") != Some("sha256") {
            return Err(BmapError::ChecksumType);
        }
        let image_size = num("ImageSize")?;
        let block = num("BlockSize")?;
        let file_sum = tag("BmapFileChecksum").ok_or(BmapError::Missing("BmapFileChecksum"))?;
        // The file's checksum is taken with its own value replaced by zeros.
        let zeroed = text.replacen(file_sum, &"0".repeat(file_sum.len()), 1);
        if Sha256::of(zeroed.as_bytes()).to_string() != file_sum {
            return Err(BmapError::OwnChecksum);
        }
        let ranges = parse_ranges(text, block, image_size)?;
        Ok(Bmap { image_size, ranges })
    }
}

/// The trimmed text of the first `<name>...</name>` element.
fn tag<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<{name}>");
    let i = text.find(&open)? + open.len();
    let j = text[i..].find(&format!("</{name}>"))? + i;
    Some(text[i..j].trim())
}

/// Byte ranges [start, end) with their SHA-256, as in [`Bmap::ranges`].
type Ranges = Vec<(u64, u64, Option<[u8; 32]>)>;

/// Every `<Range chksum="...">a-b</Range>` (block numbers, inclusive) as
/// byte offsets [start, end), ascending and within the image.
fn parse_ranges(text: &str, block: u64, image_size: u64) -> Result<Ranges, BmapError> {
    let mut ranges: Ranges = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("<Range") {
        rest = &rest[i..];
        let end = rest.find("</Range>").ok_or(BmapError::Malformed)?;
        let item = &rest[..end];
        rest = &rest[end..];
        let sum = item
            .find("chksum=\"")
            .map(|i| &item[i + 8..])
            .and_then(|v| v.split('"').next())
            .map(|s| {
                s.parse::<Sha256>()
                    .map(|h| h.0)
                    .map_err(|_| BmapError::BadChecksum(s.into()))
            })
            .transpose()?;
        let span = item[item.find('>').ok_or(BmapError::Malformed)? + 1..].trim();
        let (a, b) = match span.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (span, span),
        };
        let (a, b): (u64, u64) = (
            a.parse().map_err(|_| BmapError::BadRange(span.into()))?,
            b.parse().map_err(|_| BmapError::BadRange(span.into()))?,
        );
        // Saturating: block numbers past 64 bits of bytes are past the
        // image (refused below), and a last block past them is cut at its
        // end like any last block.
        let start = a.saturating_mul(block);
        let stop = b.saturating_add(1).saturating_mul(block).min(image_size);
        if start >= stop || ranges.last().is_some_and(|&(_, e, _)| start < e) {
            return Err(BmapError::RangeOrder(span.into()));
        }
        ranges.push((start, stop, sum));
    }
    Ok(ranges)
}

/// Checks each block-map range's SHA-256 as the image streams past.
pub(crate) struct RangeSums {
    ranges: Vec<(u64, u64, Option<[u8; 32]>)>,
    next: usize,
    hasher: sha2::Sha256,
}

impl RangeSums {
    pub(crate) fn new(ranges: &[(u64, u64, Option<[u8; 32]>)]) -> RangeSums {
        use sha2::Digest;
        RangeSums {
            ranges: ranges.to_vec(),
            next: 0,
            hasher: sha2::Sha256::new(),
        }
    }

    /// The next image bytes, `data` at offset `off`: every range that ends
    /// within them is checked.
    pub(crate) fn feed(&mut self, off: u64, data: &[u8]) -> Result<(), BmapError> {
        use sha2::Digest;
        let end = off + data.len() as u64;
        while let Some(&(a, b, sum)) = self.ranges.get(self.next) {
            if a >= end {
                return Ok(());
            }
            let (x, y) = (a.max(off), b.min(end));
            self.hasher
                .update(&data[(x - off) as usize..(y - off) as usize]);
            if b > end {
                return Ok(());
            }
            let got: [u8; 32] = std::mem::take(&mut self.hasher).finalize().into();
            if sum.is_some_and(|s| s != got) {
                return Err(BmapError::RangeChecksum { start: a, end: b });
            }
            self.next += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bmap file as bmaptool writes it (abridged), for an image of
    /// `image_size` bytes in 4 KiB blocks, with its own checksum filled in.
    fn bmap_text(image_size: u64, ranges: &[(&str, &[u8])]) -> String {
        seal(&unsealed(image_size, ranges))
    }

    /// [`bmap_text`] with zeros for its own checksum.
    fn unsealed(image_size: u64, ranges: &[(&str, &[u8])]) -> String {
        let mut body = String::new();
        for (span, bytes) in ranges {
            body.push_str(&format!(
                "        <Range chksum=\"{}\"> {span} </Range>\n",
                Sha256::of(bytes)
            ));
        }
        let text = format!(
            "<?xml version=\"1.0\" ?>\n<bmap version=\"2.0\">\n    \
             <ImageSize> {image_size} </ImageSize>\n    <BlockSize> 4096 </BlockSize>\n    \
             <BlocksCount> {} </BlocksCount>\n    <MappedBlocksCount> 3 </MappedBlocksCount>\n    \
             <ChecksumType> sha256 </ChecksumType>\n    \
             <BmapFileChecksum> {} </BmapFileChecksum>\n    <BlockMap>\n{body}    </BlockMap>\n</bmap>\n",
            image_size.div_ceil(4096),
            "0".repeat(64)
        );
        text
    }

    /// Fills in the file's own checksum.
    fn seal(text: &str) -> String {
        let sum = Sha256::of(text.as_bytes()).to_string();
        text.replacen(&"0".repeat(64), &sum, 1)
    }

    #[test]
    fn parses_a_good_file() {
        let a = vec![1u8; 8192];
        let b = vec![2u8; 1000];
        let text = bmap_text(10_000 + 4096, &[("0-1", &a), ("3", &b)]);
        let m = Bmap::parse(&text).expect("parses");
        assert_eq!(m.image_size, 14_096);
        assert_eq!(m.ranges.len(), 2);
        assert_eq!((m.ranges[0].0, m.ranges[0].1), (0, 8192));
        assert_eq!(m.ranges[0].2, Some(Sha256::of(&a).0));
        // The last block ends where the image does.
        assert_eq!((m.ranges[1].0, m.ranges[1].1), (3 * 4096, 14_096));
    }

    #[test]
    fn refuses_a_changed_file() {
        let text = bmap_text(1 << 20, &[("0-1", &[1u8; 8192]), ("10-12", &[0u8; 3])]);
        let edited = text.replace("> 10-12 <", "> 10-13 <");
        let e = Bmap::parse(&edited).expect_err("edited");
        assert_eq!(e, BmapError::OwnChecksum);
        assert!(e.to_string().contains("own checksum does not match"), "{e}");
    }

    #[test]
    fn refuses_bad_ranges() {
        let bad = |spans: &[&str]| {
            let ranges: Vec<(&str, &[u8])> = spans.iter().map(|s| (*s, &[][..])).collect();
            Bmap::parse(&bmap_text(1 << 20, &ranges)).expect_err("refused")
        };
        assert_eq!(bad(&["5-6", "2-3"]), BmapError::RangeOrder("2-3".into()));
        assert_eq!(bad(&["0-3", "3-4"]), BmapError::RangeOrder("3-4".into()));
        assert_eq!(bad(&["300-400"]), BmapError::RangeOrder("300-400".into()));
        assert!(bad(&["300-400"]).to_string().contains("past the image"));
        assert_eq!(bad(&["1-x"]), BmapError::BadRange("1-x".into()));
        // Block numbers whose byte offsets do not fit in 64 bits: past the
        // image, not wrapped around to its start.
        let huge = (u64::MAX / 4096 + 1).to_string();
        assert_eq!(bad(&[&huge]), BmapError::RangeOrder(huge.clone()));
        let ok = Bmap::parse(&bmap_text(1 << 20, &[(&format!("0-{}", u64::MAX), &[])]))
            .expect("a last range past the image's end is cut there");
        assert_eq!((ok.ranges[0].0, ok.ranges[0].1), (0, 1 << 20));
        assert_eq!(bad(&["1-x"]).to_string(), "bad range '1-x'");
        let long = seal(&unsealed(1 << 20, &[("0", &[])]).replace("chksum=\"", "chksum=\"ab"));
        let e = Bmap::parse(&long).expect_err("a 66-digit checksum");
        assert!(matches!(e, BmapError::BadChecksum(_)), "{e}");
    }

    #[test]
    fn refuses_other_versions_and_sums() {
        let text = bmap_text(1 << 20, &[("0", &[])]);
        let v1 = text.replace("version=\"2.0\"", "version=\"1.4\"");
        assert_eq!(
            Bmap::parse(&v1).unwrap_err(),
            BmapError::Version("1.4".into())
        );
        let md5 = text.replace("sha256", "md5");
        assert_eq!(Bmap::parse(&md5).unwrap_err(), BmapError::ChecksumType);
        assert_eq!(Bmap::parse("hello").unwrap_err(), BmapError::NotBmap);
        let no_size = text.replace("ImageSize", "Size");
        assert_eq!(
            Bmap::parse(&no_size).unwrap_err(),
            BmapError::Missing("ImageSize")
        );
    }

    #[test]
    fn range_sums_check_across_pieces() {
        let data: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        let ranges = vec![
            (100, 5000, Some(Sha256::of(&data[100..5000]).0)),
            (6000, 19_000, Some(Sha256::of(&data[6000..19_000]).0)),
        ];
        let mut good = RangeSums::new(&ranges);
        for (i, piece) in data.chunks(3000).enumerate() {
            good.feed(i as u64 * 3000, piece).expect("matches");
        }
        let mut changed = data.clone();
        changed[7000] ^= 1;
        let mut bad = RangeSums::new(&ranges);
        let e = changed
            .chunks(3000)
            .enumerate()
            .try_for_each(|(i, piece)| bad.feed(i as u64 * 3000, piece))
            .expect_err("caught");
        assert_eq!(
            e,
            BmapError::RangeChecksum {
                start: 6000,
                end: 19_000
            }
        );
    }
}
