//! Block maps (bmaptool's XML format, version 2): parsing, the file's own
//! checksum, and each range's SHA-256 checked as the image streams past.

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
    /// Parses a bmap file and checks its own checksum.
    pub fn parse(text: &str) -> Result<Bmap, String> {
        let tag = |name: &str| tag(text, name);
        let num = |name: &str| -> Result<u64, String> {
            tag(name)
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("no <{name}>"))
        };
        let version = text
            .find("<bmap version=\"")
            .map(|i| &text[i + 15..])
            .and_then(|v| v.split('"').next())
            .ok_or("not a bmap file")?;
        if !version.starts_with("2.") {
            return Err(format!("bmap version {version} is not supported (2.x is)"));
        }
        if tag("ChecksumType") != Some("sha256") {
            return Err("only sha256 bmap checksums are supported".into());
        }
        let image_size = num("ImageSize")?;
        let block = num("BlockSize")?;
        let file_sum = tag("BmapFileChecksum").ok_or("no <BmapFileChecksum>")?;
        // The file's checksum is taken with its own value replaced by zeros.
        let zeroed = text.replacen(file_sum, &"0".repeat(file_sum.len()), 1);
        if hex(&sha256(zeroed.as_bytes())) != file_sum {
            return Err("the bmap file's own checksum does not match: damaged or edited".into());
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
fn parse_ranges(text: &str, block: u64, image_size: u64) -> Result<Ranges, String> {
    let mut ranges: Ranges = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("<Range") {
        rest = &rest[i..];
        let end = rest.find("</Range>").ok_or("unterminated <Range>")?;
        let item = &rest[..end];
        rest = &rest[end..];
        let sum = item
            .find("chksum=\"")
            .map(|i| &item[i + 8..])
            .and_then(|v| v.split('"').next())
            .map(unhex)
            .transpose()?;
        let span = item[item.find('>').ok_or("bad <Range>")? + 1..].trim();
        let (a, b) = match span.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (span, span),
        };
        let (a, b): (u64, u64) = (
            a.parse().map_err(|_| format!("bad range '{span}'"))?,
            b.parse().map_err(|_| format!("bad range '{span}'"))?,
        );
        let start = a * block;
        let stop = ((b + 1) * block).min(image_size);
        if start >= stop || ranges.last().is_some_and(|&(_, e, _)| start < e) {
            return Err(format!("range '{span}' is out of order or past the image"));
        }
        ranges.push((start, stop, sum));
    }
    Ok(ranges)
}

fn sha256(data: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(data).into()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Result<[u8; 32], String> {
    let mut out = [0u8; 32];
    if s.len() != 64 {
        return Err(format!("bad checksum '{s}'"));
    }
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16)
            .map_err(|_| format!("bad checksum '{s}'"))?;
    }
    Ok(out)
}

/// Checks each block-map range's SHA-256 as the image streams past.
pub(super) struct RangeSums {
    ranges: Vec<(u64, u64, Option<[u8; 32]>)>,
    next: usize,
    hasher: sha2::Sha256,
}

impl RangeSums {
    pub(super) fn new(ranges: &[(u64, u64, Option<[u8; 32]>)]) -> RangeSums {
        use sha2::Digest;
        RangeSums {
            ranges: ranges.to_vec(),
            next: 0,
            hasher: sha2::Sha256::new(),
        }
    }

    /// The next image bytes, `data` at offset `off`: every range that ends
    /// within them is checked.
    pub(super) fn feed(&mut self, off: u64, data: &[u8]) -> Result<(), String> {
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
                return Err(format!(
                    "bytes {a}-{b} do not match the checksum in the bmap file"
                ));
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
    pub(crate) fn bmap_text(image_size: u64, ranges: &[(&str, &[u8])]) -> String {
        let mut body = String::new();
        for (span, bytes) in ranges {
            body.push_str(&format!(
                "        <Range chksum=\"{}\"> {span} </Range>\n",
                hex(&sha256(bytes))
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
        let sum = hex(&sha256(text.as_bytes()));
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
        assert_eq!(m.ranges[0].2, Some(sha256(&a)));
        // The last block ends where the image does.
        assert_eq!((m.ranges[1].0, m.ranges[1].1), (3 * 4096, 14_096));
    }

    #[test]
    fn refuses_a_changed_file() {
        let text = bmap_text(1 << 20, &[("0-1", &[1u8; 8192]), ("10-12", &[0u8; 3])]);
        let edited = text.replace("> 10-12 <", "> 10-13 <");
        let e = Bmap::parse(&edited).expect_err("edited");
        assert!(e.contains("own checksum does not match"), "{e}");
    }

    #[test]
    fn refuses_bad_ranges() {
        let bad = |spans: &[&str]| {
            let ranges: Vec<(&str, &[u8])> = spans.iter().map(|s| (*s, &[][..])).collect();
            Bmap::parse(&bmap_text(1 << 20, &ranges)).expect_err("refused")
        };
        assert!(bad(&["5-6", "2-3"]).contains("out of order"));
        assert!(bad(&["0-3", "3-4"]).contains("out of order"));
        assert!(bad(&["300-400"]).contains("past the image"));
        assert!(bad(&["1-x"]).contains("bad range '1-x'"));
        let short = bmap_text(1 << 20, &[("0", &[])]).replace("chksum=\"", "chksum=\"ab");
        assert!(Bmap::parse(&short).is_err());
    }

    #[test]
    fn refuses_other_versions_and_sums() {
        let text = bmap_text(1 << 20, &[("0", &[])]);
        let v1 = text.replace("version=\"2.0\"", "version=\"1.4\"");
        assert!(Bmap::parse(&v1).expect_err("v1").contains("not supported"));
        let md5 = text.replace("sha256", "md5");
        assert!(Bmap::parse(&md5).expect_err("md5").contains("sha256"));
        assert!(Bmap::parse("hello")
            .expect_err("junk")
            .contains("not a bmap"));
    }

    #[test]
    fn range_sums_check_across_pieces() {
        let data: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        let ranges = vec![
            (100, 5000, Some(sha256(&data[100..5000]))),
            (6000, 19_000, Some(sha256(&data[6000..19_000]))),
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
        assert!(e.contains("bytes 6000-19000"), "{e}");
    }
}
