//! Seed 002's fallback path with the REAL droid 0.225.2 and the REAL Codex CLI 0.169.0, no MCP
//! registration anywhere: `droid-executor setup skill --client droid` installs the fallback
//! skills in a temp HOME's `~/.factory/skills`, droid offers them to its (scripted) model, the
//! model follows `ask-codex` and droid's Execute tool runs `droid-executor ask codex "…"
//! --background` (the binary on droid's PATH, Codex configured in the same HOME, its key passed
//! through by droid-executor's `env_passthrough`), which prints a task id; then `droid-executor
//! pend codex <id> --wait 60` prints the reply of the real Codex, driven by its own scripted
//! model.

use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::agent_bin::agent_cli;
use tests::codex_home::{CodexHome, KEY_VAR};
use tests::droid_bin::{droid_executor_bin, real_droid};
use tests::droid_home::settings_json;
use tests::scripted_model::ScriptedModel;

use super::binary::{droid_executor, git_repo_at};

/// One droid run against a local model takes seconds; generous, only against a hang.
const DROID_LIMIT: Duration = Duration::from_secs(180);

/// What one `droid exec -o stream-json` run gave.
#[derive(Debug)]
struct DroidOut {
    code: Option<i32>,
    /// stdout, one JSON value per line (other lines dropped).
    events: Vec<Value>,
    stderr: String,
}

/// `droid ARGS` in `cwd` with exactly `env`, stdin from /dev/null, in its own process group;
/// whatever is left of the group afterwards is killed.
async fn run_droid(args: &[&str], env: &[(OsString, OsString)], cwd: &Path) -> DroidOut {
    #[allow(clippy::disallowed_methods)] // the real droid, as a user runs it
    let child = tokio::process::Command::new(real_droid())
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
        .unwrap();
    let pgid = Pid::from_raw(i32::try_from(child.id().unwrap()).unwrap());
    let out = tokio::time::timeout(DROID_LIMIT, child.wait_with_output()).await;
    let _ = killpg(pgid, Signal::SIGKILL);
    let out = out
        .unwrap_or_else(|_| panic!("droid did not finish in {DROID_LIMIT:?}"))
        .unwrap();
    DroidOut {
        code: out.status.code(),
        events: String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// droid's Execute call.
fn execute(command: &str) -> Value {
    json!({"name": "Execute", "args": {"summary": "ask codex", "command": command,
           "riskLevel": "low", "riskLevelReason": "starts a background task"}})
}

/// The first `codex-<secs>-<4 hex>` in `text`.
fn codex_task_id(text: &str) -> Option<String> {
    text.match_indices("codex-").find_map(|(at, _)| {
        let id: String = text[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        droid_exec::TaskKey::parse(&id).ok().map(|_| id)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn droid_delegates_to_codex_through_the_fallback_skill_without_mcp() {
    let codex_model = ScriptedModel::start(json!([{"output": [{
        "type": "message", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": "Use a BTreeMap.", "annotations": []}]
    }]}]))
    .await
    .unwrap();
    let ask = "droid-executor ask codex \"Which map keeps keys sorted?\" --background";
    let droid_model = ScriptedModel::start(json!([
        {"text": "I'll ask Codex in the background.", "tool": [execute(ask)]},
        {"text": "Codex is on it; I'll fetch its reply with pend."}
    ]))
    .await
    .unwrap();
    // one HOME for all: Codex's config, droid's custom model, droid-executor's config
    let home = CodexHome::new(&codex_model.base_url()).unwrap();
    let repo = home.path().join("repo");
    git_repo_at(&repo, &[("a.txt", "a\n")]);
    std::fs::create_dir_all(home.path().join(".factory")).unwrap();
    std::fs::write(
        home.path().join(".factory/settings.json"),
        serde_json::to_string_pretty(&settings_json(&[("Mock", &droid_model.base_url())])).unwrap(),
    )
    .unwrap();
    let config = home.path().join(".config/droid-executor");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!(
            "codex_bin = {:?}\nenv_passthrough = [\"{KEY_VAR}\"]\n",
            agent_cli("codex").display().to_string()
        ),
    )
    .unwrap();
    // droid-executor on droid's PATH
    let bin = home.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(droid_executor_bin(), bin.join("droid-executor")).unwrap();
    let mut env: Vec<(OsString, OsString)> = home
        .env()
        .into_iter()
        .map(|(k, v)| {
            if k == "PATH" {
                let mut path = bin.clone().into_os_string();
                path.push(":");
                path.push(v);
                (k, path)
            } else {
                (k, v)
            }
        })
        .collect();
    env.push(("FACTORY_AIRGAP_ENABLED".into(), "1".into()));

    let setup = droid_executor(&["setup", "skill", "--client", "droid"], &env, home.path()).await;
    assert_eq!(setup.code, Some(0), "{setup:#?}");
    let skill = home.path().join(".factory/skills/ask-codex/SKILL.md");
    assert!(skill.is_file(), "{setup:#?}");
    assert!(
        !home.path().join(".factory/mcp.json").exists(),
        "no MCP registration"
    );

    let repo_arg = repo.display().to_string();
    let droid = run_droid(
        &[
            "exec",
            "--output-format",
            "stream-json",
            "--cwd",
            &repo_arg,
            "-m",
            "custom:Mock-0",
            "--auto",
            "medium",
            "Ask Codex which map keeps keys sorted; don't wait for the answer.",
        ],
        &env,
        &repo,
    )
    .await;
    assert_eq!(droid.code, Some(0), "{droid:#?}");

    // droid offered the skills to its model
    let requests = droid_model.requests();
    let first = requests
        .iter()
        .find(|r| {
            r["path"]
                .as_str()
                .is_some_and(|p| p.ends_with("/chat/completions"))
        })
        .unwrap_or_else(|| panic!("droid never asked its model: {droid:#?}"));
    let body = first["body"].to_string();
    assert!(
        body.contains("ask-codex"),
        "droid's request does not mention ask-codex: {body}"
    );

    // the Execute call ran `droid-executor ask … --background` and its output is a task id
    let result = droid
        .events
        .iter()
        .find(|e| e["type"] == "tool_result")
        .unwrap_or_else(|| panic!("no tool result: {droid:#?}"));
    assert_eq!(result["isError"], json!(false), "{result:#}");
    let value = result["value"].to_string();
    let id = codex_task_id(&value)
        .unwrap_or_else(|| panic!("no task id in {value}; droid's stderr: {}", droid.stderr));

    // the reply of the real Codex
    let pend = droid_executor(&["pend", "codex", &id, "--wait", "60"], &env, &repo).await;
    assert_eq!(pend.code, Some(0), "{pend:#?}");
    assert!(
        pend.stdout
            .starts_with(&format!("Use a BTreeMap.\n\ntask {id}: success\n")),
        "{pend:#?}"
    );
    // Codex got the message droid's Execute tool passed
    let codex_input = codex_model.requests()[0]["body"]["input"].to_string();
    assert!(
        codex_input.contains("Which map keeps keys sorted?"),
        "{codex_input}"
    );
}
