//! Write confinement for the four provider CLIs (issue 18 items 4 and 5), each REAL CLI driven
//! by the scripted model at `high` autonomy (so the agent's own permission model allows
//! everything and only the run's Landlock ruleset can deny): the agent's own write tool creating
//! `$HOME/.bashrc-planted` is denied (the file is absent, the result has a `permission_denied`
//! issue naming it), a shell command writing `$HOME/escaped` from a new session (`setsid`) is
//! denied, and a file inside the repository is written and reported in `files_changed`.
//!
//! The HOMEs here lie under Cargo's `CARGO_TARGET_TMPDIR`, not under the system temp dir (the
//! ruleset grants temp, so a HOME there would be writable and prove nothing).
//!
//! What each CLI writes at run time (traced with `strace -f -e trace=openat,creat,mkdir,mkdirat,
//! rename,renameat2,unlink,unlinkat,symlink,link` on the scripted turn of these tests,
//! unconfined; every CLI also opens `/dev/null` for writing), which is what each provider's
//! `state_paths` must grant, besides the repository and the run's `$TMPDIR` (the engine points it
//! at the run's scratch directory):
//!
//! - **codex**, all under `$CODEX_HOME` (default `~/.codex`): `sessions/YYYY/MM/DD/rollout-*.jsonl`;
//!   SQLite files `state_5`, `logs_2`, `goals_1`, `memories_1`, `queue_1`, `thread_history_1`
//!   (`.sqlite` and `-journal`); `skills/.system/…` (its bundled skills, unpacked at start-up);
//!   `tmp/arg0-linux/codex-arg0*/` (symlinks `apply_patch`, `applypatch`, `codex-linux-sandbox`
//!   to its own binary, and a `.lock`); `.tmp/` (`plugins-clone-*`, `git-*` scratch git
//!   directories); `shell_snapshots/<thread>.<n>.sh` (written as `.tmp-<n>`, renamed);
//!   `thread-writer-locks`; `.sandbox_migration`. Nothing else in HOME.
//! - **claude**, all under `$CLAUDE_CONFIG_DIR` (`~/.claude` here): `.claude.json` (with
//!   `.claude.json.lock`, written as `.claude.json.tmp.<pid>.<hex>` and renamed),
//!   `backups/.claude.json.backup.<ms>`, `projects/<cwd slug>/<session>.jsonl`,
//!   `projects/<cwd slug>/memory/`, `sessions/<pid>.json` (and a `.key`), `shell-snapshots/
//!   snapshot-bash-*.sh`, `session-env/<session>/`, `plugins/store/*.json` (with `.lock`,
//!   `.tmp.*`). Without `CLAUDE_CONFIG_DIR` the state file is `~/.claude.json`, beside
//!   `~/.claude/` (a single file: granted alone). In `$TMPDIR`: `claude-0/bash-edit-diff/…`
//!   (scratch git directories), `claude-0/fswatch-probe-*/probe`, `claude-<hex>-cwd`. Its Write
//!   tool writes `<file>.tmp.<pid>.<hex>` in the target's directory and renames it.
//! - **gemini**, under `~/.gemini` (or `$GEMINI_CLI_HOME`): `projects.json` (with `.lock`,
//!   written as `projects.json.<uuid>.tmp` and renamed), `tmp/<project>/` (`chats/
//!   session-*.jsonl`, `logs/`, `.project_root`), `history/<project>/.project_root`. In `$TMPDIR`:
//!   `gemini-shell-*/bgpids.tmp`.
//! - **opencode**: `~/.local/share/opencode/` (`opencode.db` with `-journal`, `-wal`, `-shm`;
//!   `log/opencode.log`; `repos/`; `snapshot/<project>/<hash>/`, a git directory of its own),
//!   `~/.local/state/opencode/locks/<hash>.lock/{heartbeat,meta.json}`, `~/.cache/opencode/bin/`,
//!   `~/.config/opencode/` (a `mkdir` of the existing directory), and `~/.npm/_cacache/…` (npm's
//!   cache, while it installs the configured provider's package; with `~/.npm` denied the run
//!   still completes, checked once under a ruleset without it). It creates missing parents (`~/.local/share`, `~/.local/state`,
//!   `~/.cache`), so the engine must create each state directory before the ruleset is applied
//!   (a Landlock rule needs the path to exist, and `mkdir ~/.local/share` is a write to
//!   `~/.local`). In the repository: `.git/opencode` (a file inside `.git`, neither hooks nor
//!   config). In `$TMPDIR`: Bun's extracted native modules (`.<hex>.so`, `.<hex>.node`).
//!
//! How each CLI reports the refused write (what the providers' `findings` read): Claude Code's
//! Write `EACCES: permission denied, open '<path>'`; Gemini's write_file `Permission denied
//! writing to file: <path> (EACCES)`; OpenCode's write `PermissionDenied: FileSystem.writeFile
//! (<path>)`; Codex's apply_patch only `Failed to write file <path>` on stderr (no errno); a
//! shell `sh: 1: cannot create <path>: Permission denied`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use droid_contract::{Autonomy, ChangeType, ProviderId, Status};
use droid_exec::Engine;
use droid_exec::config::SandboxMode;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::claude_home::ClaudeHome;
use tests::codex_home::CodexHome;
use tests::gemini_home::GeminiHome;
use tests::opencode_home::{self, OpencodeHome};
use tests::scripted_model::ScriptedModel;
use tests::temp_dir::TempDir;

use super::common::{Ran, git_repo, request, run};
use super::provider_world::agent_config;

/// A HOME outside the system temp dir: a copy of a provider test HOME (its configuration) under
/// `CARGO_TARGET_TMPDIR`, removed on drop.
struct Home {
    path: PathBuf,
}

impl Home {
    /// Copy `from` (a provider test HOME) to a fresh directory under `CARGO_TARGET_TMPDIR`.
    fn copy_of(from: &Path) -> Home {
        let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("sandbox-homes");
        std::fs::create_dir_all(&root).unwrap();
        let name = from.file_name().unwrap();
        let path = root.join(name);
        copy_tree(from, &path);
        Home {
            path: path.canonicalize().unwrap(),
        }
    }

    /// `env` with every value naming `old` (the copied HOME) rewritten to name this one.
    fn rewrite(&self, old: &Path, env: Vec<(OsString, OsString)>) -> Vec<(OsString, OsString)> {
        let old = old.to_string_lossy().into_owned();
        let new = self.path.to_string_lossy().into_owned();
        env.into_iter()
            .map(|(k, v)| {
                let v = v.to_string_lossy().replace(&old, &new);
                (k, v.into())
            })
            .collect()
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), dest).unwrap();
        }
    }
}

/// A scripted model, a provider HOME outside temp, and an engine running `provider`'s real CLI
/// confined by Landlock.
struct World {
    _model: ScriptedModel,
    home: Home,
    repo: TempDir,
    _scratch: TempDir,
    engine: Engine,
    provider: ProviderId,
}

impl World {
    /// `script(home, repo)` is the model's script for a HOME at `home` and the repository at
    /// `repo`.
    async fn new(provider: ProviderId, script: impl Fn(&Path, &Path) -> Value) -> World {
        let model = ScriptedModel::start(json!([])).await.unwrap();
        let (home, env) = match provider {
            ProviderId::Codex => {
                let h = CodexHome::new(&model.base_url()).unwrap();
                let home = Home::copy_of(h.path());
                let env = home.rewrite(h.path(), h.env());
                (home, env)
            }
            ProviderId::Claude => {
                let h = ClaudeHome::new().unwrap();
                let home = Home::copy_of(h.path());
                let url = format!("http://127.0.0.1:{}", model.port());
                let env = home.rewrite(h.path(), h.env(&url));
                (home, env)
            }
            ProviderId::Gemini => {
                let h = GeminiHome::new().unwrap();
                let home = Home::copy_of(h.path());
                // Gemini's write_file refuses a path outside its workspace on its own; HOME in
                // its workspace leaves the refusal to the ruleset (like high autonomy elsewhere)
                let file = home.path.join(".gemini/settings.json");
                let mut settings: Value =
                    serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
                settings["context"] = json!({"includeDirectories": [home.path]});
                std::fs::write(&file, settings.to_string()).unwrap();
                let env = home.rewrite(h.path(), h.env(model.port()));
                (home, env)
            }
            ProviderId::Opencode => {
                model.set_aux_text("Scripted title");
                let h = OpencodeHome::new(&model.base_url()).unwrap();
                let home = Home::copy_of(h.path());
                let env = home.rewrite(h.path(), h.env());
                (home, env)
            }
            ProviderId::Droid => unreachable!("droid's confinement is engine_real_droid's"),
        };
        let repo = git_repo(&[("a.txt", "hello\n")]);
        model.set_script(script(&home.path, repo.path()));
        let scratch = TempDir::new("sandbox-scratch").unwrap();
        let mut cfg = agent_config(provider, env, scratch.path(), Autonomy::High);
        cfg.default_timeout = Duration::from_secs(90);
        cfg.sandbox = SandboxMode::Landlock;
        let engine = Engine::new(cfg);
        World {
            _model: model,
            home,
            repo,
            _scratch: scratch,
            engine,
            provider,
        }
    }

    /// Run the three writes in a fresh repository and check what the brief asks of each.
    async fn check(&self) {
        let repo = &self.repo;
        let mut req = request(
            repo.path(),
            "Plant a file in HOME, escape through setsid, write inside.txt",
            json!({"provider": self.provider.as_str(), "autonomy": "high"}),
        );
        if let Some(model) = model_of(self.provider) {
            req["model"] = json!(model);
        }
        let ran = run(&self.engine, &req).await;
        let res = &ran.result;
        let planted = self.home.path.join(".bashrc-planted");
        let escaped = self.home.path.join("escaped");
        assert!(
            !planted.exists(),
            "{} was written: {res:#?}",
            planted.display()
        );
        assert!(
            !escaped.exists(),
            "{} was written: {res:#?}",
            escaped.display()
        );
        assert_eq!(
            std::fs::read_to_string(repo.path().join("inside.txt")).unwrap_or_default(),
            "in\n",
            "{res:#?}"
        );
        let changed: Vec<(&str, ChangeType)> = res
            .files_changed
            .iter()
            .map(|f| (f.path.as_str(), f.change_type))
            .collect();
        assert_eq!(changed, vec![("inside.txt", ChangeType::Added)], "{res:#?}");
        for denied in [&planted, &escaped] {
            let named = res
                .issues
                .iter()
                .any(|i| i.kind.as_str() == "permission_denied" && names(&i.description, denied));
            assert!(
                named,
                "no permission_denied issue names {}: {:#?}",
                denied.display(),
                res.issues
            );
        }
        assert_eq!(res.status, Status::Partial, "{}", dump(&ran));
        // a write Landlock refused did not happen: no `conflict` claims it did
        assert!(
            !res.issues.iter().any(|i| i.kind.as_str() == "conflict"),
            "{}",
            dump(&ran)
        );
        let sandbox = serde_json::to_value(&res.sandbox).unwrap();
        assert_eq!(sandbox["kind"], "landlock", "{sandbox}");
    }
}

/// The model a request names (Gemini and OpenCode need one; Codex and Claude use their config).
fn model_of(provider: ProviderId) -> Option<&'static str> {
    match provider {
        ProviderId::Gemini => Some("gemini-2.5-pro"),
        ProviderId::Opencode => Some(opencode_home::MODEL),
        _ => None,
    }
}

/// `text` names `path` itself (not a longer name that starts with it, such as a temporary
/// `<path>.tmp.<pid>.<hex>` beside it).
fn names(text: &str, path: &Path) -> bool {
    let path = path.display().to_string();
    text.match_indices(&path).any(|(at, _)| {
        !text[at + path.len()..].starts_with(|c: char| c.is_alphanumeric() || "._-/".contains(c))
    })
}

fn dump(ran: &Ran) -> String {
    format!("{:#?}", ran.result)
}

/// The shell command that writes `$HOME/escaped` from a new session, waiting for it (`-w`) so
/// the file would be there when the tool returns if the write were allowed.
fn escape(home: &Path) -> String {
    format!("setsid -w sh -c 'echo x > {}/escaped'", home.display())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_writes_only_inside_the_repository() {
    let patch = |call: &str, body: String| {
        json!({"type": "custom_tool_call", "status": "completed", "call_id": call,
               "name": "apply_patch", "input": format!("*** Begin Patch\n{body}*** End Patch\n")})
    };
    let exec = |call: &str, cmd: String| {
        json!({"type": "function_call", "status": "completed", "call_id": call,
               "name": "exec_command", "arguments": json!({"cmd": cmd}).to_string()})
    };
    let w = World::new(ProviderId::Codex, |home, _repo| {
        json!([
            {"output": [patch("c0", format!("*** Add File: {}/.bashrc-planted\n+x\n", home.display()))]},
            {"output": [exec("c1", escape(home))]},
            {"output": [patch("c2", "*** Add File: inside.txt\n+in\n".into())]},
            {"output": [{"type": "message", "role": "assistant", "status": "completed",
                         "content": [{"type": "output_text", "text": "Done.", "annotations": []}]}]}
        ])
    })
    .await;
    w.check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_writes_only_inside_the_repository() {
    let tool = |id: &str, name: &str, input: Value| json!({"content": [{"type": "tool_use", "id": id, "name": name, "input": input}]});
    let w = World::new(ProviderId::Claude, |home, repo| {
        json!([
            tool("toolu_1", "Write", json!({"file_path": home.join(".bashrc-planted"), "content": "x\n"})),
            tool("toolu_2", "Bash", json!({"command": escape(home), "description": "run it"})),
            tool("toolu_3", "Write", json!({"file_path": repo.join("inside.txt"), "content": "in\n"})),
            {"content": [{"type": "text", "text": "Done."}]}
        ])
    })
    .await;
    w.check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_writes_only_inside_the_repository() {
    let call = |name: &str, args: Value| json!({"parts": [{"functionCall": {"name": name, "args": args}}]});
    let w = World::new(ProviderId::Gemini, |home, _repo| {
        json!([
            call("write_file", json!({"file_path": home.join(".bashrc-planted"), "content": "x\n"})),
            call("run_shell_command", json!({"command": escape(home), "description": "run it"})),
            call("write_file", json!({"file_path": "inside.txt", "content": "in\n"})),
            {"parts": [{"text": "Done."}]}
        ])
    })
    .await;
    w.check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_writes_only_inside_the_repository() {
    let tool = |name: &str, args: Value| json!({"tool": [{"name": name, "args": args}]});
    let w = World::new(ProviderId::Opencode, |home, repo| {
        json!([
            tool("write", json!({"filePath": home.join(".bashrc-planted"), "content": "x\n"})),
            tool("bash", json!({"command": escape(home), "description": "run it"})),
            tool("write", json!({"filePath": repo.join("inside.txt"), "content": "in\n"})),
            {"text": "Done."}
        ])
    })
    .await;
    w.check().await;
}
