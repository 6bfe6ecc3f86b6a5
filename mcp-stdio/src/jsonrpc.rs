//! JSON-RPC 2.0 as MCP uses it: the shared framing and classification of `jsonrpc-lines`, and
//! MCP's own codes.

pub use jsonrpc_lines::{
    INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, Id, Incoming, METHOD_NOT_FOUND, PARSE_ERROR,
    RpcError, SERVER_BUSY, classify, error, notification, result,
};

/// 2026-07-28: the request's `_meta` protocol version is not one this server serves per request;
/// `data` is `{supported, requested}`.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
