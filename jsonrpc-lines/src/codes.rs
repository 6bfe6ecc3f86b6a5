//! The error codes JSON-RPC 2.0 defines, and the one of its server-error range both front-ends
//! use. A protocol's own codes (MCP's `-32022`, seed 001's `-32001` …) stay in its front-end.

/// The line is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// Not a valid request object (no `jsonrpc: "2.0"`, a `null` or non-scalar id, no method, a
/// line over the limit, a batch where there are none).
pub const INVALID_REQUEST: i64 = -32600;
/// No such method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Bad parameters.
pub const INVALID_PARAMS: i64 = -32602;
/// The server failed.
pub const INTERNAL_ERROR: i64 = -32603;
/// Too many requests in flight: the message says "busy" and the limit; try again once some are
/// answered. An implementation-defined code of JSON-RPC's server-error range.
pub const SERVER_BUSY: i64 = -32000;
