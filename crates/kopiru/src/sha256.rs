//! SHA-256 sums as kopiru takes them (`--sha256`, a block map's checksums,
//! Node's `sha256`) and gives them (`--json`, messages): 64 hexadecimal
//! digits, printed in lower case. The one hex encoder of the crate is here.

use std::fmt;
use std::str::FromStr;

/// A SHA-256 sum. Parsed from 64 hexadecimal digits (either case, nothing
/// else: trim first); displayed as 64 lower-case ones.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sha256(pub [u8; 32]);

impl Sha256 {
    /// The SHA-256 of `data`.
    pub fn of(data: &[u8]) -> Sha256 {
        use sha2::Digest;
        Sha256(sha2::Sha256::digest(data).into())
    }

    /// The sum of what `hasher` was fed.
    pub(crate) fn of_hasher(hasher: sha2::Sha256) -> Sha256 {
        Sha256(sha2::Digest::finalize(hasher).into())
    }
}

/// Why a text is not a SHA-256.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotSha256;

impl fmt::Display for NotSha256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a SHA-256 is 64 hexadecimal digits")
    }
}

impl std::error::Error for NotSha256 {}

impl FromStr for Sha256 {
    type Err = NotSha256;
    fn from_str(s: &str) -> Result<Sha256, NotSha256> {
        let digit = |c: u8| (c as char).to_digit(16).ok_or(NotSha256);
        let s = s.as_bytes();
        if s.len() != 64 {
            return Err(NotSha256);
        }
        let mut out = [0u8; 32];
        for (o, pair) in out.iter_mut().zip(s.chunks_exact(2)) {
            *o = (digit(pair[0])? << 4 | digit(pair[1])?) as u8;
        }
        Ok(Sha256(out))
    }
}

impl fmt::Display for Sha256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex(&self.0))
    }
}

impl fmt::Debug for Sha256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sha256({self})")
    }
}

impl From<[u8; 32]> for Sha256 {
    fn from(b: [u8; 32]) -> Sha256 {
        Sha256(b)
    }
}

/// `bytes` in lower-case hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_hex() {
        let empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        assert_eq!(Sha256::of(b"").to_string(), empty);
        assert_eq!(empty.parse::<Sha256>(), Ok(Sha256::of(b"")));
        assert_eq!(
            empty.to_ascii_uppercase().parse::<Sha256>(),
            Ok(Sha256::of(b""))
        );
        for bad in [
            &empty[1..],
            &format!("{empty}0"),
            &format!("+{}", &empty[1..]),
            &format!("g{}", &empty[1..]),
            &format!(" {}", &empty[1..]),
            "",
        ] {
            assert_eq!(bad.parse::<Sha256>(), Err(NotSha256), "{bad:?}");
        }
        // Multi-byte characters of 64 bytes are not digits either.
        assert!("é".repeat(32).parse::<Sha256>().is_err());
        assert_eq!(hex(&[0, 0x0f, 0xa0, 0xff]), "000fa0ff");
    }
}
