//! `setup mcp` entries used by the real agent CLIs, headless, as `cargo xtask fetch-interop`
//! installs them under `target/agents/node`: Codex 0.169.0 (`codex exec --json`) and Claude Code
//! 2.1.330 (`claude -p`), each against the scripted model speaking its API (Responses, Messages),
//! which makes the agent call `execute_droid_task`; the task runs the fake droid, whose path and
//! scenario reach our server only through the environment.
//!
//! Each test first shows the failure the entry fixes (Codex: the call refused for want of
//! approval; Claude Code: the call denied for want of a permission rule), then registers with
//! `setup mcp` and sees the call succeed. A CLI that is not installed fails the test with the
//! install command; nothing skips.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::droid_bin::{droid_executor_bin, workspace_root};
use tests::scripted_model::ScriptedModel;

use super::binary::{FakeHome, droid_executor};

/// Where `cargo xtask fetch-interop` installs the agent CLIs, relative to the workspace root.
const AGENTS_DIR: &str = "target/agents/node";
/// One headless agent run: two or three model turns and one fake-droid task.
const AGENT_LIMIT: Duration = Duration::from_secs(180);

/// The Node launcher `script` (relative to the package) of an agent CLI installed at `version`,
/// or a failure naming the install command. Install scripts are not run, so Claude Code's
/// `bin/claude.exe` is a placeholder: its `cli-wrapper.cjs` finds the native binary instead.
pub(super) fn agent_launcher(package: &str, version: &str, script: &str) -> PathBuf {
    let dir = workspace_root().join(AGENTS_DIR);
    let manifest = dir.join("node_modules").join(package).join("package.json");
    let found = std::fs::read(&manifest)
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|m| m["version"].as_str().map(str::to_owned));
    assert_eq!(
        found.as_deref(),
        Some(version),
        "{package} {version} is not installed in {}: run `cargo xtask fetch-interop` (cargo \
         xtask test does; it needs Node.js 20 or later and npm)",
        dir.display()
    );
    dir.join("node_modules").join(package).join(script)
}

/// What an agent run printed.
#[derive(Debug)]
pub(super) struct AgentOut {
    pub(super) code: Option<i32>,
    /// stdout, one JSON value per line (other lines dropped).
    pub(super) events: Vec<Value>,
    pub(super) stderr: String,
}

/// Runs `node launcher args` in `cwd` with exactly `env`, stdin from /dev/null, in its own
/// process group; whatever is left of the group afterwards (the MCP server it started) is killed.
pub(super) async fn run_agent(
    launcher: &Path,
    args: &[&str],
    env: &[(OsString, OsString)],
    cwd: &Path,
) -> AgentOut {
    let mut all = vec![launcher.as_os_str()];
    all.extend(args.iter().map(std::ffi::OsStr::new));
    run_program(Path::new("node"), &all, env, cwd).await
}

/// Runs `program args` as [`run_agent`] runs the Node launchers (droid is a binary of its own).
pub(super) async fn run_program<S: AsRef<std::ffi::OsStr>>(
    program: &Path,
    args: &[S],
    env: &[(OsString, OsString)],
    cwd: &Path,
) -> AgentOut {
    #[allow(clippy::disallowed_methods)] // the real agent CLI, as a user runs it
    let child = tokio::process::Command::new(program)
        .args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
    let pgid = Pid::from_raw(i32::try_from(child.id().unwrap()).unwrap());
    let out = tokio::time::timeout(AGENT_LIMIT, child.wait_with_output()).await;
    let _ = killpg(pgid, Signal::SIGKILL);
    let out = out
        .unwrap_or_else(|_| panic!("{} did not finish in {AGENT_LIMIT:?}", program.display()))
        .unwrap();
    AgentOut {
        code: out.status.code(),
        events: String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The task the model hands over: any request that runs the fake droid in the home's repository.
pub(super) fn task(home: &FakeHome) -> Value {
    json!({
        "objective": "Say done",
        "context": {"repo_root": home.repo().display().to_string()},
    })
}

/// `setup mcp ARGS` in `home` with `env`; its stdout.
pub(super) async fn setup(args: &[&str], env: &[(OsString, OsString)], home: &Path) -> String {
    let mut all = vec!["setup", "mcp"];
    all.extend_from_slice(args);
    let out = droid_executor(&all, env, home).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    out.stdout
}

/// Codex's `mcp_tool_call` item for `execute_droid_task`, as completed.
fn codex_call(out: &AgentOut) -> Value {
    out.events
        .iter()
        .find(|e| {
            e["type"] == "item.completed"
                && e["item"]["type"] == "mcp_tool_call"
                && e["item"]["tool"] == "execute_droid_task"
        })
        .map(|e| e["item"].clone())
        .unwrap_or_else(|| {
            panic!(
                "no execute_droid_task call completed: {:#?}\nstderr: {}",
                out.events, out.stderr
            )
        })
}

/// `codex exec` calls `execute_droid_task` through the entry `setup mcp --client codex` writes:
/// the call is approved (not refused under approval policy `never`), the server gets
/// `DROID_CLI_CMD` and the variables the config passes to droid (Codex gives an MCP server only
/// HOME, PATH and LC_CTYPE unless `env_vars` names more), and the run succeeds. The entry an
/// earlier version wrote (command and args only) gets the call refused, and is replaced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_exec_runs_a_task_through_the_setup_entry() {
    let codex = agent_launcher("@openai/codex", "0.169.0", "bin/codex.js");
    let home = FakeHome::new("agents-codex", &[]);
    home.play(&json!([{"completion": "Done."}]));
    let script = json!([
        // Codex defers MCP tools behind its tool search: the model searches first
        {"output": [{"type": "tool_search_call", "call_id": "search-1", "execution": "client",
                     "status": "completed", "arguments": {"query": "droid execute task", "limit": 8}}]},
        {"output": [{"type": "function_call", "call_id": "call-1", "status": "completed",
                     "namespace": "mcp__droid_executor", "name": "execute_droid_task",
                     "arguments": task(&home).to_string()}]},
        {"output": [{"type": "message", "role": "assistant", "status": "completed",
                     "content": [{"type": "output_text", "text": "All done.", "annotations": []}]}]},
    ]);
    let model = ScriptedModel::start(script).await.unwrap();
    let codex_home = home.file(".codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    let provider = format!(
        "model = \"gpt-5.5\"\nmodel_provider = \"mock\"\n\n[model_providers.mock]\nname = \"Mock\"\n\
         base_url = \"{}\"\nwire_api = \"responses\"\nenv_key = \"MOCK_API_KEY\"\n\
         request_max_retries = 0\nstream_max_retries = 0\n",
        model.base_url()
    );
    // what `setup mcp --client codex` wrote before it knew better
    let old_entry = format!(
        "\n[mcp_servers.droid-executor]\ncommand = \"{}\"\nargs = [\"mcp\"]\n",
        droid_executor_bin().display()
    );
    std::fs::write(
        codex_home.join("config.toml"),
        format!("{provider}{old_entry}"),
    )
    .unwrap();
    let mut env = home.env();
    env.push(("CODEX_HOME".into(), codex_home.clone().into()));
    env.push(("MOCK_API_KEY".into(), "sk-mock".into()));
    let args = [
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--disable",
        "unbounded_connection_retries",
        "Hand the task to droid",
    ];

    let before = run_agent(&codex, &args, &env, &home.repo()).await;
    let call = codex_call(&before);
    assert_eq!(
        (&call["status"], &call["error"]),
        (
            &json!("failed"),
            &json!({"message": "MCP tool call requires approval, but approval policy is never"})
        ),
        "{before:#?}"
    );

    let said = setup(&["--client", "codex"], &env, home.path()).await;
    assert!(said.contains("registered droid-executor"), "{said}");
    let config = std::fs::read_to_string(codex_home.join("config.toml")).unwrap();
    assert!(config.starts_with(&provider), "{config}");
    let table: toml::Table = toml::from_str(&config).unwrap();
    let entry = &table["mcp_servers"]["droid-executor"];
    // default_timeout 600 s + a minute
    assert_eq!(entry["tool_timeout_sec"], toml::Value::Integer(660));
    let env_vars = entry["env_vars"].as_array().unwrap();
    for name in ["DROID_CLI_CMD", "FACTORY_API_KEY", "FAKE_DROID_SCENARIO"] {
        assert!(
            env_vars.contains(&toml::Value::String(name.into())),
            "{name}: {config}"
        );
    }

    let after = run_agent(&codex, &args, &env, &home.repo()).await;
    let call = codex_call(&after);
    assert_eq!(
        (&call["status"], &call["error"]),
        (&json!("completed"), &Value::Null),
        "{after:#?}"
    );
    let result = &call["result"]["structured_content"];
    assert_eq!(
        (&result["status"], &result["summary"]),
        (&json!("success"), &json!("Done.")),
        "{result:#}"
    );
    assert_eq!(after.code, Some(0), "{after:#?}");
    assert!(
        after
            .events
            .last()
            .is_some_and(|e| e["type"] == "turn.completed"),
        "{after:#?}"
    );
}

/// Claude Code's `tool_result` for the `tool_use` the scripted model sent.
fn claude_result(out: &AgentOut) -> Value {
    out.events
        .iter()
        .filter(|e| e["type"] == "user")
        .flat_map(|e| {
            e["message"]["content"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .find(|b| b["type"] == "tool_result" && b["tool_use_id"] == "toolu_1")
        .unwrap_or_else(|| {
            panic!(
                "no tool_result for the call: {:#?}\nstderr: {}",
                out.events, out.stderr
            )
        })
}

/// `claude -p` calls `execute_droid_task` once `setup mcp --client claude --allow-tools` has
/// added the rules `mcp__droid-executor__<tool>` to `permissions.allow` in
/// `~/.claude/settings.json`; registered without them, the call is denied ("you haven't granted
/// it yet"), and `setup` says which rules to add.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_print_runs_a_task_once_the_tools_are_allowed() {
    let claude = agent_launcher("@anthropic-ai/claude-code", "2.1.330", "cli-wrapper.cjs");
    let home = FakeHome::new("agents-claude", &[]);
    home.play(&json!([{"completion": "Done."}]));
    let script = json!([
        {"content": [{"type": "tool_use", "id": "toolu_1",
                      "name": "mcp__droid-executor__execute_droid_task", "input": task(&home)}]},
        {"content": [{"type": "text", "text": "All done."}]},
    ]);
    let model = ScriptedModel::start(script).await.unwrap();
    let mut env = home.env();
    let base = model.base_url();
    env.extend([
        (
            "ANTHROPIC_BASE_URL".into(),
            base.trim_end_matches("/v1").into(),
        ),
        ("ANTHROPIC_API_KEY".into(), "sk-ant-mock".into()),
        ("CLAUDE_CODE_MAX_RETRIES".into(), "0".into()),
        ("DISABLE_AUTOUPDATER".into(), "1".into()),
        ("DISABLE_TELEMETRY".into(), "1".into()),
    ]);
    let args = [
        "-p",
        "Hand the task to droid",
        "--output-format",
        "stream-json",
        "--verbose",
    ];

    let said = setup(&["--client", "claude"], &env, home.path()).await;
    assert!(
        said.contains(
            "--allowedTools mcp__droid-executor__execute_droid_task,mcp__droid-executor__droid_submit,\
             mcp__droid-executor__droid_pend,mcp__droid-executor__droid_cancel,\
             mcp__droid-executor__droid_apply,mcp__droid-executor__droid_discard,\
             mcp__droid-executor__droid_ping"
        ),
        "{said}"
    );
    let before = run_agent(&claude, &args, &env, &home.repo()).await;
    let denied = claude_result(&before);
    assert_eq!(
        (&denied["is_error"], &denied["content"]),
        (
            &json!(true),
            &json!(
                "Claude requested permissions to use mcp__droid-executor__execute_droid_task, but you haven't granted it yet."
            )
        ),
        "{before:#?}"
    );

    setup(&["--client", "claude", "--allow-tools"], &env, home.path()).await;
    let settings: Value =
        serde_json::from_str(&std::fs::read_to_string(home.file(".claude/settings.json")).unwrap())
            .unwrap();
    assert_eq!(
        settings,
        json!({"permissions": {"allow": super::mcp_stdio::approved_tools()
            .iter()
            .map(|t| format!("mcp__droid-executor__{t}"))
            .collect::<Vec<_>>()}})
    );
    let after = run_agent(&claude, &args, &env, &home.repo()).await;
    let result = claude_result(&after);
    // a successful result carries no `is_error`
    assert_eq!(result.get("is_error"), None, "{after:#?}");
    let text = result["content"].to_string();
    assert!(
        text.contains(r#"\"status\":\"success\""#) && text.contains(r#"\"summary\":\"Done.\""#),
        "{after:#?}"
    );
    assert_eq!(after.code, Some(0), "{after:#?}");
}
