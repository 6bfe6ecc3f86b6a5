//! Seed 002's delegation from the command line, through the built binary and the REAL Codex CLI
//! driven by the scripted model: `droid-executor ask codex MESSAGE` (sync: a read-only
//! consultation that changes nothing and prints the reply), `ask --background` then `pend`
//! (the provider's latest task without an id, and with the id), `pend codex <a droid- id>`
//! refused naming the mismatch, and `ping` (all five: codex configured → OK, the others not on
//! PATH → WARN with their install line; `ping codex` alone).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use droid_contract::{Status, TaskRecord, TaskState};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::agent_bin::agent_cli;
use tests::codex_home::{CodexHome, KEY_VAR};
use tests::scripted_model::ScriptedModel;

use super::binary::{NO_DROID_PATH, Out, droid_executor, git_repo_at};
use super::common::git;

/// The model's final message (Codex's Responses API).
fn say(text: &str) -> Value {
    json!({"type": "message", "role": "assistant", "status": "completed",
           "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

/// Codex's `apply_patch` adding `file`.
fn add_file(call: &str, file: &str) -> Value {
    json!({"type": "custom_tool_call", "status": "completed", "call_id": call,
           "name": "apply_patch",
           "input": format!("*** Begin Patch\n*** Add File: {file}\n+x\n*** End Patch\n")})
}

/// A scripted model, a HOME where Codex points at it and droid-executor's config names the real
/// Codex (`codex_bin`) and passes its key through, and a git repository `repo/` in it.
pub(super) struct World {
    pub model: ScriptedModel,
    pub home: CodexHome,
}

impl World {
    pub(super) async fn new(script: Value) -> World {
        let model = ScriptedModel::start(script).await.unwrap();
        let home = CodexHome::new(&model.base_url()).unwrap();
        git_repo_at(&home.path().join("repo"), &[("a.txt", "a\n")]);
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
        World { model, home }
    }

    pub(super) fn repo(&self) -> PathBuf {
        self.home.path().join("repo")
    }

    /// Codex's environment (HOME, CODEX_HOME, PATH, LANG, its key), with `PATH` = `path`.
    fn env_with_path(&self, path: &str) -> Vec<(OsString, OsString)> {
        self.home
            .env()
            .into_iter()
            .map(|(k, v)| {
                if k == "PATH" {
                    (k, path.into())
                } else {
                    (k, v)
                }
            })
            .collect()
    }

    /// `droid-executor ARGS` in the repository.
    pub(super) async fn cli(&self, args: &[&str]) -> Out {
        droid_executor(args, &self.home.env(), &self.repo()).await
    }

    /// The text of every Responses API request's input.
    fn inputs(&self) -> Vec<String> {
        self.model
            .requests()
            .iter()
            .filter(|r| {
                r["path"]
                    .as_str()
                    .is_some_and(|p| p.ends_with("/responses"))
            })
            .map(|r| r["body"]["input"].to_string())
            .collect()
    }
}

/// `git status --porcelain` of `repo`: empty when nothing changed.
fn porcelain(repo: &Path) -> String {
    git(repo, &["status", "--porcelain", "--untracked-files=all"])
}

fn record(out: &Out) -> TaskRecord {
    serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not a task record ({e}): {out:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_ask_is_a_read_only_consultation_that_prints_the_reply() {
    // the model tries to write a file: the read-only sandbox refuses it
    let w = World::new(json!([
        {"output": [add_file("c0", "new.txt")]},
        {"output": [say("The answer is 42.")]}
    ]))
    .await;
    let out = w
        .cli(&["ask", "codex", "What is the answer?\nThink about it."])
        .await;
    assert!(
        out.stdout.starts_with("status: "),
        "the report as `run` prints it: {out:#?}"
    );
    assert!(
        out.stdout.contains("\nagent: codex (Codex CLI 0.169.0"),
        "{out:#?}"
    );
    assert!(
        out.stdout.contains("\nsummary: The answer is 42.\n"),
        "{out:#?}"
    );
    assert_eq!(porcelain(&w.repo()), "", "nothing changes");
    assert!(!w.repo().join("new.txt").exists());
    let input = &w.inputs()[0];
    // the kernel keeps the run read-only (Codex's own sandbox cannot start inside ours), and
    // Codex is told so
    assert!(input.contains("This run is read-only"), "{input}");
    assert!(
        input.contains("What is the answer?\\nThink about it."),
        "{input}"
    );
    // the exit code says the status (the refused write makes it partial, as `run` would)
    let code = if out.stdout.starts_with("status: success") {
        0
    } else {
        1
    };
    assert_eq!(out.code, Some(code), "{out:#?}");
    // a sync ask leaves no task behind
    let listed = w.cli(&["tasks", "list", "--json"]).await;
    assert_eq!(listed.stdout.trim(), "[]", "{listed:#?}");

    // --json prints the ExecutionResult
    w.model.set_script(json!([{"output": [say("Still 42.")]}]));
    let out = w
        .cli(&["ask", "codex", "And now?", "--json", "--timeout", "60"])
        .await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let res = out.result();
    assert_eq!(res.status, Status::Success, "{res:#?}");
    assert_eq!(res.summary, "Still 42.");
    assert_eq!(res.files_changed, vec![]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_ask_prints_a_task_id_and_pend_prints_the_reply() {
    let w = World::new(json!([{"output": [say("Use a BTreeMap.")]}])).await;
    let started = std::time::Instant::now();
    let out = w
        .cli(&[
            "ask",
            "codex",
            "Which map keeps keys sorted?",
            "--background",
        ])
        .await;
    let took = started.elapsed();
    assert_eq!(out.code, Some(0), "{out:#?}");
    let id = out.stdout.trim().to_owned();
    assert!(id.starts_with("codex-"), "{out:#?}");
    assert_eq!(
        out.stderr,
        format!("droid-executor: follow it with: droid-executor pend codex {id} --wait 60\n")
    );
    // measured, never asserted: how long the background ask took to return its id
    println!(
        "ask --background returned its id in {} ms",
        took.as_millis()
    );

    // without an id: the provider's latest task
    let latest = w.cli(&["pend", "codex", "--wait", "60"]).await;
    assert_eq!(latest.code, Some(0), "{latest:#?}");
    assert!(
        latest.stdout.starts_with(&format!(
            "Use a BTreeMap.\n\ntask {id}: success\nstatus: success ("
        )),
        "the reply first, then the result: {latest:#?}"
    );
    assert!(
        latest.stdout.contains("\nagent: codex (Codex CLI 0.169.0"),
        "{latest:#?}"
    );
    assert!(
        !latest.stdout.contains("summary:"),
        "the reply is not repeated: {latest:#?}"
    );

    // with the id, as JSON: the task record
    let by_id = w.cli(&["pend", "codex", &id, "--json"]).await;
    assert_eq!(by_id.code, Some(0), "{by_id:#?}");
    let rec = record(&by_id);
    assert_eq!(rec.task_id, id);
    assert_eq!(rec.state, TaskState::Success);
    let res = rec.result.unwrap();
    assert_eq!(res.summary, "Use a BTreeMap.");
    assert_eq!(res.files_changed, vec![]);
    assert_eq!(porcelain(&w.repo()), "");

    // the latest of another provider: none yet
    let none = w.cli(&["pend", "gemini"]).await;
    assert_eq!(none.code, Some(2), "{none:#?}");
    assert_eq!(
        none.stderr,
        format!(
            "droid-executor: no gemini tasks yet in the repository {}; start one there with: \
             droid-executor ask gemini \"MESSAGE\" --background (a task of another repository: \
             droid-executor pend gemini TASK_ID)\n",
            std::fs::canonicalize(w.repo()).unwrap().display()
        )
    );
}

/// Issue 32, item 3: an ask is a consultation (the prompt says so at `read_only`), and the reply
/// `pend` prints is the agent's answer without the report block the prompt asks for; the
/// report's summary, a different sentence, comes with the result; `--json` gives the reply
/// first, as MCP's `pend` does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reply_of_an_ask_is_the_answer_without_the_report_block() {
    let answer = "Use a BTreeMap: it keeps its keys sorted.\n\n```droid-executor-report\n\
                  {\"status\": \"success\", \"summary\": \"Answered which map is sorted.\", \
                  \"files\": [], \"issues\": []}\n```";
    let w = World::new(json!([{"output": [say(answer)]}])).await;
    let out = w
        .cli(&[
            "ask",
            "codex",
            "Which map keeps keys sorted?",
            "--background",
        ])
        .await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let id = out.stdout.trim().to_owned();
    let pended = w.cli(&["pend", "codex", &id, "--wait", "60"]).await;
    assert_eq!(pended.code, Some(0), "{pended:#?}");
    assert!(
        pended.stdout.starts_with(&format!(
            "Use a BTreeMap: it keeps its keys sorted.\n\ntask {id}: success\nstatus: success ("
        )),
        "{pended:#?}"
    );
    assert!(
        pended
            .stdout
            .contains("\nsummary: Answered which map is sorted.\n"),
        "{pended:#?}"
    );
    assert!(
        !pended.stdout.contains("droid-executor-report"),
        "{pended:#?}"
    );
    let json = w.cli(&["pend", "codex", &id, "--json"]).await;
    let v: Value = serde_json::from_str(&json.stdout).unwrap_or_else(|e| panic!("{e}: {json:#?}"));
    assert_eq!(
        v.as_object()
            .and_then(|o| o.keys().next())
            .map(String::as_str),
        Some("reply"),
        "{json:#?}"
    );
    assert_eq!(v["reply"], "Use a BTreeMap: it keeps its keys sorted.");
    assert_eq!(v["result"]["summary"], "Answered which map is sorted.");
    // the prompt Codex got: a consultation, not a plan to implement
    let asked = w.model.requests()[0].to_string();
    assert!(
        asked.contains("read-only: a consultation") && !asked.contains("The plan is decided"),
        "{}",
        &asked[..asked.len().min(3000)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pend_refuses_a_task_of_another_provider() {
    let w = World::new(json!([])).await;
    let id = "droid-1795349045-3fa2";
    let out = w.cli(&["pend", "codex", id]).await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    assert_eq!(out.stdout, "");
    assert_eq!(
        out.stderr,
        format!(
            "droid-executor: task {id} is a droid task, not a codex one; fetch it with: \
             droid-executor pend droid {id}\n"
        )
    );
    let bad = w.cli(&["pend", "codex", "nonsense"]).await;
    assert_eq!(bad.code, Some(2), "{bad:#?}");
    assert!(bad.stderr.contains("task ids look like"), "{bad:#?}");
    let unknown = w.cli(&["ask", "mistral", "hi"]).await;
    assert_eq!(unknown.code, Some(2), "{unknown:#?}");
    assert!(
        unknown.stderr.contains(
            "invalid value 'mistral' for '<PROVIDER>': unknown provider; one of \"droid\", \
             \"codex\", \"claude\", \"gemini\", \"opencode\""
        ),
        "{unknown:#?}"
    );
    let level = w.cli(&["ask", "codex", "hi", "--autonomy", "max"]).await;
    assert_eq!(level.code, Some(2), "{level:#?}");
    assert!(
        level
            .stderr
            .contains("invalid value 'max' for '--autonomy <LEVEL>'"),
        "{level:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ping_says_which_providers_are_ready() {
    let w = World::new(json!([])).await;
    // node for Codex's launcher is in /usr/bin; no agent CLI is
    let env = w.env_with_path(NO_DROID_PATH);
    let all = droid_executor(&["ping"], &env, &w.repo()).await;
    let lines: Vec<&str> = all.stdout.lines().collect();
    let tags: Vec<(&str, &str)> = lines
        .iter()
        .filter(|l| !l.starts_with(' '))
        .map(|l| {
            let mut words = l.split_whitespace();
            (words.next().unwrap_or(""), words.next().unwrap_or(""))
        })
        .collect();
    assert_eq!(
        tags,
        [
            ("FAIL", "droid"),
            ("WARN", "auth"),
            ("OK", "codex"),
            ("WARN", "claude"),
            ("WARN", "gemini"),
            ("WARN", "opencode"),
        ],
        "{all:#?}"
    );
    // droid missing is a failure, as in `doctor`
    assert_eq!(all.code, Some(1), "{all:#?}");
    let codex = lines.iter().find(|l| l.starts_with("OK   codex")).unwrap();
    assert!(
        codex.contains(&agent_cli("codex").display().to_string()) && codex.contains("0.169.0"),
        "{codex}"
    );
    for (name, package) in [
        ("claude", "@anthropic-ai/claude-code@2.1.330"),
        ("gemini", "@google/gemini-cli@0.61.0"),
        ("opencode", "opencode-ai@1.18.33"),
    ] {
        assert!(
            all.stdout.contains(&format!(
                "fix: install it if you want it: npm install -g {package}"
            )),
            "{name}: {all:#?}"
        );
    }

    let one = droid_executor(&["ping", "codex"], &env, &w.repo()).await;
    assert_eq!(one.code, Some(0), "{one:#?}");
    assert_eq!(one.stdout, format!("{codex}\n"));
    let json_out = droid_executor(&["ping", "codex", "--json"], &env, &w.repo()).await;
    assert_eq!(json_out.code, Some(0), "{json_out:#?}");
    let v: Value = serde_json::from_str(&json_out.stdout).unwrap();
    assert_eq!(v[0]["check"], "codex");
    assert_eq!(v[0]["level"], "ok");
}
