//! Property tests for droid's stream-json parser: every event kind droid 0.225.2 emits, written as
//! droid writes it (one compact JSON line, droid's field names and order), parses into the
//! [`AgentEvent`] carrying exactly the generated values; anything else (non-JSON, invalid UTF-8,
//! unknown or malformed events, a line cut short) becomes [`AgentEvent::Unknown`] holding the line,
//! and nothing panics.

use droid_contract::Usage;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Map, Value, json};

use super::Droid;
use crate::providers::AgentEvent;

/// Cases per property; the whole module runs in well under a second in a debug build.
const CASES: u32 = 256;

/// The `type`s the parser knows.
const KNOWN: [&str; 6] = [
    "system",
    "message",
    "tool_call",
    "tool_result",
    "completion",
    "error",
];

/// Largest integer a JavaScript number (droid is a Node program) holds exactly.
const JS_SAFE: u64 = (1 << 53) - 1;

/// Characters JSON encoding has to work for.
const AWKWARD: &[char] = &[
    '"',
    '\\',
    '/',
    '\n',
    '\r',
    '\t',
    '\0',
    '\u{7f}',
    '\u{2028}',
    '\u{feff}',
    'é',
    '漢',
    '😀',
    '\u{10ffff}',
    '`',
    '{',
    '}',
];

fn text() -> impl Strategy<Value = String> {
    vec(prop_oneof![2 => any::<char>(), 1 => select(AWKWARD)], 0..40).prop_map(String::from_iter)
}

fn uuid() -> impl Strategy<Value = String> {
    "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
}

fn millis() -> impl Strategy<Value = u64> {
    0..=JS_SAFE
}

/// A tool name: droid's own, or anything (an MCP tool).
fn tool() -> impl Strategy<Value = String> {
    prop_oneof![
        select(vec![
            "Read",
            "LS",
            "Execute",
            "Edit",
            "ApplyPatch",
            "Grep",
            "Glob",
            "Create"
        ])
        .prop_map(str::to_owned),
        text(),
    ]
}

/// A JSON value as a model's tool arguments hold it.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        text().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 32, 5, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..5).prop_map(Value::from),
            vec((text(), inner), 0..5).prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn parameters() -> impl Strategy<Value = Value> {
    vec((text(), json_value()), 0..5).prop_map(|kv| Value::Object(kv.into_iter().collect()))
}

/// A number as JavaScript prints it: whole numbers without a fraction.
fn js_number(f: f64) -> Value {
    if f.fract() == 0.0 && (0.0..=JS_SAFE as f64).contains(&f) {
        // exact: a whole number within the safe range
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        Value::from(f as u64)
    } else {
        Value::from(f)
    }
}

fn usage() -> impl Strategy<Value = Usage> {
    let ttft = prop_oneof![
        (0u32..100_000).prop_map(f64::from),
        (0u32..10_000_000).prop_map(|n| f64::from(n) / 100.0),
        any::<f64>().prop_filter("finite, not negative", |f| f.is_finite() && *f >= 0.0),
    ];
    (vec(0..=JS_SAFE, 5), proptest::option::of(ttft)).prop_map(|(n, ttft_ms)| Usage {
        input_tokens: n[0],
        output_tokens: n[1],
        cache_read_input_tokens: n[2],
        cache_creation_input_tokens: n[3],
        factory_credits: n[4],
        ttft_ms,
    })
}

fn usage_json(u: &Usage) -> Value {
    let mut m = Map::new();
    m.insert("input_tokens".into(), u.input_tokens.into());
    m.insert("output_tokens".into(), u.output_tokens.into());
    m.insert(
        "cache_read_input_tokens".into(),
        u.cache_read_input_tokens.into(),
    );
    m.insert(
        "cache_creation_input_tokens".into(),
        u.cache_creation_input_tokens.into(),
    );
    m.insert("factory_credits".into(), u.factory_credits.into());
    if let Some(t) = u.ttft_ms {
        m.insert("ttft_ms".into(), js_number(t));
    }
    Value::Object(m)
}

/// One event: its fields in the order droid writes them, and the event the parser must yield.
#[derive(Debug, Clone)]
struct Case {
    fields: Vec<(&'static str, Value)>,
    want: AgentEvent,
}

impl Case {
    /// The line as droid writes it: compact JSON, `type` first, droid's order.
    fn line(&self) -> String {
        let body: Vec<String> = self
            .fields
            .iter()
            .map(|(k, v)| format!("{}:{v}", Value::from(*k)))
            .collect();
        format!("{{{}}}", body.join(","))
    }
}

fn init() -> impl Strategy<Value = Case> {
    (
        text(),
        uuid(),
        vec(tool(), 0..5),
        text(),
        select(vec!["none", "low", "high"]),
    )
        .prop_map(|(cwd, session, tools, model, effort)| Case {
            fields: vec![
                ("type", json!("system")),
                ("subtype", json!("init")),
                ("cwd", json!(cwd)),
                ("session_id", json!(session)),
                ("tools", json!(tools)),
                ("model", json!(model)),
                ("reasoning_effort", json!(effort)),
            ],
            want: AgentEvent::Init {
                session_id: Some(session),
                model: Some(model),
            },
        })
}

fn message() -> impl Strategy<Value = Case> {
    (
        select(vec!["user", "assistant"]),
        uuid(),
        text(),
        millis(),
        uuid(),
    )
        .prop_map(|(role, id, text, ts, session)| Case {
            fields: vec![
                ("type", json!("message")),
                ("role", json!(role)),
                ("id", json!(id)),
                ("text", json!(text)),
                ("timestamp", json!(ts)),
                ("session_id", json!(session)),
            ],
            want: AgentEvent::Message {
                role: role.into(),
                text,
            },
        })
}

fn tool_call() -> impl Strategy<Value = Case> {
    (text(), uuid(), tool(), parameters(), millis(), uuid()).prop_map(
        |(id, message_id, tool, parameters, ts, session)| Case {
            fields: vec![
                ("type", json!("tool_call")),
                ("id", json!(id)),
                ("messageId", json!(message_id)),
                ("toolId", json!(tool)),
                ("toolName", json!(tool)),
                ("parameters", parameters.clone()),
                ("timestamp", json!(ts)),
                ("session_id", json!(session)),
            ],
            want: AgentEvent::ToolCall {
                id,
                kind: super::tool_kind(&tool, &parameters),
                tool,
                parameters,
                timestamp_ms: Some(ts),
            },
        },
    )
}

/// A tool result: `isError:false` with `value`, or `isError:true` with `error{type,message}`.
fn tool_result() -> impl Strategy<Value = Case> {
    (
        text(),
        uuid(),
        tool(),
        any::<bool>(),
        text(),
        millis(),
        uuid(),
    )
        .prop_map(|(id, message_id, tool, is_error, out, ts, session)| {
            let payload = if is_error {
                ("error", json!({"type": "tool_error", "message": out}))
            } else {
                ("value", json!(out))
            };
            let (out_text, exit_code, diffstat) = super::result_detail(&tool, out);
            Case {
                fields: vec![
                    ("type", json!("tool_result")),
                    ("id", json!(id)),
                    ("messageId", json!(message_id)),
                    ("toolId", json!(tool)),
                    ("isError", json!(is_error)),
                    payload,
                    ("timestamp", json!(ts)),
                    ("session_id", json!(session)),
                ],
                want: AgentEvent::ToolResult {
                    id,
                    tool,
                    is_error,
                    text: out_text,
                    exit_code,
                    diffstat,
                    timestamp_ms: Some(ts),
                },
            }
        })
}

fn completion() -> impl Strategy<Value = Case> {
    (text(), 0..=JS_SAFE, millis(), uuid(), millis(), usage()).prop_map(
        |(final_text, turns, duration, session, ts, usage)| Case {
            fields: vec![
                ("type", json!("completion")),
                ("finalText", json!(final_text)),
                ("numTurns", json!(turns)),
                ("durationMs", json!(duration)),
                ("session_id", json!(session)),
                ("timestamp", json!(ts)),
                ("usage", usage_json(&usage)),
            ],
            want: AgentEvent::Completion {
                final_text,
                num_turns: Some(turns),
                session_id: Some(session),
                usage: Some(usage),
            },
        },
    )
}

/// An error event; `session_id` is `""` when the failure came before a session existed.
fn error() -> impl Strategy<Value = Case> {
    (
        select(vec!["agent_loop", "cli"]),
        text(),
        millis(),
        prop_oneof![Just(String::new()), uuid()],
    )
        .prop_map(|(source, message, ts, session)| Case {
            fields: vec![
                ("type", json!("error")),
                ("source", json!(source)),
                ("message", json!(message)),
                ("timestamp", json!(ts)),
                ("session_id", json!(session)),
            ],
            want: AgentEvent::Error {
                source: source.into(),
                message,
            },
        })
}

fn event() -> impl Strategy<Value = Case> {
    prop_oneof![
        init(),
        message(),
        tool_call(),
        tool_result(),
        completion(),
        error()
    ]
}

/// A JSON object shaped like an event but with any `type` and any field values.
fn event_like() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        select(vec![
            "type",
            "subtype",
            "role",
            "text",
            "id",
            "toolId",
            "toolName",
            "parameters",
            "isError",
            "value",
            "error",
            "finalText",
            "numTurns",
            "usage",
            "timestamp",
            "source",
            "message",
            "session_id",
            "model",
        ])
        .prop_map(str::to_owned),
        text(),
    ];
    let ty = prop_oneof![select(KNOWN.to_vec()).prop_map(Value::from), json_value()];
    (ty, vec((key, json_value()), 0..6)).prop_map(|(ty, kv)| {
        let mut m: Map<String, Value> = kv.into_iter().collect();
        m.insert("type".into(), ty);
        Value::Object(m)
    })
}

/// The event for a line the parser does not understand.
fn unknown(line: &[u8]) -> AgentEvent {
    AgentEvent::Unknown(String::from_utf8_lossy(line).into_owned())
}

/// What must hold for any line: no panic; an `Unknown` keeps the line (lossily decoded); anything
/// else came from a JSON object with a known `type`.
fn check_any_line(line: &[u8]) -> Result<(), TestCaseError> {
    match Droid.parse_line(line) {
        AgentEvent::Unknown(s) => prop_assert_eq!(AgentEvent::Unknown(s), unknown(line)),
        other => {
            let v: Value = serde_json::from_slice(line)
                .map_err(|e| TestCaseError::fail(format!("{other:?} from non-JSON: {e}")))?;
            let ty = v.get("type").and_then(Value::as_str);
            prop_assert!(ty.is_some_and(|t| KNOWN.contains(&t)), "{other:?} from {v}");
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    /// Each event droid emits parses into exactly its values, written in droid's field order, in
    /// any other order, and with the `\r` a CRLF stream leaves on the line.
    #[test]
    fn every_event_kind_parses_exactly(case in event()) {
        let line = case.line();
        prop_assert_eq!(Droid.parse_line(line.as_bytes()), case.want.clone(), "{}", line);
        let sorted: Map<String, Value> =
            case.fields.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect();
        let sorted = Value::Object(sorted);
        prop_assert_eq!(Droid.parse_line(sorted.to_string().as_bytes()), case.want.clone());
        prop_assert_eq!(Droid.parse_line(format!("{line}\r").as_bytes()), case.want);
    }

    /// A line cut anywhere (droid killed mid-write) is kept as an unknown line, never half an
    /// event.
    #[test]
    fn a_cut_line_is_unknown(case in event(), at in any::<prop::sample::Index>()) {
        let line = case.line();
        let cut = &line.as_bytes()[..at.index(line.len())];
        prop_assert_eq!(Droid.parse_line(cut), unknown(cut));
    }

    /// Invalid UTF-8 inside an event's text (the line is a valid event without it) makes the
    /// whole line unknown, kept lossily.
    #[test]
    fn invalid_utf8_is_unknown(before in text(), bad in vec(0x80u8..=0xff, 1..4), after in text()) {
        // the JSON string's inside, without its two quotes
        let escaped = |s: &str| {
            let quoted = Value::from(s).to_string();
            quoted[1..quoted.len() - 1].to_owned()
        };
        let (head, tail) = (escaped(&before), escaped(&after));
        let build = |middle: &[u8]| {
            let mut line = br#"{"type":"message","role":"assistant","text":""#.to_vec();
            line.extend_from_slice(head.as_bytes());
            line.extend_from_slice(middle);
            line.extend_from_slice(tail.as_bytes());
            line.extend_from_slice(br#""}"#);
            line
        };
        let good = build(b"");
        let text = format!("{before}{after}");
        let want = AgentEvent::Message { role: "assistant".into(), text };
        prop_assert_eq!(Droid.parse_line(&good), want);
        let line = build(&bad);
        prop_assume!(std::str::from_utf8(&line).is_err());
        prop_assert_eq!(Droid.parse_line(&line), unknown(&line));
    }

    /// An object whose `type` the parser does not know is kept verbatim as an unknown line.
    #[test]
    fn unknown_types_are_kept(ty in text(), rest in vec((text(), json_value()), 0..4)) {
        prop_assume!(!KNOWN.contains(&ty.as_str()));
        let mut m: Map<String, Value> = rest.into_iter().collect();
        m.insert("type".into(), Value::from(ty));
        let line = Value::Object(m).to_string();
        prop_assert_eq!(Droid.parse_line(line.as_bytes()), AgentEvent::Unknown(line));
    }

    /// Arbitrary bytes never panic and are kept.
    #[test]
    fn arbitrary_bytes_never_panic(
        line in vec(prop_oneof![any::<u8>(), select(b"{}[]\":,\\ \r".to_vec())], 0..64),
    ) {
        check_any_line(&line)?;
    }

    /// Event-shaped objects with wrong field types never panic: they parse or are kept.
    #[test]
    fn malformed_events_never_panic(v in event_like()) {
        check_any_line(v.to_string().as_bytes())?;
    }
}
