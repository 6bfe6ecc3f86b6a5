//! Registering `droid-executor mcp` with an MCP client (`droid-executor setup mcp --client …`).
//!
//! - droid: `droid mcp add droid-executor -- <program> mcp` (droid writes `~/.factory/mcp.json`;
//!   the `--` keeps droid from reading our arguments as its options);
//! - Claude Code: the user-scope `mcpServers` entry in `~/.claude.json` (what
//!   `claude mcp add --scope user` writes), other keys of that file kept as they are;
//! - Codex: a `[mcp_servers.droid-executor]` table appended to `$CODEX_HOME/config.toml` (default
//!   `~/.codex/config.toml`), the rest of the file left byte for byte.
//!
//! A [`Plan`] says what would be done (`--dry-run` prints it); [`apply`] does it. Registering
//! twice is not an error when the existing entry already runs this program.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::config::{EngineConfig, EnvMap};
use crate::error::EngineError;
use crate::spawn::{SpawnSpec, capture};
use crate::store::write_atomic;

/// The name the server is registered under.
pub const SERVER_NAME: &str = "droid-executor";

/// An MCP client we can register with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McpClient {
    /// Factory's droid.
    Droid,
    /// Anthropic's Claude Code.
    Claude,
    /// OpenAI's Codex CLI.
    Codex,
}

/// What registering would do.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Run droid with these arguments.
    Command {
        /// The droid program.
        program: PathBuf,
        /// Its arguments.
        args: Vec<String>,
    },
    /// Write this JSON file (the whole new content).
    Json {
        /// The file.
        path: PathBuf,
        /// Its new content.
        content: Value,
        /// It already has exactly this entry: nothing to write.
        unchanged: bool,
    },
    /// Append this text to a TOML file.
    TomlAppend {
        /// The file.
        path: PathBuf,
        /// The text appended.
        text: String,
        /// The table exists already: nothing to write.
        unchanged: bool,
    },
}

impl std::fmt::Display for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Plan::Command { program, args } => {
                write!(f, "run: {} {}", program.display(), args.join(" "))
            }
            Plan::Json {
                path, unchanged, ..
            } if *unchanged => write!(f, "{} already registers {SERVER_NAME}", path.display()),
            Plan::Json { path, content, .. } => write!(
                f,
                "write {}: mcpServers.{SERVER_NAME} = {}",
                path.display(),
                content["mcpServers"][SERVER_NAME]
            ),
            Plan::TomlAppend {
                path, unchanged, ..
            } if *unchanged => write!(
                f,
                "{} already has [mcp_servers.{SERVER_NAME}]",
                path.display()
            ),
            Plan::TomlAppend { path, text, .. } => {
                write!(f, "append to {}:\n{}", path.display(), text.trim_end())
            }
        }
    }
}

fn home(env: &EnvMap) -> Result<PathBuf, EngineError> {
    env.get("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| EngineError::Setting {
            name: "HOME".into(),
            message: "is not set; cannot find the client's configuration".into(),
        })
}

/// The largest client configuration read (`~/.claude.json` keeps per-project history and can
/// reach megabytes; a file past this, or `/dev/zero`, is refused rather than read without end).
const CLIENT_CONFIG_LIMIT: usize = 64 * 1024 * 1024;

fn read_optional(path: &Path) -> Result<Option<String>, EngineError> {
    let what = format!("the client configuration {}", path.display());
    match crate::input::read_input(
        crate::input::Input::Path(path),
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

/// What registering `program mcp` with `client` takes.
///
/// # Errors
/// [`EngineError::Setting`] without a HOME (or droid, for droid), [`EngineError::Config`] for a
/// client configuration file that cannot be parsed.
pub fn plan(
    client: McpClient,
    program: &Path,
    droid: Option<&Path>,
    env: &EnvMap,
) -> Result<Plan, EngineError> {
    let exe = program.display().to_string();
    match client {
        McpClient::Droid => {
            let droid = droid.ok_or_else(|| EngineError::Setting {
                name: "droid".into(),
                message: "droid was not found (droid-executor doctor)".into(),
            })?;
            Ok(Plan::Command {
                program: droid.to_path_buf(),
                args: vec![
                    "mcp".into(),
                    "add".into(),
                    SERVER_NAME.into(),
                    "--".into(),
                    exe,
                    "mcp".into(),
                ],
            })
        }
        McpClient::Claude => {
            let path = home(env)?.join(".claude.json");
            let mut content = match read_optional(&path)? {
                None => json!({}),
                Some(t) => serde_json::from_str::<Value>(&t).map_err(|e| EngineError::Config {
                    path: path.clone(),
                    message: e.to_string(),
                })?,
            };
            let entry = json!({"type": "stdio", "command": exe, "args": ["mcp"], "env": {}});
            let Some(root) = content.as_object_mut() else {
                return Err(EngineError::Config {
                    path,
                    message: "expected a JSON object".into(),
                });
            };
            let servers = root.entry("mcpServers").or_insert_with(|| json!({}));
            let Some(servers) = servers.as_object_mut() else {
                return Err(EngineError::Config {
                    path,
                    message: "mcpServers is not an object".into(),
                });
            };
            let unchanged = servers.get(SERVER_NAME) == Some(&entry);
            servers.insert(SERVER_NAME.into(), entry);
            Ok(Plan::Json {
                path,
                content,
                unchanged,
            })
        }
        McpClient::Codex => {
            let dir = env
                .get("CODEX_HOME")
                .filter(|h| !h.is_empty())
                .map_or_else(
                    || home(env).map(|h| h.join(".codex")),
                    |h| Ok(PathBuf::from(h)),
                )?;
            let path = dir.join("config.toml");
            let existing = read_optional(&path)?.unwrap_or_default();
            let table: toml::Table =
                toml::from_str(&existing).map_err(|e| EngineError::Config {
                    path: path.clone(),
                    message: e.to_string().trim().to_owned(),
                })?;
            let unchanged = table
                .get("mcp_servers")
                .and_then(|s| s.get(SERVER_NAME))
                .is_some();
            // a JSON string is a valid TOML basic string (same escapes)
            let quoted = |s: &str| Value::String(s.to_owned()).to_string();
            let text = format!(
                "{}[mcp_servers.{SERVER_NAME}]\ncommand = {}\nargs = [\"mcp\"]\n",
                if existing.is_empty() || existing.ends_with("\n\n") {
                    ""
                } else if existing.ends_with('\n') {
                    "\n"
                } else {
                    "\n\n"
                },
                quoted(&exe)
            );
            Ok(Plan::TomlAppend {
                path,
                text,
                unchanged,
            })
        }
    }
}

/// Carry out `plan`; what happened, in a sentence.
///
/// # Errors
/// [`EngineError::Io`] when a file cannot be written, [`EngineError::Spawn`] when droid cannot be
/// started, [`EngineError::Setting`] when droid refuses (its message included).
pub async fn apply(plan: &Plan, cfg: &EngineConfig) -> Result<String, EngineError> {
    match plan {
        Plan::Command { program, args } => {
            let spec = SpawnSpec {
                program: program.clone(),
                args: args.iter().map(Into::into).collect(),
                cwd: cfg.scratch_root.clone(),
                env: cfg.env.clone(),
                stdin_piped: false,
                detach_log: None,
            };
            let marker = format!("setup-{}", std::process::id());
            let out = capture(&spec, None, Duration::from_secs(60), 16 * 1024, &marker).await?;
            let stdout = out.stdout.text().trim().to_owned();
            let stderr = out.stderr.text().trim().to_owned();
            if out.code == Some(0) {
                Ok(stdout)
            } else if stderr.contains("already exists") || stdout.contains("already exists") {
                Ok(format!(
                    "droid already has an MCP server named {SERVER_NAME} (droid mcp remove {SERVER_NAME} to replace it): {}",
                    if stderr.is_empty() { stdout } else { stderr }
                ))
            } else {
                Err(EngineError::Setting {
                    name: "droid mcp add".into(),
                    message: format!("exit {:?}: {stderr} {stdout}", out.code),
                })
            }
        }
        Plan::Json {
            unchanged: true, ..
        }
        | Plan::TomlAppend {
            unchanged: true, ..
        } => Ok(format!("{plan}; nothing to do")),
        Plan::Json { path, content, .. } => {
            ensure_parent(path)?;
            let mut bytes = serde_json::to_vec_pretty(content)
                .map_err(|e| EngineError::io("encode", path)(std::io::Error::other(e)))?;
            bytes.push(b'\n');
            write_atomic(path, &bytes)?;
            Ok(format!("registered {SERVER_NAME} in {}", path.display()))
        }
        Plan::TomlAppend { path, text, .. } => {
            ensure_parent(path)?;
            let mut content = read_optional(path)?.unwrap_or_default();
            content.push_str(text);
            write_atomic(path, content.as_bytes())?;
            Ok(format!("registered {SERVER_NAME} in {}", path.display()))
        }
    }
}

fn ensure_parent(path: &Path) -> Result<(), EngineError> {
    match path.parent() {
        Some(dir) => std::fs::create_dir_all(dir).map_err(EngineError::io("create directory", dir)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_keep_what_is_there() {
        let home = std::env::temp_dir().join(format!("dx-setup-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        std::fs::create_dir_all(home.join(".codex")).unwrap();
        std::fs::write(
            home.join(".claude.json"),
            r#"{"theme": "dark", "mcpServers": {"other": {"command": "x"}}}"#,
        )
        .unwrap();
        std::fs::write(home.join(".codex/config.toml"), "model = \"o3\"\n").unwrap();
        let env: EnvMap = [("HOME".to_owned(), home.display().to_string())].into();
        let exe = Path::new("/opt/bin/droid-executor");
        let Plan::Json {
            content, unchanged, ..
        } = plan(McpClient::Claude, exe, None, &env).unwrap()
        else {
            panic!("claude is a JSON file")
        };
        assert!(!unchanged);
        assert_eq!(content["theme"], "dark");
        assert_eq!(content["mcpServers"]["other"]["command"], "x");
        assert_eq!(
            content["mcpServers"][SERVER_NAME],
            json!({"type": "stdio", "command": "/opt/bin/droid-executor", "args": ["mcp"], "env": {}})
        );
        let Plan::TomlAppend {
            text, unchanged, ..
        } = plan(McpClient::Codex, exe, None, &env).unwrap()
        else {
            panic!("codex is a TOML file")
        };
        assert!(!unchanged);
        assert_eq!(
            text,
            "\n[mcp_servers.droid-executor]\ncommand = \"/opt/bin/droid-executor\"\nargs = [\"mcp\"]\n"
        );
        std::fs::write(
            home.join(".codex/config.toml"),
            format!("model = \"o3\"\n{text}"),
        )
        .unwrap();
        let Plan::TomlAppend { unchanged, .. } = plan(McpClient::Codex, exe, None, &env).unwrap()
        else {
            panic!("codex is a TOML file")
        };
        assert!(unchanged);
        assert!(
            plan(McpClient::Droid, exe, None, &env).is_err(),
            "droid must be found"
        );
        std::fs::write(home.join(".claude.json"), "{oops").unwrap();
        assert!(matches!(
            plan(McpClient::Claude, exe, None, &env),
            Err(EngineError::Config { .. })
        ));
        std::fs::remove_dir_all(&home).unwrap();
    }
}
