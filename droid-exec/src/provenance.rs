//! Where each setting's effective value came from (`droid-executor config show`): the
//! environment (which variable), the config file, or the default. The value itself is the one
//! [`Settings::load`] produced, so what is shown is what every front-end uses.

use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use crate::config::{EnvMap, Settings, default_store_dir, root_list, var};
use crate::error::EngineError;

pub use crate::config::env_names;

/// One setting as `config show` prints it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sourced {
    /// The key, as written in config.toml.
    pub key: &'static str,
    /// The effective value.
    pub value: Value,
    /// What supplied the value: `env NAME`, `file`, `default`; `allowed_roots` says `default
    /// (HOME)` and names a file list or variable that was ignored because it names no directory.
    pub source: String,
}

/// Every setting, its effective value and its source, for the config file at `path` (which may
/// be absent) and the environment `env`.
///
/// # Errors
/// As [`Settings::load`] (an invalid file or variable), with line and column for a file.
pub fn sources(path: Option<&Path>, env: &EnvMap) -> Result<Vec<Sourced>, EngineError> {
    let settings = Settings::load(path, env)?;
    let file: toml::Table = path
        .and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|t| t.parse::<toml::Table>().ok())
        .unwrap_or_default();
    let values = serde_json::to_value(&settings).map_err(|e| EngineError::Setting {
        name: "settings".into(),
        message: e.to_string(),
    })?;
    let mut out = Vec::new();
    for (key, vars) in &env_names() {
        // the same rule as `Settings::load`: a variable set to "" counts as unset
        let from_env = vars.iter().rev().find(|v| var(env, v).is_some());
        let source = match from_env {
            _ if *key == "allowed_roots" => roots_source(file.get(*key), env, &settings),
            Some(v) => format!("env {v}"),
            None if file.contains_key(*key) => "file".to_owned(),
            None if *key == "store_dir" => "default (XDG_STATE_HOME or HOME)".to_owned(),
            None => "default".to_owned(),
        };
        let mut value = values.get(*key).cloned().unwrap_or(Value::Null);
        if *key == "store_dir" && value.is_null() {
            // the store every front-end will use
            value = default_store_dir(env).map_or(Value::Null, |d| d.display().to_string().into());
        }
        out.push(Sourced { key, value, source });
    }
    Ok(out)
}

/// Where `allowed_roots` came from. A list that names no directory (`[]` in the file,
/// `DROID_EXECUTOR_ALLOWED_ROOTS=":"`) is ignored by [`Settings::load`] (an empty list would
/// allow every path), so the label names what did supply the value and what was ignored.
fn roots_source(in_file: Option<&toml::Value>, env: &EnvMap, settings: &Settings) -> String {
    const VAR: &str = "DROID_EXECUTOR_ALLOWED_ROOTS";
    let mut ignored = Vec::new();
    if let Some(v) = var(env, VAR) {
        if !root_list(v).is_empty() {
            return format!("env {VAR}");
        }
        ignored.push(format!("{VAR}={v:?} names no directory: ignored"));
    }
    if let Some(list) = in_file {
        let names_one = list
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x.as_str().is_some_and(|s| !s.is_empty())));
        if names_one {
            return with_notes("file", &ignored);
        }
        ignored.push("the file's list names no directory: ignored".to_owned());
    }
    let base = if settings.allowed_roots.is_empty() {
        "default (none: HOME unset, any directory may be a repo_root"
    } else {
        "default (HOME"
    };
    let mut out = base.to_owned();
    for note in &ignored {
        out.push_str("; ");
        out.push_str(note);
    }
    out.push(')');
    out
}

/// `label (note; note)`, or `label` alone.
fn with_notes(label: &str, notes: &[String]) -> String {
    if notes.is_empty() {
        label.to_owned()
    } else {
        format!("{label} ({})", notes.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_has_a_row_and_sources_follow_precedence() {
        let keys: Vec<String> = serde_json::to_value(Settings::default())
            .unwrap()
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        let listed: Vec<&str> = env_names().iter().map(|(k, _)| *k).collect();
        for k in &keys {
            assert!(listed.contains(&k.as_str()), "{k} missing from env_names()");
        }
        assert_eq!(keys.len(), listed.len());

        let dir = std::env::temp_dir().join(format!("dx-prov-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("config.toml");
        std::fs::write(&file, "port = 1234\nverify = false\n").unwrap();
        let env: EnvMap = [("HOME", "/home/u"), ("PORT", "9"), ("DROID_TIMEOUT", "45")]
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let rows = sources(Some(&file), &env).unwrap();
        let row = |k: &str| rows.iter().find(|r| r.key == k).unwrap().clone();
        assert_eq!(row("port").value, serde_json::json!(9));
        assert_eq!(row("port").source, "env PORT");
        assert_eq!(row("verify").source, "file");
        assert_eq!(row("verify").value, serde_json::json!(false));
        assert_eq!(row("default_timeout").source, "env DROID_TIMEOUT");
        assert_eq!(row("max_queue").source, "default");
        assert_eq!(row("allowed_roots").source, "default (HOME)");

        // a list that names no directory is ignored, and the label says so
        std::fs::write(&file, "allowed_roots = []\n").unwrap();
        let rows = sources(Some(&file), &env).unwrap();
        let roots = rows.iter().find(|r| r.key == "allowed_roots").unwrap();
        assert_eq!(roots.value, serde_json::json!(["/home/u"]));
        assert_eq!(
            roots.source,
            "default (HOME; the file's list names no directory: ignored)"
        );
        let mut colon = env.clone();
        colon.insert("DROID_EXECUTOR_ALLOWED_ROOTS".into(), ":".into());
        let rows = sources(Some(&file), &colon).unwrap();
        let roots = rows.iter().find(|r| r.key == "allowed_roots").unwrap();
        assert_eq!(
            roots.source,
            "default (HOME; DROID_EXECUTOR_ALLOWED_ROOTS=\":\" names no directory: ignored; \
             the file's list names no directory: ignored)"
        );
        std::fs::write(&file, "allowed_roots = [\"/srv\"]\n").unwrap();
        let rows = sources(Some(&file), &colon).unwrap();
        let roots = rows.iter().find(|r| r.key == "allowed_roots").unwrap();
        assert_eq!(roots.value, serde_json::json!(["/srv"]));
        assert_eq!(
            roots.source,
            "file (DROID_EXECUTOR_ALLOWED_ROOTS=\":\" names no directory: ignored)"
        );
        let no_home: EnvMap = EnvMap::new();
        let rows = sources(None, &no_home).unwrap();
        let roots = rows.iter().find(|r| r.key == "allowed_roots").unwrap();
        assert_eq!(roots.value, serde_json::json!([]));
        assert_eq!(
            roots.source,
            "default (none: HOME unset, any directory may be a repo_root)"
        );
        std::fs::write(&file, "port = [\n").unwrap();
        let err = sources(Some(&file), &env).unwrap_err().to_string();
        assert!(err.contains("line 1"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
