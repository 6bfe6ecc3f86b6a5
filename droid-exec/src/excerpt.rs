//! Bounded output: keep the last N bytes of a stream and how much was dropped, and render it as a
//! UTF-8 excerpt cut on a character boundary.

/// The last `cap` bytes of a stream.
#[derive(Debug, Clone)]
pub struct Tail {
    cap: usize,
    buf: std::collections::VecDeque<u8>,
    total: u64,
}

impl Tail {
    /// An empty tail keeping at most `cap` bytes.
    pub fn new(cap: usize) -> Self {
        Self {
            cap,
            buf: std::collections::VecDeque::new(),
            total: 0,
        }
    }

    /// Append bytes, dropping the oldest beyond the cap.
    pub fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        if self.cap == 0 {
            return;
        }
        let bytes = if bytes.len() > self.cap {
            &bytes[bytes.len() - self.cap..]
        } else {
            bytes
        };
        let overflow = (self.buf.len() + bytes.len()).saturating_sub(self.cap);
        self.buf.drain(..overflow);
        self.buf.extend(bytes);
    }

    /// Bytes seen in all.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Some bytes were dropped.
    pub fn truncated(&self) -> bool {
        self.total > self.buf.len() as u64
    }

    /// The kept bytes.
    pub fn bytes(&self) -> Vec<u8> {
        self.buf.iter().copied().collect()
    }

    /// The kept bytes as text (lossy), starting on a character boundary.
    pub fn text(&self) -> String {
        let bytes = self.bytes();
        let start = if self.truncated() {
            // skip UTF-8 continuation bytes at the cut
            bytes.iter().position(|b| (b & 0xC0) != 0x80).unwrap_or(0)
        } else {
            0
        };
        String::from_utf8_lossy(&bytes[start..]).into_owned()
    }
}

/// The last `max` bytes of `s`, cut on a character boundary, and whether anything was cut.
pub fn tail_str(s: &str, max: usize) -> (String, bool) {
    if s.len() <= max {
        return (s.to_owned(), false);
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    (s[start..].to_owned(), true)
}

/// The first `max` bytes of `s`, cut on a character boundary, with an ellipsis when cut.
pub fn head_str(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn keeps_the_tail() {
        let mut t = Tail::new(4);
        t.push(b"hello");
        t.push(b" world");
        assert_eq!(t.text(), "orld");
        assert!(t.truncated());
        assert_eq!(t.total(), 11);
    }

    proptest! {
        #[test]
        fn tail_is_bounded_and_valid(s in "\\PC{0,50}", max in 0usize..20) {
            let (t, cut) = tail_str(&s, max);
            prop_assert!(t.len() <= max || !cut);
            prop_assert!(s.ends_with(&t));
            prop_assert_eq!(cut, s.len() > max);
        }

        #[test]
        fn tail_buffer_matches_suffix(chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..10), 0..10), cap in 0usize..16) {
            let mut t = Tail::new(cap);
            let mut all = Vec::new();
            for c in &chunks { t.push(c); all.extend_from_slice(c); }
            let keep = all.len().min(cap);
            prop_assert_eq!(t.bytes(), all[all.len() - keep..].to_vec());
        }
    }
}
