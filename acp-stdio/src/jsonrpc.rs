//! JSON-RPC 2.0 as ACP uses it: one object per line (no batches), the error codes (JSON-RPC's
//! own and seed 001's), and the classification of an incoming line.

use serde_json::{Value, json};

/// The line is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// Not a request object (a batch, no `jsonrpc: "2.0"`, a bad id, no method).
pub const INVALID_REQUEST: i64 = -32600;
/// No such method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Bad parameters.
pub const INVALID_PARAMS: i64 = -32602;
/// We failed.
pub const INTERNAL_ERROR: i64 = -32603;
/// Too many requests in flight: try again (an implementation-defined code of JSON-RPC's
/// server-error range).
pub const SERVER_BUSY: i64 = -32000;
/// seed 001: droid is not installed or cannot start.
pub const DROID_NOT_AVAILABLE: i64 = -32001;
/// seed 001: droid is not authenticated.
pub const AUTHENTICATION_FAILED: i64 = -32002;
/// seed 001: no such session.
pub const SESSION_NOT_FOUND: i64 = -32004;
/// seed 001: the model or Factory's API failed the turn.
pub const FACTORY_API_ERROR: i64 = -32005;
/// seed 001: droid's process failed (exited mid-turn).
pub const PROCESS_ERROR: i64 = -32006;
/// seed 001: droid or the turn ran out of time.
pub const TIMEOUT_ERROR: i64 = -32007;

/// A JSON-RPC error to send.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// The code.
    pub code: i64,
    /// What went wrong, for a person.
    pub message: String,
    /// Structured detail (`null`: none).
    pub data: Value,
}

impl RpcError {
    /// An error without data.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: Value::Null,
        }
    }

    /// `-32602` naming what is wrong.
    pub fn params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }

    /// This error with `data`.
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = data;
        self
    }

    /// The error object.
    pub fn to_value(&self) -> Value {
        let mut e = json!({"code": self.code, "message": self.message});
        if !self.data.is_null() {
            e["data"] = self.data.clone();
        }
        e
    }
}

/// What one incoming line is.
#[derive(Debug, PartialEq)]
pub enum Incoming {
    /// A request: answer it.
    Request {
        /// Its id, echoed exactly.
        id: Value,
        /// The method.
        method: String,
        /// Its params (`null` when absent).
        params: Value,
    },
    /// A notification: never answered.
    Notification {
        /// The method.
        method: String,
        /// Its params.
        params: Value,
    },
    /// The client's answer to one of our requests.
    Response {
        /// The id we gave.
        id: Value,
        /// `result`, or the error object.
        outcome: Result<Value, Value>,
    },
    /// Not a message we can take: answer with this error and id (`null` when none usable).
    Invalid {
        /// The id to answer with.
        id: Value,
        /// The error.
        error: RpcError,
    },
}

fn valid_id(id: &Value) -> bool {
    id.is_string() || id.as_i64().is_some() || id.as_u64().is_some()
}

/// Classify one line.
pub fn classify(line: &str) -> Incoming {
    let v: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => {
            return Incoming::Invalid {
                id: Value::Null,
                error: RpcError::new(PARSE_ERROR, format!("Parse error: {e}")),
            };
        }
    };
    let Value::Object(obj) = v else {
        let why = if v.is_array() {
            "batches are not part of ACP; send one JSON-RPC object per line"
        } else {
            "a JSON-RPC message is an object"
        };
        return Incoming::Invalid {
            id: Value::Null,
            error: RpcError::new(INVALID_REQUEST, format!("Invalid request: {why}")),
        };
    };
    let id = obj.get("id").cloned();
    let usable_id = id.clone().filter(valid_id).unwrap_or(Value::Null);
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Incoming::Invalid {
            id: usable_id,
            error: RpcError::new(
                INVALID_REQUEST,
                "Invalid request: \"jsonrpc\" must be \"2.0\"",
            ),
        };
    }
    let params = obj.get("params").cloned().unwrap_or(Value::Null);
    match (obj.get("method"), id) {
        (Some(Value::String(method)), None) => Incoming::Notification {
            method: method.clone(),
            params,
        },
        (Some(Value::String(method)), Some(id)) if valid_id(&id) => Incoming::Request {
            id,
            method: method.clone(),
            params,
        },
        (Some(Value::String(_)), Some(_)) => Incoming::Invalid {
            id: Value::Null,
            error: RpcError::new(
                INVALID_REQUEST,
                "Invalid request: \"id\" must be a string or an integer",
            ),
        },
        (Some(_), _) => Incoming::Invalid {
            id: usable_id,
            error: RpcError::new(
                INVALID_REQUEST,
                "Invalid request: \"method\" must be a string",
            ),
        },
        (None, Some(id)) if obj.contains_key("result") || obj.contains_key("error") => {
            Incoming::Response {
                id,
                outcome: match obj.get("error") {
                    Some(e) => Err(e.clone()),
                    None => Ok(obj.get("result").cloned().unwrap_or(Value::Null)),
                },
            }
        }
        (None, _) => Incoming::Invalid {
            id: usable_id,
            error: RpcError::new(INVALID_REQUEST, "Invalid request: no \"method\""),
        },
    }
}

/// A response line's value.
pub fn response(id: &Value, result: Result<Value, RpcError>) -> Value {
    match result {
        Ok(r) => json!({"jsonrpc": "2.0", "id": id, "result": r}),
        Err(e) => json!({"jsonrpc": "2.0", "id": id, "error": e.to_value()}),
    }
}

/// A notification's value.
pub fn notification(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

/// A request's value.
pub fn request(id: &Value, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn code(line: &str) -> (Value, i64) {
        match classify(line) {
            Incoming::Invalid { id, error } => (id, error.code),
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn every_kind_of_line_is_classified() {
        assert_eq!(code("not json"), (Value::Null, PARSE_ERROR));
        assert_eq!(
            code("{\"jsonrpc\":\"2.0\",\"id\":1"),
            (Value::Null, PARSE_ERROR)
        );
        assert_eq!(code("[1]"), (Value::Null, INVALID_REQUEST));
        assert_eq!(code("7"), (Value::Null, INVALID_REQUEST));
        assert_eq!(
            code(r#"{"id":3,"method":"x"}"#),
            (json!(3), INVALID_REQUEST)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":3}"#),
            (json!(3), INVALID_REQUEST)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":{"a":1},"method":"x"}"#),
            (Value::Null, INVALID_REQUEST)
        );
        assert_eq!(
            classify(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#),
            Incoming::Request {
                id: json!(0),
                method: "initialize".into(),
                params: json!({})
            }
        );
        assert_eq!(
            classify(r#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}"#),
            Incoming::Notification {
                method: "session/cancel".into(),
                params: json!({"sessionId": "s"})
            }
        );
        assert_eq!(
            classify(r#"{"jsonrpc":"2.0","id":"p1","result":{"outcome":{"outcome":"cancelled"}}}"#),
            Incoming::Response {
                id: json!("p1"),
                outcome: Ok(json!({"outcome": {"outcome": "cancelled"}}))
            }
        );
    }

    #[test]
    fn errors_carry_data_only_when_there_is_some() {
        let e = RpcError::new(DROID_NOT_AVAILABLE, "gone");
        assert_eq!(e.to_value(), json!({"code": -32001, "message": "gone"}));
        let e = e.with_data(json!({"install": "npm"}));
        assert_eq!(e.to_value()["data"]["install"], "npm");
    }
}
