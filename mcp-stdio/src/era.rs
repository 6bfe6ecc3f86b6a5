//! The two protocol eras and which one a request belongs to (docs/architecture.md#mcp-server).
//!
//! - **Legacy** (2024-11-05 … 2025-11-25): `initialize` negotiates a revision for the whole stdio
//!   process; every request without modern `_meta` is served that way, exactly as before the
//!   modern era existed.
//! - **Modern** (2026-07-28): stateless. A request is modern when it is `server/discover` or its
//!   `params._meta` carries `io.modelcontextprotocol/protocolVersion`; that request alone is then
//!   served by the modern rules: its `_meta` is checked (`-32602` for a missing or malformed
//!   required field, `-32022` with `{supported, requested}` for a version we do not serve per
//!   request) and its result carries `resultType: "complete"` and our `serverInfo` in `_meta`.
//!
//! Deciding per request (rather than locking the process into one era) is what the 2026
//! versioning page allows a dual-era server ("MAY serve both eras concurrently"), and legacy
//! clients never send the modern key, so they cannot be affected. `initialize` is always legacy.

use serde_json::{Map, Value, json};

use crate::jsonrpc::{INVALID_PARAMS, RpcError, UNSUPPORTED_PROTOCOL_VERSION};
use crate::logging::Level;

/// Revisions answered through `initialize`, newest first; an unknown one gets the first.
pub const LEGACY_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// Revisions served per request through `_meta`, newest first.
pub const MODERN_VERSIONS: [&str; 1] = ["2026-07-28"];

/// Every revision this server speaks, newest first: `server/discover`'s `supportedVersions` and
/// the `supported` list of `-32022` (a client picks one; the legacy ones through `initialize`).
pub const SUPPORTED_VERSIONS: [&str; 5] = [
    MODERN_VERSIONS[0],
    LEGACY_VERSIONS[0],
    LEGACY_VERSIONS[1],
    LEGACY_VERSIONS[2],
    LEGACY_VERSIONS[3],
];

/// The only revision with JSON-RPC batches (added in 2025-03-26, removed in 2025-06-18).
pub const BATCH_VERSION: &str = LEGACY_VERSIONS[2];

/// The only legacy revision with Tasks (`capabilities.tasks`, `execution.taskSupport`,
/// `tasks/*`).
pub const TASKS_VERSION: &str = LEGACY_VERSIONS[0];

const VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
const CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
const LOG_LEVEL_KEY: &str = "io.modelcontextprotocol/logLevel";
const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";

/// What the server calls itself (`serverInfo` in `initialize`, `_meta` in modern results).
pub fn server_info() -> Value {
    json!({"name": "droid-executor", "title": "droid-executor", "version": env!("CARGO_PKG_VERSION")})
}

/// How one request is to be served.
#[derive(Debug, Clone, PartialEq)]
pub enum Era {
    /// By the revision `initialize` negotiated.
    Legacy,
    /// Statelessly, by the revision its `_meta` names.
    Modern(Modern),
}

/// A modern request's checked `_meta`.
#[derive(Debug, Clone, PartialEq)]
pub struct Modern {
    /// The revision it asked for (one of [`MODERN_VERSIONS`]).
    pub version: &'static str,
    /// The level its log messages must reach; none are sent without one.
    pub log_level: Option<Level>,
}

impl Era {
    /// The era of request `method` with `params`.
    ///
    /// # Errors
    /// The error to answer a modern request whose `_meta` is wrong with.
    pub fn of(method: &str, params: &Value) -> Result<Era, RpcError> {
        let meta = params.get("_meta").and_then(Value::as_object);
        let modern =
            method == "server/discover" || meta.is_some_and(|m| m.contains_key(VERSION_KEY));
        if method == "initialize" || !modern {
            return Ok(Era::Legacy);
        }
        Modern::check(method, meta).map(Era::Modern)
    }
}

impl Modern {
    fn check(method: &str, meta: Option<&Map<String, Value>>) -> Result<Modern, RpcError> {
        let Some(meta) = meta else {
            return Err(RpcError::invalid_params(format!(
                "{method} needs params._meta with {VERSION_KEY} and {CAPABILITIES_KEY} (protocol revision 2026-07-28); legacy clients call initialize"
            )));
        };
        let requested = match meta.get(VERSION_KEY) {
            Some(Value::String(v)) => v,
            Some(other) => {
                return Err(RpcError::invalid_params(format!(
                    "_meta {VERSION_KEY} must be a string, got {other}"
                )));
            }
            None => {
                return Err(RpcError::invalid_params(format!(
                    "_meta needs {VERSION_KEY}"
                )));
            }
        };
        let Some(version) = MODERN_VERSIONS.into_iter().find(|v| v == requested) else {
            let how = if LEGACY_VERSIONS.contains(&requested.as_str()) {
                " per request (it is served through initialize)"
            } else {
                ""
            };
            return Err(RpcError {
                code: UNSUPPORTED_PROTOCOL_VERSION,
                message: format!("Unsupported protocol version {requested}{how}"),
                data: Some(json!({"supported": SUPPORTED_VERSIONS, "requested": requested})),
            });
        };
        if !meta.get(CAPABILITIES_KEY).is_some_and(Value::is_object) {
            return Err(RpcError::new(
                INVALID_PARAMS,
                format!("_meta needs {CAPABILITIES_KEY} (an object; {{}} declares none)"),
            ));
        }
        let log_level = match meta.get(LOG_LEVEL_KEY) {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                Level::from_value(Some(v))
                    .map_err(|e| RpcError::invalid_params(format!("_meta {LOG_LEVEL_KEY}: {e}")))?,
            ),
        };
        Ok(Modern { version, log_level })
    }

    /// `result` as this revision wants it: `resultType: "complete"` (unless the result has its
    /// own) and our `serverInfo` in `_meta`, beside whatever `_meta` it already had.
    pub fn finish(&self, mut result: Value) -> Value {
        if let Some(obj) = result.as_object_mut() {
            obj.entry("resultType").or_insert_with(|| json!("complete"));
            let meta = obj.entry("_meta").or_insert_with(|| json!({}));
            if let Some(meta) = meta.as_object_mut() {
                meta.insert(SERVER_INFO_KEY.into(), server_info());
            }
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn meta(m: Value) -> Value {
        json!({"_meta": m})
    }

    #[test]
    fn only_modern_meta_or_discover_is_modern() {
        assert_eq!(Era::of("tools/list", &Value::Null), Ok(Era::Legacy));
        assert_eq!(
            Era::of("tools/call", &json!({"_meta": {"progressToken": 1}})),
            Ok(Era::Legacy)
        );
        let ok = meta(json!({VERSION_KEY: "2026-07-28", CAPABILITIES_KEY: {}}));
        assert_eq!(Era::of("initialize", &ok), Ok(Era::Legacy));
        assert_eq!(
            Era::of("tools/list", &ok),
            Ok(Era::Modern(Modern {
                version: "2026-07-28",
                log_level: None
            }))
        );
        assert_eq!(
            Era::of("server/discover", &json!({})).map_err(|e| e.code),
            Err(INVALID_PARAMS)
        );
    }

    #[test]
    fn a_bad_meta_is_rejected_with_the_right_code() {
        let code = |m: Value| Era::of("tools/list", &meta(m)).map_err(|e| e.code);
        assert_eq!(
            code(json!({VERSION_KEY: 7, CAPABILITIES_KEY: {}})),
            Err(-32602)
        );
        assert_eq!(code(json!({VERSION_KEY: "2026-07-28"})), Err(-32602));
        assert_eq!(
            code(json!({VERSION_KEY: "2026-07-28", CAPABILITIES_KEY: {}, LOG_LEVEL_KEY: "loud"})),
            Err(-32602)
        );
        let err = Era::of(
            "tools/list",
            &meta(json!({VERSION_KEY: "1900-01-01", CAPABILITIES_KEY: {}})),
        )
        .err();
        assert_eq!(
            err.map(|e| (e.code, e.data)),
            Some((
                -32022,
                Some(json!({"supported": SUPPORTED_VERSIONS, "requested": "1900-01-01"}))
            ))
        );
    }

    #[test]
    fn finish_adds_result_type_and_server_info_and_keeps_meta() {
        let m = Modern {
            version: "2026-07-28",
            log_level: None,
        };
        let done = m.finish(json!({"tools": [], "_meta": {"x/y": 1}}));
        assert_eq!(
            done,
            json!({"tools": [], "resultType": "complete",
                   "_meta": {"x/y": 1, SERVER_INFO_KEY: server_info()}})
        );
    }
}
