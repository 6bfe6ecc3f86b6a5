//! Incremental NDJSON framing with a bounded line buffer: a line longer than the limit is cut,
//! reported once with its length, and skipped, instead of being buffered forever.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// droid's longest real lines are under 1 KiB (large Execute output is truncated by droid itself);
/// 8 MiB leaves room for huge tool parameters without letting a runaway line eat memory.
pub const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;

/// One framed item.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A complete line without its newline (a final unterminated line counts too).
    Text(Vec<u8>),
    /// A line over the limit: its length in bytes; its content was dropped.
    Oversized(u64),
}

/// Reads lines from `R`, at most `max` bytes each.
#[derive(Debug)]
pub struct Lines<R> {
    reader: R,
    max: usize,
    buf: Vec<u8>,
    skipping: Option<u64>,
}

impl<R: AsyncBufRead + Unpin> Lines<R> {
    /// Frame `reader` with lines of at most `max` bytes.
    pub fn new(reader: R, max: usize) -> Self {
        Self {
            reader,
            max,
            buf: Vec::new(),
            skipping: None,
        }
    }

    /// The next line, or `None` at end of stream (or on a read error, which ends the stream too).
    pub async fn next(&mut self) -> Option<Line> {
        loop {
            let chunk = match self.reader.fill_buf().await {
                Ok(c) => c,
                Err(_) => return self.finish(),
            };
            if chunk.is_empty() {
                return self.finish();
            }
            let (piece, consumed, ended) = match memchr_newline(chunk) {
                Some(i) => (&chunk[..i], i + 1, true),
                None => (chunk, chunk.len(), false),
            };
            if let Some(n) = self.skipping.as_mut() {
                *n += piece.len() as u64;
            } else if self.buf.len() + piece.len() > self.max {
                self.skipping = Some((self.buf.len() + piece.len()) as u64);
                self.buf = Vec::new();
            } else {
                self.buf.extend_from_slice(piece);
            }
            self.reader.consume(consumed);
            if ended {
                if let Some(n) = self.skipping.take() {
                    return Some(Line::Oversized(n));
                }
                return Some(Line::Text(std::mem::take(&mut self.buf)));
            }
        }
    }

    fn finish(&mut self) -> Option<Line> {
        if let Some(n) = self.skipping.take() {
            return Some(Line::Oversized(n));
        }
        if self.buf.is_empty() {
            None
        } else {
            Some(Line::Text(std::mem::take(&mut self.buf)))
        }
    }
}

fn memchr_newline(b: &[u8]) -> Option<usize> {
    b.iter().position(|c| *c == b'\n')
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    async fn all(input: &[u8], max: usize, cap: usize) -> Vec<Line> {
        let r = tokio::io::BufReader::with_capacity(cap, input);
        let mut l = Lines::new(r, max);
        let mut out = Vec::new();
        while let Some(x) = l.next().await {
            out.push(x);
        }
        out
    }

    #[tokio::test]
    async fn frames_and_bounds() {
        let got = all(b"a\nbbbbbbbbbb\n\nccc", 4, 3).await;
        assert_eq!(
            got,
            vec![
                Line::Text(b"a".to_vec()),
                Line::Oversized(10),
                Line::Text(Vec::new()),
                Line::Text(b"ccc".to_vec())
            ]
        );
    }

    proptest! {
        /// Whatever the chunking, lines under the limit come back exactly and long ones are
        /// reported with their exact length.
        #[test]
        fn any_chunking(lines in proptest::collection::vec("[a-z]{0,12}", 0..8), cap in 1usize..7, max in 1usize..10) {
            let input = lines.iter().map(|l| format!("{l}\n")).collect::<String>();
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let got = rt.block_on(all(input.as_bytes(), max, cap));
            let want: Vec<Line> = lines.iter().map(|l| if l.len() > max { Line::Oversized(l.len() as u64) } else { Line::Text(l.as_bytes().to_vec()) }).collect();
            prop_assert_eq!(got, want);
        }
    }
}

#[cfg(test)]
mod props;
