//! The soak's throw-away world: one temp directory with a HOME per server (so each has its own
//! config, task store and run slots), and in each HOME two git repositories per client, one
//! whose fake droid completes after a few milliseconds and one whose fake droid hangs until it
//! is stopped.
//!
//! The fake droid reads its scenario from `FAKE_DROID_SCENARIO`, one per process, and the
//! engine starts droid in `repo_root`. So the servers get the relative path
//! [`SCENARIO_FILE`] (passed through to droid by the config's `env_passthrough`) and every
//! repository holds its own committed scenario there: which repository a request names picks
//! what droid does. The hanging scenario first writes [`STARTED_FILE`] (under `.git`, so the
//! repository's snapshot does not see it): a client that must stop a *running* run waits for
//! that file.
//!
//! Dropping the world kills, by pid, every process still running with one of its HOMEs (the
//! servers' background supervisors and droids, should any be left) and removes the directory.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};
use serde_json::{Value, json};

use crate::procfs::{self, Found};
use crate::sh::git_commit_all;

/// The scenario's path, relative to the repository droid runs in.
pub(crate) const SCENARIO_FILE: &str = "fake-droid-scenario.json";
/// The file a hanging fake droid writes when it starts, relative to its repository.
pub(crate) const STARTED_FILE: &str = ".git/soak-droid-started";
/// The variable the engine marks every process of a run with (`droid_exec::process::sweep::MARKER_VAR`;
/// xtask does not depend on the engine).
pub(crate) const MARKER_VAR: &str = "DROID_EXECUTOR_RUN_ID";
/// Run slots of each server (the default, stated so the soak does not depend on it).
pub(crate) const MAX_CONCURRENT: usize = 4;

/// A server's HOME with its repositories.
pub(crate) struct Home {
    /// The HOME directory (canonical).
    pub(crate) path: PathBuf,
    quick: Vec<PathBuf>,
    hang: Vec<PathBuf>,
}

impl Home {
    fn new(path: &Path, clients: usize) -> Result<Self> {
        let config = path.join(".config/droid-executor");
        std::fs::create_dir_all(&config)?;
        std::fs::write(
            config.join("config.toml"),
            "env_passthrough = [\"FAKE_DROID_SCENARIO\"]\n",
        )?;
        let path = std::fs::canonicalize(path)?;
        let quick_steps = json!([{"sleep_ms": 5}, {"completion": "Done."}]);
        let hang_steps = json!([
            {"write_file": {"path": STARTED_FILE, "content": "started\n"}},
            {"hang": true}
        ]);
        let mut me = Self {
            path,
            quick: Vec::new(),
            hang: Vec::new(),
        };
        for client in 0..clients {
            me.quick
                .push(repo(&me.path, &format!("quick-{client:02}"), &quick_steps)?);
            me.hang
                .push(repo(&me.path, &format!("hang-{client:02}"), &hang_steps)?);
        }
        Ok(me)
    }

    /// A request for client `client`'s quick or hanging repository.
    pub(crate) fn request(&self, client: usize, hang: bool) -> Value {
        let repo = self.repo(client, hang);
        json!({
            "objective": "Look around the repository and report what it holds",
            "context": {"repo_root": repo.display().to_string()},
        })
    }

    /// Client `client`'s quick or hanging repository.
    pub(crate) fn repo(&self, client: usize, hang: bool) -> &Path {
        let repos = if hang { &self.hang } else { &self.quick };
        &repos[client % repos.len()]
    }

    /// Where the hanging fake droid of client `client` says it started.
    pub(crate) fn started_file(&self, client: usize) -> PathBuf {
        self.repo(client, true).join(STARTED_FILE)
    }

    /// Live processes running with this HOME, except `servers`.
    pub(crate) fn processes(&self, servers: &[u32]) -> Vec<Found> {
        let entry = format!("HOME={}", self.path.display());
        procfs::with_env(&entry, MARKER_VAR)
            .into_iter()
            .filter(|f| !servers.contains(&f.pid))
            .collect()
    }
}

/// A committed git repository `name` under `home` whose fake droid plays `steps`.
fn repo(home: &Path, name: &str, steps: &Value) -> Result<PathBuf> {
    let repo = home.join(name);
    std::fs::create_dir_all(&repo)?;
    std::fs::write(repo.join("notes.txt"), "notes\n")?;
    std::fs::write(
        repo.join(SCENARIO_FILE),
        json!({ "steps": steps }).to_string(),
    )?;
    git_commit_all(&repo, "soak repository")?;
    Ok(repo)
}

/// The temp directory, the two HOMEs and the fake droid.
pub(crate) struct World {
    dir: PathBuf,
    fake_droid: PathBuf,
    /// The bridge's HOME.
    pub(crate) bridge: Home,
    /// The MCP server's HOME.
    pub(crate) mcp: Home,
}

impl World {
    /// Lay out the world for `bridge_clients` and `mcp_clients`; `bins` holds `fake-droid`.
    pub(crate) fn new(bins: &Path, bridge_clients: usize, mcp_clients: usize) -> Result<Self> {
        let dir = std::env::temp_dir().join(format!("droid-executor-soak-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        // from here on, Drop removes what was made even if a later step fails
        let mut world = Self {
            bridge: Home::empty(),
            mcp: Home::empty(),
            fake_droid: bins.join("fake-droid"),
            dir,
        };
        world.bridge = Home::new(&world.dir.join("bridge-home"), bridge_clients)?;
        world.mcp = Home::new(&world.dir.join("mcp-home"), mcp_clients)?;
        Ok(world)
    }

    /// A log file's path in the world.
    pub(crate) fn log(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// `program` with exactly the environment a server of `home` gets: HOME (config, store and
    /// allowed root derive from it), PATH, LANG, the fake droid and the relative scenario path.
    pub(crate) fn command(&self, home: &Home, program: &Path) -> Command {
        let mut c = Command::new(program);
        c.env_clear()
            .env("HOME", &home.path)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("LANG", "C.UTF-8")
            .env("DROID_CLI_CMD", &self.fake_droid)
            .env("FAKE_DROID_SCENARIO", SCENARIO_FILE)
            .env("DROID_EXECUTOR_MAX_CONCURRENT", MAX_CONCURRENT.to_string())
            .current_dir(&home.path);
        c
    }
}

impl Home {
    /// A placeholder until [`Home::new`] has laid the real one out.
    fn empty() -> Self {
        Self {
            path: PathBuf::new(),
            quick: Vec::new(),
            hang: Vec::new(),
        }
    }
}

/// SIGKILL `pids` (processes this soak started, directly or through a server).
pub(crate) fn kill(pids: &[u32]) {
    if pids.is_empty() {
        return;
    }
    let _ = Command::new("kill")
        .arg("-KILL")
        .args(pids.iter().map(u32::to_string))
        .stderr(std::process::Stdio::null())
        .status();
}

impl Drop for World {
    fn drop(&mut self) {
        for home in [&self.bridge, &self.mcp] {
            if home.path.as_os_str().is_empty() {
                continue;
            }
            let left: Vec<u32> = home.processes(&[]).iter().map(|f| f.pid).collect();
            kill(&left);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
