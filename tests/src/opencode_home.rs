//! A throw-away `HOME` for the real OpenCode 1.18.33: `.config/opencode/opencode.json` declares a
//! provider `mock` (`@ai-sdk/openai-compatible`, built into OpenCode, nothing downloaded) whose
//! `baseURL` is a [`crate::scripted_model`] server, with one model `mock-model`, so OpenCode runs
//! with no account and no network beyond loopback. OpenCode keeps its state there too (its
//! SQLite sessions database, logs, snapshots), so each test starts clean and a resumed session
//! must reuse the same home. The title model (`small_model`) is the same model: its side call
//! offers no tools, so give the server an aux text ([`crate::scripted_model::ScriptedModel::set_aux_text`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde_json::{Value, json};

use crate::temp_dir::TempDir;

/// Used when the test process has no `PATH` (OpenCode's bash tool needs one).
const FALLBACK_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The model id to pass as the request's `model`.
pub const MODEL: &str = "mock/mock-model";

/// A temporary OpenCode `HOME`, removed on drop.
#[derive(Debug)]
pub struct OpencodeHome {
    dir: TempDir,
}

impl OpencodeHome {
    /// Creates the directory and its `.config/opencode/opencode.json` pointing at `base_url`
    /// (`http://127.0.0.1:PORT/v1`).
    ///
    /// # Errors
    /// When the directory or the config file cannot be written.
    pub fn new(base_url: &str) -> anyhow::Result<OpencodeHome> {
        let dir = TempDir::new("opencode-home").context("creating a temporary OpenCode HOME")?;
        let conf = dir.path().join(".config/opencode");
        std::fs::create_dir_all(&conf).with_context(|| format!("creating {}", conf.display()))?;
        let file = conf.join("opencode.json");
        std::fs::write(&file, serde_json::to_string_pretty(&config(base_url))?)
            .with_context(|| format!("writing {}", file.display()))?;
        Ok(OpencodeHome { dir })
    }

    /// The HOME directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// OpenCode's own log directory (why a silent failure failed).
    pub fn log_dir(&self) -> PathBuf {
        self.path().join(".local/share/opencode/log")
    }

    /// The complete environment to run OpenCode with: `HOME` = this directory, `PATH` from the
    /// test process, `LANG=C.UTF-8`. The provider adds `OPENCODE_DISABLE_AUTOUPDATE`,
    /// `OPENCODE_DISABLE_MODELS_FETCH` and `OPENCODE_PERMISSION` itself.
    pub fn env(&self) -> Vec<(OsString, OsString)> {
        let path = std::env::var_os("PATH").unwrap_or_else(|| FALLBACK_PATH.into());
        vec![
            ("HOME".into(), self.path().into()),
            ("PATH".into(), path),
            ("LANG".into(), "C.UTF-8".into()),
        ]
    }
}

/// The config document: provider `mock` at `base_url`, model and title model `mock/mock-model`,
/// no autoupdate, no sharing.
pub fn config(base_url: &str) -> Value {
    json!({
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "mock": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Mock",
                "options": {"baseURL": base_url, "apiKey": "sk-mock"},
                "models": {"mock-model": {"name": "Mock Model", "tool_call": true}}
            }
        },
        "model": MODEL,
        "small_model": MODEL,
        "autoupdate": false,
        "share": "disabled"
    })
}
