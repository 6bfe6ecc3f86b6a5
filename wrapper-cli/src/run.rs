//! `droid-executor run`: build an ExecutionRequest from flags (or `--request FILE|-`), run it
//! in-process through the engine, and print the result (`--json`) or a readable report.
//!
//! Flags override the fields of `--request`; `--context` takes seed 000's JSON
//! (docs/architecture.md#origin)
//! (`{"repo_root": …, "files_of_interest": […]}`), `--repo` and `--file` override or extend it;
//! with neither, repo_root is the current directory. Every flag mistake that concerns the request
//! (bad `--context` JSON, unreadable `--instructions-file`) is reported like a contract violation,
//! so `--json` callers always get an ExecutionResult.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use droid_contract::INSTRUCTIONS_MAX;
use droid_contract::{AgentChoice, ExecutionResult, Violation, Violations};
use droid_exec::input::{Input, read_input};
use droid_exec::{EngineConfig, Settings};
use serde_json::{Map, Value, json};

use crate::bridge_client::{Where, ensure, target};
use crate::context::Context;
use crate::in_process::in_process;
use crate::output::{print_result, print_submitted};

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// What the task must achieve (or use --objective).
    #[arg(value_name = "OBJECTIVE")]
    pub objective_arg: Option<String>,
    /// What the task must achieve.
    #[arg(long, conflicts_with = "objective_arg")]
    pub objective: Option<String>,
    /// How to do it.
    #[arg(long)]
    pub instructions: Option<String>,
    /// Read the instructions from a file.
    #[arg(long, value_name = "FILE", conflicts_with = "instructions")]
    pub instructions_file: Option<PathBuf>,
    /// Context as JSON: {"repo_root": "/abs", "files_of_interest": ["src/x.rs"]}.
    #[arg(long, value_name = "JSON")]
    pub context: Option<String>,
    /// Repository root (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub repo: Option<PathBuf>,
    /// A file of interest (repeatable).
    #[arg(long = "file", value_name = "PATH")]
    pub files: Vec<String>,
    /// A constraint droid must keep (repeatable).
    #[arg(long = "constraint", value_name = "TEXT")]
    pub constraints: Vec<String>,
    /// An acceptance criterion (repeatable).
    #[arg(long = "accept", value_name = "TEXT")]
    pub accept: Vec<String>,
    /// code | command | mixed.
    #[arg(long, value_name = "MODE")]
    pub mode: Option<String>,
    /// A command droid should run and we re-run to verify (repeatable).
    #[arg(long = "command", value_name = "CMD")]
    pub commands: Vec<String>,
    /// Time budget in seconds (default 600, or DROID_TIMEOUT).
    #[arg(long, value_name = "SECONDS")]
    pub max_runtime: Option<u64>,
    /// Token budget: input + output tokens the agent may report (cache reads apart); over it,
    /// the agent is stopped with `budget_exceeded`, and its session can be resumed with a
    /// larger one.
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u64>,
    /// Agents tried in turn after this one when it cannot do the task (not installed,
    /// authentication, rate limit or quota, model error): provider or provider:model, comma
    /// separated, e.g. `codex,claude:opus`.
    #[arg(long, value_name = "AGENTS", value_delimiter = ',', value_parser = agent_choice)]
    pub fallback: Vec<AgentChoice>,
    /// Run the task on 2 to 5 agents at once, each in a worktree, and keep the one the
    /// verification commands (--command) judge best: provider or provider:model, comma
    /// separated, e.g. `codex,claude:opus`.
    #[arg(long, value_name = "AGENTS", value_delimiter = ',', value_parser = agent_choice)]
    pub best_of: Vec<AgentChoice>,
    /// With --best-of: keep every candidate's worktree, not only the winner's.
    #[arg(long)]
    pub keep_all: bool,
    /// read_only | low | medium | high (capped by max_autonomy).
    #[arg(long, value_name = "LEVEL")]
    pub autonomy: Option<String>,
    /// The agent CLI that runs the task: droid (default), codex, claude, gemini, opencode.
    #[arg(long, value_name = "NAME")]
    pub provider: Option<String>,
    /// Model id, in the provider's own terms (droid: a custom model as `doctor` lists it,
    /// custom:<displayName>-<n>; codex: gpt-5.5).
    #[arg(long)]
    pub model: Option<String>,
    /// Reasoning effort (mapped onto the provider's own flag; refused where it has none).
    #[arg(long, value_name = "EFFORT")]
    pub reasoning_effort: Option<String>,
    /// Continue this session of the provider (the result's session_id).
    #[arg(long = "session", value_name = "ID")]
    pub session: Option<String>,
    /// Your id for the task, echoed back.
    #[arg(long)]
    pub task_id: Option<String>,
    /// Where the agent works: none (in the repository, the default unless the setting
    /// `isolation` says otherwise) or worktree (a git worktree of its own; review the result,
    /// then `droid-executor tasks apply ID` or `tasks discard ID`).
    #[arg(long, value_name = "none|worktree")]
    pub isolation: Option<String>,
    /// A command run in the new worktree before the agent, e.g. `npm ci` (repeatable; with
    /// --isolation worktree).
    #[arg(long = "setup-command", value_name = "CMD")]
    pub setup_commands: Vec<String>,
    /// An untracked path copied into the new worktree, e.g. `.env` (repeatable; with
    /// --isolation worktree).
    #[arg(long = "worktree-copy", value_name = "PATH")]
    pub worktree_copy: Vec<String>,
    /// Notes echoed back, never sent to droid.
    #[arg(long)]
    pub notes: Option<String>,
    /// Read the whole request as JSON from FILE, or from stdin with "-".
    #[arg(long, value_name = "FILE|-")]
    pub request: Option<String>,
    /// Print the ExecutionResult as JSON on stdout (with --background: `{"task_id": …}`).
    #[arg(long)]
    pub json: bool,
    /// Submit the task to run in the background, print its id and return at once (follow it
    /// with `droid-executor tasks wait ID`).
    #[arg(long)]
    pub background: bool,
    /// Where the run happens: in this process (default), or through the HTTP bridge, which is
    /// started in the background when nothing listens on its port.
    #[arg(long, value_enum, default_value_t = Via::InProcess)]
    pub via: Via,
    /// The bridge's address with --via bridge (default 127.0.0.1).
    #[arg(long, value_name = "HOST")]
    pub bridge_host: Option<String>,
    /// The bridge's port with --via bridge (default 53002, or PORT).
    #[arg(long, value_name = "PORT")]
    pub bridge_port: Option<u16>,
}

/// Where a run happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Via {
    /// In this process.
    InProcess,
    /// Through the HTTP bridge (`droid-executor serve`).
    Bridge,
}

/// One agent of --fallback or --best-of: `provider` or `provider:model`.
fn agent_choice(s: &str) -> Result<AgentChoice, String> {
    AgentChoice::parse(s.trim())
}

fn set(obj: &mut Map<String, Value>, key: &str, v: Option<Value>) {
    if let Some(v) = v {
        obj.insert(key.to_owned(), v);
    }
}

fn list(obj: &mut Map<String, Value>, key: &str, items: &[String]) {
    if !items.is_empty() {
        obj.insert(key.to_owned(), json!(items));
    }
}

/// The request as JSON, or the flag problems as violations. `body_limit` bounds `--request`
/// (the bridge's limit on the same JSON); `--instructions-file` is bounded by the contract's
/// limit on `instructions`. Neither is ever read past its limit (see [`droid_exec::input`]).
fn build_request(a: &RunArgs, body_limit: usize) -> Result<Value, Violations> {
    let mut bad = Vec::new();
    let mut obj = match &a.request {
        None => Map::new(),
        Some(src) => {
            let (input, what) = if src == "-" {
                (Input::Stdin, "--request - (stdin)".to_owned())
            } else {
                (Input::Path(Path::new(src)), format!("--request {src}"))
            };
            let text = read_input(
                input,
                &what,
                body_limit,
                "body_limit; raise it in the config or with DROID_EXECUTOR_BODY_LIMIT",
            )
            .map_err(|e| e.to_string())
            .and_then(|bytes| {
                String::from_utf8(bytes).map_err(|e| format!("{what} is not UTF-8 text: {e}"))
            });
            match text.and_then(|t| {
                serde_json::from_str::<Value>(&t).map_err(|e| format!("not valid JSON: {e}"))
            }) {
                Ok(Value::Object(m)) => m,
                Ok(other) => {
                    bad.push(Violation::new(
                        "$",
                        format!("--request must hold a JSON object, got {other}"),
                    ));
                    Map::new()
                }
                Err(e) => {
                    bad.push(Violation::new("$", format!("--request: {e}")));
                    Map::new()
                }
            }
        }
    };
    set(
        &mut obj,
        "objective",
        a.objective_arg
            .clone()
            .or_else(|| a.objective.clone())
            .map(Value::from),
    );
    if let Some(f) = &a.instructions_file {
        let what = format!("--instructions-file {}", f.display());
        // UTF-8 takes at most 4 bytes a character: more bytes than this cannot be valid
        let limit = INSTRUCTIONS_MAX * 4;
        let read = read_input(
            Input::Path(f),
            &what,
            limit,
            &format!("instructions hold at most {INSTRUCTIONS_MAX} characters"),
        )
        .map_err(|e| e.to_string())
        .and_then(|bytes| {
            String::from_utf8(bytes).map_err(|e| format!("{what}: not UTF-8 text: {e}"))
        });
        match read {
            Ok(s) => set(&mut obj, "instructions", Some(s.into())),
            Err(e) => bad.push(Violation::new("$.instructions", e)),
        }
    }
    set(
        &mut obj,
        "instructions",
        a.instructions.clone().map(Value::from),
    );
    if let Some(c) = &a.context {
        match serde_json::from_str::<Value>(c) {
            Ok(v) => {
                obj.insert("context".into(), v);
            }
            Err(e) => bad.push(Violation::new(
                "$.context",
                format!(
                    "--context is not valid JSON ({e}); write {{\"repo_root\": \"/abs/path\"}}"
                ),
            )),
        }
    }
    let ctx = obj
        .entry("context")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(ctx) = ctx {
        // a path is carried exactly or refused: a lossy conversion (`\xff` → U+FFFD) would
        // name another directory
        if let Some(repo) = &a.repo {
            let abs = std::path::absolute(repo).unwrap_or_else(|_| repo.clone());
            match abs.to_str() {
                Some(p) => {
                    ctx.insert("repo_root".into(), p.into());
                }
                None => bad.push(Violation::new(
                    "$.context.repo_root",
                    format!(
                        "--repo {abs:?} is not valid UTF-8; the request carries paths as UTF-8 \
                         text, so rename the directory or use a UTF-8 path to it (a symlink)"
                    ),
                )),
            }
        } else if !ctx.contains_key("repo_root")
            && let Ok(cwd) = std::env::current_dir()
        {
            match cwd.to_str() {
                Some(p) => {
                    ctx.insert("repo_root".into(), p.into());
                }
                None => bad.push(Violation::new(
                    "$.context.repo_root",
                    format!(
                        "the current directory {cwd:?} is not valid UTF-8; pass --repo with a \
                         UTF-8 path to it (a symlink)"
                    ),
                )),
            }
        }
        if !a.files.is_empty() {
            let files = ctx
                .entry("files_of_interest")
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(list) = files {
                list.extend(a.files.iter().cloned().map(Value::from));
            }
        }
    }
    list(&mut obj, "constraints", &a.constraints);
    list(&mut obj, "acceptance_criteria", &a.accept);
    list(&mut obj, "suggested_commands", &a.commands);
    set(&mut obj, "execution_mode", a.mode.clone().map(Value::from));
    set(
        &mut obj,
        "max_runtime_seconds",
        a.max_runtime.map(Value::from),
    );
    set(&mut obj, "max_tokens", a.max_tokens.map(Value::from));
    let agents = |list: &[AgentChoice]| {
        (!list.is_empty()).then(|| list.iter().map(|c| Value::from(c.label())).collect())
    };
    set(&mut obj, "fallback", agents(&a.fallback));
    set(&mut obj, "best_of", agents(&a.best_of));
    set(
        &mut obj,
        "keep_all",
        a.keep_all.then_some(Value::Bool(true)),
    );
    set(&mut obj, "autonomy", a.autonomy.clone().map(Value::from));
    set(&mut obj, "model", a.model.clone().map(Value::from));
    set(
        &mut obj,
        "reasoning_effort",
        a.reasoning_effort.clone().map(Value::from),
    );
    set(&mut obj, "session_id", a.session.clone().map(Value::from));
    set(&mut obj, "provider", a.provider.clone().map(Value::from));
    set(&mut obj, "task_id", a.task_id.clone().map(Value::from));
    set(&mut obj, "isolation", a.isolation.clone().map(Value::from));
    list(&mut obj, "setup_commands", &a.setup_commands);
    list(&mut obj, "worktree_copy", &a.worktree_copy);
    set(
        &mut obj,
        "notes_for_human",
        a.notes.clone().map(Value::from),
    );
    if bad.is_empty() {
        Ok(Value::Object(obj))
    } else {
        Err(Violations(bad))
    }
}

pub(crate) async fn run(args: RunArgs, ctx: &Context) -> ExitCode {
    let (settings, cfg) = match ctx.settings().and_then(|s| Ok((s, ctx.engine_config()?))) {
        Ok(both) => both,
        Err(e) => {
            eprintln!("droid-executor: {e:#}");
            return ExitCode::from(2);
        }
    };
    for w in &cfg.droid_warnings {
        eprintln!("droid-executor: warning: {w}");
    }
    let request = match build_request(&args, settings.body_limit) {
        Ok(v) => v,
        Err(v) => {
            let result = ExecutionResult::invalid_request(args.task_id.clone(), &v);
            return print_result(&result, args.json);
        }
    };
    if args.via == Via::Bridge {
        return via_bridge(&request, &args, settings, cfg, ctx).await;
    }
    let follow = |id: &str| format!("droid-executor tasks wait {id}");
    let background = args
        .background
        .then_some(&follow as &dyn Fn(&str) -> String);
    in_process(cfg.clone(), &request, args.json, background).await
}

/// `run --via bridge`: make sure the bridge runs (seed 000's socket probe,
/// docs/architecture.md#origin, then `bridge
/// start`), post the request, print its answer. The bridge validates the request; its 400
/// answer is an `error` result like a local one. With `--background` the request goes to
/// `POST /tasks` and the task id is printed.
async fn via_bridge(
    request: &Value,
    args: &RunArgs,
    settings: &Settings,
    cfg: &EngineConfig,
    ctx: &Context,
) -> ExitCode {
    let at = Where {
        host: args.bridge_host.clone(),
        port: args.bridge_port,
    };
    let t = match target(&at, settings, ctx.env()).await {
        Ok(t) => t,
        Err(e) => {
            eprintln!("droid-executor: {e:#}");
            return ExitCode::from(2);
        }
    };
    match ensure(&t, cfg, ctx.config_arg()).await {
        Ok(Some(pid)) => eprintln!(
            "droid-executor: started the bridge on http://{} (pid {pid})",
            t.addr
        ),
        Ok(None) => {}
        Err(e) => {
            eprintln!("droid-executor: cannot use the bridge: {e:#}");
            return ExitCode::from(2);
        }
    }
    let client = bridge_http::client::Client::new(t.addr, t.token.clone());
    if args.background {
        return match client.submit(request).await {
            Ok(Ok(id)) => print_submitted(&id, args.json, &|id| {
                format!("droid-executor tasks wait {id}")
            }),
            Ok(Err(result)) => print_result(&result, args.json),
            Err(e) => {
                eprintln!("droid-executor: {e}");
                ExitCode::from(2)
            }
        };
    }
    // the run's own budget, plus room for queueing, verification and the answer
    let budget = request
        .get("max_runtime_seconds")
        .and_then(Value::as_u64)
        .unwrap_or(u64::from(settings.default_timeout));
    let timeout = std::time::Duration::from_secs(budget.saturating_add(3600));
    match client.execute(request, timeout).await {
        Ok(result) => print_result(&result, args.json),
        Err(e) => {
            eprintln!("droid-executor: {e}");
            ExitCode::from(2)
        }
    }
}
