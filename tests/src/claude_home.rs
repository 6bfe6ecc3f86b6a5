//! A throw-away `HOME` for the real Claude Code: its state (sessions under
//! `.claude/projects/`, settings, caches) stays in a temp dir, and the environment points it at a
//! [`crate::scripted_model`] server with a dummy key, so it runs with no Anthropic account and no
//! network beyond loopback (no config file, login or onboarding is needed in `-p` mode).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::temp_dir::TempDir;

/// Used when the test process has no `PATH` (Claude Code's Bash tool needs one).
const FALLBACK_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// A temporary Claude Code `HOME`, removed on drop.
#[derive(Debug)]
pub struct ClaudeHome {
    dir: TempDir,
}

impl ClaudeHome {
    /// Creates the directory.
    ///
    /// # Errors
    /// When the directory cannot be made.
    pub fn new() -> anyhow::Result<ClaudeHome> {
        let dir = TempDir::new("claude-home").context("creating a temporary Claude Code HOME")?;
        Ok(ClaudeHome { dir })
    }

    /// The HOME directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Claude Code's config directory (`CLAUDE_CONFIG_DIR`) inside it.
    pub fn config_dir(&self) -> PathBuf {
        self.path().join(".claude")
    }

    /// The complete environment to run Claude Code with against the Messages API at
    /// `base_url` (the scripted model's root, without `/v1`): `HOME` and `CLAUDE_CONFIG_DIR`
    /// here, `ANTHROPIC_BASE_URL`, a dummy `ANTHROPIC_API_KEY`, `PATH` from the test process,
    /// `LANG=C.UTF-8`.
    pub fn env(&self, base_url: &str) -> Vec<(OsString, OsString)> {
        let path = std::env::var_os("PATH").unwrap_or_else(|| FALLBACK_PATH.into());
        vec![
            ("HOME".into(), self.path().into()),
            ("CLAUDE_CONFIG_DIR".into(), self.config_dir().into()),
            ("ANTHROPIC_BASE_URL".into(), base_url.into()),
            ("ANTHROPIC_API_KEY".into(), "sk-ant-scripted".into()),
            ("PATH".into(), path),
            ("LANG".into(), "C.UTF-8".into()),
        ]
    }
}
