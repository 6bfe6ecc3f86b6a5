//! What every subcommand starts from, built once by `main` before dispatch: the process
//! environment as a map (the engine never reads the environment itself), the global
//! `--config`, and, on first use, the settings and the engine configuration they give. Built
//! lazily because some commands must run with a broken config file (`doctor` reports it,
//! `config show` names its line, `setup skill` installs anyway); a command that needs the
//! settings reports their error in its own words.
//!
//! Below every subcommand: it imports no other module of this crate.

use std::path::PathBuf;
use std::sync::OnceLock;

use droid_exec::{EngineConfig, EnvMap, Settings};

/// The command line's context: see the module docs.
pub(crate) struct Context {
    /// `--config FILE`, as given.
    config: Option<PathBuf>,
    env: EnvMap,
    /// Loaded on first use; reset when the environment changes.
    settings: OnceLock<anyhow::Result<Settings>>,
    /// Built from the settings on first use; reset with them.
    engine: OnceLock<EngineConfig>,
}

impl Context {
    /// The context of this process: its environment, and `--config`.
    pub(crate) fn of_process(config: Option<PathBuf>) -> Self {
        Self::new(config, env_map())
    }

    pub(crate) fn new(config: Option<PathBuf>, env: EnvMap) -> Self {
        Self {
            config,
            env,
            settings: OnceLock::new(),
            engine: OnceLock::new(),
        }
    }

    /// `--config FILE` as the user gave it.
    pub(crate) fn config_arg(&self) -> Option<&PathBuf> {
        self.config.as_ref()
    }

    /// The config file read: `--config`, else the default path (none without `HOME` and
    /// `XDG_CONFIG_HOME`).
    pub(crate) fn config_path(&self) -> Option<PathBuf> {
        self.config
            .clone()
            .or_else(|| droid_exec::config::default_config_path(&self.env))
    }

    pub(crate) fn env(&self) -> &EnvMap {
        &self.env
    }

    /// The environment, to change before the settings are read (`mcp` marks its client);
    /// settings and engine configuration already built are dropped, to be built again from it.
    pub(crate) fn env_mut(&mut self) -> &mut EnvMap {
        self.settings = OnceLock::new();
        self.engine = OnceLock::new();
        &mut self.env
    }

    /// A config file named with `--config` must exist (the default one may be absent:
    /// defaults).
    pub(crate) fn check_named_config(&self) -> anyhow::Result<()> {
        match &self.config {
            Some(p) if !p.exists() => anyhow::bail!(
                "the config file {} does not exist (--config names a file to read; without it \
                 the default path is used)",
                p.display()
            ),
            _ => Ok(()),
        }
    }

    /// The settings from `--config` or the default path, and the environment.
    ///
    /// # Errors
    /// A named config file that does not exist, an unreadable or invalid file, an invalid
    /// environment value (the same error at each call).
    pub(crate) fn settings(&self) -> anyhow::Result<&Settings> {
        let loaded = self.settings.get_or_init(|| {
            self.check_named_config()?;
            Ok(Settings::load(self.config_path().as_deref(), &self.env)?)
        });
        // the error is kept for the next caller; each gets its words, its chain included
        loaded.as_ref().map_err(|e| anyhow::anyhow!("{e:#}"))
    }

    /// The engine configuration of this process: the settings, the environment, and this
    /// executable as the supervisor of background tasks.
    ///
    /// # Errors
    /// Those of [`Context::settings`].
    pub(crate) fn engine_config(&self) -> anyhow::Result<&EngineConfig> {
        let settings = self.settings()?;
        Ok(self.engine.get_or_init(|| {
            let mut cfg = settings.engine_config(&self.env);
            cfg.supervisor = std::env::current_exe().ok();
            cfg
        }))
    }
}

/// The process environment as a map (variables that are not UTF-8 are left out).
fn env_map() -> EnvMap {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> EnvMap {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_missing_named_config_is_an_error_at_every_call() {
        let ctx = Context::new(
            Some(PathBuf::from("/nonexistent/droid-executor.toml")),
            env(&[]),
        );
        for _ in 0..2 {
            let e = ctx.settings().err().map(|e| format!("{e:#}"));
            assert_eq!(
                e.as_deref(),
                Some(
                    "the config file /nonexistent/droid-executor.toml does not exist (--config \
                     names a file to read; without it the default path is used)"
                )
            );
        }
        assert!(ctx.engine_config().is_err());
    }

    #[test]
    fn a_changed_environment_is_read_again() {
        let mut ctx = Context::new(None, env(&[("PORT", "1234")]));
        assert_eq!(ctx.settings().map(|s| s.port).ok(), Some(1234));
        ctx.env_mut().insert("PORT".into(), "4321".into());
        assert_eq!(ctx.settings().map(|s| s.port).ok(), Some(4321));
    }
}
