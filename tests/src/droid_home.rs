//! A throw-away `HOME` for the real droid: `.factory/settings.json` lists BYOK custom models that
//! point at [`crate::scripted_model`] servers, so droid runs with no Factory account and no
//! network beyond loopback. droid keeps all its state there (sessions, logs, caches), so each
//! test gets a clean slate and nothing touches the developer's own `~/.factory`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde_json::{Value, json};

use crate::temp_dir::TempDir;

/// Used when the test process has no `PATH` (droid's Execute tool needs one).
const FALLBACK_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// A temporary droid `HOME`, removed on drop.
#[derive(Debug)]
pub struct DroidHome {
    dir: TempDir,
}

impl DroidHome {
    /// Creates the directory and its `.factory/settings.json` with one custom model per
    /// `(displayName, baseUrl)`: `{"model":"scripted","displayName":NAME,"baseUrl":URL,
    /// "apiKey":"sk-mock","provider":"generic-chat-completion-api","maxOutputTokens":4096}`.
    ///
    /// # Errors
    /// When the directory or the settings file cannot be written.
    pub fn new(models: &[(&str, &str)]) -> anyhow::Result<DroidHome> {
        let dir = TempDir::new("droid-home").context("creating a temporary droid HOME")?;
        let factory = dir.path().join(".factory");
        std::fs::create_dir(&factory).with_context(|| format!("creating {}", factory.display()))?;
        let settings = factory.join("settings.json");
        let text = serde_json::to_string_pretty(&settings_json(models))?;
        std::fs::write(&settings, text)
            .with_context(|| format!("writing {}", settings.display()))?;
        Ok(DroidHome { dir })
    }

    /// The HOME directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The id droid knows a custom model by: `custom:<displayName>-0` (the suffix is the index
    /// among entries sharing that displayName, so 0 for the first).
    pub fn model_id(&self, display_name: &str) -> String {
        format!("custom:{display_name}-0")
    }

    /// The complete environment to run droid with (use it after `env_clear`): `HOME` = this
    /// directory, `FACTORY_AIRGAP_ENABLED=1` (no Factory API calls and no ~6 s exit delay),
    /// `PATH` from the test process, `LANG=C.UTF-8`.
    pub fn env(&self) -> Vec<(OsString, OsString)> {
        let path = std::env::var_os("PATH").unwrap_or_else(|| FALLBACK_PATH.into());
        vec![
            ("HOME".into(), self.path().into()),
            ("FACTORY_AIRGAP_ENABLED".into(), "1".into()),
            ("PATH".into(), path),
            ("LANG".into(), "C.UTF-8".into()),
        ]
    }

    /// droid's own log, where the reason for a silent failure ends up (missing prompt file,
    /// relative `--cwd`...). It may not exist.
    pub fn droid_log(&self) -> PathBuf {
        self.path().join(".factory/logs/droid-log-single.log")
    }
}

/// The settings document for these `(displayName, baseUrl)` pairs.
pub fn settings_json(models: &[(&str, &str)]) -> Value {
    let custom: Vec<Value> = models
        .iter()
        .map(|(name, url)| {
            json!({
                "model": "scripted",
                "displayName": name,
                "baseUrl": url,
                "apiKey": "sk-mock",
                "provider": "generic-chat-completion-api",
                "maxOutputTokens": 4096,
            })
        })
        .collect();
    json!({ "customModels": custom })
}
