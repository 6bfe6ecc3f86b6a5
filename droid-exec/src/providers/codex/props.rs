//! Property tests for Codex's JSONL parser: arbitrary bytes, invalid UTF-8, lines cut anywhere
//! and event-shaped objects with wrong field types never panic; a cut line is never half an
//! event; and a run never completes without `turn.completed`.

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Map, Value};

use super::events::CodexParser;
use crate::providers::{AgentEvent, EventParser};

/// Cases per property.
const CASES: u32 = 256;

/// Lines the real Codex printed (case `basic-tool-turn`).
const RECORDED: &str =
    include_str!("../../../../tests/fixtures/codex-0.169.0/basic-tool-turn.ndjson");

fn parse(lines: &[&[u8]]) -> Vec<AgentEvent> {
    let mut p = CodexParser::default();
    let mut out = Vec::new();
    for l in lines {
        p.line(l, &mut out);
    }
    p.end(&mut out);
    out
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::from),
            vec(
                (
                    prop_oneof![
                        select(vec![
                            "id",
                            "type",
                            "text",
                            "command",
                            "exit_code",
                            "status",
                            "changes",
                            "path",
                            "kind",
                            "message",
                            "aggregated_output",
                            "usage"
                        ])
                        .prop_map(str::to_owned),
                        ".{0,6}"
                    ],
                    inner
                ),
                0..5
            )
            .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// An object shaped like a Codex line, with any field values.
fn event_like() -> impl Strategy<Value = Value> {
    let ty = prop_oneof![
        select(vec![
            "thread.started",
            "turn.started",
            "item.started",
            "item.updated",
            "item.completed",
            "turn.completed",
            "turn.failed",
            "error"
        ])
        .prop_map(Value::from),
        json_value(),
    ];
    let key = prop_oneof![
        select(vec!["thread_id", "item", "usage", "error", "message"]).prop_map(str::to_owned),
        ".{0,6}",
    ];
    (ty, vec((key, json_value()), 0..4)).prop_map(|(ty, kv)| {
        let mut m: Map<String, Value> = kv.into_iter().collect();
        m.insert("type".into(), ty);
        Value::Object(m)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    /// Arbitrary bytes never panic and never complete a run.
    #[test]
    fn arbitrary_bytes_never_panic(
        line in vec(prop_oneof![any::<u8>(), select(b"{}[]\":,\\ .".to_vec())], 0..64),
    ) {
        let ev = parse(&[&line]);
        let completed = ev.iter().any(|e| matches!(e, AgentEvent::Completion { .. }));
        prop_assert!(!completed, "{:?}", ev);
    }

    /// Event-shaped objects with wrong field types never panic.
    #[test]
    fn malformed_events_never_panic(v in vec(event_like(), 1..6)) {
        let lines: Vec<String> = v.iter().map(Value::to_string).collect();
        let refs: Vec<&[u8]> = lines.iter().map(|l| l.as_bytes()).collect();
        let ev = parse(&refs);
        // only a turn.completed line completes
        let completions = ev.iter().filter(|e| matches!(e, AgentEvent::Completion { .. })).count();
        let finals = v.iter().filter(|o| o["type"] == "turn.completed").count();
        prop_assert!(completions <= finals);
    }

    /// A recorded line cut anywhere is kept as an unknown line, never half an event; invalid
    /// UTF-8 spliced into one makes it unknown too.
    #[test]
    fn cut_or_corrupt_recorded_lines_are_unknown(
        which in any::<prop::sample::Index>(),
        at in any::<prop::sample::Index>(),
        bad in vec(0x80u8..=0xff, 1..4),
    ) {
        let lines: Vec<&str> = RECORDED.lines().collect();
        let line = lines[which.index(lines.len())].as_bytes();
        let cut = &line[..at.index(line.len())];
        let unknown = |l: &[u8]| vec![AgentEvent::Unknown(String::from_utf8_lossy(l).into_owned())];
        prop_assert_eq!(parse(&[cut]), unknown(cut));
        // inside the first string value
        if let Some(q) = line.iter().position(|b| *b == b'"') {
            let mut corrupt = line[..=q].to_vec();
            corrupt.extend_from_slice(&bad);
            corrupt.extend_from_slice(&line[q + 1..]);
            prop_assume!(std::str::from_utf8(&corrupt).is_err());
            prop_assert_eq!(parse(&[&corrupt]), unknown(&corrupt));
        }
    }
}
