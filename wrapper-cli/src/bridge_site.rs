//! Where a bridge of ours is and who may talk to it, for `serve` (the bridge itself) and its
//! clients (`bridge`, `run --via bridge`): its address, its bearer token, and its daemon record
//! in the task store.

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use bridge_http::Token;
use droid_exec::tasks::daemon::Daemon;
use droid_exec::{EngineConfig, EnvMap, Settings};

/// The daemon record of the bridge on `port`, in the task store.
pub(crate) fn daemon(cfg: &EngineConfig, port: u16) -> Option<Daemon> {
    cfg.store_dir
        .as_deref()
        .map(|dir| Daemon::new(dir, &format!("bridge-{port}")))
}

/// The token: `--token-file`, else `DROID_EXECUTOR_TOKEN`, else the `token_file` setting.
pub(crate) fn token(
    flag: Option<&PathBuf>,
    settings: &Settings,
    env: &EnvMap,
) -> anyhow::Result<Option<Token>> {
    if let Some(f) = flag {
        return Ok(Some(token_file(f)?));
    }
    if let Some(t) = env.get("DROID_EXECUTOR_TOKEN").filter(|t| !t.is_empty()) {
        return Ok(Some(Token::new(t)?));
    }
    match &settings.token_file {
        Some(f) => Ok(Some(token_file(f)?)),
        None => Ok(None),
    }
}

/// The token in `path`, with a warning on stderr when other users may read or replace the file
/// (the token is the only thing between them and droid running commands as this user).
fn token_file(path: &Path) -> anyhow::Result<Token> {
    let token = Token::from_file(path)?;
    let mode = std::fs::metadata(path).map_or(0, |m| m.permissions().mode() & 0o777);
    if mode & 0o077 != 0 {
        eprintln!(
            "droid-executor: warning: the token file {} is open to other users (mode {mode:04o}); \
             restrict it with `chmod 600 {}`",
            path.display(),
            path.display()
        );
    }
    Ok(token)
}

/// `host:port` as a socket address (a name such as `localhost` is resolved).
pub(crate) async fn address(host: &str, port: u16) -> anyhow::Result<SocketAddr> {
    droid_exec::bind_address::resolve(host, port)
        .await
        .map_err(anyhow::Error::msg)
}
