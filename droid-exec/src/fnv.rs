//! 64-bit FNV-1a: tiny, std-only, and plenty to tell an edited file from an untouched one or to
//! name a repository's lock. Not for anything an adversary chooses to collide.

/// A running FNV-1a hash.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fnv1a(u64);

impl Fnv1a {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    pub(crate) fn new() -> Self {
        Self(Self::OFFSET)
    }

    pub(crate) fn update(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }

    pub(crate) fn finish(self) -> u64 {
        self.0
    }
}

/// The hash of `bytes` as 16 hex digits.
pub fn hex(bytes: &[u8]) -> String {
    let mut h = Fnv1a::new();
    h.update(bytes);
    format!("{:016x}", h.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_reference_vectors() {
        let hash = |bytes: &[u8]| {
            let mut h = Fnv1a::new();
            h.update(bytes);
            h.finish()
        };
        assert_eq!(hash(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(hash(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(hash(b"foobar"), 0x8594_4171_f739_67e8);
        assert_eq!(hex(b"a"), "af63dc4c8601ec8c");
    }
}
