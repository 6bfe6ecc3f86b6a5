//! What the server holds: the engine, the task store, the configuration it was started with, and
//! the output every message goes through.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use droid_exec::{Engine, EnvMap, Tasks};
use serde_json::Value;
use tokio::sync::mpsc;

/// Messages waiting for the writer: enough for bursts of progress, bounded so a client that stops
/// reading slows us down instead of growing memory.
pub const OUTBOX_CAPACITY: usize = 1024;

/// The single way out to the client: one writer task serializes every message.
#[derive(Debug, Clone)]
pub struct Outbox {
    tx: mpsc::Sender<Value>,
}

impl Outbox {
    /// An outbox and the receiver its writer drains.
    pub fn new() -> (Self, mpsc::Receiver<Value>) {
        let (tx, rx) = mpsc::channel(OUTBOX_CAPACITY);
        (Self { tx }, rx)
    }

    /// Queue `msg`; after the writer stopped (stdout closed) it is dropped.
    pub async fn send(&self, msg: Value) {
        let _ = self.tx.send(msg).await;
    }
}

/// The server's state, shared by every request.
#[derive(Debug)]
pub struct Server {
    engine: Engine,
    tasks: Option<Tasks>,
    env: EnvMap,
    config_path: Option<PathBuf>,
}

impl Server {
    /// A server over `engine`; `env` and `config_path` are what `droid_ping` checks.
    pub fn new(engine: Engine, env: EnvMap, config_path: Option<PathBuf>) -> Arc<Self> {
        let tasks = Tasks::open(engine.config()).ok();
        Arc::new(Self {
            engine,
            tasks,
            env,
            config_path,
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

    /// The config file.
    pub fn config_path(&self) -> Option<&Path> {
        self.config_path.as_deref()
    }
}
