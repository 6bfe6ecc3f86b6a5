//! Registering `droid-executor mcp` with Gemini CLI 0.61.0 (`setup mcp --client gemini`): an
//! entry under `mcpServers` in its user settings (`$GEMINI_CLI_HOME/.gemini/settings.json`,
//! default `~/.gemini/settings.json`, JSON with comments, edited in place by [`crate::jsonc`]).
//!
//! Measured with the real Gemini CLI, headless (`gemini -p`), against a scripted model:
//! - in its default approval mode a tool that would need confirmation is not offered at all, so
//!   the model never sees an MCP server's tools unless the entry says `"trust": true` (every
//!   call of the server's tools then runs without confirmation);
//! - it removes from the server's environment every variable whose name contains KEY, TOKEN,
//!   SECRET, PASSWORD, AUTH, CREDENTIAL, PRIVATE or CERT (`droid_ping` said "no
//!   FACTORY_API_KEY" while it was set); the entry's `env` map passes them back, by name:
//!   `"FACTORY_API_KEY": "$FACTORY_API_KEY"` is expanded from Gemini's own environment when it
//!   starts the server (an unset one becomes `""`, which the server treats as unset);
//! - a tool call may take `timeout` milliseconds (default 600 000); a whole task can take longer.
//!
//! It starts a stdio server only in a trusted folder (`gemini trust`, or `--skip-trust`), as it
//! runs headless only there; `setup` says so.

use std::path::PathBuf;

use serde_json::{Map, Value, json};

use droid_exec::EngineError;
use droid_exec::client_env::{CLIENT_VAR, gemini_drops};
use droid_exec::config::EnvMap;

use crate::registration::{Registration, SERVER_NAME};

/// Gemini CLI's user settings file.
///
/// # Errors
/// [`EngineError::Setting`] when neither `GEMINI_CLI_HOME` nor `HOME` is set.
pub fn settings_path(env: &EnvMap) -> Result<PathBuf, EngineError> {
    ["GEMINI_CLI_HOME", "HOME"]
        .iter()
        .find_map(|v| env.get(*v).filter(|h| !h.is_empty()))
        .map(|h| PathBuf::from(h).join(".gemini/settings.json"))
        .ok_or_else(|| EngineError::Setting {
            name: "HOME".into(),
            message: "is not set; cannot find Gemini CLI's settings".into(),
        })
}

/// Our entry: the command, the variables Gemini would drop passed back by name, the client's
/// name, a tool-call timeout above the run budget, and trust (else headless Gemini offers none
/// of the tools).
pub fn entry(reg: &Registration<'_>) -> Value {
    let mut env = Map::new();
    env.insert(CLIENT_VAR.to_owned(), json!("gemini"));
    for name in reg.env_vars.iter().filter(|n| gemini_drops(n)) {
        env.insert(name.clone(), json!(format!("${name}")));
    }
    json!({
        "command": reg.program.display().to_string(),
        "args": ["mcp"],
        "env": env,
        "timeout": reg.tool_timeout_secs * 1000,
        "trust": true,
    })
}

/// The path of our entry in the settings.
pub const AT: [&str; 2] = ["mcpServers", SERVER_NAME];

/// What `setup` says after writing the entry.
pub const NOTE: &str = "note: Gemini CLI starts a stdio MCP server only in a trusted folder (`gemini \
     trust` there, or gemini --skip-trust); \"trust\": true in the entry lets every call of \
     droid-executor's tools run without confirmation, which headless Gemini needs to offer them \
     at all";
