//! Property tests for OpenCode's JSON-lines parser: arbitrary bytes, invalid UTF-8, recorded
//! lines cut short or with a byte changed, and well-formed lines whose fields have the wrong
//! types never make it panic; a line that is not a JSON object is kept as
//! [`AgentEvent::Unknown`]; a recorded turn cut anywhere never yields a completion before its
//! `stop` step.

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Value, json};

use super::events::OpencodeParser;
use crate::providers::{AgentEvent, EventParser};

/// Cases per property.
const CASES: u32 = 256;

/// The recorded basic turn (`basic-tool-turn`).
const BASIC: &str =
    include_str!("../../../../tests/fixtures/opencode-1.18.33/basic-tool-turn.ndjson");

fn parse_all(lines: &[Vec<u8>]) -> Vec<AgentEvent> {
    let mut p = OpencodeParser::default();
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
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::from),
            vec(
                (
                    select(vec![
                        "text",
                        "tool",
                        "callID",
                        "state",
                        "status",
                        "input",
                        "output",
                        "error",
                        "metadata",
                        "exit",
                        "filediff",
                        "additions",
                        "reason",
                        "tokens",
                        "cache",
                        "time",
                        "start",
                        "end",
                        "data",
                        "message",
                        "statusCode",
                        "name",
                        "x"
                    ]),
                    inner
                ),
                0..5
            )
            .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn arbitrary_bytes_never_panic(lines in vec(vec(any::<u8>(), 0..200), 0..8)) {
        let out = parse_all(&lines);
        for (l, e) in lines.iter().zip(&out) {
            if serde_json::from_slice::<Value>(l).map_or(true, |v| !v.is_object()) {
                prop_assert_eq!(e, &AgentEvent::Unknown(String::from_utf8_lossy(l).into_owned()));
            }
        }
    }

    #[test]
    fn known_types_with_any_fields_never_panic(
        kind in select(vec!["step_start", "text", "reasoning", "tool_use", "step_finish", "error", "other"]),
        part in json_value(),
        error in json_value(),
        session in proptest::option::of(json_value()),
    ) {
        let mut line = json!({"type": kind, "part": part, "error": error});
        if let Some(s) = session {
            line["sessionID"] = s;
        }
        let _ = parse_all(&[line.to_string().into_bytes()]);
    }

    #[test]
    fn a_cut_or_changed_recorded_turn_never_panics(
        which in 0usize..11,
        cut in any::<prop::sample::Index>(),
        flip in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let mut lines: Vec<Vec<u8>> = BASIC.lines().map(|l| l.as_bytes().to_vec()).collect();
        let which = which % lines.len();
        let mut changed = lines[which].clone();
        let i = flip.index(changed.len());
        changed[i] = byte;
        lines[which] = changed;
        let _ = parse_all(&lines);
        // the turn cut after any line: a completion only once the stop step is in
        let whole: Vec<Vec<u8>> = BASIC.lines().map(|l| l.as_bytes().to_vec()).collect();
        let n = cut.index(whole.len());
        let out = parse_all(&whole[..n]);
        let early = out.iter().any(|e| matches!(e, AgentEvent::Completion { .. }));
        prop_assert!(!early, "a completion before the stop step");
        let mut half = whole[n].clone();
        half.truncate(half.len() / 2);
        let mut cut_lines = whole[..n].to_vec();
        cut_lines.push(half);
        let out = parse_all(&cut_lines);
        let last_unknown = matches!(out.last(), Some(AgentEvent::Unknown(_)));
        prop_assert!(last_unknown, "a cut line is not kept as unknown");
    }
}
