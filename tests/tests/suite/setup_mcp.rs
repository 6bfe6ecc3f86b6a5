//! `droid-executor setup mcp --client droid|claude|codex|gemini|opencode [--allow-tools]
//! [--dry-run]`: registration with the real droid (its `~/.factory/mcp.json` and the two keys of
//! `~/.factory/settings.json` afterwards), with Claude Code's, Codex's, Gemini CLI's and
//! OpenCode's config files (other settings and comments kept), idempotence, and a dry run that
//! changes nothing. The real clients using the entries: suites `mcp_agents` and `mcp_clients`.

use std::ffi::OsString;
use std::path::Path;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::droid_bin::{droid_executor_bin, real_droid};
use tests::temp_dir::TempDir;

use super::binary::{droid_executor, path_var};

fn env(home: &Path) -> Vec<(OsString, OsString)> {
    vec![
        ("HOME".into(), home.into()),
        ("PATH".into(), path_var()),
        ("DROID_CLI_CMD".into(), real_droid().into()),
        ("FACTORY_AIRGAP_ENABLED".into(), "1".into()),
    ]
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registers_with_the_real_droid_once() {
    let home = TempDir::new("setup-droid").unwrap();
    let env = env(home.path());
    let mcp_json = home.path().join(".factory/mcp.json");
    let dry = droid_executor(
        &["setup", "mcp", "--client", "droid", "--dry-run"],
        &env,
        home.path(),
    )
    .await;
    assert_eq!(dry.code, Some(0), "{dry:#?}");
    assert!(dry.stdout.starts_with("would run: "), "{dry:#?}");
    assert!(
        dry.stdout.contains(&format!(
            "mcp add droid-executor --env DROID_EXECUTOR_CLIENT=droid -- {} mcp",
            droid_executor_bin().display()
        )),
        "{dry:#?}"
    );
    let settings = home.path().join(".factory/settings.json");
    assert!(
        dry.stdout.contains(&format!(
            "would write {}: blockOnMcpLoad = true, mcpAutonomyOverrides.droid-executor.tools",
            settings.display()
        )),
        "{dry:#?}"
    );
    assert!(
        dry.stdout.contains(
            "note: at its default autonomy droid calls ask, pend, ping, cancel, droid_pend"
        ) && dry.stdout.contains(
            "; execute_droid_task, droid_submit, droid_apply need `droid exec --auto medium`"
        ),
        "{dry:#?}"
    );
    assert!(
        !mcp_json.exists() && !settings.exists(),
        "a dry run changes nothing"
    );
    let out = droid_executor(&["setup", "mcp", "--client", "droid"], &env, home.path()).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let entry = &read_json(&mcp_json)["mcpServers"]["droid-executor"];
    assert_eq!(entry["type"], "stdio", "{entry:#}");
    assert_eq!(
        entry["command"],
        json!(droid_executor_bin().display().to_string())
    );
    assert_eq!(entry["args"], json!(["mcp"]));
    assert_eq!(entry["env"], json!({"DROID_EXECUTOR_CLIENT": "droid"}));
    let written = read_json(&settings);
    assert_eq!(written["blockOnMcpLoad"], true);
    let levels = &written["mcpAutonomyOverrides"]["droid-executor"]["tools"];
    assert_eq!(
        (
            &levels["ask"],
            &levels["pend"],
            &levels["execute_droid_task"],
            &levels["droid_discard"]
        ),
        (
            &json!("low"),
            &json!("low"),
            &json!("medium"),
            &json!("high")
        )
    );
    let again = droid_executor(&["setup", "mcp", "--client", "droid"], &env, home.path()).await;
    assert_eq!(again.code, Some(0), "{again:#?}");
    assert!(
        again
            .stdout
            .contains("already has an MCP server named droid-executor")
            && again.stdout.contains("nothing to do"),
        "{again:#?}"
    );
    // doctor reads what setup wrote
    let doctor = droid_executor(&["doctor", "--json"], &env, home.path()).await;
    let checks: Value = serde_json::from_str(&doctor.stdout).unwrap();
    let line = checks
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "droid_mcp")
        .unwrap_or_else(|| panic!("{doctor:#?}"));
    assert_eq!(line["level"], "ok", "{line:#}");
    assert!(
        line["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("registered; droid's model sees the tools")),
        "{line:#}"
    );
}

/// After `setup mcp --client droid`, droid itself starts our server and lists its five tools
/// (`droid exec --list-tools` needs a model id but never calls the model).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn droid_lists_the_registered_tools() {
    let home = tests::droid_home::DroidHome::new(&[("Listing", "http://127.0.0.1:9/v1")]).unwrap();
    let env = env(home.path());
    let out = droid_executor(&["setup", "mcp", "--client", "droid"], &env, home.path()).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    #[allow(clippy::disallowed_methods)] // the real droid, as a user would run it
    let listed = tokio::process::Command::new(real_droid())
        .args(["exec", "--list-tools", "-o", "json", "-m"])
        .arg(home.model_id("Listing"))
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(home.path())
        .kill_on_drop(true)
        .output();
    let listed = tokio::time::timeout(super::binary::CLI_LIMIT, listed)
        .await
        .expect("droid --list-tools did not finish")
        .unwrap();
    assert!(listed.status.success(), "{listed:?}");
    let tools: Vec<Value> = serde_json::from_slice(&listed.stdout).unwrap();
    let mut ours: Vec<String> = tools
        .iter()
        .filter_map(|t| t["id"].as_str())
        .filter_map(|id| id.strip_prefix("mcp_droid-executor_"))
        .map(str::to_owned)
        .collect();
    ours.sort();
    let mut every = super::mcp_stdio::TOOLS.to_vec();
    every.sort_unstable();
    assert_eq!(ours, every, "{}", String::from_utf8_lossy(&listed.stdout));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registers_with_claude_and_codex_keeping_their_settings() {
    let home = TempDir::new("setup-files").unwrap();
    let env = env(home.path());
    let claude = home.path().join(".claude.json");
    std::fs::write(
        &claude,
        r#"{"numStartups": 3, "mcpServers": {"other": {"command": "x"}}}"#,
    )
    .unwrap();
    let out = droid_executor(&["setup", "mcp", "--client", "claude"], &env, home.path()).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let v = read_json(&claude);
    assert_eq!(v["numStartups"], 3);
    assert_eq!(v["mcpServers"]["other"], json!({"command": "x"}));
    assert_eq!(
        v["mcpServers"]["droid-executor"],
        json!({"type": "stdio", "command": droid_executor_bin().display().to_string(), "args": ["mcp"],
               "env": {"DROID_EXECUTOR_CLIENT": "claude"}})
    );
    let codex = home.path().join(".codex/config.toml");
    let out = droid_executor(&["setup", "mcp", "--client", "codex"], &env, home.path()).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let text = std::fs::read_to_string(&codex).unwrap();
    let table: toml::Table = toml::from_str(&text).unwrap();
    let entry = &table["mcp_servers"]["droid-executor"];
    assert_eq!(
        entry["command"],
        toml::Value::String(droid_executor_bin().display().to_string())
    );
    assert_eq!(entry["args"], toml::Value::Array(vec!["mcp".into()]));
    assert_eq!(entry["tool_timeout_sec"], toml::Value::Integer(660));
    let approved: Vec<(&str, &str)> = entry["tools"]
        .as_table()
        .unwrap()
        .iter()
        .map(|(tool, t)| (tool.as_str(), t["approval_mode"].as_str().unwrap()))
        .collect();
    // every tool, the delegation families of every provider included (tables sorted by name)
    let all = super::mcp_stdio::approved_tools();
    let mut every: Vec<(&str, &str)> = all.iter().map(|t| (t.as_str(), "approve")).collect();
    every.sort_unstable();
    assert_eq!(approved, every);
    let again = droid_executor(&["setup", "mcp", "--client", "codex"], &env, home.path()).await;
    assert_eq!(again.code, Some(0), "{again:#?}");
    assert!(again.stdout.contains("nothing to do"), "{again:#?}");
    assert_eq!(std::fs::read_to_string(&codex).unwrap(), text);
    std::fs::write(&claude, "{broken").unwrap();
    let bad = droid_executor(&["setup", "mcp", "--client", "claude"], &env, home.path()).await;
    assert_eq!(bad.code, Some(2), "{bad:#?}");
    assert!(bad.stderr.contains(".claude.json"), "{bad:#?}");
}

/// `--allow-tools` is Claude Code's: a dry run names both files and changes neither, a second
/// run adds nothing, and with `--client codex` the flag is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_tools_is_for_claude_and_idempotent() {
    let home = TempDir::new("setup-allow").unwrap();
    let env = env(home.path());
    let settings = home.path().join(".claude/settings.json");
    let args = ["setup", "mcp", "--client", "claude", "--allow-tools"];
    let mut dry_args = args.to_vec();
    dry_args.push("--dry-run");
    let dry = droid_executor(&dry_args, &env, home.path()).await;
    assert_eq!(dry.code, Some(0), "{dry:#?}");
    assert!(
        dry.stdout.contains(&format!(
            "would write {}: permissions.allow with mcp__droid-executor__execute_droid_task, ",
            settings.display()
        )),
        "{dry:#?}"
    );
    assert!(!settings.exists() && !home.path().join(".claude.json").exists());
    let first = droid_executor(&args, &env, home.path()).await;
    assert_eq!(first.code, Some(0), "{first:#?}");
    let written = std::fs::read_to_string(&settings).unwrap();
    let again = droid_executor(&args, &env, home.path()).await;
    assert_eq!(again.code, Some(0), "{again:#?}");
    assert!(again.stdout.contains("nothing to do"), "{again:#?}");
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), written);
    let codex = droid_executor(
        &["setup", "mcp", "--client", "codex", "--allow-tools"],
        &env,
        home.path(),
    )
    .await;
    assert_eq!(
        (codex.code, codex.stderr.trim()),
        (
            Some(2),
            "droid-executor: --allow-tools is for --client claude"
        ),
        "{codex:#?}"
    );
    assert!(!home.path().join(".codex").exists());
}

/// Gemini CLI's and OpenCode's JSON-with-comments files: the entry added with every comment and
/// key of the file kept, what the user added to an earlier entry kept, nothing to do the second
/// time, and a dry run that writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registers_with_gemini_and_opencode_keeping_their_files() {
    let home = TempDir::new("setup-jsonc").unwrap();
    let mut env = env(home.path());
    env.push(("ANTHROPIC_API_KEY".into(), "sk-ant-not-written".into()));
    let gemini = home.path().join(".gemini/settings.json");
    std::fs::create_dir_all(gemini.parent().unwrap()).unwrap();
    let text = "// my Gemini settings\n{\n  \"security\": {\"auth\": {\"selectedType\": \"gemini-api-key\"}}, // keep\n  \"mcpServers\": {\n    \"droid-executor\": {\"command\": \"/old/droid-executor\", \"cwd\": \"/work\"},\n  },\n}\n";
    std::fs::write(&gemini, text).unwrap();
    let dry = droid_executor(
        &["setup", "mcp", "--client", "gemini", "--dry-run"],
        &env,
        home.path(),
    )
    .await;
    assert_eq!(dry.code, Some(0), "{dry:#?}");
    assert!(
        dry.stdout.starts_with(&format!(
            "would write {}: mcpServers.droid-executor = ",
            gemini.display()
        )),
        "{dry:#?}"
    );
    assert_eq!(std::fs::read_to_string(&gemini).unwrap(), text);
    let out = droid_executor(&["setup", "mcp", "--client", "gemini"], &env, home.path()).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let written = std::fs::read_to_string(&gemini).unwrap();
    assert!(
        written.starts_with("// my Gemini settings\n{\n  \"security\": {\"auth\": {\"selectedType\": \"gemini-api-key\"}}, // keep\n"),
        "{written}"
    );
    assert!(
        !written.contains("sk-ant-not-written"),
        "a value is never written: {written}"
    );
    let v = client_setup::jsonc::value(&written).unwrap().unwrap();
    let entry = &v["mcpServers"]["droid-executor"];
    assert_eq!(
        (
            &entry["command"],
            &entry["args"],
            &entry["cwd"],
            &entry["trust"],
            &entry["timeout"]
        ),
        (
            &json!(droid_executor_bin().display().to_string()),
            &json!(["mcp"]),
            &json!("/work"),
            &json!(true),
            &json!(660_000)
        )
    );
    // the variables Gemini strips, passed back by name; the others need no help
    assert_eq!(entry["env"]["DROID_EXECUTOR_CLIENT"], "gemini");
    for name in [
        "FACTORY_API_KEY",
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "GEMINI_API_KEY",
    ] {
        assert_eq!(entry["env"][name], json!(format!("${name}")), "{entry:#}");
    }
    assert!(entry["env"].get("DROID_CLI_CMD").is_none(), "{entry:#}");
    let again = droid_executor(&["setup", "mcp", "--client", "gemini"], &env, home.path()).await;
    assert!(again.stdout.contains("nothing to do"), "{again:#?}");
    assert_eq!(std::fs::read_to_string(&gemini).unwrap(), written);

    let opencode = home.path().join(".config/opencode/opencode.json");
    std::fs::create_dir_all(opencode.parent().unwrap()).unwrap();
    let text = "{\n  // my model\n  \"model\": \"mock/mock-model\"\n}\n";
    std::fs::write(&opencode, text).unwrap();
    let out = droid_executor(&["setup", "mcp", "--client", "opencode"], &env, home.path()).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let written = std::fs::read_to_string(&opencode).unwrap();
    assert!(
        written.starts_with("{\n  // my model\n  \"model\": \"mock/mock-model\",\n"),
        "{written}"
    );
    assert_eq!(
        client_setup::jsonc::value(&written).unwrap().unwrap()["mcp"]["droid-executor"],
        json!({
            "type": "local",
            "command": [droid_executor_bin().display().to_string(), "mcp"],
            "enabled": true,
            "environment": {"DROID_EXECUTOR_CLIENT": "opencode"},
            "timeout": 660_000,
        })
    );
    std::fs::write(&gemini, "{\"mcpServers\": [}").unwrap();
    let bad = droid_executor(&["setup", "mcp", "--client", "gemini"], &env, home.path()).await;
    assert_eq!(bad.code, Some(2), "{bad:#?}");
    assert!(bad.stderr.contains("line 1, column 17"), "{bad:#?}");
}
