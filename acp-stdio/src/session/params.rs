//! What `session/new`, `session/load` and `session/resume` carry, checked: the working
//! directory, the client's MCP servers (stdio ones passed to droid, the names of the others
//! kept to say so) and the session's verification commands (`_meta.droidExecutor.verify`).

use std::path::PathBuf;

use droid_contract::ShellCommand;
use droid_exec::session::McpServer;
use serde_json::Value;

use crate::jsonrpc::RpcError;

/// Verification commands a session may carry.
const MAX_VERIFY: usize = 16;
/// MCP servers a session may be given.
const MAX_MCP_SERVERS: usize = 32;

/// The string parameter `key`, required.
pub(super) fn str_param<'a>(params: &'a Value, key: &str) -> Result<&'a str, RpcError> {
    params
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params(format!("{key} (a string) is required")))
}

/// A session's parameters (`session/new`'s, and those `session/load` and `session/resume` share).
pub(super) struct NewParams {
    /// The working directory, absolute.
    pub(super) cwd: PathBuf,
    /// The session's verification commands, run after a turn that changed something.
    pub(super) verify: Vec<ShellCommand>,
    /// The client's stdio MCP servers, given to droid for this session only.
    pub(super) mcp_servers: Vec<McpServer>,
    /// The names of its `http` and `sse` servers: not passed (`mcpCapabilities` says we take
    /// neither); the answer names them in `_meta`.
    pub(super) not_passed: Vec<String>,
}

/// One of `session/new`'s `mcpServers`: a stdio server (`{name, command, args, env: [{name,
/// value}]}`, no `type`), or the name of an `http`/`sse` one.
fn mcp_server(i: usize, s: &Value) -> Result<Result<McpServer, String>, RpcError> {
    let field = |k: &str| format!("mcpServers[{i}].{k}");
    let name = s
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            RpcError::invalid_params(format!("{} (a string) is required", field("name")))
        })?;
    match s.get("type").and_then(Value::as_str) {
        None | Some("stdio") => {}
        Some(_) => return Ok(Err(name.to_owned())),
    }
    let command = s
        .get("command")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
        .ok_or_else(|| {
            RpcError::invalid_params(format!("{} (a string) is required", field("command")))
        })?;
    let args = match s.get("args") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| x.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                RpcError::invalid_params(format!("{} must hold strings", field("args")))
            })?,
        Some(_) => {
            return Err(RpcError::invalid_params(format!(
                "{} must be an array",
                field("args")
            )));
        }
    };
    let env = match s.get("env") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(vars)) => vars
            .iter()
            .map(|v| {
                Some((
                    v.get("name")?.as_str()?.to_owned(),
                    v.get("value")?.as_str()?.to_owned(),
                ))
            })
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                RpcError::invalid_params(format!(
                    "{} must be an array of {{name, value}} strings",
                    field("env")
                ))
            })?,
        Some(_) => {
            return Err(RpcError::invalid_params(format!(
                "{} must be an array",
                field("env")
            )));
        }
    };
    Ok(Ok(McpServer {
        name: name.to_owned(),
        command: command.to_owned(),
        args,
        env,
    }))
}

/// `params` as a session's parameters, or the error saying what is wrong with them.
pub(super) fn new_params(params: &Value) -> Result<NewParams, RpcError> {
    let cwd = PathBuf::from(str_param(params, "cwd")?);
    if !cwd.is_absolute() {
        return Err(RpcError::invalid_params(format!(
            "cwd {cwd:?} must be an absolute path"
        )));
    }
    let (mut mcp_servers, mut not_passed) = (Vec::new(), Vec::new());
    match params.get("mcpServers") {
        Some(Value::Array(servers)) => {
            if servers.len() > MAX_MCP_SERVERS {
                return Err(RpcError::invalid_params(format!(
                    "mcpServers has {} servers; at most {MAX_MCP_SERVERS}",
                    servers.len()
                )));
            }
            for (i, s) in servers.iter().enumerate() {
                match mcp_server(i, s)? {
                    Ok(server) => mcp_servers.push(server),
                    Err(name) => not_passed.push(name),
                }
            }
        }
        Some(_) => return Err(RpcError::invalid_params("mcpServers must be an array")),
        None => {
            return Err(RpcError::invalid_params(
                "mcpServers is required (an array, possibly empty)",
            ));
        }
    }
    let verify = match params.pointer("/_meta/droidExecutor/verify") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(cmds)) => {
            if cmds.len() > MAX_VERIFY {
                return Err(RpcError::invalid_params(format!(
                    "_meta.droidExecutor.verify has {} commands; at most {MAX_VERIFY}",
                    cmds.len()
                )));
            }
            cmds.iter()
                .enumerate()
                .map(|(i, c)| {
                    c.as_str()
                        .ok_or_else(|| "is not a string".to_owned())
                        .and_then(|s| ShellCommand::try_from(s.to_owned()))
                        .map_err(|why| {
                            RpcError::invalid_params(format!(
                                "_meta.droidExecutor.verify[{i}] {why}"
                            ))
                        })
                })
                .collect::<Result<_, _>>()?
        }
        Some(_) => {
            return Err(RpcError::invalid_params(
                "_meta.droidExecutor.verify must be an array of shell commands",
            ));
        }
    };
    Ok(NewParams {
        cwd,
        verify,
        mcp_servers,
        not_passed,
    })
}
