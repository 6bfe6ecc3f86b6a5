//! A throw-away world for the demo and the benchmark: a temp HOME with droid's custom model
//! pointing at the scripted model server, and the sample repository committed in git.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::sh::{git_commit_all, output, workspace_root};

/// The custom model droid is told about.
pub(crate) const MODEL: &str = "custom:Demo-0";

pub(crate) struct Sandbox {
    pub dir: PathBuf,
    pub home: PathBuf,
    pub repo: PathBuf,
    model: Child,
}

impl Sandbox {
    /// Build the bins in `profile` ("debug"/"release"), start the scripted model with the script
    /// `make_script(repo)`, and lay out HOME and the repository.
    pub(crate) fn new(
        bin_dir: &Path,
        make_script: impl Fn(&Path) -> serde_json::Value,
    ) -> Result<Self> {
        let dir = std::env::temp_dir().join(format!("droid-executor-xtask-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let home = dir.join("home");
        let repo = home.join("sample-repo");
        std::fs::create_dir_all(home.join(".factory"))?;
        copy_dir(&workspace_root().join("xtask/demo/sample-repo"), &repo)?;
        git_commit_all(&repo, "sample repository")?;
        let script = dir.join("script.json");
        std::fs::write(&script, serde_json::to_string_pretty(&make_script(&repo))?)?;
        let port_file = dir.join("model.port");
        let model = Command::new(bin_dir.join("scripted-model"))
            .arg("--script")
            .arg(&script)
            .arg("--port-file")
            .arg(&port_file)
            .stderr(Stdio::null())
            .spawn()
            .context("could not start scripted-model")?;
        let mut me = Self {
            dir,
            home,
            repo,
            model,
        };
        let until = Instant::now() + Duration::from_secs(10);
        let port = loop {
            if let Ok(p) = std::fs::read_to_string(&port_file)
                && let Ok(p) = p.trim().parse::<u16>()
            {
                break p;
            }
            if Instant::now() > until {
                bail!("scripted-model did not report its port");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let settings = serde_json::json!({"customModels": [{
            "model": "scripted", "displayName": "Demo", "baseUrl": format!("http://127.0.0.1:{port}/v1"),
            "apiKey": "sk-demo", "provider": "generic-chat-completion-api", "maxOutputTokens": 4096}]});
        std::fs::write(me.home.join(".factory/settings.json"), settings.to_string())?;
        me.home = std::fs::canonicalize(&me.home)?;
        me.repo = std::fs::canonicalize(&me.repo)?;
        Ok(me)
    }

    /// A command with droid's offline environment: HOME, airgap, PATH.
    pub(crate) fn command(&self, program: &Path) -> Command {
        let mut c = Command::new(program);
        c.env_clear()
            .env("HOME", &self.home)
            .env("FACTORY_AIRGAP_ENABLED", "1")
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("LANG", "C.UTF-8")
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
        let _ = self.model.kill();
        let _ = self.model.wait();
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
