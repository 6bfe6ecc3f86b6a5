//! Property tests for Gemini's stream-json parser: arbitrary bytes (garbage, invalid UTF-8,
//! truncated recorded lines, known event types with fields of the wrong type) never panic and
//! never produce a completion unless a `result` line with `status: "success"` came; and assistant
//! deltas written by Gemini come back whole as the final text.

use proptest::collection::vec;
use proptest::prelude::*;
use serde_json::json;

use super::GeminiParser;
use crate::providers::{AgentEvent, EventParser};

/// Cases per property.
const CASES: u32 = 256;

/// Real lines (case `basic-tool-turn`), to cut short.
const RECORDED: &str =
    include_str!("../../../../tests/fixtures/gemini-cli-0.61.0/basic-tool-turn.ndjson");

fn parse(lines: &[Vec<u8>]) -> Vec<AgentEvent> {
    let mut p = GeminiParser::default();
    let mut out = Vec::new();
    for l in lines {
        p.line(l, &mut out);
    }
    p.end(&mut out);
    out
}

fn is_completion(e: &AgentEvent) -> bool {
    matches!(e, AgentEvent::Completion { .. })
}

/// A line: random bytes, a recorded line cut anywhere, or a known type with odd fields.
fn line() -> impl Strategy<Value = Vec<u8>> {
    let recorded: Vec<&'static str> = RECORDED.lines().collect();
    let types = [
        "init",
        "message",
        "tool_use",
        "tool_result",
        "error",
        "result",
        "other",
    ];
    prop_oneof![
        vec(any::<u8>(), 0..200),
        (proptest::sample::select(recorded), any::<usize>()).prop_map(|(l, cut)| {
            let b = l.as_bytes();
            b[..cut % (b.len() + 1)].to_vec()
        }),
        (
            proptest::sample::select(types.to_vec()),
            any::<i64>(),
            ".{0,20}"
        )
            .prop_map(|(t, n, s)| {
                json!({"type": t, "role": n, "content": n, "tool_id": n, "status": s,
                              "parameters": s, "stats": s, "error": n, "session_id": n})
                .to_string()
                .into_bytes()
            }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn nothing_panics_and_only_a_success_result_completes(lines in vec(line(), 0..12)) {
        let out = parse(&lines);
        let successes = lines
            .iter()
            .filter(|l| {
                serde_json::from_slice::<serde_json::Value>(l).is_ok_and(|v| {
                    v["type"] == "result" && v["status"] == "success"
                })
            })
            .count();
        prop_assert_eq!(out.iter().filter(|e| is_completion(e)).count(), successes);
    }

    #[test]
    fn deltas_are_the_final_text(deltas in vec(".{0,30}", 1..6)) {
        let mut lines: Vec<Vec<u8>> = vec![
            br#"{"type":"tool_result","tool_id":"x","status":"success","output":"o"}"#.to_vec(),
        ];
        for d in &deltas {
            lines.push(json!({"type": "message", "role": "assistant", "content": d, "delta": true})
                .to_string()
                .into_bytes());
        }
        lines.push(br#"{"type":"result","status":"success","stats":{"input_tokens":1}}"#.to_vec());
        let out = parse(&lines);
        let Some(AgentEvent::Completion { final_text, .. }) = out.last() else {
            return Err(TestCaseError::fail(format!("no completion: {out:?}")));
        };
        prop_assert_eq!(final_text, &deltas.concat().trim().to_owned());
    }
}
