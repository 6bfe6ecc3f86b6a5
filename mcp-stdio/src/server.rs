//! What the server holds: the engine, the task store, the configuration it was started with, the
//! tasks this session submitted (what a pend or cancel without a task id means), and the output
//! every message goes through.
//!
//! The output is one bounded queue drained by one writer ([`crate::outbox`]).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use droid_contract::ProviderId;
use droid_exec::toolset::Toolsets;
use droid_exec::{Engine, EnvMap, Settings, TaskKey, Tasks};

use crate::catalog::Catalog;
pub use crate::outbox::{Inbox, OUTBOX_CAPACITY, Outbox};

/// The tasks this session submitted, as far as a pend or cancel without a task id needs them:
/// the latest of each provider, the latest last (at most one entry per provider, so it never
/// grows). The store is shared by every client of the machine; what a call without a task id
/// means must be this session's own task, never another client's (issue 29, item 13).
#[derive(Debug, Default)]
struct OwnTasks(Vec<TaskKey>);

impl OwnTasks {
    fn remember(&mut self, key: &TaskKey) {
        self.0.retain(|k| k.provider() != key.provider());
        self.0.push(key.clone());
    }

    fn latest(&self, provider: Option<ProviderId>) -> Option<&TaskKey> {
        self.0
            .iter()
            .rev()
            .find(|k| provider.is_none_or(|p| k.provider() == p))
    }
}

/// The server's state, shared by every request.
#[derive(Debug)]
pub struct Server {
    /// Shared by the sessions of one front-end ([`Server::fork`]) and, in the bridge, with its
    /// routes.
    engine: Arc<Engine>,
    tasks: Option<Tasks>,
    env: EnvMap,
    config_path: Option<PathBuf>,
    catalog: Catalog,
    /// Never locked across an `.await`.
    own: Mutex<OwnTasks>,
}

impl Server {
    /// A server over `engine`; `env` and `config_path` are what `droid_ping` checks. Background
    /// tasks run with the engine's configuration.
    pub fn new(engine: Engine, env: EnvMap, config_path: Option<PathBuf>) -> Arc<Self> {
        let task_config = engine.config().clone();
        Self::with_task_config(engine, &task_config, env, config_path)
    }

    /// [`Server::new`], with background tasks run under `task_config` instead: their supervisors
    /// outlive the server, so what bounds the server's own shutdown (a short kill grace for
    /// droid) need not apply to them.
    pub fn with_task_config(
        engine: Engine,
        task_config: &droid_exec::EngineConfig,
        env: EnvMap,
        config_path: Option<PathBuf>,
    ) -> Arc<Self> {
        Self::with_toolsets(engine, task_config, env, config_path, None)
    }

    /// [`Server::with_task_config`], offering `toolsets` (`mcp --toolsets`) instead of the
    /// setting `toolsets` when given. The engine may be one the front-end shares (the bridge's).
    pub fn with_toolsets(
        engine: impl Into<Arc<Engine>>,
        task_config: &droid_exec::EngineConfig,
        env: EnvMap,
        config_path: Option<PathBuf>,
        toolsets: Option<Toolsets>,
    ) -> Arc<Self> {
        let tasks = Tasks::open(task_config).ok();
        // the tools offered: the settings `toolsets` and `providers` of the same file and
        // environment the front-end loaded (it refused them already if they were invalid)
        let settings = Settings::load(config_path.as_deref(), &env).ok();
        let defaults = Catalog::default();
        let catalog = Catalog {
            toolsets: toolsets
                .or_else(|| settings.as_ref().map(|s| s.toolsets.clone()))
                .unwrap_or(defaults.toolsets),
            providers: settings.map_or(defaults.providers, |s| s.providers),
        };
        Arc::new(Self {
            engine: engine.into(),
            tasks,
            env,
            config_path,
            catalog,
            own: Mutex::new(OwnTasks::default()),
        })
    }

    /// A server for another session of the same front-end: the same engine, task store,
    /// environment and tools, and no task of its own yet (what a pend or cancel without a task
    /// id means is per session: [`Server::own_latest`]).
    pub fn fork(&self) -> Arc<Self> {
        Arc::new(Self {
            engine: Arc::clone(&self.engine),
            tasks: self.tasks.clone(),
            env: self.env.clone(),
            config_path: self.config_path.clone(),
            catalog: self.catalog.clone(),
            own: Mutex::new(OwnTasks::default()),
        })
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The background tasks, when a store is configured.
    pub fn tasks(&self) -> Option<&Tasks> {
        self.tasks.as_ref()
    }

    /// The environment the server was started with.
    pub fn env(&self) -> &EnvMap {
        &self.env
    }

    /// The providers the delegation tools delegate to (setting `providers`).
    pub fn providers(&self) -> &[ProviderId] {
        &self.catalog.providers
    }

    /// The tools this server lists and answers: its toolsets and providers.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// The config file.
    pub fn config_path(&self) -> Option<&Path> {
        self.config_path.as_deref()
    }

    /// Remember that this session (this server: one client's connection) submitted task `key`
    /// (`droid_submit`, `ask_<p>`, a task-augmented call, a cut result kept in the store).
    pub fn remember(&self, key: &TaskKey) {
        self.own
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remember(key);
    }

    /// The id of the latest task this session submitted (of `provider`, when given): what
    /// `droid_pend`, `pend`, `cancel`, `pend_<p>` and `cancel_<p>` mean without a task id. Another client's tasks
    /// are never taken for it: those only their id reaches.
    pub fn own_latest(&self, provider: Option<ProviderId>) -> Option<String> {
        self.own
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .latest(provider)
            .map(|k| k.as_str().to_owned())
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;
    use tokio_util::sync::CancellationToken;

    use super::*;

    #[test]
    fn a_sessions_latest_task_is_its_own_latest_submission() {
        let key = |id: &str| TaskKey::parse(id).unwrap();
        let mut own = OwnTasks::default();
        assert_eq!(own.latest(None), None);
        own.remember(&key("droid-1700000000-0001"));
        own.remember(&key("codex-1700000001-0002"));
        own.remember(&key("droid-1700000002-0003"));
        assert_eq!(own.latest(None), Some(&key("droid-1700000002-0003")));
        assert_eq!(
            own.latest(Some(ProviderId::Droid)),
            Some(&key("droid-1700000002-0003"))
        );
        assert_eq!(
            own.latest(Some(ProviderId::Codex)),
            Some(&key("codex-1700000001-0002"))
        );
        assert_eq!(own.latest(Some(ProviderId::Gemini)), None);
        // one entry per provider: a long session's memory stays this small
        for n in 0..1000 {
            own.remember(&key(&format!("droid-{}-{:04x}", 1_700_000_100 + n, n)));
        }
        assert_eq!(own.0.len(), 2);
        assert_eq!(
            own.latest(Some(ProviderId::Codex)),
            Some(&key("codex-1700000001-0002"))
        );
    }

    #[tokio::test]
    async fn a_cancelled_requests_queued_messages_are_never_written() {
        let (out, mut inbox) = Outbox::new();
        let token = CancellationToken::new();
        let call = out.guarded(token.clone());
        call.send(json!({"n": 1})).await;
        out.send(json!({"n": 2})).await;
        call.send(json!({"n": 3})).await;
        token.cancel();
        call.send(json!({"n": 4})).await;
        out.send(json!({"n": 5})).await;
        assert!(call.withdrawn());
        drop((out, call));
        let mut got = Vec::new();
        while let Some(m) = inbox.recv().await {
            got.push(m["n"].clone());
        }
        // 1 and 3 were queued before the cancel and still not written
        assert_eq!(got, vec![json!(2), json!(5)]);
    }
}
