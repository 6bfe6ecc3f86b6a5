//! A throw-away `HOME` for the real Gemini CLI: `.gemini/settings.json` selects API-key auth (env
//! alone exits 41 "Invalid auth method selected." when `GOOGLE_GEMINI_BASE_URL` is set) and turns
//! usage statistics off, and [`GeminiHome::env`] points the CLI at a [`crate::scripted_model`]
//! server. Gemini keeps its sessions under this directory (`.gemini/tmp/<project>/chats`), so
//! each test starts clean and two runs of one test share their sessions.

use std::ffi::OsString;
use std::path::Path;

use anyhow::Context as _;
use serde_json::json;

use crate::temp_dir::TempDir;

/// Used when the test process has no `PATH` (Gemini's shell tool and `node` need one).
const FALLBACK_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// A temporary Gemini `HOME`, removed on drop.
#[derive(Debug)]
pub struct GeminiHome {
    dir: TempDir,
}

impl GeminiHome {
    /// Creates the directory and its `.gemini/settings.json`:
    /// `{"security":{"auth":{"selectedType":"gemini-api-key"}},"privacy":{"usageStatisticsEnabled":false}}`.
    ///
    /// # Errors
    /// When the directory or the settings file cannot be written.
    pub fn new() -> anyhow::Result<GeminiHome> {
        let dir = TempDir::new("gemini-home").context("creating a temporary Gemini HOME")?;
        let gemini = dir.path().join(".gemini");
        std::fs::create_dir(&gemini).with_context(|| format!("creating {}", gemini.display()))?;
        let settings = json!({
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": false},
        });
        let file = gemini.join("settings.json");
        std::fs::write(&file, serde_json::to_string_pretty(&settings)?)
            .with_context(|| format!("writing {}", file.display()))?;
        Ok(GeminiHome { dir })
    }

    /// The HOME directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The complete environment to run Gemini with against the scripted model on `port`:
    /// `HOME` = this directory, `GEMINI_API_KEY=mock-key`,
    /// `GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:PORT` (Gemini adds `/v1beta/models/…`), `PATH`
    /// from the test process, `LANG=C.UTF-8`.
    pub fn env(&self, port: u16) -> Vec<(OsString, OsString)> {
        let path = std::env::var_os("PATH").unwrap_or_else(|| FALLBACK_PATH.into());
        vec![
            ("HOME".into(), self.path().into()),
            ("GEMINI_API_KEY".into(), "mock-key".into()),
            (
                "GOOGLE_GEMINI_BASE_URL".into(),
                format!("http://127.0.0.1:{port}").into(),
            ),
            ("PATH".into(), path),
            ("LANG".into(), "C.UTF-8".into()),
        ]
    }
}
