//! `droid-executor setup mcp --client droid|claude|codex [--allow-tools] [--dry-run]`: registration
//! with the real droid (its `~/.factory/mcp.json` afterwards), with Claude Code's and Codex's
//! config files (other settings kept), idempotence, and a dry run that changes nothing. The real
//! Codex and Claude Code using the entries: suite `mcp_agents`.

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
            "mcp add droid-executor -- {} mcp",
            droid_executor_bin().display()
        )),
        "{dry:#?}"
    );
    assert!(!mcp_json.exists(), "a dry run changes nothing");
    let out = droid_executor(&["setup", "mcp", "--client", "droid"], &env, home.path()).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let entry = &read_json(&mcp_json)["mcpServers"]["droid-executor"];
    assert_eq!(entry["type"], "stdio", "{entry:#}");
    assert_eq!(
        entry["command"],
        json!(droid_executor_bin().display().to_string())
    );
    assert_eq!(entry["args"], json!(["mcp"]));
    let again = droid_executor(&["setup", "mcp", "--client", "droid"], &env, home.path()).await;
    assert_eq!(again.code, Some(0), "{again:#?}");
    assert!(
        again
            .stdout
            .contains("already has an MCP server named droid-executor"),
        "{again:#?}"
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
        json!({"type": "stdio", "command": droid_executor_bin().display().to_string(), "args": ["mcp"], "env": {}})
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
    let mut every: Vec<(&str, &str)> = super::mcp_stdio::TOOLS
        .iter()
        .map(|t| (*t, "approve"))
        .collect();
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
