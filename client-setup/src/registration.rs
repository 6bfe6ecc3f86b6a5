//! What every client's entry for our MCP server is made from ([`Registration`], under
//! [`SERVER_NAME`]), and how a client's configuration file is read ([`read_optional`]): shared by
//! the plan ([`crate::register`]) and each client's own format.

use std::path::Path;

use droid_exec::EngineError;

/// The name the server is registered under.
pub const SERVER_NAME: &str = "droid-executor";

/// What the registered entry says: the front-end knows its tools and budget.
#[derive(Debug, Clone, PartialEq)]
pub struct Registration<'a> {
    /// The program started as `<program> mcp`.
    pub program: &'a Path,
    /// The server's tool names (Codex approvals, Claude Code permission rules, droid's levels).
    pub tools: &'a [&'a str],
    /// Variables the server or an enabled provider reads, passed by name where the client
    /// filters its environment (Codex `env_vars`, Gemini `env`): `client_env::pass_names`.
    pub env_vars: Vec<String>,
    /// How long the client may wait for one tool call (Codex `tool_timeout_sec`, Gemini's and
    /// OpenCode's `timeout`).
    pub tool_timeout_secs: u64,
    /// Claude Code: add the permission rules to `~/.claude/settings.json` (else only say them).
    pub allow_tools: bool,
}

/// The largest client configuration read (`~/.claude.json` keeps per-project history and can
/// reach megabytes; a file past this, or `/dev/zero`, is refused rather than read without end).
const CLIENT_CONFIG_LIMIT: usize = 64 * 1024 * 1024;

pub(crate) fn read_optional(path: &Path) -> Result<Option<String>, EngineError> {
    let what = format!("the client configuration {}", path.display());
    match droid_exec::input::read_input(
        droid_exec::input::Input::Path(path),
        &what,
        CLIENT_CONFIG_LIMIT,
        "64 MiB; edit the file by hand",
    ) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|e| EngineError::Config {
                path: path.to_path_buf(),
                message: format!("it is not UTF-8 text ({e})"),
            }),
        Err(EngineError::Input { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            Ok(None)
        }
        Err(EngineError::Input { source, .. }) => Err(EngineError::io("read", path)(source)),
        Err(e) => Err(e),
    }
}
