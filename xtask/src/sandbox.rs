//! A throw-away world for the demo and the benchmark: a temp HOME configured for the agent CLIs
//! it is made for, each pointed at its own scripted model server (one `scripted-model` process
//! per agent: droid and OpenCode both speak chat completions but call different tools), and the
//! sample repository committed in git.
//!
//! What each CLI is given (the offline set-ups the provider suites use, `tests/src/<p>_home.rs`):
//!
//! | agent | configuration in HOME | environment |
//! |---|---|---|
//! | droid | `.factory/settings.json`: a custom model (`customModels`, chat completions) | `FACTORY_AIRGAP_ENABLED=1` |
//! | codex | `.codex/config.toml`: a custom Responses provider, model `gpt-5.5`, no retries | `CODEX_HOME`, `MOCK_API_KEY` (its `env_key`; listed in droid-executor's `env_passthrough`) |
//! | claude | — | `ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY` |
//! | gemini | `.gemini/settings.json`: auth type `gemini-api-key`, no usage statistics | `GEMINI_API_KEY`, `GOOGLE_GEMINI_BASE_URL` |
//! | opencode | `.config/opencode/opencode.json`: an `@ai-sdk/openai-compatible` provider `scripted` | — |
//!
//! [`Sandbox::command`] gives every program all of it (the engine passes each provider only its
//! own variables) and, for the agents other than droid, `DROID_EXECUTOR_<P>_BIN`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::json;

use crate::agents::{Agent, AgentCli, CODEX_KEY_VAR};
use crate::sh::{git_commit_all, output, workspace_root};

pub(crate) struct Sandbox {
    pub dir: PathBuf,
    pub home: PathBuf,
    pub repo: PathBuf,
    /// One scripted model per agent.
    models: Vec<Child>,
    /// What every command gets besides HOME, PATH and LANG.
    env: Vec<(String, OsString)>,
}

impl Sandbox {
    /// A sandbox for droid alone: the scripted model answers `make_script(repo)`.
    pub(crate) fn new(
        bin_dir: &Path,
        make_script: impl Fn(&Path) -> serde_json::Value,
    ) -> Result<Self> {
        Self::with_agents(bin_dir, &[], |_, repo| make_script(repo))
    }

    /// A sandbox for droid and for each of `agents` (`(agent, program)`; droid is always set
    /// up, its program is given by the caller as `DROID_CLI_CMD`): each one's scripted model
    /// (from `bin_dir`) answers `make_script(agent, repo)`.
    pub(crate) fn with_agents(
        bin_dir: &Path,
        agents: &[(Agent, PathBuf)],
        make_script: impl Fn(Agent, &Path) -> serde_json::Value,
    ) -> Result<Self> {
        let dir = std::env::temp_dir().join(format!("droid-executor-xtask-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let home = dir.join("home");
        let repo = home.join("sample-repo");
        std::fs::create_dir_all(&home)?;
        copy_dir(&workspace_root().join("xtask/demo/sample-repo"), &repo)?;
        git_commit_all(&repo, "sample repository")?;
        let home = std::fs::canonicalize(&home)?;
        let repo = std::fs::canonicalize(&repo)?;
        let mut me = Self {
            dir,
            home,
            repo,
            models: Vec::new(),
            env: vec![("FACTORY_AIRGAP_ENABLED".into(), "1".into())],
        };
        let mut all = vec![Agent::Droid];
        all.extend(
            agents
                .iter()
                .map(|(a, _)| *a)
                .filter(|a| *a != Agent::Droid),
        );
        for agent in all {
            let script = make_script(agent, &me.repo);
            let port = me.start_model(bin_dir, agent, &script)?;
            me.configure(agent, port)?;
        }
        for (agent, program) in agents {
            if *agent != Agent::Droid {
                me.env.push((agent.bin_var().into(), program.into()));
            }
        }
        Ok(me)
    }

    /// Start `agent`'s scripted model answering `script`; its port.
    fn start_model(
        &mut self,
        bin_dir: &Path,
        agent: Agent,
        script: &serde_json::Value,
    ) -> Result<u16> {
        let name = agent.name();
        let script_file = self.dir.join(format!("script-{name}.json"));
        std::fs::write(&script_file, serde_json::to_string_pretty(script)?)?;
        let port_file = self.dir.join(format!("model-{name}.port"));
        let model = Command::new(bin_dir.join("scripted-model"))
            .arg("--script")
            .arg(&script_file)
            .arg("--port-file")
            .arg(&port_file)
            .arg("--log")
            .arg(self.dir.join(format!("model-{name}.jsonl")))
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("could not start scripted-model")?;
        self.models.push(model);
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(p) = std::fs::read_to_string(&port_file)
                && let Ok(p) = p.trim().parse::<u16>()
            {
                return Ok(p);
            }
            if Instant::now() > until {
                bail!("scripted-model ({name}) did not report its port");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Point `agent` at the scripted model on `port`.
    fn configure(&mut self, agent: Agent, port: u16) -> Result<()> {
        let home = self.home.clone();
        let write = |rel: &str, text: String| -> Result<()> {
            let path = home.join(rel);
            std::fs::create_dir_all(path.parent().context("a file has a parent")?)?;
            std::fs::write(&path, text).with_context(|| format!("write {}", path.display()))
        };
        let root = format!("http://127.0.0.1:{port}");
        match agent {
            Agent::Droid => {
                let settings = json!({"customModels": [{
                    "model": "scripted", "displayName": "Demo", "baseUrl": format!("{root}/v1"),
                    "apiKey": "sk-demo", "provider": "generic-chat-completion-api",
                    "maxOutputTokens": 4096}]});
                write(".factory/settings.json", settings.to_string())?;
            }
            Agent::Codex => {
                write(
                    ".codex/config.toml",
                    format!(
                        "model = \"gpt-5.5\"\nmodel_provider = \"scripted\"\n\n\
                         [model_providers.scripted]\nname = \"Scripted\"\n\
                         base_url = \"{root}/v1\"\nwire_api = \"responses\"\n\
                         env_key = \"{CODEX_KEY_VAR}\"\n\
                         request_max_retries = 0\nstream_max_retries = 0\n"
                    ),
                )?;
                write(
                    ".config/droid-executor/config.toml",
                    format!("env_passthrough = [\"{CODEX_KEY_VAR}\"]\n"),
                )?;
                self.env
                    .push(("CODEX_HOME".into(), self.home.join(".codex").into()));
                self.env.push((CODEX_KEY_VAR.into(), "sk-demo".into()));
            }
            Agent::Claude => {
                self.env.push(("ANTHROPIC_BASE_URL".into(), root.into()));
                self.env
                    .push(("ANTHROPIC_API_KEY".into(), "sk-ant-demo".into()));
            }
            Agent::Gemini => {
                let settings = json!({
                    "security": {"auth": {"selectedType": "gemini-api-key"}},
                    "privacy": {"usageStatisticsEnabled": false},
                });
                write(".gemini/settings.json", settings.to_string())?;
                self.env.push(("GEMINI_API_KEY".into(), "demo-key".into()));
                self.env
                    .push(("GOOGLE_GEMINI_BASE_URL".into(), root.into()));
            }
            Agent::Opencode => {
                let (provider, model) = crate::agents::OPENCODE_MODEL
                    .split_once('/')
                    .context("the OpenCode model is provider/model")?;
                let config = json!({
                    "$schema": "https://opencode.ai/config.json",
                    "provider": {provider: {
                        "npm": "@ai-sdk/openai-compatible",
                        "name": "Scripted",
                        "options": {"baseURL": format!("{root}/v1"), "apiKey": "sk-demo"},
                        "models": {model: {"name": "Demo", "tool_call": true}}
                    }},
                    "model": crate::agents::OPENCODE_MODEL,
                    "small_model": crate::agents::OPENCODE_MODEL,
                    "autoupdate": false,
                    "share": "disabled"
                });
                write(
                    ".config/opencode/opencode.json",
                    serde_json::to_string_pretty(&config)?,
                )?;
            }
        }
        Ok(())
    }

    /// A command with the sandbox's offline environment: HOME, PATH, LANG and every agent's
    /// variables.
    pub(crate) fn command(&self, program: &Path) -> Command {
        let mut c = Command::new(program);
        c.env_clear()
            .env("HOME", &self.home)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("LANG", "C.UTF-8")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&self.repo);
        c
    }

    /// Put the repository back to its commit.
    pub(crate) fn reset(&self) -> Result<()> {
        output(
            Command::new("git")
                .args(["checkout", "-q", "--", "."])
                .current_dir(&self.repo),
        )?;
        output(
            Command::new("git")
                .args(["clean", "-fdq"])
                .current_dir(&self.repo),
        )?;
        Ok(())
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        for model in &mut self.models {
            let _ = model.kill();
            let _ = model.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from).with_context(|| format!("read {}", from.display()))? {
        let entry = entry?;
        let dest = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &dest)?;
        } else {
            std::fs::copy(entry.path(), dest)?;
        }
    }
    Ok(())
}
