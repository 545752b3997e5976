//! What the fuzz targets share: the fuzzer's bytes read as several inputs.

/// The fuzzer's bytes, taken apart from the front.
pub struct Bytes<'a>(pub &'a [u8]);

impl<'a> Bytes<'a> {
    /// The next byte (0 once none are left).
    pub fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    /// A little-endian number of the next `n` bytes (at most 8).
    pub fn number(&mut self, n: usize) -> u64 {
        (0..n.min(8)).fold(0, |v, i| v | u64::from(self.byte()) << (8 * i))
    }

    /// A part whose length is the next byte.
    pub fn part(&mut self) -> &'a [u8] {
        let n = usize::from(self.byte()).min(self.0.len());
        let (part, rest) = self.0.split_at(n);
        self.0 = rest;
        part
    }

    /// What is left.
    pub fn rest(self) -> &'a [u8] {
        self.0
    }
}
