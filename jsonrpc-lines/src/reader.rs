//! Reading messages: one JSON value per line, each line bounded before it is read (the engine's
//! [`Lines`]: a line over the limit is skipped in constant memory and reported once with its
//! length). A UTF-8 byte-order mark, a trailing `\r` and blank lines are tolerated.

use droid_exec::run::lines::{Line, Lines};
use serde_json::Value;
use tokio::io::{AsyncRead, BufReader};

/// One framed item of the input.
#[derive(Debug)]
pub enum Frame {
    /// A line that is JSON: classify it ([`crate::classify`]), or treat an array as a batch.
    Message(Value),
    /// A line over the limit: its length in bytes (its content was dropped). Answer `-32600`
    /// with id `null`.
    Oversized(u64),
    /// A line that is not JSON (or nested too deep): answer `-32700` with id `null`.
    Unparsable(serde_json::Error),
}

/// Reads [`Frame`]s from `R`, each line at most `max` bytes.
#[derive(Debug)]
pub struct Reader<R> {
    lines: Lines<BufReader<R>>,
}

impl<R: AsyncRead + Unpin> Reader<R> {
    /// Frame `input` with lines of at most `max` bytes.
    pub fn new(input: R, max: usize) -> Self {
        Self {
            lines: Lines::new(BufReader::new(input), max),
        }
    }

    /// The next non-blank line, framed; `None` at the end of the input (or on a read error,
    /// which ends it too). Cancel-safe: a line read in part stays buffered for the next call.
    pub async fn next(&mut self) -> Option<Frame> {
        loop {
            let raw = match self.lines.next().await? {
                Line::Oversized(n) => return Some(Frame::Oversized(n)),
                Line::Text(raw) => raw,
            };
            let raw = raw.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&raw);
            let text = String::from_utf8_lossy(raw);
            let text = text.trim();
            if text.is_empty() {
                continue;
            }
            return Some(match serde_json::from_str(text) {
                Ok(v) => Frame::Message(v),
                Err(e) => Frame::Unparsable(e),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    #[tokio::test]
    async fn lines_become_frames() {
        let input = "\u{feff}{\"a\":1}\r\n\n   \n[1,2]\nnot json\n{\"long\":\"xxxxxxxxxxxxxxxxxxxx\"}\n{\"b\":2}";
        let mut r = Reader::new(input.as_bytes(), 24);
        let mut got = Vec::new();
        while let Some(f) = r.next().await {
            got.push(match f {
                Frame::Message(v) => v,
                Frame::Oversized(n) => json!({"oversized": n}),
                Frame::Unparsable(_) => json!("unparsable"),
            });
        }
        assert_eq!(
            got,
            [
                json!({"a": 1}),
                json!([1, 2]),
                json!("unparsable"),
                json!({"oversized": 31}),
                json!({"b": 2})
            ]
        );
    }
}
