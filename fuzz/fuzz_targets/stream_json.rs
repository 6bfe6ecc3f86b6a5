//! Fuzz target `stream_json`: the engine's path for droid's `-o stream-json` stdout. The bytes go
//! through `droid_exec::run::lines::Lines` (the bounded line framer, here with a 4 KiB limit and a
//! 61-byte read buffer so lines span reads and the oversize path is reached), each line through
//! the droid provider's `parse_line`, each final text through `droid_exec::run::report::extract`, and
//! texts through the excerpt cutters the supervisor applies.
//!
//! Invariants: nothing panics; the framer yields exactly the newline-separated pieces of the
//! input (a piece over the limit as `Oversized` with its exact length); a line the provider
//! cannot read comes back as `Unknown` holding the line itself; the excerpts are a prefix / suffix
//! of their text cut on a character boundary.
#![no_main]

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use droid_exec::providers::droid::Droid;
use droid_exec::excerpt::{head_str, tail_str};
use droid_exec::run::lines::{Line, Lines};
use droid_exec::AgentEvent;
use droid_exec::run::report;
use libfuzzer_sys::fuzz_target;

/// Longest line the framer keeps here (the engine uses 8 MiB; a small limit reaches the
/// oversize path with small inputs).
const MAX_LINE: usize = 4 * 1024;
/// The framer's read buffer: small and odd, so lines and the limit straddle reads.
const READ_BUFFER: usize = 61;

/// Run a future over in-memory I/O to completion. Reading a byte slice never waits, so the first
/// poll finishes it; a `Pending` would be a bug in the framer (it would hang on a pipe too).
fn ready<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("the line framer waited on an in-memory reader"),
    }
}

/// What the framer must produce: every `\n`-terminated piece, and a final unterminated one when
/// it is not empty.
fn expected(data: &[u8]) -> Vec<Line> {
    let mut pieces: Vec<&[u8]> = data.split(|b| *b == b'\n').collect();
    if pieces.last().is_some_and(|p| p.is_empty()) {
        pieces.pop();
    }
    pieces
        .into_iter()
        .map(|p| {
            if p.len() > MAX_LINE {
                Line::Oversized(p.len() as u64)
            } else {
                Line::Text(p.to_vec())
            }
        })
        .collect()
}

fn check_excerpts(text: &str) {
    for max in [0, 1, 5, 64] {
        let head = head_str(text, max);
        let kept = head.strip_suffix('…').unwrap_or(&head);
        assert!(
            text.starts_with(kept),
            "head_str({text:?}, {max}) = {head:?}"
        );
        let (tail, cut) = tail_str(text, max);
        assert!(
            text.ends_with(&tail),
            "tail_str({text:?}, {max}) = {tail:?}"
        );
        assert_eq!(cut, text.len() > max, "tail_str({text:?}, {max}) cut flag");
        assert!(
            tail.len() <= max || !cut,
            "tail_str({text:?}, {max}) = {tail:?}"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let mut lines = Lines::new(
        tokio::io::BufReader::with_capacity(READ_BUFFER, data),
        MAX_LINE,
    );
    let mut framed = Vec::new();
    while let Some(line) = ready(lines.next()) {
        framed.push(line);
    }
    assert_eq!(framed, expected(data), "framing of {data:?}");

    for line in &framed {
        let Line::Text(bytes) = line else { continue };
        match Droid.parse_line(bytes) {
            AgentEvent::Unknown(raw) => {
                assert_eq!(
                    raw,
                    String::from_utf8_lossy(bytes),
                    "Unknown must keep the line"
                );
            }
            AgentEvent::Completion { final_text, .. } => {
                let (prose, _report) = report::extract(&final_text);
                check_excerpts(&prose);
            }
            AgentEvent::Message { text, .. } | AgentEvent::ToolResult { text, .. } => {
                check_excerpts(&text);
            }
            AgentEvent::Error { message, .. } => check_excerpts(&message),
            AgentEvent::Init { .. } | AgentEvent::ToolCall { .. } => {}
        }
    }

    // the report block is usually reached through a JSON-escaped finalText; the raw text reaches
    // the block parser directly
    let (_prose, _report) = report::extract(&String::from_utf8_lossy(data));
});
