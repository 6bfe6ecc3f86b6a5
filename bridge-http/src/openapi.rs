//! The OpenAPI 3.1 document of the bridge (`GET /openapi.json`, checked in as
//! `schemas/openapi.json` by `cargo xtask codegen`), generated from the contract types' JSON
//! Schemas: their `$defs` become `components/schemas` and every `$ref` is rewritten to point
//! there, so the document cannot drift from the types the bridge actually decodes and encodes.

use serde_json::{Map, Value, json};

/// Point `#/$defs/X` references at `#/components/schemas/X`, everywhere in `v`.
fn rewrite_refs(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get_mut("$ref")
                && let Some(name) = r.strip_prefix("#/$defs/")
            {
                *r = format!("#/components/schemas/{name}");
            }
            m.values_mut().for_each(rewrite_refs);
        }
        Value::Array(a) => a.iter_mut().for_each(rewrite_refs),
        _ => {}
    }
}

/// Move `schema`'s definitions into `into` (first one of a name wins: the contract's schemas
/// share their definitions) and return the schema itself, without `$schema` and `$defs`.
fn hoist(mut schema: Value, into: &mut Map<String, Value>) -> Value {
    if let Value::Object(m) = &mut schema {
        m.remove("$schema");
        if let Some(Value::Object(defs)) = m.remove("$defs") {
            for (name, def) in defs {
                into.entry(name).or_insert(def);
            }
        }
    }
    schema
}

fn reference(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

fn body(name: &str) -> Value {
    json!({"content": {"application/json": {"schema": reference(name)}}})
}

fn answer(description: &str, name: &str) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": reference(name)}}})
}

fn refusal(description: &str) -> Value {
    answer(description, "Error")
}

/// An answer of `/mcp`'s transport: a JSON-RPC error with a `null` id.
fn rpc_refusal(description: &str) -> Value {
    answer(description, "JsonRpcError")
}

/// The headers of MCP's Streamable HTTP a request may carry.
fn mcp_headers(with_mirrored: bool) -> Value {
    let mut all = vec![
        json!({"name": "Mcp-Session-Id", "in": "header", "schema": {"type": "string"}, "description": "the session, as initialize's answer named it (legacy revisions; every request but initialize)"}),
        json!({"name": "MCP-Protocol-Version", "in": "header", "schema": {"type": "string"}, "description": "a revision the server speaks (400 with -32022 otherwise); on a 2026-07-28 request, the revision its _meta names"}),
    ];
    if with_mirrored {
        all.push(json!({"name": "Mcp-Method", "in": "header", "schema": {"type": "string"}, "description": "2026-07-28: the body's method (400 with -32020 when missing or different)"}));
        all.push(json!({"name": "Mcp-Name", "in": "header", "schema": {"type": "string"}, "description": "2026-07-28, on tools/call: the body's params.name, plain or =?base64?…?= (400 with -32020 when missing or different)"}));
    }
    Value::Array(all)
}

/// The document.
pub fn document() -> Value {
    let mut schemas = Map::new();
    // top-level types first, so they win over their copies inside other schemas' $defs
    let request = hoist(droid_contract::request_schema(), &mut Map::new());
    let result = hoist(droid_contract::result_schema(), &mut Map::new());
    let record = hoist(droid_contract::task_record_schema(), &mut Map::new());
    let worktree = hoist(droid_contract::worktree_answer_schema(), &mut Map::new());
    schemas.insert("ExecutionRequest".into(), request);
    schemas.insert("ExecutionResult".into(), result);
    schemas.insert("TaskRecord".into(), record);
    schemas.insert("WorktreeAnswer".into(), worktree);
    for s in [
        droid_contract::request_schema(),
        droid_contract::result_schema(),
        droid_contract::task_record_schema(),
        droid_contract::worktree_answer_schema(),
    ] {
        hoist(s, &mut schemas);
    }
    schemas.insert(
        "TaskSubmitted".into(),
        json!({
            "type": "object",
            "required": ["task_id", "status_url", "events_url"],
            "properties": {
                "task_id": {"type": "string", "description": "droid-<unix seconds>-<4 hex digits>"},
                "status_url": {"type": "string", "description": "GET it for the task's record"},
                "events_url": {"type": "string", "description": "GET it for server-sent events"},
            },
        }),
    );
    schemas.insert(
        "TaskList".into(),
        json!({
            "type": "object",
            "required": ["tasks", "damaged"],
            "properties": {
                "tasks": {"type": "array", "items": reference("TaskRecord")},
                "damaged": {
                    "type": "array",
                    "description": "entries of the task store skipped because they are not readable tasks (a file or FIFO where a task directory belongs, a damaged task.json); every other task is listed",
                    "items": {
                        "type": "object",
                        "required": ["entry", "problem"],
                        "properties": {
                            "entry": {"type": "string", "description": "the entry's name in the store's tasks/ directory"},
                            "problem": {"type": "string", "description": "what is wrong with it"},
                        },
                    },
                },
            },
        }),
    );
    schemas.insert(
        "Error".into(),
        json!({
            "type": "object",
            "required": ["error"],
            "properties": {"error": {
                "type": "object",
                "required": ["status", "code", "message"],
                "properties": {
                    "status": {"type": "integer"},
                    "code": {"type": "string", "description": "stable machine name, e.g. body_too_large"},
                    "message": {"type": "string", "description": "what went wrong and what to do"},
                },
            }},
        }),
    );
    schemas.insert(
        "JsonRpcMessage".into(),
        json!({
            "description": "A JSON-RPC 2.0 message of MCP (a request, a notification or a response), or, in a session that negotiated revision 2025-03-26, a batch of them",
            "oneOf": [
                {"type": "object", "required": ["jsonrpc"], "properties": {"jsonrpc": {"const": "2.0"}}},
                {"type": "array", "items": {"type": "object"}},
            ],
        }),
    );
    schemas.insert(
        "JsonRpcError".into(),
        json!({
            "type": "object",
            "required": ["jsonrpc", "id", "error"],
            "properties": {
                "jsonrpc": {"const": "2.0"},
                "id": {"type": "null"},
                "error": {
                    "type": "object",
                    "required": ["code", "message"],
                    "properties": {
                        "code": {"type": "integer", "description": "-32700 parse error, -32600 invalid request, -32601 method not found (2026-07-28), -32001 session not found, -32020 header mismatch, -32022 unsupported protocol version (data: {supported, requested})"},
                        "message": {"type": "string", "description": "what went wrong and what to do"},
                        "data": {},
                    },
                },
            },
        }),
    );
    schemas.insert(
        "Health".into(),
        json!({
            "type": "object",
            "required": ["status", "version", "droid", "runs", "tasks"],
            "properties": {
                "status": {"type": "string", "enum": ["ok"]},
                "version": {"type": "string"},
                "droid": {"type": "object", "properties": {
                    "found": {"type": "boolean"},
                    "path": {"type": ["string", "null"]},
                    "source": {"type": "string"},
                    "version": {"type": ["string", "null"]},
                }},
                "runs": {"type": "object", "properties": {
                    "running": {"type": "integer"}, "queued": {"type": "integer"}}},
                "tasks": {"type": "object", "properties": {
                    "store": {"type": ["string", "null"]},
                    "running": {"type": ["integer", "null"]},
                    "queued": {"type": ["integer", "null"]},
                    "damaged": {"type": ["integer", "null"], "description": "store entries skipped as damaged (GET /tasks names them)"}}},
                "limits": {"type": "object"},
            },
        }),
    );
    let mut doc = json!({
        "openapi": "3.1.0",
        "info": {
            "title": "droid-executor HTTP bridge",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Hand a decided, well-specified coding task to Factory's droid CLI and get back a verified, structured result. Every route answers 400 without exactly one Host header, 401 without the configured bearer token, 403 for a non-loopback Host or a browser Origin, 431 for a request head over 64 KiB or with more than 100 header lines (from the HTTP layer, without a body), and 503 while the bridge shuts down. A connection arriving while every connection the bridge holds is busy (max_connections; idle ones are closed to make room) is answered 503 `connection_limit` before its request is read. Every GET route answers HEAD too. An unknown path is answered 404, a known path with another method 405 with Allow.",
        },
        "servers": [{"url": "http://127.0.0.1:53002"}],
        "paths": {
            "/execute": {"post": {
                "summary": "Run one task and wait for its result (the client disconnecting cancels it)",
                "requestBody": body("ExecutionRequest"),
                "responses": {
                    "200": answer("The result, whatever its status", "ExecutionResult"),
                    "400": answer("Invalid JSON or contract violations: an error result listing each (an Error when the body itself cannot be read)", "ExecutionResult"),
                    "408": refusal("The body did not arrive in time"),
                    "413": refusal("The body is larger than body_limit"),
                    "415": refusal("The body is not declared application/json"),
                    "429": refusal("The queue of sync requests is full (see Retry-After)"),
                    "503": refusal("Shutting down, or `connections_reserved`: as many long requests (event streams and sync runs) go as the connections outside the reserve of short requests allow (see Retry-After)"),
                },
            }},
            "/tasks": {
                "post": {
                    "summary": "Start a background task",
                    "requestBody": body("ExecutionRequest"),
                    "responses": {
                        "202": answer("Started", "TaskSubmitted"),
                        "400": answer("Invalid JSON or contract violations: an error result listing each (an Error when the body itself cannot be read)", "ExecutionResult"),
                        "408": refusal("The body did not arrive in time"),
                        "409": refusal("`worktree`: an isolation \"worktree\" task beyond max_worktrees (apply or discard some first)"),
                        "413": refusal("The body is larger than body_limit"),
                        "415": refusal("The body is not declared application/json"),
                    },
                },
                "get": {
                    "summary": "Tasks, newest first",
                    "parameters": [
                        {"name": "state", "in": "query", "schema": reference("TaskState")},
                        {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "default": 100}},
                    ],
                    "responses": {
                        "200": answer("The tasks", "TaskList"),
                        "400": refusal("Bad query"),
                    },
                },
            },
            "/tasks/{id}": {
                "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
                "get": {
                    "summary": "A task's record (with its result once finished)",
                    "responses": {"200": answer("The record", "TaskRecord"), "404": refusal("No such task")},
                },
                "delete": {
                    "summary": "Cancel a task",
                    "responses": {
                        "200": answer("Stopped (or already finished)", "TaskRecord"),
                        "202": answer("Still stopping", "TaskRecord"),
                        "404": refusal("No such task"),
                    },
                },
            },
            "/tasks/{id}/events": {
                "parameters": [
                    {"name": "id", "in": "path", "required": true, "schema": {"type": "string"}},
                    {"name": "after", "in": "query", "schema": {"type": "integer", "minimum": 0}},
                    {"name": "Last-Event-ID", "in": "header", "schema": {"type": "integer", "minimum": 0}},
                ],
                "get": {
                    "summary": "Server-sent events: the recorded events, then live ones, then `event: result`; a `: keep-alive` comment after stream_keep_alive of quiet; at stream_max_life the stream ends with `event: resume` (data `{after, message}`): reconnect with Last-Event-ID",
                    "responses": {
                        "200": {"description": "An event stream", "content": {"text/event-stream": {"schema": {"type": "string"}}}},
                        "400": refusal("Last-Event-ID or after is not an event number, or the query has another parameter"),
                        "404": refusal("No such task"),
                        "429": refusal("`too_many_streams`: max_streams event streams are open, or max_streams_per_task of this task (see Retry-After)"),
                        "503": refusal("Shutting down, background tasks are unavailable, or `connections_reserved`: as many long requests (event streams and sync runs) go as the connections outside the reserve of short requests allow (see Retry-After)"),
                    },
                },
            },
            "/tasks/{id}/apply": {
                "parameters": [
                    {"name": "id", "in": "path", "required": true, "schema": {"type": "string"}},
                    {"name": "check", "in": "query", "schema": {"type": "boolean", "default": false}},
                ],
                "post": {
                    "summary": "Bring a worktree task's change into the user's working tree as uncommitted changes, merged three-way against its base; all or nothing (with check=true: say what would happen, change nothing)",
                    "responses": {
                        "200": answer("Applied (or, with check, it would apply cleanly)", "WorktreeAnswer"),
                        "400": refusal("The query has another parameter, or check is not true or false"),
                        "404": refusal("No such task"),
                        "409": answer("`conflict`: nothing was written, `conflicts` names the paths; or `refused`: already applied or discarded, a run working there, a run using the repository in place", "WorktreeAnswer"),
                    },
                },
            },
            "/tasks/{id}/discard": {
                "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
                "post": {
                    "summary": "Remove a worktree task's worktree and branch",
                    "responses": {
                        "200": answer("Discarded", "WorktreeAnswer"),
                        "404": refusal("No such task"),
                        "409": answer("`refused`: already applied or discarded, or a run working there", "WorktreeAnswer"),
                    },
                },
            },
            "/health": {"get": {
                "summary": "Version, droid, run and task counts",
                "responses": {"200": answer("Serving", "Health")},
            }},
            "/metrics": {"get": {
                "summary": "Prometheus text",
                "responses": {"200": {"description": "Metrics", "content": {"text/plain": {"schema": {"type": "string"}}}}},
            }},
            "/openapi.json": {"get": {
                "summary": "This document",
                "responses": {"200": {"description": "OpenAPI 3.1", "content": {"application/json": {"schema": {"type": "object"}}}}},
            }},
            "/mcp": {
                "post": {
                    "summary": "MCP over Streamable HTTP (the tools of `droid-executor mcp`): one JSON-RPC message. Revisions 2024-11-05 … 2025-11-25: initialize opens a session, named by Mcp-Session-Id in its answer and in every later request. Revision 2026-07-28 (the request's params._meta names it): stateless, with the mirrored headers",
                    "parameters": mcp_headers(true),
                    "requestBody": body("JsonRpcMessage"),
                    "responses": {
                        "200": {
                            "description": "The answer: one JSON-RPC response (application/json) when it is known at once, else an event stream of the request's notifications ending with its response (events carry no id: streams are not resumable). The answer to initialize carries Mcp-Session-Id",
                            "headers": {"Mcp-Session-Id": {"schema": {"type": "string"}, "description": "on the answer to initialize: the new session"}},
                            "content": {
                                "application/json": {"schema": reference("JsonRpcMessage")},
                                "text/event-stream": {"schema": {"type": "string"}},
                            },
                        },
                        "202": {"description": "A notification (or a response) accepted; no body"},
                        "400": rpc_refusal("Not JSON (-32700); no Mcp-Session-Id on a request other than initialize, or a message refused as a whole (-32600); MCP-Protocol-Version not served, or a 2026-07-28 request for a revision not served (-32022); 2026-07-28 headers missing or unlike the body (-32020)"),
                        "404": rpc_refusal("Mcp-Session-Id names no open session: start a new one with initialize (-32001); or a 2026-07-28 request for a method the server does not have (-32601)"),
                        "406": rpc_refusal("The Accept header takes neither application/json nor text/event-stream"),
                        "408": refusal("The body did not arrive in time"),
                        "413": refusal("The body is larger than body_limit"),
                        "415": refusal("The body is not declared application/json"),
                        "500": refusal("No session id could be made (the kernel's random source is unreadable)"),
                        "503": refusal("Shutting down; `mcp_sessions_full`: 256 sessions are open and all busy; or `connections_reserved`: the answer is an event stream and as many long requests go as the connections outside the reserve of short requests allow, so the request is cancelled (see Retry-After)"),
                    },
                },
                "get": {
                    "summary": "The session's own event stream: what relates to no open request (a 2025-11-25 task's status and progress once its CreateTaskResult was sent); one per session; a `: keep-alive` comment after stream_keep_alive of quiet; it ends at stream_max_life, when the session ends, or at shutdown",
                    "parameters": mcp_headers(false),
                    "responses": {
                        "200": {"description": "An event stream", "content": {"text/event-stream": {"schema": {"type": "string"}}}},
                        "400": rpc_refusal("No Mcp-Session-Id, or an MCP-Protocol-Version not served (-32022)"),
                        "404": rpc_refusal("Mcp-Session-Id names no open session (-32001)"),
                        "406": rpc_refusal("The Accept header does not take text/event-stream"),
                        "409": rpc_refusal("The session's stream is open already"),
                        "503": refusal("Shutting down, or `connections_reserved`: as many long requests go as the connections outside the reserve of short requests allow (see Retry-After)"),
                    },
                },
                "delete": {
                    "summary": "End the session: what it runs is cancelled",
                    "parameters": mcp_headers(false),
                    "responses": {
                        "204": {"description": "Ended"},
                        "400": rpc_refusal("No Mcp-Session-Id, or an MCP-Protocol-Version not served (-32022)"),
                        "404": rpc_refusal("Mcp-Session-Id names no open session (-32001)"),
                    },
                },
            },
        },
        "components": {
            "schemas": Value::Object(schemas),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{}, {"bearer": []}],
    });
    add_common_refusals(&mut doc);
    rewrite_refs(&mut doc);
    doc
}

/// The answers every operation can give, whatever its route, because the checks of every
/// request come before routing: 400 (Host missing or repeated), 401, 403, 431, 503; and 500 on
/// the task routes (the store could not be read or written).
fn add_common_refusals(doc: &mut Value) {
    let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) else {
        return;
    };
    for (path, item) in paths.iter_mut() {
        let Some(ops) = item.as_object_mut() else {
            continue;
        };
        for (method, op) in ops.iter_mut() {
            if method == "parameters" {
                continue;
            }
            let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) else {
                continue;
            };
            const NO_HOST: &str = "the Host header is missing or repeated (an Error)";
            match responses.get_mut("400") {
                // a route's own 400 may carry an ExecutionResult: then either body can come
                Some(own) => {
                    if let Some(Value::String(d)) = own.get_mut("description") {
                        *d = format!("{d}; or {NO_HOST}");
                    }
                    let schema = &mut own["content"]["application/json"]["schema"];
                    if *schema != reference("Error") {
                        *schema = json!({"oneOf": [schema.take(), reference("Error")]});
                    }
                }
                None => {
                    responses.insert(
                        "400".into(),
                        refusal("The Host header is missing or repeated"),
                    );
                }
            }
            responses.entry("431").or_insert_with(|| {
                json!({"description": "The request head is larger than 64 KiB, or has more than 100 header lines (answered by the HTTP layer, without a body)"})
            });
            let mut add = |code: &str, what: &str| {
                responses
                    .entry(code.to_owned())
                    .or_insert_with(|| refusal(what));
            };
            add(
                "401",
                "A token is configured and the request carries none, or a wrong one",
            );
            add(
                "403",
                "The Host header is not a loopback or allowed name, or a browser origin is not allowed",
            );
            if path.starts_with("/tasks") {
                add("500", "The task store could not be read or written");
                add(
                    "503",
                    "Shutting down (see Retry-After), or background tasks are unavailable: no \
                     task store is configured, or its directory could not be made (the message \
                     names it and the OS error)",
                );
            } else {
                add("503", "Shutting down (see Retry-After)");
            }
            // listed by status code, as a reader looks them up
            responses.sort_keys();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::PATHS;

    fn refs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(r)) = m.get("$ref") {
                    out.push(r.clone());
                }
                m.values().for_each(|x| refs(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
            _ => {}
        }
    }

    #[test]
    fn every_reference_resolves_and_every_route_is_documented() {
        let doc = document();
        let mut all = Vec::new();
        refs(&doc, &mut all);
        assert!(!all.is_empty());
        let schemas = &doc["components"]["schemas"];
        for r in all {
            let name = r
                .strip_prefix("#/components/schemas/")
                .unwrap_or_else(|| panic!("unexpected $ref {r}"));
            assert!(schemas.get(name).is_some(), "dangling {r}");
        }
        for (path, methods) in PATHS {
            for m in *methods {
                let op = &doc["paths"][path][m.to_ascii_lowercase()];
                assert!(op.is_object(), "{m} {path} undocumented");
            }
        }
        assert_eq!(doc["paths"].as_object().unwrap().len(), PATHS.len());
        assert_eq!(
            schemas["ExecutionRequest"]["title"],
            json!("ExecutionRequest")
        );
    }

    /// The statuses of the checks made before routing are on every operation, and a route's own
    /// 400 keeps its ExecutionResult while the Host check's Error is added beside it.
    #[test]
    fn every_operation_lists_the_answers_of_the_common_checks() {
        let doc = document();
        for (path, methods) in PATHS {
            for m in *methods {
                let responses = doc["paths"][path][m.to_ascii_lowercase()]["responses"]
                    .as_object()
                    .unwrap();
                let mut codes: Vec<&str> = responses.keys().map(String::as_str).collect();
                codes.retain(|c| ["400", "401", "403", "431", "500", "503"].contains(c));
                // the task routes read the store; POST /mcp makes session ids from the kernel
                let own_500 = path.starts_with("/tasks") || (*path == "/mcp" && *m == "POST");
                let want: &[&str] = if own_500 {
                    &["400", "401", "403", "431", "500", "503"]
                } else {
                    &["400", "401", "403", "431", "503"]
                };
                assert_eq!(codes, want, "{m} {path}");
            }
        }
        let execute_400 = &doc["paths"]["/execute"]["post"]["responses"]["400"];
        assert_eq!(
            execute_400["content"]["application/json"]["schema"],
            json!({"oneOf": [
                {"$ref": "#/components/schemas/ExecutionResult"},
                {"$ref": "#/components/schemas/Error"},
            ]})
        );
        let list_400 = &doc["paths"]["/tasks"]["get"]["responses"]["400"];
        assert_eq!(
            list_400["content"]["application/json"]["schema"],
            json!({"$ref": "#/components/schemas/Error"})
        );
    }
}
