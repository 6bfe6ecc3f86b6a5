//! One JSON-RPC 2.0 message: what an incoming value is ([`classify`]), and the values we send
//! (responses, errors, notifications, requests).

use std::fmt;

use serde_json::{Value, json};

use crate::codes::INVALID_PARAMS;

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
    /// The peer's answer to one of our requests (never answered back).
    Response {
        /// The id it answers (`null` when it had none).
        id: Id,
        /// `result`, or the error object.
        outcome: Result<Value, Value>,
    },
    /// Not a valid message: answer `-32600` with this id (`null` when it had none usable).
    Invalid {
        /// The id to answer with.
        id: Id,
        /// What is wrong.
        fault: Fault,
    },
}

/// Why a value is not a JSON-RPC 2.0 message; its `Display` is the sentence of the `-32600`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Not a JSON object.
    NotAnObject,
    /// `"jsonrpc"` is missing or not `"2.0"`.
    Version,
    /// A request's id is `null`, a fraction, a boolean, an array or an object.
    Id,
    /// No string `"method"`, and not a response either.
    Method,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NotAnObject => "a message must be a JSON object",
            Self::Version => "\"jsonrpc\" must be \"2.0\"",
            Self::Id => "a request id must be a string or an integer",
            Self::Method => "\"method\" must be a string",
        })
    }
}

fn valid_id(id: &Value) -> bool {
    id.is_string() || id.as_i64().is_some() || id.as_u64().is_some()
}

/// Classify one message (a whole line, or an element of a batch).
pub fn classify(msg: &Value) -> Incoming {
    let Some(obj) = msg.as_object() else {
        return Incoming::Invalid {
            id: Value::Null,
            fault: Fault::NotAnObject,
        };
    };
    let id = obj.get("id");
    let usable_id = id.filter(|i| valid_id(i)).cloned().unwrap_or(Value::Null);
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Incoming::Invalid {
            id: usable_id,
            fault: Fault::Version,
        };
    }
    let params = obj.get("params").cloned().unwrap_or(Value::Null);
    match (obj.get("method"), id) {
        (Some(Value::String(method)), None) => Incoming::Notification {
            method: method.clone(),
            params,
        },
        (Some(Value::String(method)), Some(id)) if valid_id(id) => Incoming::Request {
            id: id.clone(),
            method: method.clone(),
            params,
        },
        (Some(Value::String(_)), Some(_)) => Incoming::Invalid {
            id: Value::Null,
            fault: Fault::Id,
        },
        (None, _) if obj.contains_key("result") || obj.contains_key("error") => {
            Incoming::Response {
                id: id.cloned().unwrap_or(Value::Null),
                outcome: match obj.get("error") {
                    Some(e) => Err(e.clone()),
                    None => Ok(obj.get("result").cloned().unwrap_or(Value::Null)),
                },
            }
        }
        (_, _) => Incoming::Invalid {
            id: usable_id,
            fault: Fault::Method,
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

/// A notification.
pub fn notification(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

/// A request of ours to the peer.
pub fn request(id: &Id, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// An error answer before it is tied to a request id: handlers return it, the dispatcher sends
/// it with the id.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// The JSON-RPC code.
    pub code: i64,
    /// One sentence saying what is wrong.
    pub message: String,
    /// Structured detail (MCP's `-32022` carries `{supported, requested}`).
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

    /// `-32602` naming what is wrong.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }

    /// This error with `data`.
    #[must_use]
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// The error object (`{code, message}`, and `data` when there is some).
    pub fn to_value(&self) -> Value {
        let mut err = json!({"code": self.code, "message": self.message});
        if let (Some(data), Some(obj)) = (&self.data, err.as_object_mut()) {
            obj.insert("data".into(), data.clone());
        }
        err
    }

    /// The error response to request `id`.
    pub fn to_response(&self, id: &Id) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "error": self.to_value()})
    }
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
        assert_eq!(
            classify(
                &json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}})
            ),
            Incoming::Notification {
                method: "session/cancel".into(),
                params: json!({"sessionId": "s"})
            }
        );
        assert_eq!(
            classify(&json!({"jsonrpc": "2.0", "id": "p1", "result": {"outcome": "cancelled"}})),
            Incoming::Response {
                id: json!("p1"),
                outcome: Ok(json!({"outcome": "cancelled"}))
            }
        );
        assert_eq!(
            classify(&json!({"jsonrpc": "2.0", "id": 3, "error": {"code": 1}})),
            Incoming::Response {
                id: json!(3),
                outcome: Err(json!({"code": 1}))
            }
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
                fault: Fault::Version
            }
        );
        assert_eq!(
            classify(&json!({"jsonrpc": "2.0", "id": 3})),
            Incoming::Invalid {
                id: json!(3),
                fault: Fault::Method
            }
        );
        assert_eq!(
            classify(&json!({"jsonrpc": "2.0", "id": 3, "method": 7, "result": 1})),
            Incoming::Invalid {
                id: json!(3),
                fault: Fault::Method
            }
        );
    }

    #[test]
    fn errors_carry_data_only_when_there_is_some() {
        let e = RpcError::new(-32001, "gone");
        assert_eq!(e.to_value(), json!({"code": -32001, "message": "gone"}));
        let e = e.with_data(json!({"install": "npm"}));
        assert_eq!(
            e.to_response(&json!(1)),
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32001, "message": "gone", "data": {"install": "npm"}}})
        );
    }
}

#[cfg(test)]
mod props;
