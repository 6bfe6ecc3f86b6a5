//! Seed 002's delegation tools (docs/architecture.md#origin), one family per provider:
//! `ask_<p>`, `pend_<p>`, `ping_<p>`, `cancel_<p>` for `p` in droid, codex, claude, gemini and
//! opencode, served next to the five droid tools. The setting `providers` (config file or
//! `DROID_EXECUTOR_PROVIDERS`) chooses the families listed and answered; a tool of another
//! family is an unknown tool.
//!
//! An ask is a background task in the store, submitted the way `droid_submit` submits (so the
//! reply survives this server), its request built by the engine's one ask builder
//! ([`droid_exec::ask::ask_request`]: its defaults, read_only and 120 s, are the seed's and live
//! there only). `wait_seconds` (0 to 600) waits for the reply in the same call, with a progress
//! heartbeat as `droid_pend` sends.
//!
//! `pend_<p>` and `cancel_<p>` without a `task_id` act on this session's latest task of `p`
//! ([`Server::own_latest`]), never on the store's: the store is shared by every client of the
//! machine, and a fresh session once cancelled another client's Codex task that way (issue 29,
//! item 13). A session without one is told so; an explicit `task_id` reaches any task.
//!
//! The schemas are small on purpose: twenty tools go into the client's context. An ask's input
//! schema has no prose (the description says what the arguments mean, once), and `pend_<p>` and
//! `cancel_<p>` share one small output schema ([`record_schema`]): the task record's fields,
//! with the result an object (its own schema is `execute_droid_task`'s output schema, listed
//! once).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use droid_contract::{Autonomy, ProviderId, TaskRecord, Violations};
use droid_exec::ask::{Ask, ask_request};
use droid_exec::health::{self, Level};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::logging::Level as LogLevel;
use crate::relay::Relay;
use crate::server::Server;
use crate::tools::{
    MAX_WAIT_SECONDS, bad_arguments, engine_error, only_keys, record_answer_with, tool_result,
};

/// What a delegation tool does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// `ask_<p>`: start a task (and optionally wait for it).
    Ask,
    /// `pend_<p>`: a task's record with the agent's reply first.
    Pend,
    /// `ping_<p>`: whether the provider can run.
    Ping,
    /// `cancel_<p>`: stop a task.
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

/// The tool name of `verb` for `p` (`ask_codex`).
pub fn tool_name(verb: Verb, p: ProviderId) -> String {
    format!("{}_{}", verb.as_str(), p.as_str())
}

/// The verb and provider a delegation tool's name names.
pub fn parse(name: &str) -> Option<(Verb, ProviderId)> {
    let (verb, p) = name.split_once('_')?;
    let verb = Verb::ALL.into_iter().find(|v| v.as_str() == verb)?;
    Some((verb, ProviderId::parse(p)?))
}

/// The names of the families of `providers`, in `tools/list` order (by provider, then verb).
pub fn names(providers: &[ProviderId]) -> Vec<String> {
    droid_exec::config::delegation_tools(providers)
}

/// The output schema `pend_<p>` and `cancel_<p>` share: the reply, then the task record's
/// fields; the result is an object or null (its full schema is `execute_droid_task`'s output).
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

/// The four tool definitions of `p`.
pub fn definitions(p: ProviderId) -> Vec<Value> {
    let who = p.display_name();
    let id = p.as_str();
    let string = json!({"type": "string"});
    let wait = json!({"type": "integer", "minimum": 0, "maximum": MAX_WAIT_SECONDS});
    let task_id_only = json!({
        "type": "object",
        "properties": {"task_id": string},
        "required": ["task_id"],
    });
    let pend_input = json!({
        "type": "object",
        "properties": {"task_id": string, "wait_seconds": wait},
        "additionalProperties": false,
    });
    vec![
        json!({
            "name": tool_name(Verb::Ask, p),
            "title": format!("Ask {who} (background)"),
            "description": format!(
                "Delegate to {who}: message is the whole request in your words. Returns {{task_id}} at once; the task runs in the background (it survives this server): get the reply with pend_{id}, stop it with cancel_{id}. repo_root: default the server's directory. autonomy: read_only (default, a consultation), low or medium let it edit (capped by the server). timeout_s: default 120. session: continue that {id} session. wait_seconds (0-600, default 0): wait for the reply in this call instead."
            ),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "message": string,
                    "repo_root": string,
                    "autonomy": {"type": "string", "enum": ["read_only", "low", "medium", "high"]},
                    "timeout_s": {"type": "integer", "minimum": 1, "maximum": 86_400},
                    "session": string,
                    "isolation": {"type": "string", "enum": ["none", "worktree"]},
                    "wait_seconds": wait,
                },
                "required": ["message"],
                "additionalProperties": false,
            },
            "outputSchema": task_id_only,
            "annotations": {"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true},
        }),
        json!({
            "name": tool_name(Verb::Pend, p),
            "title": format!("Get {who}'s reply"),
            "description": format!(
                "The reply of an ask_{id} task, then its verified result (status, files changed, commands, issues). task_id: default your latest {id} task in this session. wait_seconds (0-600, default 0): wait for it to finish; stay under your client's tool-call timeout and call again while it runs."
            ),
            "inputSchema": pend_input.clone(),
            "outputSchema": record_schema(),
            "annotations": {"readOnlyHint": true, "idempotentHint": true, "openWorldHint": false},
        }),
        json!({
            "name": tool_name(Verb::Ping, p),
            "title": format!("Check that {who} can run"),
            "description": format!("Whether {who} is found, its version, whether an endpoint or key is configured, and what to do if not."),
            "inputSchema": {"type": "object", "properties": {}, "additionalProperties": false},
            "outputSchema": {
                "type": "object",
                "properties": {
                    "provider": string,
                    "found": {"type": "boolean"},
                    "version": {"anyOf": [string, {"type": "null"}]},
                    "endpoint": {"type": "boolean"},
                    "checks": {"type": "array"},
                },
                "required": ["provider", "found", "version", "endpoint", "checks"],
            },
            "annotations": {"readOnlyHint": true, "idempotentHint": true, "openWorldHint": false},
        }),
        json!({
            "name": tool_name(Verb::Cancel, p),
            "title": format!("Cancel a {who} task"),
            "description": format!(
                "Stop an ask_{id} task ({id} and everything it started are killed). task_id: default your latest {id} task in this session. Returns the record right after the request."
            ),
            "inputSchema": {
                "type": "object",
                "properties": {"task_id": string},
                "additionalProperties": false,
            },
            "outputSchema": record_schema(),
            "annotations": {"readOnlyHint": false, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false},
        }),
    ]
}

/// Run `verb` of provider `p` with `args`.
pub async fn call(
    server: &Arc<Server>,
    verb: Verb,
    p: ProviderId,
    args: Map<String, Value>,
    relay: Relay,
    cancel: CancellationToken,
) -> Value {
    let answer = match verb {
        Verb::Ask => ask(server, p, &args, relay, cancel).await,
        Verb::Pend => pend(server, p, &args, relay, cancel).await,
        Verb::Ping => match only_keys(&args, &[]) {
            Ok(()) => Ok(ping(server, p).await),
            Err(e) => Err(e),
        },
        Verb::Cancel => cancel_task(server, p, &args, &relay).await,
    };
    answer.unwrap_or_else(|e| e)
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
    p: ProviderId,
    args: &Map<String, Value>,
    mut relay: Relay,
    cancel: CancellationToken,
) -> Result<Value, Value> {
    only_keys(
        args,
        &[
            "message",
            "repo_root",
            "autonomy",
            "timeout_s",
            "session",
            "isolation",
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
        Some(i) => Some(droid_contract::Isolation::parse(i).map_err(|e| {
            bad_arguments(format!("isolation must be none or worktree: {e}"))
        })?),
    };
    let wait = opt_int(args, "wait_seconds", 0..=MAX_WAIT_SECONDS)?.unwrap_or(0);
    let value = ask_request(&Ask {
        provider: p,
        message,
        repo_root: &repo_root,
        autonomy,
        timeout_s,
        session,
        isolation,
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
                "asked {}: task {key}; get the reply with pend_{} {{\"task_id\": \"{key}\", \"wait_seconds\": 50}}",
                p.display_name(),
                p.as_str()
            ),
            Some(json!({"task_id": key.as_str()})),
            false,
        ));
    }
    waited(server, p, key.as_str(), wait, &mut relay, &cancel).await
}

/// The record of task `id` after waiting up to `wait` seconds, with the reply first.
async fn waited(
    server: &Arc<Server>,
    p: ProviderId,
    id: &str,
    wait: u64,
    relay: &mut Relay,
    cancel: &CancellationToken,
) -> Result<Value, Value> {
    let tasks = tasks_of(server)?;
    let waiting = format!("waiting for {} task {id}", p.as_str());
    let rec = tokio::select! {
        r = relay.with_heartbeat(&waiting, tasks.wait(id, Duration::from_secs(wait))) => r,
        () = cancel.cancelled() => tasks.status(id).await,
    };
    let rec = rec.map_err(|e| engine_error(&e))?;
    Ok(with_reply(server, p, &rec))
}

/// The task id a pend or cancel of `p` is about: `args.task_id` (refused when it names another
/// provider's task), else this session's latest task of `p` (never another session's).
fn task_of(server: &Server, p: ProviderId, args: &Map<String, Value>) -> Result<String, Value> {
    tasks_of(server)?;
    match opt_str(args, "task_id")? {
        Some(id) => {
            let named = id.split_once('-').and_then(|(q, _)| ProviderId::parse(q));
            match named {
                Some(q) if q != p => Err(bad_arguments(format!(
                    "task_id {id} is a {q} task, not a {p} one; call pend_{q} or cancel_{q} for it",
                    q = q.as_str(),
                    p = p.as_str()
                ))),
                _ => Ok(id.to_owned()),
            }
        }
        None => server.own_latest(Some(p)).ok_or_else(|| {
            bad_arguments(format!(
                "no {p} tasks yet in this session; start one with ask_{p}, or pass the task_id \
                 of a task another session started",
                p = p.as_str()
            ))
        }),
    }
}

async fn pend(
    server: &Arc<Server>,
    p: ProviderId,
    args: &Map<String, Value>,
    mut relay: Relay,
    cancel: CancellationToken,
) -> Result<Value, Value> {
    only_keys(args, &["task_id", "wait_seconds"])?;
    let wait = opt_int(args, "wait_seconds", 0..=MAX_WAIT_SECONDS)?.unwrap_or(0);
    let id = task_of(server, p, args)?;
    waited(server, p, &id, wait, &mut relay, &cancel).await
}

async fn cancel_task(
    server: &Arc<Server>,
    p: ProviderId,
    args: &Map<String, Value>,
    relay: &Relay,
) -> Result<Value, Value> {
    only_keys(args, &["task_id"])?;
    let id = task_of(server, p, args)?;
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
    Ok(with_reply(server, p, &rec))
}

/// The agent's final reply in task `id`: its last assistant message, else (a run that said
/// nothing, or whose events are gone) `None`.
fn reply_of(server: &Server, id: &str) -> Option<String> {
    let events = server.tasks()?.events(id, 0).ok()?;
    events.iter().rev().find_map(|e| {
        (e["type"] == "message" && e["role"] == "assistant")
            .then(|| e["text"].as_str().map(str::to_owned))
            .flatten()
    })
}

/// The answer of a pend or cancel: the reply first, then the record.
fn with_reply(server: &Server, p: ProviderId, rec: &TaskRecord) -> Value {
    let reply = rec
        .result
        .as_ref()
        .and_then(|_| reply_of(server, &rec.task_id));
    let head = match &reply {
        Some(r) => format!("{} replied:\n{r}\n\n", p.display_name()),
        None if rec.result.is_none() => String::new(),
        None => format!("{} gave no reply\n\n", p.display_name()),
    };
    let mut answer = record_answer_with(server, rec, &head, &format!("pend_{}", p.as_str()));
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
    let endpoint = if p == ProviderId::Droid {
        checks
            .iter()
            .any(|c| c.name == "auth" && c.level == Level::Ok)
    } else {
        let provider = droid_exec::providers::provider(p);
        let env = server.env();
        let home = env.get("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
        (provider.auth_vars().is_empty() && provider.auth_files().is_empty())
            || provider
                .auth_vars()
                .iter()
                .any(|v| env.get(*v).is_some_and(|x| !x.is_empty()))
            || provider
                .auth_files()
                .iter()
                .any(|f| home.as_ref().is_some_and(|h| h.join(f).exists()))
    };
    let text = checks
        .iter()
        .map(|c| {
            let lvl = c.level.tag();
            if c.fix.is_empty() {
                format!("{lvl} {}: {}", c.name, c.detail)
            } else {
                format!("{lvl} {}: {} (fix: {})", c.name, c.detail, c.fix)
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
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
                assert_eq!(parse(&tool_name(v, p)), Some((v, p)));
            }
        }
        assert_eq!(parse("ask_gpt"), None);
        assert_eq!(parse("tell_codex"), None);
        assert_eq!(parse("droid_pend"), None);
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
            }))
            .unwrap();
        let done = droid_contract::ExecutionResult::error(None, "done", Vec::new());
        let key = theirs.tasks().unwrap().record(&req, &done).await.unwrap();
        theirs.remember(&key);
        let none = Map::new();
        assert_eq!(
            task_of(&mine, ProviderId::Droid, &none).unwrap_err()["content"][0]["text"],
            "no droid tasks yet in this session; start one with ask_droid, or pass the task_id \
             of a task another session started"
        );
        assert_eq!(
            task_of(&theirs, ProviderId::Droid, &none),
            Ok(key.as_str().to_owned())
        );
        assert!(task_of(&theirs, ProviderId::Codex, &none).is_err());
        // naming the task reaches it from any session
        let named = json!({"task_id": key.as_str()});
        assert_eq!(
            task_of(&mine, ProviderId::Droid, named.as_object().unwrap()),
            Ok(key.as_str().to_owned())
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
