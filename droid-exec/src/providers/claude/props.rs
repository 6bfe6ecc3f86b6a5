//! Properties of the Claude Code parser over any input: garbage, invalid UTF-8, recorded lines
//! cut anywhere, and event-shaped objects with wrong field types never panic; what is not JSON
//! is kept as an [`AgentEvent::Unknown`] line.

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Map, Value};

use super::events::ClaudeParser;
use crate::providers::{AgentEvent, EventParser};

/// Cases per property.
const CASES: u32 = 256;

/// Every line of the recorded transcripts.
fn recorded_lines() -> Vec<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/claude-code-2.1.330");
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "ndjson") {
            let text = std::fs::read_to_string(path).unwrap();
            lines.extend(text.lines().map(str::to_owned));
        }
    }
    lines
}

fn parse(line: &[u8]) -> Vec<AgentEvent> {
    let mut p = ClaudeParser::default();
    let mut out = Vec::new();
    p.line(line, &mut out);
    p.end(&mut out);
    out
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
        select(vec![
            "system",
            "assistant",
            "user",
            "result",
            "init",
            "success",
            "tool_use",
            "tool_result",
            "text",
            "Bash",
            "Edit",
            "Exit code 3\nx",
            "permission_denied",
            "api_retry",
        ])
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        let key = select(vec![
            "type",
            "subtype",
            "message",
            "content",
            "id",
            "name",
            "input",
            "tool_use_id",
            "is_error",
            "text",
            "result",
            "usage",
            "errors",
            "permission_denials",
            "tool_use_result",
            "structuredPatch",
            "lines",
            "is_api_error_message",
            "timestamp",
        ]);
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::from),
            vec((key, inner), 0..5).prop_map(|kv| {
                Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    /// Arbitrary bytes never panic; what is not JSON is kept whole (lossily decoded).
    #[test]
    fn arbitrary_bytes_never_panic(
        line in vec(prop_oneof![any::<u8>(), select(b"{}[]\":,\\ \r".to_vec())], 0..64),
    ) {
        let out = parse(&line);
        if serde_json::from_slice::<Value>(&line).is_err() {
            prop_assert_eq!(out, vec![AgentEvent::Unknown(String::from_utf8_lossy(&line).into_owned())]);
        }
    }

    /// A recorded line cut anywhere (the CLI killed mid-write) is an unknown line, never half an
    /// event; a recorded line with invalid UTF-8 in it is one too.
    #[test]
    fn a_cut_or_corrupted_line_is_unknown(
        pick in any::<prop::sample::Index>(),
        at in any::<prop::sample::Index>(),
        bad in vec(0x80u8..=0xbf, 1..3), // continuation bytes with no lead: never UTF-8
    ) {
        let lines = recorded_lines();
        let line = lines[pick.index(lines.len())].as_bytes();
        let cut = &line[..at.index(line.len())];
        if serde_json::from_slice::<Value>(cut).is_err() {
            prop_assert_eq!(parse(cut), vec![AgentEvent::Unknown(String::from_utf8_lossy(cut).into_owned())]);
        }
        // bytes after the first quote: inside a JSON string
        if let Some(q) = line.iter().position(|b| *b == b'"') {
            let mut corrupt = line[..=q].to_vec();
            corrupt.extend_from_slice(&bad);
            corrupt.extend_from_slice(&line[q + 1..]);
            let out = parse(&corrupt);
            prop_assert_eq!(out, vec![AgentEvent::Unknown(String::from_utf8_lossy(&corrupt).into_owned())]);
        }
    }

    /// Event-shaped objects with any field types never panic.
    #[test]
    fn malformed_events_never_panic(
        ty in select(vec!["system", "assistant", "user", "result", "stream_event", "other"]),
        rest in json_value(),
    ) {
        let mut m = match rest {
            Value::Object(m) => m,
            other => {
                let mut m = Map::new();
                m.insert("message".into(), other);
                m
            }
        };
        m.insert("type".into(), Value::from(ty));
        let _ = parse(Value::Object(m).to_string().as_bytes());
    }
}
