//! Property tests for [`Lines`] beyond `any_chunking` (short ASCII lines, fixed-size reads): any
//! bytes (invalid UTF-8, `\r\n`, NUL), reads cut at any point, a last line without its newline, a
//! read error, and lines over the limit, which come out as their exact length while every line
//! after them comes out intact; plus one line at the real 8 MiB limit.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use pretty_assertions::assert_eq;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use tokio::io::{AsyncBufRead, AsyncRead, ReadBuf};

use super::{Line, Lines, MAX_LINE_BYTES};

/// Cases per property.
const CASES: u32 = 256;

/// A reader that hands out exactly the given chunks, one per read, then ends (or fails).
#[derive(Debug)]
struct Chunks {
    chunks: VecDeque<Vec<u8>>,
    fail_at_end: bool,
}

impl Chunks {
    /// `input` cut at `cuts` (offsets, any order, duplicates allowed).
    fn new(input: &[u8], mut cuts: Vec<usize>, fail_at_end: bool) -> Self {
        cuts.push(input.len());
        cuts.sort_unstable();
        let mut chunks = VecDeque::new();
        let mut from = 0;
        for to in cuts {
            chunks.push_back(input[from..to].to_vec());
            from = to;
        }
        Self {
            chunks,
            fail_at_end,
        }
    }
}

impl AsyncRead for Chunks {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let available = match Pin::new(&mut *this).poll_fill_buf(cx) {
            Poll::Ready(Ok(b)) => b,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        };
        let n = available.len().min(buf.remaining());
        buf.put_slice(&available[..n]);
        Pin::new(this).consume(n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncBufRead for Chunks {
    fn poll_fill_buf(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<&[u8]>> {
        let this = self.get_mut();
        while this.chunks.front().is_some_and(Vec::is_empty) {
            this.chunks.pop_front();
        }
        match this.chunks.front() {
            Some(c) => Poll::Ready(Ok(c.as_slice())),
            None if this.fail_at_end => Poll::Ready(Err(io::Error::other("connection reset"))),
            None => Poll::Ready(Ok(&[])),
        }
    }

    fn consume(self: Pin<&mut Self>, amt: usize) {
        if let Some(c) = self.get_mut().chunks.front_mut() {
            c.drain(..amt);
        }
    }
}

fn frame<R: AsyncBufRead + Unpin>(reader: R, max: usize) -> Vec<Line> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut lines = Lines::new(reader, max);
        let mut out = Vec::new();
        while let Some(l) = lines.next().await {
            out.push(l);
        }
        out
    })
}

/// One line's bytes (no `\n`): anything, with NUL and broken UTF-8 common, often ending in the
/// `\r` of a CRLF stream; as often within `max` as over it.
fn line(max: usize) -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![
        3 => any::<u8>().prop_filter("not a newline", |b| *b != b'\n'),
        1 => select(vec![b'\r', 0, 0xff, 0xc3, 0x80, 0xe2, b'{', b'"']),
    ];
    let bytes = prop_oneof![vec(byte.clone(), 0..=max), vec(byte, max..=max * 3 + 1)];
    (bytes, any::<bool>()).prop_map(|(mut b, crlf)| {
        if crlf {
            b.push(b'\r');
        }
        b
    })
}

/// Lines, whether the last one has its newline, and the limit.
fn input() -> impl Strategy<Value = (Vec<Vec<u8>>, bool, usize)> {
    (1usize..24).prop_flat_map(|max| (vec(line(max), 0..8), any::<bool>(), Just(max)))
}

/// What the framing must give for `lines`: each line, or its length when over `max`; a last line
/// without a newline counts unless it is empty.
fn expected(lines: &[Vec<u8>], last_terminated: bool, max: usize) -> Vec<Line> {
    lines
        .iter()
        .enumerate()
        .filter(|(i, l)| last_terminated || *i + 1 < lines.len() || !l.is_empty())
        .map(|(_, l)| {
            if l.len() > max {
                Line::Oversized(l.len() as u64)
            } else {
                Line::Text(l.clone())
            }
        })
        .collect()
}

fn join(lines: &[Vec<u8>], last_terminated: bool) -> Vec<u8> {
    let mut input: Vec<u8> = lines
        .iter()
        .flat_map(|l| [l.as_slice(), b"\n"].concat())
        .collect();
    if !last_terminated && !lines.is_empty() {
        input.pop();
    }
    input
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    /// Any bytes, read in any pieces, ended or failed: lines within the limit come back byte for
    /// byte (the `\r` of a CRLF stream stays: the consumers trim it), longer ones as their exact
    /// length, and a long line never disturbs the lines after it.
    #[test]
    fn any_bytes_any_reads(
        (lines, last_terminated, max) in input(),
        cuts in vec(any::<prop::sample::Index>(), 0..12),
        fail_at_end in any::<bool>(),
    ) {
        let input = join(&lines, last_terminated);
        let cuts = cuts.iter().map(|c| c.index(input.len() + 1)).collect();
        let got = frame(Chunks::new(&input, cuts, fail_at_end), max);
        prop_assert_eq!(got, expected(&lines, last_terminated, max));
    }
}

/// At the real limit: a line of exactly `MAX_LINE_BYTES` comes out whole, one byte more is
/// reported with its length, and the line after each comes out intact.
#[test]
fn the_real_limit() {
    let mut input = vec![b'a'; MAX_LINE_BYTES];
    input.extend_from_slice(b"\n{\"type\":\"error\"}\n");
    input.extend(std::iter::repeat_n(b'b', MAX_LINE_BYTES + 1));
    input.extend_from_slice(b"\n{\"type\":\"completion\"}");
    let got = frame(
        tokio::io::BufReader::with_capacity(64 * 1024, input.as_slice()),
        MAX_LINE_BYTES,
    );
    let lens: Vec<String> = got
        .iter()
        .map(|l| match l {
            Line::Text(t) if t.len() > 64 => format!("text of {} bytes", t.len()),
            Line::Text(t) => String::from_utf8_lossy(t).into_owned(),
            Line::Oversized(n) => format!("oversized {n}"),
        })
        .collect();
    assert_eq!(
        lens,
        [
            format!("text of {MAX_LINE_BYTES} bytes"),
            "{\"type\":\"error\"}".to_owned(),
            format!("oversized {}", MAX_LINE_BYTES + 1),
            "{\"type\":\"completion\"}".to_owned(),
        ]
    );
}
