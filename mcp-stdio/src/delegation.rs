//! The delegation tools (seed 002's ask / pend / ping / cancel, docs/architecture.md#origin), in
//! two toolsets ([`droid_exec::toolset`]):
//! - `delegate` (default): one family, `ask`, `pend`, `ping`, `cancel`, whose `provider` argument
//!   names the agent CLI (one of the setting `providers`);
//! - `per_provider` (opt-in, seed 002's naming): `ask_<p>`, `pend_<p>`, `ping_<p>`, `cancel_<p>`
//!   for each `p` of the setting `providers`.
//!
//! Both do the same: a tool of a toolset that is off, or of a provider left out, is an unknown
//! tool.
//!
//! An ask is a background task in the store, submitted the way `droid_submit` submits (so the
//! reply survives this server), its request built by the engine's one ask builder
//! ([`droid_exec::ask::ask_request`]: its defaults, read_only and 120 s, are the seed's and live
//! there only). `wait_seconds` (0 to 600) waits for the reply in the same call, with a progress
//! heartbeat as `droid_pend` sends. The reply is the engine's ([`droid_exec::reply`]).
//!
//! `pend` and `cancel` without a `task_id` act on this session's latest task (of `provider` when
//! given; [`Server::own_latest`]), never on the store's: the store is shared by every client of
//! the machine, and a fresh session once cancelled another client's Codex task that way (issue
//! 29, item 13). A session without one is told so; an explicit `task_id` reaches any task.
//!
//! The schemas are small on purpose: the model-facing part of the default `tools/list` is held
//! under 8 KB (`tools::tests`). Input schemas carry the limits the server enforces and no prose
//! (each description says what the arguments mean, once), and `pend` and `cancel` share one
//! small output schema ([`record_schema`]): the reply and the task record's fields, with the
//! result an object (its own schema is `execute_droid_task`'s output schema, listed once).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use droid_contract::{
    Autonomy, MAX_FALLBACK, MAX_TOKEN_BUDGET, MIN_TOKEN_BUDGET, ProviderId, TaskRecord, Violations,
};
use droid_exec::ask::{Ask, ask_request};
use droid_exec::health;
use droid_exec::pend::NotPendable;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::answer::{
    MAX_WAIT_SECONDS, bad_arguments, engine_error, only_keys, record_answer_with, tool_result,
};
use crate::logging::Level as LogLevel;
use crate::relay::Relay;
use crate::server::Server;

/// Longest `message` of an ask, in characters: the contract's bound on `instructions`, which
/// holds the whole message (its first line, cut to 500 characters, is the objective).
pub const MESSAGE_MAX: usize = droid_contract::INSTRUCTIONS_MAX;

/// Longest `session` of an ask, in characters (the contract's bound on `session_id`).
const SESSION_MAX: usize = 256;

/// What a delegation tool does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// `ask`: start a task (and optionally wait for it).
    Ask,
    /// `pend`: a task's record with the agent's reply first.
    Pend,
    /// `ping`: whether the provider can run.
    Ping,
    /// `cancel`: stop a task.
    Cancel,
}

impl Verb {
    const ALL: [Self; 4] = [Self::Ask, Self::Pend, Self::Ping, Self::Cancel];

    /// The name's prefix (one of [`droid_exec::config::DELEGATION_VERBS`], in the same order).
    fn as_str(self) -> &'static str {
        let [ask, pend, ping, cancel] = droid_exec::config::DELEGATION_VERBS;
        match self {
            Self::Ask => ask,
            Self::Pend => pend,
            Self::Ping => ping,
            Self::Cancel => cancel,
        }
    }
}

/// Which family a delegation tool belongs to, which says where its provider comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// `ask`, `pend`, `ping`, `cancel` (toolset `delegate`): the `provider` argument, or for
    /// `pend` and `cancel` the task.
    Shared,
    /// `ask_<p>`, `pend_<p>`, … (toolset `per_provider`): the name.
    Of(ProviderId),
}

impl Family {
    /// The name of this family's tool `verb` (`pend`, `pend_codex`).
    pub fn tool(self, verb: Verb) -> String {
        match self {
            Self::Shared => verb.as_str().to_owned(),
            Self::Of(p) => tool_name(verb, p),
        }
    }
}

/// The tool name of `verb` for `p` (`ask_codex`).
pub fn tool_name(verb: Verb, p: ProviderId) -> String {
    format!("{}_{}", verb.as_str(), p.as_str())
}

/// The verb and family a delegation tool's name names.
pub fn parse(name: &str) -> Option<(Verb, Family)> {
    if let Some(verb) = Verb::ALL.into_iter().find(|v| v.as_str() == name) {
        return Some((verb, Family::Shared));
    }
    let (verb, p) = name.split_once('_')?;
    let verb = Verb::ALL.into_iter().find(|v| v.as_str() == verb)?;
    Some((verb, Family::Of(ProviderId::parse(p)?)))
}

/// The names of the per-provider families of `providers`, in `tools/list` order (by provider,
/// then verb).
pub fn names(providers: &[ProviderId]) -> Vec<String> {
    ProviderId::ALL
        .into_iter()
        .filter(|p| providers.contains(p))
        .flat_map(|p| Verb::ALL.map(|v| tool_name(v, p)))
        .collect()
}

/// The names of the shared family, in `tools/list` order.
pub fn shared_names() -> Vec<String> {
    Verb::ALL.map(|v| v.as_str().to_owned()).to_vec()
}

/// The output schema `pend` and `cancel` share: the reply, then the task record's fields; the
/// result is an object or null (its full schema is `execute_droid_task`'s output).
pub fn record_schema() -> Value {
    let string = json!({"type": "string"});
    json!({
        "type": "object",
        "properties": {
            "reply": {"anyOf": [string, {"type": "null"}]},
            "task_id": string,
            "state": string,
            "created_at": string,
            "updated_at": string,
            "result": {"anyOf": [{"type": "object"}, {"type": "null"}]},
        },
        "required": ["task_id", "state", "created_at", "updated_at", "result"],
    })
}

/// The output schema of an ask: `{task_id}` at once, or with `wait_seconds` what `pend` returns.
fn ask_schema() -> Value {
    let mut s = record_schema();
    s["required"] = json!(["task_id"]);
    s
}

/// The output schema of a ping.
fn ping_schema() -> Value {
    let string = json!({"type": "string"});
    json!({
        "type": "object",
        "properties": {
            "provider": string,
            "found": {"type": "boolean"},
            "version": {"anyOf": [string, {"type": "null"}]},
            "endpoint": {"type": "boolean"},
            "checks": {"type": "array"},
        },
        "required": ["provider", "found", "version", "endpoint", "checks"],
    })
}

/// The arguments of an ask (less `provider`), with the limits the server enforces.
fn ask_properties() -> Map<String, Value> {
    let wait = json!({"type": "integer", "minimum": 0, "maximum": MAX_WAIT_SECONDS});
    let Value::Object(m) = json!({
        "message": {"type": "string", "maxLength": MESSAGE_MAX},
        "repo_root": {"type": "string"},
        "autonomy": {"type": "string", "enum": ["read_only", "low", "medium", "high"]},
        "timeout_s": {"type": "integer", "minimum": 1, "maximum": 86_400},
        "session": {"type": "string", "maxLength": SESSION_MAX},
        "isolation": {"type": "string", "enum": ["none", "worktree"]},
        "fallback": fallback_schema(),
        "max_tokens": {"type": "integer", "minimum": MIN_TOKEN_BUDGET, "maximum": MAX_TOKEN_BUDGET},
        "wait_seconds": wait,
    }) else {
        unreachable!("a JSON object literal")
    };
    m
}

/// The request's `fallback`, compact (the request's rules check each agent): agents, each
/// `"codex"` or `"claude:opus"` (the request also takes `{"provider", "model"}`; no type arrays
/// here, see `portable.rs`).
fn fallback_schema() -> Value {
    json!({"type": "array", "maxItems": MAX_FALLBACK, "items": {"type": "string"}})
}

/// `{"type": "object", "properties": …, "required": …, "additionalProperties": false}`.
fn object(properties: Map<String, Value>, required: &[&str]) -> Value {
    let mut s = json!({"type": "object", "properties": properties});
    if !required.is_empty() {
        s["required"] = json!(required);
    }
    s["additionalProperties"] = json!(false);
    s
}

/// The four tool definitions of the shared family, whose `provider` takes one of `providers`.
pub fn shared_definitions(providers: &[ProviderId]) -> Vec<Value> {
    let provider =
        json!({"type": "string", "enum": providers.iter().map(|p| p.as_str()).collect::<Vec<_>>()});
    let task_id = json!({"type": "string"});
    let wait = json!({"type": "integer", "minimum": 0, "maximum": MAX_WAIT_SECONDS});
    let mut ask = Map::new();
    ask.insert("provider".into(), provider.clone());
    ask.extend(ask_properties());
    let mut pend = Map::new();
    pend.insert("provider".into(), provider.clone());
    pend.insert("task_id".into(), task_id.clone());
    pend.insert("wait_seconds".into(), wait);
    let mut cancel = Map::new();
    cancel.insert("provider".into(), provider.clone());
    cancel.insert("task_id".into(), task_id);
    let mut ping = Map::new();
    ping.insert("provider".into(), provider);
    vec![
        json!({
            "name": "ask",
            "title": "Ask another agent (background)",
            "description": "Ask an agent CLI (provider); message: the whole request in your words. Returns {task_id} at once: get the reply with pend, stop it with cancel. autonomy: read_only (default: a consultation), low or medium let it edit. repo_root: default the server's directory. timeout_s: default 120. session: continue a result's session_id. wait_seconds: wait for the reply in this call.",
            "inputSchema": object(ask, &["provider", "message"]),
            "outputSchema": ask_schema(),
            "annotations": {"title": "Ask another agent", "readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true},
        }),
        json!({
            "name": "pend",
            "title": "Get an agent's reply",
            "description": "An ask's reply (the agent's answer), then its verified result. Without task_id: your latest task in this session (of provider, if given). wait_seconds: wait for the end; stay under your tool-call timeout, call again while it runs.",
            "inputSchema": object(pend, &[]),
            "outputSchema": record_schema(),
            "annotations": {"title": "Get an agent's reply", "readOnlyHint": true, "idempotentHint": true, "openWorldHint": false},
        }),
        json!({
            "name": "ping",
            "title": "Check that an agent can run",
            "description": "Whether provider's CLI is found (version) and has a key or endpoint, and the fix if not.",
            "inputSchema": object(ping, &["provider"]),
            "outputSchema": ping_schema(),
            "annotations": {"title": "Check that an agent can run", "readOnlyHint": true, "idempotentHint": true, "openWorldHint": false},
        }),
        json!({
            "name": "cancel",
            "title": "Cancel an agent's task",
            "description": "Stop an ask's task (the agent and everything it started are killed). Without task_id: your latest task in this session (of provider, if given).",
            "inputSchema": object(cancel, &[]),
            "outputSchema": record_schema(),
            "annotations": {"title": "Cancel an agent's task", "readOnlyHint": false, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false},
        }),
    ]
}

/// The four tool definitions of `p`'s own family (toolset `per_provider`).
pub fn definitions(p: ProviderId) -> Vec<Value> {
    let who = p.display_name();
    let id = p.as_str();
    let string = json!({"type": "string"});
    let wait = json!({"type": "integer", "minimum": 0, "maximum": MAX_WAIT_SECONDS});
    let mut pend = Map::new();
    pend.insert("task_id".into(), string.clone());
    pend.insert("wait_seconds".into(), wait);
    let mut cancel = Map::new();
    cancel.insert("task_id".into(), string);
    vec![
        json!({
            "name": tool_name(Verb::Ask, p),
            "title": format!("Ask {who} (background)"),
            "description": format!(
                "Delegate to {who}: message is the whole request in your words. Returns {{task_id}} at once; the task runs in the background (it survives this server): get the reply with pend_{id}, stop it with cancel_{id}. repo_root: default the server's directory. autonomy: read_only (default, a consultation), low or medium let it edit (capped by the server). timeout_s: default 120. session: continue that {id} session. wait_seconds (0-600, default 0): wait for the reply in this call instead."
            ),
            "inputSchema": object(ask_properties(), &["message"]),
            "outputSchema": ask_schema(),
            "annotations": {"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true},
        }),
        json!({
            "name": tool_name(Verb::Pend, p),
            "title": format!("Get {who}'s reply"),
            "description": format!(
                "The reply of an ask_{id} task, then its verified result (status, files changed, commands, issues). task_id: default your latest {id} task in this session. wait_seconds (0-600, default 0): wait for it to finish; stay under your client's tool-call timeout and call again while it runs."
            ),
            "inputSchema": object(pend, &[]),
            "outputSchema": record_schema(),
            "annotations": {"readOnlyHint": true, "idempotentHint": true, "openWorldHint": false},
        }),
        json!({
            "name": tool_name(Verb::Ping, p),
            "title": format!("Check that {who} can run"),
            "description": format!("Whether {who} is found, its version, whether an endpoint or key is configured, and what to do if not."),
            "inputSchema": object(Map::new(), &[]),
            "outputSchema": ping_schema(),
            "annotations": {"readOnlyHint": true, "idempotentHint": true, "openWorldHint": false},
        }),
        json!({
            "name": tool_name(Verb::Cancel, p),
            "title": format!("Cancel a {who} task"),
            "description": format!(
                "Stop an ask_{id} task ({id} and everything it started are killed). task_id: default your latest {id} task in this session. Returns the record right after the request."
            ),
            "inputSchema": object(cancel, &[]),
            "outputSchema": record_schema(),
            "annotations": {"readOnlyHint": false, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false},
        }),
    ]
}

/// Run `verb` of `family` with `args`.
pub async fn call(
    server: &Arc<Server>,
    verb: Verb,
    family: Family,
    mut args: Map<String, Value>,
    relay: Relay,
    cancel: CancellationToken,
) -> Value {
    let answer = async {
        // the shared family's provider: required to ask or ping, else a filter
        let named = match family {
            Family::Of(p) => Some(p),
            Family::Shared => {
                let given = provider_arg(server, &args)?;
                args.shift_remove("provider");
                match (verb, given) {
                    (Verb::Ask | Verb::Ping, None) => {
                        return Err(bad_arguments(format!(
                            "provider is required: one of {}",
                            enabled(server)
                        )));
                    }
                    (_, given) => given,
                }
            }
        };
        let extra = match family {
            Family::Shared => "provider, ",
            Family::Of(_) => "",
        };
        match (verb, named) {
            (Verb::Ask, Some(p)) => ask(server, family, p, &args, extra, relay, cancel).await,
            (Verb::Ping, Some(p)) => {
                only_keys_of(&args, extra, &[])?;
                Ok(ping(server, p).await)
            }
            (Verb::Pend, named) => pend(server, family, named, &args, extra, relay, cancel).await,
            (Verb::Cancel, named) => cancel_task(server, family, named, &args, extra, &relay).await,
            (Verb::Ask | Verb::Ping, None) => Err(bad_arguments("provider is required")),
        }
    };
    answer.await.unwrap_or_else(|e| e)
}

/// The providers this server delegates to, for a message.
fn enabled(server: &Server) -> String {
    server
        .providers()
        .iter()
        .map(|p| p.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The shared family's `provider` argument, if given: one of the setting `providers`.
fn provider_arg(server: &Server, args: &Map<String, Value>) -> Result<Option<ProviderId>, Value> {
    let Some(name) = opt_str(args, "provider")? else {
        return Ok(None);
    };
    match ProviderId::parse(name) {
        Some(p) if server.providers().contains(&p) => Ok(Some(p)),
        Some(p) => Err(bad_arguments(format!(
            "provider {} is not enabled on this server (setting providers); it delegates to {}",
            p.as_str(),
            enabled(server)
        ))),
        None => Err(bad_arguments(format!(
            "provider must be one of {}, got {name:?}",
            enabled(server)
        ))),
    }
}

/// [`only_keys`], with `extra` (`"provider, "` for the shared family) named in the message
/// among the arguments the tool takes.
fn only_keys_of(args: &Map<String, Value>, extra: &str, allowed: &[&str]) -> Result<(), Value> {
    if extra.is_empty() {
        return only_keys(args, allowed);
    }
    let mut with: Vec<&str> = vec!["provider"];
    with.extend_from_slice(allowed);
    // `provider` was taken out of `args` already; it is named in the list all the same
    only_keys(args, allowed).map_err(|_| {
        let unknown = args
            .keys()
            .find(|k| !allowed.contains(&k.as_str()))
            .cloned()
            .unwrap_or_default();
        bad_arguments(format!(
            "unknown argument {unknown:?}; this tool takes {}",
            with.join(", ")
        ))
    })
}

/// `args[name]` as a string, if given.
fn opt_str<'a>(args: &'a Map<String, Value>, name: &str) -> Result<Option<&'a str>, Value> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(bad_arguments(format!(
            "{name} must be a string, got {other}"
        ))),
    }
}

/// `args[name]` as an integer in `range`, if given.
fn opt_int(
    args: &Map<String, Value>,
    name: &str,
    range: std::ops::RangeInclusive<u64>,
) -> Result<Option<u64>, Value> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .filter(|n| range.contains(n))
            .map(Some)
            .ok_or_else(|| {
                bad_arguments(format!(
                    "{name} must be an integer from {} to {}, got {v}",
                    range.start(),
                    range.end()
                ))
            }),
    }
}

/// The argument of an ask that a request field comes from (violations name the argument).
fn argument_of(path: &str) -> &str {
    match path {
        "$.objective" | "$.instructions" => "message",
        p if p.starts_with("$.context") => "repo_root",
        "$.max_runtime_seconds" => "timeout_s",
        "$.session_id" => "session",
        "$.autonomy" => "autonomy",
        "$.isolation" => "isolation",
        p if p.starts_with("$.fallback") => "fallback",
        "$.max_tokens" => "max_tokens",
        other => other,
    }
}

fn invalid_ask(v: &Violations) -> Value {
    let said: Vec<String> =
        v.0.iter()
            .map(|v| format!("{}: {}", argument_of(&v.path), v.message))
            .collect();
    bad_arguments(format!("invalid arguments: {}", said.join("; ")))
}

fn tasks_of(server: &Server) -> Result<&droid_exec::Tasks, Value> {
    server.tasks().ok_or_else(|| {
        bad_arguments(
            "background tasks are unavailable: no task store (set HOME, XDG_STATE_HOME or store_dir)",
        )
    })
}

async fn ask(
    server: &Arc<Server>,
    family: Family,
    p: ProviderId,
    args: &Map<String, Value>,
    extra: &str,
    mut relay: Relay,
    cancel: CancellationToken,
) -> Result<Value, Value> {
    only_keys_of(
        args,
        extra,
        &[
            "message",
            "repo_root",
            "autonomy",
            "timeout_s",
            "session",
            "isolation",
            "fallback",
            "max_tokens",
            "wait_seconds",
        ],
    )?;
    let message = opt_str(args, "message")?
        .ok_or_else(|| bad_arguments("message is required: the whole request, in your words"))?;
    let repo_root = match opt_str(args, "repo_root")? {
        Some(r) => PathBuf::from(r),
        None => std::env::current_dir().map_err(|e| {
            bad_arguments(format!(
                "repo_root is required: the server's working directory is unreadable ({e})"
            ))
        })?,
    };
    let autonomy = match opt_str(args, "autonomy")? {
        None => None,
        Some(a) => Some(
            serde_json::from_value::<Autonomy>(Value::String(a.to_owned())).map_err(|_| {
                bad_arguments(format!(
                    "autonomy must be read_only, low, medium or high, got {a:?}"
                ))
            })?,
        ),
    };
    let timeout_s = opt_int(args, "timeout_s", 1..=86_400)?.map(|t| t as u32);
    let session = opt_str(args, "session")?;
    let isolation = match opt_str(args, "isolation")? {
        None => None,
        Some(i) => Some(
            droid_contract::Isolation::parse(i)
                .map_err(|e| bad_arguments(format!("isolation must be none or worktree: {e}")))?,
        ),
    };
    let max_tokens = opt_int(args, "max_tokens", MIN_TOKEN_BUDGET..=MAX_TOKEN_BUDGET)?;
    let wait = opt_int(args, "wait_seconds", 0..=MAX_WAIT_SECONDS)?.unwrap_or(0);
    let value = ask_request(&Ask {
        provider: p,
        message,
        repo_root: &repo_root,
        autonomy,
        timeout_s,
        session,
        isolation,
        fallback: args.get("fallback").filter(|v| !v.is_null()),
        max_tokens,
    });
    let req = server.engine().admit(&value).map_err(|v| invalid_ask(&v))?;
    let tasks = tasks_of(server)?;
    let key = match tasks.submit(&req).await {
        Ok(key) => key,
        Err(e) => {
            relay
                .log(
                    LogLevel::Error,
                    json!({"message": format!("could not submit the task: {e}"), "event": "submit_failed"}),
                )
                .await;
            return Err(engine_error(&e));
        }
    };
    server.remember(&key);
    relay
        .log(
            LogLevel::Notice,
            json!({"message": format!("submitted task {key}"), "event": "submitted", "task_id": key.as_str()}),
        )
        .await;
    if wait == 0 {
        return Ok(tool_result(
            format!(
                "asked {}: task {key}; get the reply with {} {{\"task_id\": \"{key}\", \"wait_seconds\": 50}}",
                p.display_name(),
                family.tool(Verb::Pend)
            ),
            Some(json!({"task_id": key.as_str()})),
            false,
        ));
    }
    waited(server, family, key.as_str(), wait, &mut relay, &cancel).await
}

/// The record of task `id` after waiting up to `wait` seconds, with the reply first.
async fn waited(
    server: &Arc<Server>,
    family: Family,
    id: &str,
    wait: u64,
    relay: &mut Relay,
    cancel: &CancellationToken,
) -> Result<Value, Value> {
    let tasks = tasks_of(server)?;
    let waiting = match droid_exec::pend::provider_of(id) {
        Some(p) => format!("waiting for {} task {id}", p.as_str()),
        None => format!("waiting for task {id}"),
    };
    let rec = tokio::select! {
        r = relay.with_heartbeat(&waiting, tasks.wait(id, Duration::from_secs(wait))) => r,
        () = cancel.cancelled() => tasks.status(id).await,
    };
    let rec = rec.map_err(|e| engine_error(&e))?;
    Ok(with_reply(server, family, &rec))
}

/// The task id a pend or cancel is about: `args.task_id` (refused when it names another
/// provider's task than `named`), else this session's latest task (of `named`, when given;
/// never another session's).
fn task_of(
    server: &Server,
    family: Family,
    named: Option<ProviderId>,
    args: &Map<String, Value>,
) -> Result<String, Value> {
    tasks_of(server)?;
    match opt_str(args, "task_id")? {
        Some(id) => match (droid_exec::pend::named_task(id, named), family) {
            (Ok(_) | Err(NotPendable::Malformed(_)), _) => Ok(id.to_owned()),
            (Err(NotPendable::OtherProvider { owner: q, asked: p }), Family::Of(_)) => {
                Err(bad_arguments(format!(
                    "task_id {id} is a {q} task, not a {p} one; call pend_{q} or cancel_{q} for it",
                    q = q.as_str(),
                    p = p.as_str()
                )))
            }
            (Err(NotPendable::OtherProvider { owner: q, asked: p }), Family::Shared) => {
                Err(bad_arguments(format!(
                    "task_id {id} is a {q} task, not a {p} one; leave provider out, or make it {q}",
                    q = q.as_str(),
                    p = p.as_str()
                )))
            }
        },
        None => server.own_latest(named).ok_or_else(|| {
            bad_arguments(match (named, family) {
                (Some(p), Family::Of(_)) => format!(
                    "no {p} tasks yet in this session; start one with ask_{p}, or pass the \
                     task_id of a task another session started",
                    p = p.as_str()
                ),
                (Some(p), Family::Shared) => format!(
                    "no {p} tasks yet in this session; start one with ask (provider {p}), or \
                     pass the task_id of a task another session started",
                    p = p.as_str()
                ),
                (None, _) => "no tasks yet in this session; start one with ask, or pass the \
                              task_id of a task another session started"
                    .to_owned(),
            })
        }),
    }
}

async fn pend(
    server: &Arc<Server>,
    family: Family,
    named: Option<ProviderId>,
    args: &Map<String, Value>,
    extra: &str,
    mut relay: Relay,
    cancel: CancellationToken,
) -> Result<Value, Value> {
    only_keys_of(args, extra, &["task_id", "wait_seconds"])?;
    let wait = opt_int(args, "wait_seconds", 0..=MAX_WAIT_SECONDS)?.unwrap_or(0);
    let id = task_of(server, family, named, args)?;
    waited(server, family, &id, wait, &mut relay, &cancel).await
}

async fn cancel_task(
    server: &Arc<Server>,
    family: Family,
    named: Option<ProviderId>,
    args: &Map<String, Value>,
    extra: &str,
    relay: &Relay,
) -> Result<Value, Value> {
    only_keys_of(args, extra, &["task_id"])?;
    let id = task_of(server, family, named, args)?;
    let rec = tasks_of(server)?
        .cancel(&id)
        .await
        .map_err(|e| engine_error(&e))?;
    relay
        .log(
            LogLevel::Notice,
            json!({"message": format!("cancel requested for task {id} ({})", rec.state.as_str()),
                   "event": "cancel", "task_id": id, "state": rec.state.as_str()}),
        )
        .await;
    Ok(with_reply(server, family, &rec))
}

/// The answer of a pend or cancel: the reply ([`droid_exec::reply`]) first, then the record.
fn with_reply(server: &Server, family: Family, rec: &TaskRecord) -> Value {
    let reply = server
        .tasks()
        .and_then(|tasks| droid_exec::reply::of_task(tasks, rec));
    let who = rec
        .result
        .as_ref()
        .and_then(|r| r.agent.as_ref().map(|a| a.provider))
        .or_else(|| droid_exec::pend::provider_of(&rec.task_id))
        .map_or("the agent", ProviderId::display_name);
    let head = match &reply {
        Some(r) => format!("{who} replied:\n{r}\n\n"),
        None if rec.result.is_none() => String::new(),
        None => format!("{who} gave no reply\n\n"),
    };
    let mut answer = record_answer_with(server, rec, &head, &family.tool(Verb::Pend));
    if let Some(Value::Object(sc)) = answer.get_mut("structuredContent") {
        // the reply first: what the reader needs before the record
        let mut first = Map::new();
        first.insert("reply".into(), reply.map_or(Value::Null, Value::String));
        first.append(sc);
        *sc = first;
    }
    answer
}

async fn ping(server: &Arc<Server>, p: ProviderId) -> Value {
    let cfg = server.engine().config();
    let checks = health::provider_checks(cfg, server.env(), p).await;
    let found = cfg.program_of(p).0.is_some();
    let version = if p == ProviderId::Droid {
        server.engine().droid_version().await
    } else {
        server.engine().agent_version(p).await
    };
    let endpoint = health::credentials_configured(cfg, server.env(), p);
    let text = droid_exec::check_text::render(&checks, droid_exec::check_text::Layout::Lines);
    tool_result(
        text,
        Some(json!({
            "provider": p.as_str(),
            "found": found,
            "version": version,
            "endpoint": endpoint,
            "checks": serde_json::to_value(&checks).unwrap_or(Value::Null),
        })),
        false,
    )
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn names_parse_back_and_follow_the_providers_setting() {
        for p in ProviderId::ALL {
            for v in Verb::ALL {
                assert_eq!(parse(&tool_name(v, p)), Some((v, Family::Of(p))));
                assert_eq!(Family::Of(p).tool(v), tool_name(v, p));
            }
        }
        for v in Verb::ALL {
            assert_eq!(parse(v.as_str()), Some((v, Family::Shared)));
        }
        assert_eq!(parse("ask_gpt"), None);
        assert_eq!(parse("tell_codex"), None);
        assert_eq!(parse("droid_pend"), None);
        assert_eq!(parse("asks"), None);
        assert_eq!(
            names(&[ProviderId::Gemini, ProviderId::Codex]),
            [
                "ask_codex",
                "pend_codex",
                "ping_codex",
                "cancel_codex",
                "ask_gemini",
                "pend_gemini",
                "ping_gemini",
                "cancel_gemini"
            ]
        );
        // the engine's list (what `setup mcp` approves) holds every name this server can list
        let every = droid_exec::config::delegation_tools(&ProviderId::ALL);
        let mut ours = names(&ProviderId::ALL);
        ours.extend(shared_names());
        assert_eq!(every, ours);
    }

    #[tokio::test]
    async fn without_a_task_id_a_session_acts_on_its_own_task_only() {
        let root = std::env::temp_dir().join(format!("mcp-own-tasks-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let repo = root.join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        let mut cfg = droid_exec::Settings::default().engine_config(&droid_exec::EnvMap::new());
        cfg.store_dir = Some(root.join("store"));
        let session = || {
            Server::new(
                droid_exec::Engine::new(cfg.clone()),
                Default::default(),
                None,
            )
        };
        let (mine, theirs) = (session(), session());
        // the other session's task, the newest of the store both share
        let req = mine
            .engine()
            .admit(&ask_request(&Ask {
                provider: ProviderId::Droid,
                message: "hi",
                repo_root: &repo,
                autonomy: None,
                timeout_s: None,
                session: None,
                isolation: None,
                fallback: None,
                max_tokens: None,
            }))
            .unwrap();
        let done = droid_contract::ExecutionResult::error(None, "done", Vec::new());
        let key = theirs.tasks().unwrap().record(&req, &done).await.unwrap();
        theirs.remember(&key);
        let none = Map::new();
        let droid = Family::Of(ProviderId::Droid);
        let refusal = |r: Result<String, Value>| {
            r.unwrap_err()["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        };
        assert_eq!(
            refusal(task_of(&mine, droid, Some(ProviderId::Droid), &none)),
            "no droid tasks yet in this session; start one with ask_droid, or pass the task_id \
             of a task another session started"
        );
        // the shared family: with a provider, or any of this session's tasks
        assert_eq!(
            refusal(task_of(
                &mine,
                Family::Shared,
                Some(ProviderId::Codex),
                &none
            )),
            "no codex tasks yet in this session; start one with ask (provider codex), or pass \
             the task_id of a task another session started"
        );
        assert_eq!(
            refusal(task_of(&mine, Family::Shared, None, &none)),
            "no tasks yet in this session; start one with ask, or pass the task_id of a task \
             another session started"
        );
        for (family, named) in [(droid, Some(ProviderId::Droid)), (Family::Shared, None)] {
            assert_eq!(
                task_of(&theirs, family, named, &none),
                Ok(key.as_str().to_owned())
            );
        }
        assert!(
            task_of(
                &theirs,
                Family::Of(ProviderId::Codex),
                Some(ProviderId::Codex),
                &none
            )
            .is_err()
        );
        // naming the task reaches it from any session; a provider that contradicts it is refused
        let named = json!({"task_id": key.as_str()});
        let named = named.as_object().unwrap();
        assert_eq!(
            task_of(&mine, droid, Some(ProviderId::Droid), named),
            Ok(key.as_str().to_owned())
        );
        assert_eq!(
            task_of(&mine, Family::Shared, None, named),
            Ok(key.as_str().to_owned())
        );
        assert_eq!(
            refusal(task_of(
                &mine,
                Family::Shared,
                Some(ProviderId::Codex),
                named
            )),
            format!(
                "task_id {key} is a droid task, not a codex one; leave provider out, or make it \
                 droid"
            )
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn an_ask_violation_names_the_argument() {
        assert_eq!(argument_of("$.context.repo_root"), "repo_root");
        assert_eq!(argument_of("$.objective"), "message");
        assert_eq!(argument_of("$.max_runtime_seconds"), "timeout_s");
    }
}
