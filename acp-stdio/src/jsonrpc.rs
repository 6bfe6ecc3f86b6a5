//! JSON-RPC 2.0 as ACP uses it: the shared framing and classification of `jsonrpc-lines` (one
//! object per line; ACP has no batches), and seed 001's error codes.

use serde_json::Value;

pub use jsonrpc_lines::{
    INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, Incoming, METHOD_NOT_FOUND, PARSE_ERROR,
    RpcError, SERVER_BUSY, classify, notification, request,
};

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

/// A response line's value.
pub fn response(id: &Value, result: Result<Value, RpcError>) -> Value {
    match result {
        Ok(r) => jsonrpc_lines::result(id, r),
        Err(e) => e.to_response(id),
    }
}

/// The `-32600` of a line that is not a message ACP takes: `why` prefixed as every such answer
/// of this agent is.
pub fn invalid_request(why: impl std::fmt::Display) -> RpcError {
    RpcError::new(INVALID_REQUEST, format!("Invalid request: {why}"))
}
