//! JSON-RPC 2.0 as MCP uses it: the error codes, the shape of responses and notifications, and
//! the classification of an incoming message.

use serde_json::{Value, json};

/// The line is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// Not a valid request object (no `jsonrpc: "2.0"`, a `null` or non-scalar id, …).
pub const INVALID_REQUEST: i64 = -32600;
/// No such method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Bad parameters (unknown tool, malformed `tools/call`, bad cursor or log level).
pub const INVALID_PARAMS: i64 = -32602;
/// The server failed.
pub const INTERNAL_ERROR: i64 = -32603;
/// The session already runs and queues as many tool calls as it takes (see
/// `MAX_RUNNING_CALLS` / `MAX_QUEUED_CALLS`): the message says "busy" and the limits; try again
/// once some have been answered. An implementation-defined code of the legacy range
/// (docs/architecture.md#mcp-server).
pub const SERVER_BUSY: i64 = -32000;
/// 2026-07-28: the request's `_meta` protocol version is not one this server serves per request;
/// `data` is `{supported, requested}`.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// A request id: a string or an integer (0 included), echoed exactly as received.
pub type Id = Value;

/// What one incoming JSON value is.
#[derive(Debug, PartialEq)]
pub enum Incoming {
    /// A request: answer it.
    Request {
        /// Its id.
        id: Id,
        /// The method.
        method: String,
        /// Its params (`null` when absent).
        params: Value,
    },
    /// A notification: never answered.
    Notification {
        /// The method.
        method: String,
        /// Its params (`null` when absent).
        params: Value,
    },
    /// A response from the client (we send no requests): ignored.
    Response,
    /// Not a valid message: answer `-32600` with this id (`null` when it had none usable).
    Invalid {
        /// The id to answer with.
        id: Id,
        /// What is wrong.
        why: String,
    },
}

fn valid_id(id: &Value) -> bool {
    id.is_string() || id.as_i64().is_some() || id.as_u64().is_some()
}

/// Classify one message (an element of a batch, or a whole line).
pub fn classify(msg: &Value) -> Incoming {
    let Some(obj) = msg.as_object() else {
        return Incoming::Invalid {
            id: Value::Null,
            why: "a message must be a JSON object".into(),
        };
    };
    let id = obj.get("id");
    let usable_id = id.filter(|i| valid_id(i)).cloned().unwrap_or(Value::Null);
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Incoming::Invalid {
            id: usable_id,
            why: "\"jsonrpc\" must be \"2.0\"".into(),
        };
    }
    let params = obj.get("params").cloned().unwrap_or(Value::Null);
    match (obj.get("method").and_then(Value::as_str), id) {
        (Some(method), None) => Incoming::Notification {
            method: method.to_owned(),
            params,
        },
        (Some(method), Some(id)) if valid_id(id) => Incoming::Request {
            id: id.clone(),
            method: method.to_owned(),
            params,
        },
        (Some(_), Some(_)) => Incoming::Invalid {
            id: Value::Null,
            why: "a request id must be a string or an integer".into(),
        },
        (None, _) if obj.contains_key("result") || obj.contains_key("error") => Incoming::Response,
        (None, _) => Incoming::Invalid {
            id: usable_id,
            why: "\"method\" must be a string".into(),
        },
    }
}

/// A success response.
pub fn result(id: &Id, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An error response.
pub fn error(id: &Id, code: i64, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}})
}

/// An error answer before it is tied to a request id: handlers return it, the dispatcher sends
/// it with the id.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// The JSON-RPC code (one of the constants above).
    pub code: i64,
    /// One sentence saying what is wrong.
    pub message: String,
    /// Extra detail (`-32022` carries `{supported, requested}`).
    pub data: Option<Value>,
}

impl RpcError {
    /// An error without data.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// `-32602`.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }

    /// The error response to request `id`.
    pub fn to_response(&self, id: &Id) -> Value {
        let mut err = json!({"code": self.code, "message": self.message});
        if let (Some(data), Some(obj)) = (&self.data, err.as_object_mut()) {
            obj.insert("data".into(), data.clone());
        }
        json!({"jsonrpc": "2.0", "id": id, "error": err})
    }
}

/// A notification.
pub fn notification(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn classifies_every_shape() {
        let req = classify(&json!({"jsonrpc": "2.0", "id": 0, "method": "ping"}));
        assert_eq!(
            req,
            Incoming::Request {
                id: json!(0),
                method: "ping".into(),
                params: Value::Null
            }
        );
        assert!(matches!(
            classify(&json!({"jsonrpc": "2.0", "id": "a", "method": "x", "params": {}})),
            Incoming::Request { .. }
        ));
        assert!(matches!(
            classify(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
            Incoming::Notification { .. }
        ));
        assert_eq!(
            classify(&json!({"jsonrpc": "2.0", "id": 3, "result": {}})),
            Incoming::Response
        );
        for bad in [
            json!({"jsonrpc": "2.0", "id": null, "method": "ping"}),
            json!({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}),
            json!({"jsonrpc": "2.0", "id": [1], "method": "ping"}),
            json!([1]),
            json!("ping"),
        ] {
            assert!(
                matches!(classify(&bad), Incoming::Invalid { ref id, .. } if id.is_null()),
                "{bad}"
            );
        }
        assert_eq!(
            classify(&json!({"id": 4, "method": "ping"})),
            Incoming::Invalid {
                id: json!(4),
                why: "\"jsonrpc\" must be \"2.0\"".into()
            }
        );
    }
}

#[cfg(test)]
mod props;
