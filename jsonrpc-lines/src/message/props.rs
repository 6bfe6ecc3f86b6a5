//! Property tests for JSON-RPC framing: any request, notification or response built from
//! generated ids (integers of either sign and zero, full-range unsigned, any unicode string) and
//! methods goes through text and [`classify`] into the right [`Incoming`] with the id exactly as
//! sent (same JSON type, same value); every answer echoes the id exactly; anything that is not a
//! JSON-RPC 2.0 message is [`Incoming::Invalid`] with a usable (or `null`) id, and nothing panics.

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Map, Value, json};

use super::{Fault, Id, Incoming, RpcError, classify, error, notification, result};

/// Cases per property.
const CASES: u32 = 256;

fn text() -> impl Strategy<Value = String> {
    let special = select(vec![
        '"',
        '\\',
        '\n',
        '\0',
        '\u{2028}',
        '\u{feff}',
        '😀',
        '\u{10ffff}',
    ]);
    vec(prop_oneof![3 => any::<char>(), 1 => special], 0..24).prop_map(String::from_iter)
}

/// A valid id: an integer (zero, negative, the extremes) or a string.
fn id() -> impl Strategy<Value = Id> {
    prop_oneof![
        select(vec![
            json!(0),
            json!(-1),
            json!(i64::MIN),
            json!(i64::MAX),
            json!(u64::MAX)
        ]),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        text().prop_map(Value::from),
        Just(json!("")),
    ]
}

/// An id JSON-RPC does not allow: null, a fraction, a boolean, an array or an object.
fn bad_id() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<f64>()
            .prop_filter("a fraction", |f| f.is_finite() && f.fract() != 0.0)
            .prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        vec(any::<i64>(), 0..3).prop_map(Value::from),
        Just(json!({"id": 1})),
    ]
}

fn method() -> impl Strategy<Value = String> {
    prop_oneof![
        select(vec![
            "initialize",
            "tools/call",
            "tools/list",
            "ping",
            "notifications/cancelled",
            "server/discover",
        ])
        .prop_map(str::to_owned),
        text(),
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        text().prop_map(Value::from),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::from),
            vec((text(), inner), 0..4).prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// `params`: absent, or any JSON value.
fn params() -> impl Strategy<Value = Option<Value>> {
    proptest::option::of(json_value())
}

/// A member a JSON-RPC object may have, with a valid or an arbitrary value.
fn member() -> impl Strategy<Value = (&'static str, Value)> {
    let key = select(vec!["jsonrpc", "id", "method", "params", "result", "error"]);
    let value = prop_oneof![
        json_value(),
        Just(json!("2.0")),
        id(),
        method().prop_map(Value::from),
    ];
    (key, value)
}

/// `v` written as a line and read back, as the transport does.
fn wire(v: &Value) -> Value {
    serde_json::from_str(&v.to_string()).unwrap()
}

/// The same JSON value with the same JSON type: an integer stays an integer of that value.
fn same_id(a: &Value, b: &Value) -> bool {
    a == b
        && a.is_string() == b.is_string()
        && a.as_i64() == b.as_i64()
        && a.as_u64() == b.as_u64()
        && a.is_f64() == b.is_f64()
}

fn message(id: Option<&Id>, method: &str, params: Option<&Value>) -> Value {
    let mut m = Map::new();
    m.insert("jsonrpc".into(), json!("2.0"));
    if let Some(id) = id {
        m.insert("id".into(), id.clone());
    }
    m.insert("method".into(), json!(method));
    if let Some(p) = params {
        m.insert("params".into(), p.clone());
    }
    Value::Object(m)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    /// A request comes back as a request with its id, method and params exactly.
    #[test]
    fn requests_round_trip(id in id(), method in method(), params in params()) {
        let got = classify(&wire(&message(Some(&id), &method, params.as_ref())));
        let Incoming::Request { id: got_id, method: got_method, params: got_params } = got else {
            return Err(TestCaseError::fail(format!("not a request: {got:?}")));
        };
        prop_assert!(same_id(&got_id, &id), "{} became {}", id, got_id);
        prop_assert_eq!(got_method, method);
        prop_assert_eq!(got_params, params.unwrap_or(Value::Null));
    }

    /// A notification (no id) comes back as a notification.
    #[test]
    fn notifications_round_trip(method in method(), params in params()) {
        let sent = message(None, &method, params.as_ref());
        let want = Incoming::Notification {
            method: method.clone(),
            params: params.clone().unwrap_or(Value::Null),
        };
        prop_assert_eq!(classify(&wire(&sent)), want);
        let ours = notification(&method, params.unwrap_or(Value::Null));
        let got = classify(&wire(&ours));
        prop_assert!(matches!(got, Incoming::Notification { .. }), "{:?}", got);
    }

    /// Every answer echoes the id exactly, and a client's answer to us is a response.
    #[test]
    fn answers_echo_the_id(
        id in id(),
        value in json_value(),
        code in any::<i64>(),
        msg in text(),
        data in params(),
    ) {
        let mut rpc = RpcError::new(code, msg.clone());
        rpc.data = data;
        let answers = [
            result(&id, value.clone()),
            error(&id, code, msg.clone()),
            rpc.to_response(&id),
        ];
        for answer in answers {
            let back = wire(&answer);
            prop_assert!(same_id(&back["id"], &id), "{} became {}", id, back["id"]);
            prop_assert_eq!(&back["jsonrpc"], &json!("2.0"));
            let got = classify(&back);
            prop_assert!(matches!(got, Incoming::Response { .. }), "{:?}", got);
        }
        let back = wire(&result(&id, value.clone()));
        prop_assert_eq!(&back["result"], &value);
        let back = wire(&error(&id, code, msg.clone()));
        prop_assert_eq!(&back["error"], &json!({"code": code, "message": msg}));
    }

    /// A request with an id JSON-RPC does not allow is invalid, answered with a null id.
    #[test]
    fn bad_ids_are_invalid(id in bad_id(), method in method()) {
        let got = classify(&wire(&message(Some(&id), &method, None)));
        prop_assert!(matches!(&got, Incoming::Invalid { id, .. } if id.is_null()), "{:?}", got);
    }

    /// Without `"jsonrpc": "2.0"` nothing is a message; the answer carries the id when it is
    /// usable.
    #[test]
    fn wrong_version_is_invalid(
        id in proptest::option::of(prop_oneof![id(), bad_id()]),
        version in proptest::option::of(prop_oneof![
            json_value(),
            select(vec!["1.0", "2", "2.0 "]).prop_map(Value::from),
        ]),
        method in method(),
    ) {
        prop_assume!(version != Some(json!("2.0")));
        let mut sent = message(id.as_ref(), &method, None);
        let obj = sent.as_object_mut().unwrap();
        match &version {
            Some(v) => obj.insert("jsonrpc".into(), v.clone()),
            None => obj.remove("jsonrpc"),
        };
        let got = classify(&wire(&sent));
        let usable = id
            .filter(|i| i.is_string() || i.is_i64() || i.is_u64())
            .unwrap_or(Value::Null);
        prop_assert_eq!(got, Incoming::Invalid { id: usable, fault: Fault::Version });
    }

    /// A 2.0 object without a string method that is not a response is invalid.
    #[test]
    fn no_method_is_invalid(
        id in proptest::option::of(id()),
        method in proptest::option::of(json_value()),
    ) {
        prop_assume!(!method.as_ref().is_some_and(Value::is_string));
        let mut m = Map::new();
        m.insert("jsonrpc".into(), json!("2.0"));
        if let Some(id) = &id {
            m.insert("id".into(), id.clone());
        }
        if let Some(method) = method {
            m.insert("method".into(), method);
        }
        let got = classify(&wire(&Value::Object(m)));
        let Incoming::Invalid { id: got_id, .. } = got else {
            return Err(TestCaseError::fail(format!("not invalid: {got:?}")));
        };
        prop_assert!(same_id(&got_id, &id.unwrap_or(Value::Null)));
    }

    /// Anything that is not an object (a scalar or an array) is invalid with a null id.
    #[test]
    fn non_objects_are_invalid(
        v in prop_oneof![leaf(), vec(json_value(), 0..4).prop_map(Value::from)],
    ) {
        let got = classify(&v);
        prop_assert!(matches!(&got, Incoming::Invalid { id, .. } if id.is_null()), "{:?}", got);
    }

    /// Any JSON value classifies without panicking, and an invalid one's id is usable or null.
    #[test]
    fn anything_classifies(v in json_value(), extra in vec(member(), 0..5)) {
        let mut v = v;
        if let Value::Object(m) = &mut v {
            m.extend(extra.into_iter().map(|(k, x)| (k.to_owned(), x)));
        }
        if let Incoming::Invalid { id, fault } = classify(&wire(&v)) {
            prop_assert!(id.is_null() || id.is_string() || id.is_i64() || id.is_u64(), "{}", id);
            prop_assert!(!fault.to_string().is_empty());
        }
    }
}
