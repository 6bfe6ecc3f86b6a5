//! A throw-away `HOME` for the real Codex CLI: `CODEX_HOME` (`<home>/.codex`) holds a
//! `config.toml` whose model provider is the scripted model's OpenAI Responses API, with the
//! catalog slug `gpt-5.5` (Codex offers `apply_patch` only for a model it knows) and no retries.
//! The provider's key variable is [`KEY_VAR`], a user-defined name as a custom provider's
//! `env_key` is: the engine passes it only because the test puts it in the run's environment
//! (a user lists it in the setting `env_passthrough`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::temp_dir::TempDir;

/// The variable the scripted provider's `env_key` names.
pub const KEY_VAR: &str = "MOCK_API_KEY";
/// The model slug the config selects.
pub const MODEL: &str = "gpt-5.5";

const FALLBACK_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// A temp `HOME` with `.codex/config.toml` pointing Codex at a scripted model.
#[derive(Debug)]
pub struct CodexHome {
    dir: TempDir,
}

impl CodexHome {
    /// A new home whose provider's `base_url` is `base_url` (`http://127.0.0.1:PORT/v1`).
    ///
    /// # Errors
    /// When the directory or the config cannot be written.
    pub fn new(base_url: &str) -> anyhow::Result<CodexHome> {
        let dir = TempDir::new("codex-home").context("creating a temporary codex HOME")?;
        let codex = dir.path().join(".codex");
        std::fs::create_dir(&codex).with_context(|| format!("creating {}", codex.display()))?;
        let config = format!(
            "model = \"{MODEL}\"\nmodel_provider = \"scripted\"\n\n\
             [model_providers.scripted]\nname = \"Scripted\"\nbase_url = \"{base_url}\"\n\
             wire_api = \"responses\"\nenv_key = \"{KEY_VAR}\"\n\
             request_max_retries = 0\nstream_max_retries = 0\n"
        );
        let file = codex.join("config.toml");
        std::fs::write(&file, config).with_context(|| format!("writing {}", file.display()))?;
        Ok(CodexHome { dir })
    }

    /// The HOME directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `CODEX_HOME` (sessions are stored under it).
    pub fn codex_home(&self) -> PathBuf {
        self.dir.path().join(".codex")
    }

    /// The environment to run Codex with: `HOME`, `CODEX_HOME`, `PATH`, `LANG` and the key.
    pub fn env(&self) -> Vec<(OsString, OsString)> {
        let path = std::env::var_os("PATH").unwrap_or_else(|| FALLBACK_PATH.into());
        vec![
            ("HOME".into(), self.path().into()),
            ("CODEX_HOME".into(), self.codex_home().into()),
            ("PATH".into(), path),
            ("LANG".into(), "C.UTF-8".into()),
            (KEY_VAR.into(), "sk-scripted".into()),
        ]
    }
}
