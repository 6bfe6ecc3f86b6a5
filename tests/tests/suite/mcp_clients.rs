//! The delegation flows of issue 32 from the real MCP clients, each registered by `setup mcp` as
//! it writes the entry (no hand edits) and run headless at its default autonomy or approval mode
//! against the scripted model: droid 0.225.2 → `ask` (to the real Codex) → `pend`; Codex 0.169.0 →
//! `ask` and `pend` to the real Claude Code with Claude's key in Codex's environment; Gemini CLI
//! 0.61.0 → `ping` and `execute_droid_task`; OpenCode 1.18.33 → `ask` (with `wait_seconds`);
//! Claude Code 2.1.330 → `ask` and `pend` (its `execute_droid_task` is in `mcp_agents`); and the
//! MCP Inspector 2.12.0's minimal environment named in `ping`'s fix.
//!
//! Each test first shows what the entry fixes: droid's model never told of the tools and the
//! first call ending the run ("requires higher autonomy"); Codex dropping Claude's key, with the
//! hint naming the client's filter instead of "set ANTHROPIC_API_KEY"; Gemini offering none of
//! the tools of an untrusted server; OpenCode with no server at all (Claude Code's denial is shown
//! in `mcp_agents`). Then it registers and sees the flow through, the reply the calling model
//! receives being the other agent's answer. A CLI that is not installed fails the test with the
//! install command; nothing skips.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::agent_bin::agent_cli;
use tests::codex_home::{CodexHome, KEY_VAR};
use tests::droid_bin::{droid_executor_bin, real_droid};
use tests::scripted_model::ScriptedModel;

use super::binary::{FakeHome, git_repo_at};
use super::mcp_agents::{AgentOut, agent_launcher, run_agent, run_program, setup, task};

/// A Responses API output item: the assistant says `text`.
fn says(text: &str) -> Value {
    json!({"type": "message", "role": "assistant", "status": "completed",
           "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

/// A Responses API output item: a call of our MCP tool `name` as Codex names it.
fn codex_calls(id: &str, name: &str, args: &Value) -> Value {
    json!({"type": "function_call", "call_id": id, "status": "completed",
           "namespace": "mcp__droid_executor", "name": name, "arguments": args.to_string()})
}

/// The chat-completions request bodies the scripted model got, from the `from`th on.
fn chat_bodies(model: &ScriptedModel, from: usize) -> Vec<String> {
    model
        .requests()
        .into_iter()
        .filter(|r| {
            r["path"]
                .as_str()
                .is_some_and(|p| p.ends_with("/chat/completions"))
        })
        .skip(from)
        .map(|r| r["body"].to_string())
        .collect()
}

/// droid's `tool_result` event for its call of `tool`.
fn droid_result<'a>(out: &'a AgentOut, tool: &str) -> &'a Value {
    out.events
        .iter()
        .find(|e| e["type"] == "tool_result" && e["toolId"] == tool)
        .unwrap_or_else(|| {
            panic!(
                "no tool_result of {tool}: {:#?}\nstderr: {}",
                out.events, out.stderr
            )
        })
}

fn is_codex_task_id(id: &str) -> bool {
    let parts: Vec<&str> = id.split('-').collect();
    matches!(parts[..], ["codex", secs, hex]
        if !secs.is_empty() && secs.bytes().all(|b| b.is_ascii_digit())
            && hex.len() == 4 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// `droid exec` (no `--auto`: droid's default autonomy) asks Codex through `ask` and gets its
/// reply through `pend`. Registered as the setup of earlier releases did (`droid mcp add` alone),
/// droid's first model request names none of the tools, and the first call ends the run: droid
/// rates an MCP tool it knows nothing of `high`. `setup mcp --client droid` writes
/// `blockOnMcpLoad` and the tools' levels into droid's settings, and the same run goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn droid_asks_codex_at_its_default_autonomy() {
    let codex = agent_cli("codex");
    let droid = real_droid();
    let codex_model = ScriptedModel::start(json!([{"output": [says("Four.")]}]))
        .await
        .unwrap();
    let droid_model = ScriptedModel::start(json!([
        {"text": "Asking Codex.", "tool": [{"name": "droid-executor___ask",
            "args": {"provider": "codex", "message": "What is 2 + 2? Answer in one word."}}]},
        {"text": "Waiting for its reply.", "tool": [{"name": "droid-executor___pend",
            "args": {"provider": "codex", "wait_seconds": 60}}]},
        {"text": "Codex says four."},
    ]))
    .await
    .unwrap();
    let home = CodexHome::new(&codex_model.base_url()).unwrap();
    let factory = home.path().join(".factory");
    std::fs::create_dir_all(&factory).unwrap();
    let droid_models = tests::droid_home::settings_json(&[("Asker", &droid_model.base_url())]);
    std::fs::write(factory.join("settings.json"), droid_models.to_string()).unwrap();
    let config = home.path().join(".config/droid-executor");
    std::fs::create_dir_all(&config).unwrap();
    // Codex's scripted provider reads its key from a variable of the user's choosing
    std::fs::write(
        config.join("config.toml"),
        format!("env_passthrough = [\"{KEY_VAR}\"]\n"),
    )
    .unwrap();
    let repo = home.path().join("repo");
    git_repo_at(&repo, &[("a.txt", "a\n")]);
    let mut env = home.env();
    env.extend([
        ("DROID_CLI_CMD".into(), droid.clone().into()),
        ("FACTORY_AIRGAP_ENABLED".into(), "1".into()),
        ("DROID_EXECUTOR_CODEX_BIN".into(), codex.into()),
    ]);
    let repo_arg = repo.display().to_string();
    let args = [
        "exec",
        "-o",
        "stream-json",
        "-m",
        "custom:Asker-0",
        "--cwd",
        &repo_arg,
        "Ask Codex what 2 + 2 is",
    ];

    // what `setup mcp --client droid` wrote before issue 32
    let exe = droid_executor_bin().display().to_string();
    let added = run_program(
        &droid,
        &["mcp", "add", "droid-executor", "--", &exe, "mcp"],
        &env,
        home.path(),
    )
    .await;
    assert_eq!(added.code, Some(0), "{added:#?}");
    let before = run_program(&droid, &args, &env, &repo).await;
    let refused = droid_result(&before, "droid-executor___ask");
    assert_eq!(refused["isError"], true, "{before:#?}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("requires higher autonomy")),
        "{refused:#}"
    );
    assert_eq!(before.code, Some(1), "{before:#?}");
    let first = chat_bodies(&droid_model, 0);
    assert!(
        !first[0].contains("droid-executor___ask"),
        "droid told its model of the tools without blockOnMcpLoad: {}",
        first[0]
    );

    let said = setup(&["--client", "droid"], &env, home.path()).await;
    assert!(
        said.contains("already has an MCP server named droid-executor")
            && said.contains("blockOnMcpLoad = true"),
        "{said}"
    );
    let seen = chat_bodies(&droid_model, 0).len();
    let after = run_program(&droid, &args, &env, &repo).await;
    let bodies = chat_bodies(&droid_model, seen);
    assert!(
        bodies[0].contains("droid-executor___ask"),
        "the first request of the run names the tools: {}",
        bodies[0]
    );
    let asked = droid_result(&after, "droid-executor___ask");
    assert_eq!(asked["isError"], false, "{after:#?}");
    let text = asked["value"].as_str().unwrap_or_default();
    let task_id = text
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .find(|w| is_codex_task_id(w))
        .unwrap_or_else(|| panic!("no Codex task id in the ask's answer: {text}"));
    eprintln!("droid's ask answered: {text}");
    let pended = droid_result(&after, "droid-executor___pend");
    assert_eq!(pended["isError"], false, "{after:#?}");
    let reply = pended["value"].as_str().unwrap_or_default();
    eprintln!("droid's pend answered: {reply}");
    assert!(
        reply.contains("Four.") && reply.contains(task_id),
        "the reply droid's model reads is Codex's answer: {reply}"
    );
    let completion = after
        .events
        .iter()
        .find(|e| e["type"] == "completion")
        .unwrap_or_else(|| panic!("no completion: {after:#?}"));
    assert_eq!(completion["finalText"], "Codex says four.");
    assert_eq!(after.code, Some(0), "{after:#?}");
}

/// Codex's `mcp_tool_call` item for the `n`th call of `tool`, as completed.
fn codex_call(out: &AgentOut, tool: &str) -> Value {
    out.events
        .iter()
        .find(|e| {
            e["type"] == "item.completed"
                && e["item"]["type"] == "mcp_tool_call"
                && e["item"]["tool"] == tool
        })
        .map(|e| e["item"].clone())
        .unwrap_or_else(|| {
            panic!(
                "no {tool} call completed: {:#?}\nstderr: {}",
                out.events, out.stderr
            )
        })
}

/// `codex exec` asks Claude Code (`ask`, then `pend`) while Claude's key and endpoint are in
/// Codex's environment. An entry that passes only the server's own variables (what setup wrote
/// before issue 32) loses them: Claude says it is not logged in, and the hint droid-executor
/// gives names the client's filter first (it never simply says to set a variable that may well
/// be set). `setup mcp --client codex` lists, by name, what each enabled provider reads, and the
/// reply Codex's model reads is Claude's answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_asks_claude_with_the_key_in_its_environment() {
    let codex = agent_launcher("@openai/codex", "0.169.0", "bin/codex.js");
    let claude = agent_cli("claude");
    let claude_model = ScriptedModel::start(json!([
        {"content": [{"type": "text", "text": "Claude: it is four."}]},
    ]))
    .await
    .unwrap();
    let ask = json!({"provider": "claude", "message": "What is 2 + 2?"});
    let pend = json!({"provider": "claude", "wait_seconds": 60});
    let codex_model = ScriptedModel::start(json!([
        // Codex defers MCP tools behind its tool search: the model searches first
        {"output": [{"type": "tool_search_call", "call_id": "search-1", "execution": "client",
                     "status": "completed", "arguments": {"query": "ask claude pend", "limit": 8}}]},
        {"output": [codex_calls("call-1", "ask", &ask)]},
        {"output": [codex_calls("call-2", "pend", &pend)]},
        {"output": [says("Claude answered.")]},
    ]))
    .await
    .unwrap();
    let home = CodexHome::new(&codex_model.base_url()).unwrap();
    let repo = home.path().join("repo");
    git_repo_at(&repo, &[("a.txt", "a\n")]);
    let mut env = home.env();
    env.extend([
        (
            "ANTHROPIC_BASE_URL".into(),
            claude_model.base_url().trim_end_matches("/v1").into(),
        ),
        ("ANTHROPIC_API_KEY".into(), "sk-ant-scripted".into()),
        ("CLAUDE_CODE_MAX_RETRIES".into(), "0".into()),
        ("DROID_EXECUTOR_CLAUDE_BIN".into(), claude.into()),
    ]);
    let args = [
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--disable",
        "unbounded_connection_retries",
        "Ask Claude what 2 + 2 is",
    ];
    // the entry setup wrote before issue 32: the tools approved, the server's own variables
    let config = home.codex_home().join("config.toml");
    let provider = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        format!(
            "{provider}\n[mcp_servers.droid-executor]\ncommand = {}\nargs = [\"mcp\"]\n\
             env_vars = [\"DROID_EXECUTOR_CLAUDE_BIN\", \"DROID_CLI_CMD\", \"FACTORY_API_KEY\"]\n\
             tool_timeout_sec = 660\n\n[mcp_servers.droid-executor.tools.ask]\n\
             approval_mode = \"approve\"\n\n[mcp_servers.droid-executor.tools.pend]\n\
             approval_mode = \"approve\"\n",
            json!(droid_executor_bin().display().to_string())
        ),
    )
    .unwrap();

    let before = run_agent(&codex, &args, &env, &repo).await;
    let failed = &codex_call(&before, "pend")["result"]["structured_content"];
    let issues = failed["result"]["issues"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let auth = issues
        .iter()
        .find(|i| i["type"] == "auth_failure")
        .unwrap_or_else(|| panic!("Claude's key did not reach it: {failed:#}"));
    let hint = auth["suggested_action"].as_str().unwrap_or_default();
    eprintln!("the hint without the key: {hint}");
    assert!(
        hint.starts_with("ANTHROPIC_API_KEY")
            && hint.contains("not in droid-executor's environment")
            && hint.contains("the MCP Inspector and other MCP SDK clients pass a server only"),
        "the hint names the client's filter first: {hint}"
    );

    let said = setup(&["--client", "codex"], &env, home.path()).await;
    assert!(said.contains("registered droid-executor"), "{said}");
    let table: toml::Table = toml::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    let entry = &table["mcp_servers"]["droid-executor"];
    let env_vars = entry["env_vars"].as_array().unwrap();
    for name in [
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "CLAUDE_CODE_MAX_RETRIES",
    ] {
        assert!(
            env_vars.contains(&toml::Value::String(name.into())),
            "{name}: {entry:?}"
        );
    }
    assert_eq!(
        entry["env"]["DROID_EXECUTOR_CLIENT"],
        toml::Value::String("codex".into())
    );

    let after = run_agent(&codex, &args, &env, &repo).await;
    let asked = codex_call(&after, "ask");
    assert_eq!(
        (&asked["status"], &asked["error"]),
        (&json!("completed"), &Value::Null),
        "{after:#?}"
    );
    let pended = codex_call(&after, "pend");
    let answer = &pended["result"]["structured_content"];
    eprintln!("pend answered: {answer:#}");
    assert_eq!(answer["reply"], "Claude: it is four.", "{answer:#}");
    assert_eq!(answer["state"], "success", "{answer:#}");
    assert_eq!(after.code, Some(0), "{after:#?}");
}

/// Gemini CLI's `tool_result` event for its call of our `tool`.
fn gemini_result<'a>(out: &'a AgentOut, tool: &str) -> &'a Value {
    let name = format!("mcp_droid-executor_{tool}");
    let id = out
        .events
        .iter()
        .find(|e| e["type"] == "tool_use" && e["tool_name"] == name.as_str())
        .map(|e| e["tool_id"].clone())
        .unwrap_or_else(|| {
            panic!(
                "no call of {name}: {:#?}\nstderr: {}",
                out.events, out.stderr
            )
        });
    out.events
        .iter()
        .find(|e| e["type"] == "tool_result" && e["tool_id"] == id)
        .unwrap_or_else(|| panic!("no result of {name}: {:#?}", out.events))
}

/// `gemini -p` (default approval mode) checks droid with `ping` and runs a task with
/// `execute_droid_task`. An entry as Gemini's docs show one (command and args) gets none of its
/// tools offered: headless Gemini leaves out every tool that would need confirmation. `setup mcp
/// --client gemini` trusts the server and passes back by name the variables Gemini strips from
/// an MCP server's environment (`FACTORY_API_KEY` among them: `ping` sees it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_runs_a_task_through_the_setup_entry() {
    let gemini = agent_launcher("@google/gemini-cli", "0.61.0", "bundle/gemini.js");
    let home = FakeHome::new("clients-gemini", &[]);
    home.play(&json!([{"completion": "Done."}]));
    let model = ScriptedModel::start(json!([
        {"parts": [{"functionCall": {"name": "mcp_droid-executor_ping", "args": {"provider": "droid"}}}]},
        {"parts": [{"functionCall": {"name": "mcp_droid-executor_execute_droid_task", "args": task(&home)}}]},
        {"parts": [{"text": "All done."}]},
    ]))
    .await
    .unwrap();
    let settings = home.file(".gemini/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    // API-key auth against the scripted model; the entry a user copies from Gemini's docs
    std::fs::write(
        &settings,
        json!({
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": false},
            "mcpServers": {"droid-executor": {
                "command": droid_executor_bin().display().to_string(), "args": ["mcp"]}},
        })
        .to_string(),
    )
    .unwrap();
    let mut env = home.env();
    env.extend([
        ("GEMINI_API_KEY".into(), "mock-key".into()),
        (
            "GOOGLE_GEMINI_BASE_URL".into(),
            format!("http://127.0.0.1:{}", model.port()).into(),
        ),
        ("FACTORY_API_KEY".into(), "fk-scripted".into()),
        ("LANG".into(), "C.UTF-8".into()),
    ]);
    // headless Gemini runs only in a trusted folder
    let args = [
        "-p",
        "Hand the task to droid",
        "-o",
        "stream-json",
        "--skip-trust",
    ];

    let before = run_agent(&gemini, &args, &env, &home.repo()).await;
    let missing = gemini_result(&before, "ping");
    assert_eq!(
        (&missing["status"], &missing["error"]["type"]),
        (&json!("error"), &json!("tool_not_registered")),
        "{before:#?}"
    );

    let said = setup(&["--client", "gemini"], &env, home.path()).await;
    assert!(said.contains("\"trust\":true"), "{said}");
    let after = run_agent(&gemini, &args, &env, &home.repo()).await;
    let pinged = gemini_result(&after, "ping");
    let output = pinged["output"].as_str().unwrap_or_default();
    assert!(
        output.contains("OK auth: FACTORY_API_KEY is set"),
        "Gemini passed the key back: {output}"
    );
    let ran = gemini_result(&after, "execute_droid_task");
    let output = ran["output"].as_str().unwrap_or_default();
    eprintln!("execute_droid_task answered Gemini: {output}");
    assert_eq!(ran["status"], "success", "{after:#?}");
    assert!(
        output.contains("success") && output.contains("Done."),
        "{output}"
    );
    assert_eq!(after.code, Some(0), "{after:#?}");
}

/// OpenCode's `tool_use` part for its call of `tool`, if there is one.
fn opencode_call(out: &AgentOut, tool: &str) -> Option<Value> {
    out.events
        .iter()
        .find(|e| e["type"] == "tool_use" && e["part"]["tool"] == tool)
        .map(|e| e["part"].clone())
}

/// `opencode run` asks droid through `ask` with `wait_seconds` and reads its reply in the same
/// call. Without an entry the tool does not exist; `setup mcp --client opencode` adds one to
/// OpenCode's config, whose other keys stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_asks_through_the_setup_entry() {
    let opencode = agent_cli("opencode");
    let home = FakeHome::new("clients-opencode", &[]);
    // what the real droid prints: the assistant's message, then the completion
    home.play(&json!([
        {"emit": {"type": "message", "role": "assistant", "id": "m1", "text": "Four, says droid."}},
        {"completion": "Four, says droid."},
    ]));
    let model = ScriptedModel::start(json!([
        {"tool": [{"name": "droid-executor_ask",
                   "args": {"provider": "droid", "message": "What is 2 + 2?", "wait_seconds": 60}}]},
        {"text": "All done."},
    ]))
    .await
    .unwrap();
    // the title request of every new session offers no tools
    model.set_aux_text("Asking droid");
    let config = home.file(".config/opencode/opencode.json");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    let provider = tests::opencode_home::config(&model.base_url());
    std::fs::write(&config, serde_json::to_string_pretty(&provider).unwrap()).unwrap();
    let mut env = home.env();
    env.extend([
        ("OPENCODE_DISABLE_MODELS_FETCH".into(), "1".into()),
        ("OPENCODE_DISABLE_AUTOUPDATE".into(), "1".into()),
        ("LANG".into(), "C.UTF-8".into()),
    ]);
    let args = ["run", "--format", "json", "Ask droid what 2 + 2 is"];

    let before = run_program(&opencode, &args, &env, &home.repo()).await;
    assert!(
        opencode_call(&before, "droid-executor_ask").is_none(),
        "no server, no tool: {before:#?}"
    );

    let said = setup(&["--client", "opencode"], &env, home.path()).await;
    assert!(said.contains("mcp.droid-executor"), "{said}");
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    assert_eq!(written["provider"], provider["provider"]);
    let after = run_program(&opencode, &args, &env, &home.repo()).await;
    let asked =
        opencode_call(&after, "droid-executor_ask").unwrap_or_else(|| panic!("no ask: {after:#?}"));
    let output = asked["state"]["output"].as_str().unwrap_or_default();
    eprintln!("ask answered OpenCode: {output}");
    assert_eq!(asked["state"]["status"], "completed", "{asked:#}");
    assert!(
        output.contains("Four, says droid."),
        "the reply OpenCode's model reads is droid's answer: {output}"
    );
    assert_eq!(after.code, Some(0), "{after:#?}");
}

/// Claude Code's `tool_result` block for the `tool_use` `id`.
fn claude_result(out: &AgentOut, id: &str) -> Value {
    out.events
        .iter()
        .filter(|e| e["type"] == "user")
        .flat_map(|e| {
            e["message"]["content"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .find(|b| b["type"] == "tool_result" && b["tool_use_id"] == id)
        .unwrap_or_else(|| {
            panic!(
                "no tool_result for {id}: {:#?}\nstderr: {}",
                out.events, out.stderr
            )
        })
}

/// `claude -p` asks droid (`ask`) and reads its reply (`pend`) through the entry `setup mcp
/// --client claude --allow-tools` writes (its `execute_droid_task` flow is in `mcp_agents`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_asks_and_pends_through_the_setup_entry() {
    let claude = agent_launcher("@anthropic-ai/claude-code", "2.1.330", "cli-wrapper.cjs");
    let home = FakeHome::new("clients-claude", &[]);
    home.play(&json!([
        {"emit": {"type": "message", "role": "assistant", "id": "m1", "text": "Four, says droid."}},
        {"completion": "Four, says droid."},
    ]));
    let model = ScriptedModel::start(json!([
        {"content": [{"type": "tool_use", "id": "toolu_ask", "name": "mcp__droid-executor__ask",
                      "input": {"provider": "droid", "message": "What is 2 + 2?"}}]},
        {"content": [{"type": "tool_use", "id": "toolu_pend", "name": "mcp__droid-executor__pend",
                      "input": {"provider": "droid", "wait_seconds": 60}}]},
        {"content": [{"type": "text", "text": "droid says four."}]},
    ]))
    .await
    .unwrap();
    let mut env = home.env();
    env.extend([
        (
            "ANTHROPIC_BASE_URL".into(),
            model.base_url().trim_end_matches("/v1").into(),
        ),
        ("ANTHROPIC_API_KEY".into(), "sk-ant-mock".into()),
        ("CLAUDE_CODE_MAX_RETRIES".into(), "0".into()),
        ("DISABLE_AUTOUPDATER".into(), "1".into()),
        ("DISABLE_TELEMETRY".into(), "1".into()),
    ]);
    setup(&["--client", "claude", "--allow-tools"], &env, home.path()).await;
    let args = [
        "-p",
        "Ask droid what 2 + 2 is",
        "--output-format",
        "stream-json",
        "--verbose",
    ];
    let out = run_agent(&claude, &args, &env, &home.repo()).await;
    let asked = claude_result(&out, "toolu_ask");
    assert_eq!(asked.get("is_error"), None, "{out:#?}");
    let pended = claude_result(&out, "toolu_pend");
    assert_eq!(pended.get("is_error"), None, "{out:#?}");
    let reply = pended["content"].to_string();
    eprintln!("pend answered Claude Code: {reply}");
    assert!(
        reply.contains("Four, says droid."),
        "the reply Claude's model reads is droid's answer: {reply}"
    );
    assert_eq!(out.code, Some(0), "{out:#?}");
}

/// The MCP Inspector 2.12.0's CLI, as `cargo xtask fetch-interop` installs it.
fn inspector_cli() -> std::path::PathBuf {
    let dir = tests::droid_bin::workspace_root()
        .join("target/interop/node/node_modules/@modelcontextprotocol/inspector");
    let version = std::fs::read(dir.join("package.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|m| m["version"].as_str().map(str::to_owned));
    assert_eq!(
        version.as_deref(),
        Some("2.12.0"),
        "the MCP Inspector 2.12.0 is not installed in {}: run `cargo xtask fetch-interop` (cargo \
         xtask test does; it needs Node.js 20 or later and npm)",
        dir.display()
    );
    dir.join("clients/launcher/build/index.js")
}

/// The MCP Inspector starts a server with only HOME, LOGNAME, PATH, SHELL, TERM and USER (and
/// what `-e` names): with `FACTORY_API_KEY` set where the Inspector runs but not passed, `ping`'s
/// fix names that filter and the Inspector's `-e` first, instead of "export FACTORY_API_KEY";
/// passed with `-e`, the key is seen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspectors_minimal_environment_is_named_in_the_hint() {
    let inspector = inspector_cli();
    let home = FakeHome::new("clients-inspector", &[]);
    let mut env = home.env();
    env.push(("FACTORY_API_KEY".into(), "fk-scripted".into()));
    let droid = format!("DROID_CLI_CMD={}", real_droid().display());
    let exe = droid_executor_bin().display().to_string();
    let call = |extra: &[&str]| {
        let mut args = vec![
            inspector.display().to_string(),
            "--cli".into(),
            exe.clone(),
            "mcp".into(),
            "-e".into(),
            droid.clone(),
        ];
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        args.extend(
            [
                "--method",
                "tools/call",
                "--tool-name",
                "ping",
                "--tool-arg",
                "provider=droid",
                "--format",
                "json",
                "-q",
            ]
            .map(str::to_owned),
        );
        args
    };
    let auth = |out: &AgentOut| -> Value {
        out.events
            .iter()
            .find_map(|e| {
                // `--format json`: {"result": the CallToolResult}
                e["result"]["structuredContent"]["checks"]
                    .as_array()?
                    .iter()
                    .find(|c| c["check"] == "auth")
                    .cloned()
            })
            .unwrap_or_else(|| panic!("no auth check: {out:#?}"))
    };

    let bare = run_program(std::path::Path::new("node"), &call(&[]), &env, home.path()).await;
    let check = auth(&bare);
    let fix = check["fix"].as_str().unwrap_or_default();
    eprintln!("ping's fix under the Inspector: {fix}");
    assert_eq!(check["level"], "warn", "{check:#}");
    assert!(
        fix.starts_with(
            "FACTORY_API_KEY is not in droid-executor's environment: the MCP Inspector and other \
             MCP SDK clients pass a server only HOME, LOGNAME, PATH, SHELL, TERM and USER unless \
             told (Inspector: -e FACTORY_API_KEY=…"
        ) && fix
            .contains("If it is not set where you start the client either: export FACTORY_API_KEY"),
        "{fix}"
    );

    let passed = run_program(
        std::path::Path::new("node"),
        &call(&["-e", "FACTORY_API_KEY=fk-scripted"]),
        &env,
        home.path(),
    )
    .await;
    let check = auth(&passed);
    assert_eq!(
        (&check["level"], &check["detail"]),
        (&json!("ok"), &json!("FACTORY_API_KEY is set")),
        "{check:#}"
    );
}
