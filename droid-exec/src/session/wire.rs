//! droid's interactive wire (`droid exec --input-format stream-jsonrpc --output-format
//! stream-jsonrpc`): JSON-RPC 2.0 envelopes with Factory's extra fields, one per line.
//!
//! Every line droid writes carries `"type": "notification" | "response" | "request"` and
//! `factoryApiVersion`; what we write carries the same (droid ignores a request without them).
//! Recorded in the droid recordings `input-stream-jsonrpc-multiturn` and
//! `input-stream-jsonrpc-permission-request` (copied under `tests/fixtures/droid-rpc/`).

use serde_json::{Value, json};

/// The Factory API version droid 0.225.2 speaks and expects on requests.
pub const FACTORY_API_VERSION: &str = "1.0.0";

/// One line from droid, decoded.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// The answer to one of our requests.
    Response {
        /// The id we gave.
        id: String,
        /// `result`, or the `error` object's message.
        outcome: Result<Value, String>,
    },
    /// droid asks us something (a permission): answer with [`response`].
    Request {
        /// droid's id, echoed in the answer.
        id: Value,
        /// e.g. `droid.request_permission`.
        method: String,
        /// Its params.
        params: Value,
    },
    /// `droid.session_notification`: the inner `notification` object.
    Notification(Value),
    /// Anything else that parsed as JSON (kept for the logs).
    Other(Value),
}

/// Decode one line; `None` for a line that is not a JSON object (droid prints none, but a
/// broken pipe can cut one).
pub fn decode(line: &str) -> Option<Incoming> {
    let v: Value = serde_json::from_str(line).ok()?;
    if !v.is_object() {
        return None;
    }
    let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
    Some(match kind {
        "response" => {
            let id = match v.get("id") {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            let outcome = match v.get("error") {
                Some(e) => Err(e
                    .get("message")
                    .and_then(Value::as_str)
                    .map_or_else(|| e.to_string(), str::to_owned)),
                None => Ok(v.get("result").cloned().unwrap_or(Value::Null)),
            };
            Incoming::Response { id, outcome }
        }
        "request" => Incoming::Request {
            id: v.get("id").cloned().unwrap_or(Value::Null),
            method: v
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            params: v.get("params").cloned().unwrap_or(Value::Null),
        },
        "notification" => match v.pointer("/params/notification") {
            Some(n) if n.is_object() => Incoming::Notification(n.clone()),
            _ => Incoming::Other(v),
        },
        _ => Incoming::Other(v),
    })
}

/// A request line (without the newline).
pub fn request(id: &str, method: &str, params: &Value) -> String {
    json!({
        "jsonrpc": "2.0",
        "type": "request",
        "factoryApiVersion": FACTORY_API_VERSION,
        "id": id,
        "method": method,
        "params": params,
    })
    .to_string()
}

/// The answer to droid's request `id` (without the newline).
pub fn response(id: &Value, result: &Value) -> String {
    json!({
        "jsonrpc": "2.0",
        "type": "response",
        "factoryApiVersion": FACTORY_API_VERSION,
        "id": id,
        "result": result,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn the_three_kinds_of_line_decode() {
        let r = decode(
            r#"{"jsonrpc":"2.0","type":"response","factoryApiVersion":"1.0.0","id":"msg-1","result":{}}"#,
        );
        assert_eq!(
            r,
            Some(Incoming::Response {
                id: "msg-1".into(),
                outcome: Ok(json!({}))
            })
        );
        let e = decode(r#"{"type":"response","id":"i","error":{"code":-32602,"message":"bad"}}"#);
        assert_eq!(
            e,
            Some(Incoming::Response {
                id: "i".into(),
                outcome: Err("bad".into())
            })
        );
        let q = decode(
            r#"{"type":"request","jsonrpc":"2.0","method":"droid.request_permission","id":"16a7","params":{"toolUses":[]}}"#,
        );
        assert_eq!(
            q,
            Some(Incoming::Request {
                id: json!("16a7"),
                method: "droid.request_permission".into(),
                params: json!({"toolUses": []})
            })
        );
        let n = decode(
            r#"{"type":"notification","method":"droid.session_notification","params":{"notification":{"type":"assistant_text_delta","textDelta":"Hi"}}}"#,
        );
        assert_eq!(
            n,
            Some(Incoming::Notification(
                json!({"type": "assistant_text_delta", "textDelta": "Hi"})
            ))
        );
    }

    #[test]
    fn garbage_is_not_a_message() {
        for line in ["", "not json", "[1,2]", "\"s\"", "{\"type\":"] {
            assert_eq!(decode(line), None, "{line:?}");
        }
    }

    #[test]
    fn what_we_write_carries_the_envelope() {
        let v: Value =
            serde_json::from_str(&request("a", "droid.interrupt_session", &json!({}))).unwrap();
        assert_eq!(v["type"], "request");
        assert_eq!(v["factoryApiVersion"], FACTORY_API_VERSION);
        let v: Value =
            serde_json::from_str(&response(&json!("x"), &json!({"selectedOption": "cancel"})))
                .unwrap();
        assert_eq!(v["result"]["selectedOption"], "cancel");
        assert_eq!(v["id"], "x");
    }
}
