//! The tools: their definitions (schemas generated from the contract types) and what a call does.
//!
//! Agent failures and bad argument values are tool results with `isError: true` and a text that
//! says what to do; only an unknown tool or malformed `tools/call` params are protocol errors
//! (decided in `message_processor`).
//!
//! `isError` of a run follows its status: `failed`, `timeout`, `cancelled` and `error` are errors;
//! `success` is not, and neither is `partial` (droid finished and changed files, but a verify
//! command failed, droid reported partial work or a permission was denied). A `partial` result
//! is work to look at rather than a failed call: marking it `isError` would tell the model and
//! the client that the call failed while the repository holds changes to review (as
//! `docs/protocol.md` documents it). The tool description tells the model to read `status` and
//! `issues` whatever `isError` says.
//!
//! The text rendering is short ([`TEXT_MAX`] bytes at most, cut on a character boundary); the
//! whole result is in `structuredContent`.
//!
//! Under revision 2025-11-25 every tool also says whether it can run as a task
//! (`execution.taskSupport`): `execute_droid_task` is `"optional"` (a task-augmented call runs as
//! a background task in the same store as `droid_submit`); the others answer at once or manage
//! tasks themselves, so they are `"forbidden"`.

use std::sync::Arc;
use std::time::Duration;

use droid_contract::{ExecutionResult, ProviderId};
use droid_exec::health::{self, Level};
use droid_exec::toolset::Toolset;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

pub use crate::answer::{
    MAX_WAIT_SECONDS, RESULT_MAX, TEXT_MAX, render_result, result_answer, task_result_answer,
};
use crate::answer::{
    bad_arguments, engine_error, only_keys, record_answer, sync_answer, to_value, tool_result,
};
pub use crate::catalog::Catalog;
use crate::logging::Level as LogLevel;
use crate::relay::{Relay, relayed};
use crate::server::Server;

/// The droid tools (toolset `droid`), in the order `tools/list` shows them.
pub const NAMES: [&str; 7] = [
    "execute_droid_task",
    "droid_submit",
    "droid_pend",
    "droid_cancel",
    "droid_apply",
    "droid_discard",
    "droid_ping",
];

fn object_schema(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// `execution.taskSupport` of tool `name` (2025-11-25).
pub fn task_support(name: &str) -> &'static str {
    if name == "execute_droid_task" {
        "optional"
    } else {
        "forbidden"
    }
}

/// The definitions of the droid tools and of every provider's own family (toolset
/// `per_provider`), for `tools/list`; with `execution.taskSupport` when `tasks` (the session
/// negotiated 2025-11-25). Built once per process: generating the schemas costs milliseconds,
/// and every `tools/list` (and `server/discover`) asks.
pub fn definitions(tasks: bool) -> Vec<Value> {
    static PLAIN: std::sync::OnceLock<Vec<Value>> = std::sync::OnceLock::new();
    static WITH_TASKS: std::sync::OnceLock<Vec<Value>> = std::sync::OnceLock::new();
    let cell = if tasks { &WITH_TASKS } else { &PLAIN };
    cell.get_or_init(|| build_definitions(tasks)).clone()
}

/// The tools a server offering `catalog` lists, in this order: the droid tools (toolset
/// `droid`), the shared delegation family (`delegate`, its `provider` one of `catalog.providers`),
/// then the family of each of those providers (`per_provider`).
pub fn listed(tasks: bool, catalog: &Catalog) -> Vec<Value> {
    let all = definitions(tasks);
    let mut out: Vec<Value> = Vec::new();
    for toolset in catalog.toolsets.iter() {
        match toolset {
            Toolset::Droid => out.extend(
                all.iter()
                    .filter(|t| NAMES.contains(&t["name"].as_str().unwrap_or_default()))
                    .cloned(),
            ),
            Toolset::Delegate if !catalog.providers.is_empty() => {
                let mut shared = crate::delegation::shared_definitions(&catalog.providers);
                if tasks {
                    shared.iter_mut().for_each(with_execution);
                }
                out.extend(shared);
            }
            Toolset::Delegate => {}
            Toolset::PerProvider => out.extend(
                all.iter()
                    .filter(|t| {
                        match crate::delegation::parse(t["name"].as_str().unwrap_or_default()) {
                            Some((_, crate::delegation::Family::Of(p))) => {
                                catalog.providers.contains(&p)
                            }
                            _ => false,
                        }
                    })
                    .cloned(),
            ),
        }
    }
    out
}

/// Whether `name` is a tool of a server offering `catalog`.
pub fn known(name: &str, catalog: &Catalog) -> bool {
    use crate::delegation::Family;
    match crate::delegation::parse(name) {
        Some((_, Family::Shared)) => {
            catalog.toolsets.contains(Toolset::Delegate) && !catalog.providers.is_empty()
        }
        Some((_, Family::Of(p))) => {
            catalog.toolsets.contains(Toolset::PerProvider) && catalog.providers.contains(&p)
        }
        None => catalog.toolsets.contains(Toolset::Droid) && NAMES.contains(&name),
    }
}

/// The tool names of such a server, in `tools/list` order, for an "unknown tool" message.
pub fn names(catalog: &Catalog) -> Vec<String> {
    let mut all = Vec::new();
    for toolset in catalog.toolsets.iter() {
        match toolset {
            Toolset::Droid => all.extend(NAMES.iter().map(|n| (*n).to_owned())),
            Toolset::Delegate if !catalog.providers.is_empty() => {
                all.extend(crate::delegation::shared_names());
            }
            Toolset::Delegate => {}
            Toolset::PerProvider => all.extend(crate::delegation::names(&catalog.providers)),
        }
    }
    all
}

/// `tool` with its 2025-11-25 `execution.taskSupport`.
fn with_execution(tool: &mut Value) {
    let name = tool["name"].as_str().unwrap_or_default().to_owned();
    if let Some(obj) = tool.as_object_mut() {
        obj.insert(
            "execution".into(),
            json!({"taskSupport": task_support(&name)}),
        );
    }
}

fn build_definitions(tasks: bool) -> Vec<Value> {
    let mut all = base_definitions();
    for tool in &mut all {
        for key in ["inputSchema", "outputSchema"] {
            if let Some(s) = tool.get(key) {
                // the model reads every input schema (in every request, for some clients):
                // the rules without prose, the meaning in the description; output schemas are
                // there for validation
                let s = crate::portable::portable(s);
                tool[key] = if key == "inputSchema" {
                    agents_as_strings(crate::portable::compact(&s))
                } else {
                    crate::portable::terse(&s)
                };
            }
        }
    }
    // the delegation families are written small and portable already (no type arrays, no
    // formats, no prose in their schemas)
    for p in ProviderId::ALL {
        all.extend(crate::delegation::definitions(p));
    }
    if tasks {
        all.iter_mut().for_each(with_execution);
    }
    all
}

/// The request's lists of agents (`fallback`, `best_of`) as a model writes them: strings,
/// `"codex"` or `"claude:opus"`. The request also takes `{"provider", "model"}` objects (its
/// published schema says so), but an `anyOf` of both costs every model request ~470 bytes.
fn agents_as_strings(mut schema: Value) -> Value {
    for key in ["fallback", "best_of"] {
        if let Some(items) = schema
            .get_mut("properties")
            .and_then(|p| p.get_mut(key))
            .and_then(|l| l.get_mut("items"))
        {
            *items = json!({"type": "string"});
        }
    }
    schema
}

fn base_definitions() -> Vec<Value> {
    let request = droid_contract::request_schema();
    let result = droid_contract::result_schema();
    let record = droid_contract::task_record_schema();
    let task_id = json!({"type": "string"});
    vec![
        json!({
            "name": "execute_droid_task",
            "title": "Run a coding task with droid (wait for the result)",
            "description": "Hand one decided, well-specified coding task to droid (or provider codex, claude, gemini, opencode) and wait for the verified result: files_changed from the repository, suggested_commands re-run, status (success, partial, failed, timeout, cancelled, error), issues with actions. Read status and issues: partial is not isError. context.repo_root: absolute. isolation worktree: then droid_apply or droid_discard. More agents: fallback (codex, claude:opus: next if one cannot run), best_of (2-5 at once, judged by suggested_commands; droid_apply the winner), max_tokens. Clients often stop waiting after 60 s (runs: max_runtime_seconds, 600): for longer, droid_submit and droid_pend.",
            "inputSchema": request,
            "outputSchema": result,
            "annotations": {"title": "Run a coding task with droid", "readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true},
        }),
        json!({
            "name": "droid_submit",
            "title": "Start a coding task with droid in the background",
            "description": "As execute_droid_task, but returns {task_id} at once and runs in the background (it survives this server): follow it with droid_pend, stop it with droid_cancel. Independent subtasks: submit each with isolation worktree; they run in parallel.",
            "inputSchema": request,
            "outputSchema": object_schema(json!({"task_id": {"type": "string"}}), &["task_id"]),
            "annotations": {"title": "Start a background droid task", "readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true},
        }),
        json!({
            "name": "droid_pend",
            "title": "Check on a background droid task",
            "description": "A background task's state (queued, running, then its status) and result. Without task_id: your latest task in this session. wait_seconds: wait for the end first; stay under your tool-call timeout, call again while it runs.",
            "inputSchema": object_schema(json!({
                "task_id": task_id,
                "wait_seconds": {"type": "integer", "minimum": 0, "maximum": MAX_WAIT_SECONDS},
            }), &[]),
            "outputSchema": record.clone(),
            "annotations": {"title": "Check on a background droid task", "readOnlyHint": true, "idempotentHint": true, "openWorldHint": false},
        }),
        json!({
            "name": "droid_cancel",
            "title": "Cancel a background droid task",
            "description": "Stop a background task: the agent and everything it started are killed. Returns its record.",
            "inputSchema": object_schema(json!({"task_id": task_id}), &["task_id"]),
            "outputSchema": record,
            "annotations": {"title": "Cancel a background droid task", "readOnlyHint": false, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false},
        }),
    ]
    .into_iter()
    .chain(crate::worktree_tools::definitions())
    .chain([
        json!({
            "name": "droid_ping",
            "title": "Check that droid can run",
            "description": "Whether droid is found (version), authenticated and can store tasks: each readiness check with its fix.",
            "inputSchema": object_schema(json!({}), &[]),
            "outputSchema": object_schema(json!({
                "droid_found": {"type": "boolean"},
                "droid_version": {"type": ["string", "null"]},
                "auth": {"type": "boolean"},
                "store_writable": {"type": "boolean"},
                "checks": {"type": "array", "items": {"type": "object"}},
            }), &["droid_found", "droid_version", "auth", "store_writable", "checks"]),
            "annotations": {"title": "Check that droid can run", "readOnlyHint": true, "idempotentHint": true, "openWorldHint": false},
        }),
    ])
    .collect()
}

fn task_id_arg(args: &Map<String, Value>) -> Result<Option<String>, Value> {
    match args.get("task_id") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(bad_arguments(format!(
            "task_id must be a string like droid-1795349045-3fa2, got {other}"
        ))),
    }
}

/// Run the tool `name` (one of [`NAMES`]) with `args`. `relay` sends the progress and log
/// notifications the client asked for; all of them are queued before this returns, so the
/// response the caller sends comes after them.
pub async fn call(
    server: &Arc<Server>,
    name: &str,
    args: Map<String, Value>,
    mut relay: Relay,
    cancel: CancellationToken,
) -> Value {
    if let Some((verb, family)) = crate::delegation::parse(name) {
        return crate::delegation::call(server, verb, family, args, relay, cancel).await;
    }
    match name {
        "execute_droid_task" => {
            let value = Value::Object(args);
            let result = relayed(relay, |tx| {
                server.engine().execute(&value, cancel, Some(tx))
            })
            .await;
            sync_answer(server, &value, &result).await
        }
        "droid_submit" => {
            let value = Value::Object(args);
            let req = match server.engine().admit(&value) {
                Ok(r) => r,
                // the text of the `error` result execute_droid_task would give, without the
                // result as structured content: droid_submit's output schema is `{task_id}`,
                // and a client that validates it (the TypeScript SDK's `callTool`) would throw
                // the text away with the answer
                Err(v) => {
                    let task_id = value
                        .get("task_id")
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                    return bad_arguments(render_result(&ExecutionResult::invalid_request(
                        task_id, &v,
                    )));
                }
            };
            let Some(tasks) = server.tasks() else {
                return bad_arguments(
                    "background tasks are unavailable: no task store (set HOME, XDG_STATE_HOME or store_dir)",
                );
            };
            match tasks.submit(&req).await {
                Ok(key) => {
                    server.remember(&key);
                    relay
                        .log(
                            LogLevel::Notice,
                            json!({"message": format!("submitted task {key}"), "event": "submitted", "task_id": key.as_str()}),
                        )
                        .await;
                    tool_result(
                        format!(
                            "submitted task {key}; follow it with droid_pend {{\"task_id\": \"{key}\", \"wait_seconds\": 50}}"
                        ),
                        Some(json!({"task_id": key.as_str()})),
                        false,
                    )
                }
                Err(e) => {
                    relay
                        .log(
                            LogLevel::Error,
                            json!({"message": format!("could not submit the task: {e}"), "event": "submit_failed"}),
                        )
                        .await;
                    engine_error(&e)
                }
            }
        }
        "droid_pend" => {
            if let Err(e) = only_keys(&args, &["task_id", "wait_seconds"]) {
                return e;
            }
            let wait = match args.get("wait_seconds") {
                None | Some(Value::Null) => 0,
                Some(v) => match v.as_u64().filter(|s| *s <= MAX_WAIT_SECONDS) {
                    Some(s) => s,
                    None => {
                        return bad_arguments(format!(
                            "wait_seconds must be an integer from 0 to {MAX_WAIT_SECONDS}, got {v}"
                        ));
                    }
                },
            };
            let Some(tasks) = server.tasks() else {
                return bad_arguments("background tasks are unavailable: no task store");
            };
            // without a task id: this session's latest task, never another client's
            let id = match task_id_arg(&args) {
                Ok(Some(id)) => id,
                Ok(None) => match server.own_latest(None) {
                    Some(id) => id,
                    None => {
                        return bad_arguments(
                            "no tasks yet in this session; start one with droid_submit, or pass \
                             the task_id of a task another session started",
                        );
                    }
                },
                Err(e) => return e,
            };
            let waiting = format!("waiting for task {id}");
            let rec = tokio::select! {
                r = relay.with_heartbeat(&waiting, tasks.wait(&id, Duration::from_secs(wait))) => r,
                () = cancel.cancelled() => tasks.status(&id).await,
            };
            match rec {
                Ok(rec) => record_answer(server, &rec),
                Err(e) => engine_error(&e),
            }
        }
        "droid_apply" | "droid_discard" => crate::worktree_tools::call(server, name, args).await,
        "droid_cancel" => {
            if let Err(e) = only_keys(&args, &["task_id"]) {
                return e;
            }
            let Some(tasks) = server.tasks() else {
                return bad_arguments("background tasks are unavailable: no task store");
            };
            match task_id_arg(&args) {
                Ok(Some(id)) => match tasks.cancel(&id).await {
                    Ok(rec) => {
                        relay
                            .log(
                                LogLevel::Notice,
                                json!({"message": format!("cancel requested for task {id} ({})", rec.state.as_str()),
                                       "event": "cancel", "task_id": id, "state": rec.state.as_str()}),
                            )
                            .await;
                        record_answer(server, &rec)
                    }
                    Err(e) => engine_error(&e),
                },
                Ok(None) => bad_arguments("task_id is required"),
                Err(e) => e,
            }
        }
        _ => {
            if let Err(e) = only_keys(&args, &[]) {
                return e;
            }
            ping(server).await
        }
    }
}

async fn ping(server: &Arc<Server>) -> Value {
    let checks = health::checks(server.config_path(), server.env()).await;
    let level = |name: &str| {
        checks
            .iter()
            .filter(|c| c.name == name)
            .map(|c| c.level)
            .max_by_key(|l| match l {
                Level::Ok => 0,
                Level::Warn => 1,
                Level::Fail => 2,
            })
    };
    let droid_found = level("droid").is_some_and(|l| l != Level::Fail);
    let auth = level("auth") == Some(Level::Ok);
    let store_writable = level("store") == Some(Level::Ok);
    let version = server.engine().droid_version().await;
    let text = droid_exec::check_text::render(&checks, droid_exec::check_text::Layout::Lines);
    tool_result(
        text,
        Some(json!({
            "droid_found": droid_found,
            "droid_version": version,
            "auth": auth,
            "store_writable": store_writable,
            "checks": to_value(&checks),
        })),
        false,
    )
}

#[cfg(test)]
mod tests {
    use droid_contract::{Issue, IssueType, Status, TaskRecord, TaskState};
    use droid_exec::toolset::Toolsets;
    use pretty_assertions::assert_eq;

    use super::*;
    use crate::answer::{render_record, shorten};

    fn result_with(summary: String, issues: usize) -> ExecutionResult {
        let issues = (0..issues)
            .map(|i| {
                Issue::new(
                    IssueType::AgentError,
                    format!("problem {i}: {}", "x".repeat(200)),
                    "look at the logs",
                )
            })
            .collect();
        ExecutionResult::error(Some("t-1".into()), summary, issues)
    }

    #[test]
    fn a_short_text_is_kept_whole() {
        let text = render_result(&result_with("All done.".into(), 1));
        assert!(
            text.starts_with("status: error\nsummary: All done.\nissue [agent_error]: problem 0")
        );
        assert!(!text.ends_with('…'), "{text}");
    }

    #[test]
    fn the_text_keeps_what_a_model_acts_on_and_the_structured_content_everything() {
        let mut r = result_with("Added farewell().".into(), 1);
        r.status = Status::Partial;
        r.sandbox = Some(droid_contract::SandboxInfo {
            kind: droid_contract::SandboxKind::Landlock,
            abi: Some(7),
            writable: (0..14).map(|i| format!("/writable/path/{i}")).collect(),
            reason: None,
        });
        let agent = droid_contract::AgentInfo {
            provider: ProviderId::Droid,
            version: Some("0.225.2".into()),
            model: Some("custom:Demo-0".into()),
            exit_code: Some(0),
            num_turns: Some(4),
            usage: None,
        };
        r.droid = Some(agent.as_droid());
        r.agent = Some(agent);
        r.worktree = Some(droid_contract::WorktreeInfo {
            path: "/store/worktrees/droid-1-abcd".into(),
            branch: "droid-executor/droid-1-abcd".into(),
            base: "b".repeat(40),
            head: "h".repeat(40),
            state: droid_contract::WorktreeState::Ready,
        });
        r.logs = vec!["droid stderr: noise".into()];
        let answer = result_answer(&r);
        let text = answer["content"][0]["text"].as_str().unwrap_or_default();
        assert_eq!(
            text,
            format!(
                "status: partial\nsummary: Added farewell().\nworktree: ready on branch \
                 droid-executor/droid-1-abcd (droid_apply or droid_discard it)\nissue \
                 [agent_error]: problem 0: {} -> look at the logs",
                "x".repeat(200)
            )
        );
        // everything is in the structured content, the same result every front-end gives
        assert_eq!(answer["structuredContent"], to_value(&r));
    }

    #[test]
    fn a_huge_summary_or_many_issues_are_cut_to_the_bound() {
        for (summary, issues) in [("s".repeat(1_000_000), 0), ("short".into(), 10_000)] {
            let r = result_with(summary, issues);
            let text = render_result(&r);
            assert!(text.len() <= TEXT_MAX, "{} bytes", text.len());
            assert!(text.len() > TEXT_MAX - 8, "{} bytes", text.len());
            assert!(text.ends_with('…'));
            let answer = result_answer(&r);
            let said = answer["content"][0]["text"].as_str().unwrap_or_default();
            assert!(said.len() <= TEXT_MAX, "{} bytes", said.len());
            assert!(said.starts_with("status: error\nsummary: "), "{said}");
            // the structured content is cut to its bound too, its head kept
            let sc = &answer["structuredContent"];
            assert!(
                sc.to_string().len() <= RESULT_MAX,
                "{} bytes",
                sc.to_string().len()
            );
            let summary = sc["summary"].as_str().unwrap_or_default();
            assert!(r.summary.starts_with(summary.trim_end_matches('…')));
            assert!(!summary.is_empty() && summary.len() <= droid_contract::SUMMARY_MAX);
            let note = sc["logs"][0].as_str().unwrap_or_default();
            assert!(
                note.starts_with("this MCP result was cut to 24 KiB"),
                "{note}"
            );
            assert_eq!(answer["isError"], true);
        }
    }

    #[test]
    fn the_cut_never_splits_a_character() {
        // every alignment of 1-, 2-, 3- and 4-byte characters against the cut
        for ch in ['a', 'é', '€', '😀'] {
            for pad in 0..4 {
                let s = format!("{}{}", "p".repeat(pad), ch.to_string().repeat(TEXT_MAX + 1));
                let cut = shorten(s.clone());
                assert!(cut.len() <= TEXT_MAX, "{ch} {pad}: {} bytes", cut.len());
                assert!(
                    cut.len() + ch.len_utf8() > TEXT_MAX,
                    "{ch} {pad}: cut too short"
                );
                let body = cut
                    .strip_suffix('…')
                    .unwrap_or_else(|| panic!("{ch} {pad}: no mark"));
                assert!(s.starts_with(body), "{ch} {pad}");
            }
        }
        let exact = "é".repeat(TEXT_MAX / 2);
        assert_eq!(
            shorten(exact.clone()),
            exact,
            "exactly the bound is not cut"
        );
    }

    #[test]
    fn a_task_record_text_is_bounded_too() {
        let rec = TaskRecord {
            task_id: "droid-1-abcd".into(),
            state: TaskState::Error,
            created_at: "2026-11-22T12:04:05.123Z".into(),
            updated_at: "2026-11-22T12:04:05.123Z".into(),
            result: Some(result_with("€".repeat(100_000), 3)),
        };
        let text = render_record(&rec);
        assert!(text.len() <= TEXT_MAX, "{} bytes", text.len());
        assert!(text.starts_with("task droid-1-abcd: error\nstatus: error\nsummary: €€"));
    }

    /// The model-facing part of a tool list: what clients hand the model for each tool (its
    /// name, description and input schema; Gemini CLI and OpenCode send it with every request),
    /// as compact JSON.
    fn model_facing(tools: &[Value]) -> usize {
        let parts: Vec<Value> = tools
            .iter()
            .map(|t| json!({"name": t["name"], "description": t["description"], "inputSchema": t["inputSchema"]}))
            .collect();
        Value::Array(parts).to_string().len()
    }

    /// The budget of the model-facing part of the default `tools/list` (issue 32): 25 tools
    /// took 20.5 KB, about 5k tokens, and look-alike per-provider names crowded the right tool
    /// out of Codex's tool search. The default is the seven droid tools and one shared
    /// delegation family; a new tool or longer prose must find its bytes elsewhere. It was
    /// 8 KB until the request gained `fallback`, `best_of`, `keep_all` and `max_tokens`: with
    /// their lists of agents written as strings (`agents_as_strings`) and the description cut,
    /// they cost ~640 bytes over the two request tools and `ask` (8.6 KB in all).
    const DEFAULT_MODEL_FACING_BUDGET: usize = 9 * 1000;

    /// Every toolset on (`all`): the whole answer stays under 56 KiB (it was 48 KiB with the
    /// per-provider families alone, their prose-carrying request schema included).
    const ALL_TOOLSETS_BUDGET: usize = 56 * 1024;

    #[test]
    fn the_default_tool_list_is_small_and_every_toolset_stays_bounded() {
        let default = Catalog::default();
        let all = Catalog {
            toolsets: Toolsets::parse("all").unwrap(),
            providers: ProviderId::ALL.to_vec(),
        };
        for tasks in [false, true] {
            let tools = listed(tasks, &default);
            let facing = model_facing(&tools);
            let whole = Value::Array(tools.clone()).to_string().len();
            println!(
                "default tools/list (tasks: {tasks}): {} tools, model-facing part {facing} bytes \
                 (names, descriptions, input schemas), whole answer {whole} bytes",
                tools.len()
            );
            for t in &tools {
                println!(
                    "  {}: description {} bytes, input schema {} bytes",
                    t["name"],
                    t["description"].as_str().unwrap_or_default().len(),
                    t["inputSchema"].to_string().len()
                );
            }
            assert!(
                facing <= DEFAULT_MODEL_FACING_BUDGET,
                "the model-facing part of the default tools/list is {facing} bytes"
            );
            let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
            let mut want: Vec<&str> = NAMES.to_vec();
            want.extend(["ask", "pend", "ping", "cancel"]);
            assert_eq!(names, want);
            let every = listed(tasks, &all);
            let size = Value::Array(every.clone()).to_string().len();
            println!(
                "every toolset (tasks: {tasks}): {} tools, model-facing part {} bytes, whole \
                 answer {size} bytes",
                every.len(),
                model_facing(&every)
            );
            assert!(size < ALL_TOOLSETS_BUDGET, "tools/list is {size} bytes");
            assert_eq!(every.len(), 7 + 4 + 4 * ProviderId::ALL.len());
        }
    }

    #[test]
    fn the_request_schemas_state_the_limits_the_server_enforces() {
        let tools = listed(false, &Catalog::default());
        let by = |name: &str| {
            tools
                .iter()
                .find(|t| t["name"] == name)
                .cloned()
                .unwrap_or_else(|| panic!("no {name}"))
        };
        let (exec, submit) = (by("execute_droid_task"), by("droid_submit"));
        assert_eq!(exec["inputSchema"], submit["inputSchema"]);
        let p = &exec["inputSchema"]["properties"];
        assert_eq!(p["objective"]["maxLength"], 50_000);
        assert_eq!(p["instructions"]["maxLength"], 100_000);
        assert_eq!(p["constraints"]["maxItems"], 100);
        assert_eq!(p["constraints"]["items"]["maxLength"], 2_000);
        assert_eq!(p["suggested_commands"]["maxItems"], 50);
        assert_eq!(
            p["context"]["properties"]["files_of_interest"]["maxItems"],
            1_000
        );
        assert_eq!(p["max_runtime_seconds"]["maximum"], 86_400);
        let ask = &by("ask")["inputSchema"];
        assert_eq!(ask["properties"]["message"]["maxLength"], 100_000);
        assert_eq!(ask["properties"]["session"]["maxLength"], 256);
        assert_eq!(
            ask["properties"]["wait_seconds"]["maximum"],
            MAX_WAIT_SECONDS
        );
        assert_eq!(ask["required"], json!(["provider", "message"]));
        assert_eq!(
            ask["properties"]["provider"]["enum"],
            json!(["droid", "codex", "claude", "gemini", "opencode"])
        );
        // the output schemas are the contract's, without prose
        let result = crate::portable::portable(&droid_contract::result_schema());
        assert_eq!(exec["outputSchema"], crate::portable::terse(&result));
    }

    #[test]
    fn toolsets_and_providers_choose_the_tools_listed_and_answered() {
        let catalog = |toolsets: &str, providers: &[ProviderId]| Catalog {
            toolsets: Toolsets::parse(toolsets).unwrap(),
            providers: providers.to_vec(),
        };
        let listed_names = |c: &Catalog| -> Vec<String> {
            listed(false, c)
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect()
        };
        let two = catalog(
            "delegate,per_provider",
            &[ProviderId::Gemini, ProviderId::Codex],
        );
        let want = [
            "ask",
            "pend",
            "ping",
            "cancel",
            "ask_codex",
            "pend_codex",
            "ping_codex",
            "cancel_codex",
            "ask_gemini",
            "pend_gemini",
            "ping_gemini",
            "cancel_gemini",
        ];
        assert_eq!(listed_names(&two), want);
        assert_eq!(names(&two), want);
        assert!(known("ask_codex", &two) && known("pend", &two));
        assert!(!known("ask_claude", &two) && !known("execute_droid_task", &two));
        assert_eq!(
            listed(false, &two)[0]["inputSchema"]["properties"]["provider"]["enum"],
            json!(["gemini", "codex"])
        );
        // no provider: no delegation tool at all
        let none = catalog("all", &[]);
        assert_eq!(listed_names(&none), NAMES);
        assert!(!known("ask", &none));
        let default = Catalog::default();
        assert!(!known("ask_codex", &default), "per_provider is opt-in");
        assert_eq!(names(&default), listed_names(&default));
    }

    #[test]
    fn only_failures_are_errors_partial_is_not() {
        for (status, is_error) in [
            (Status::Success, false),
            (Status::Partial, false),
            (Status::Failed, true),
            (Status::Timeout, true),
            (Status::Cancelled, true),
            (Status::Error, true),
        ] {
            let mut r = result_with("x".into(), 0);
            r.status = status;
            assert_eq!(result_answer(&r)["isError"], is_error, "{status:?}");
        }
    }
}
