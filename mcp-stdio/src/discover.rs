//! `server/discover` (2026-07-28, which every server MUST implement) and the caching hints the
//! modern revision puts on it and on `tools/list`.
//!
//! Both answers depend on nothing but this binary: the same versions, capabilities and tools for
//! every user and connection. So they are `cacheScope: "public"`, cacheable for an hour (a new
//! release of the binary is a new process, whose answers a client re-fetches after its TTL).
//!
//! Capabilities: `tools` (a static set, so no `listChanged`) and `logging`, because requests with
//! `_meta` `io.modelcontextprotocol/logLevel` get `notifications/message` (the capability is
//! deprecated in 2026-07-28 but still in the schema). No `extensions`: the 2026 Tasks extension
//! is not offered; long runs use `droid_submit` / `droid_pend` (the spec's "Stateful Tools").

use serde_json::{Value, json};

use crate::era::{Modern, SUPPORTED_VERSIONS};
use crate::tools;

/// How long a client may cache `server/discover` and `tools/list`, in milliseconds.
pub const TTL_MS: u64 = 3_600_000;

/// The cache scope of both: nothing in them is user-specific.
pub const CACHE_SCOPE: &str = "public";

/// The `DiscoverResult`.
pub fn discover(modern: &Modern, instructions: &str) -> Value {
    modern.finish(json!({
        "supportedVersions": SUPPORTED_VERSIONS,
        "capabilities": {"tools": {}, "logging": {}},
        "instructions": instructions,
        "ttlMs": TTL_MS,
        "cacheScope": CACHE_SCOPE,
    }))
}

/// The modern `tools/list` result: the tools in their fixed order (without the 2025-11-25
/// `execution` field, which left the core protocol) and the caching hints.
pub fn tools_list(modern: &Modern, catalog: &tools::Catalog) -> Value {
    modern.finish(json!({
        "tools": tools::listed(false, catalog),
        "ttlMs": TTL_MS,
        "cacheScope": CACHE_SCOPE,
    }))
}
