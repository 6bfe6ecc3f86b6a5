//! droid's own models (BYOK: a key of the user's, or a local server), as droid 0.225.2 reads them
//! from `customModels` in `~/.factory/settings.json`, and the ids to pass it. Measured with the
//! real droid, whose `Invalid model` message lists the ids it knows:
//! - `~/.factory/settings.local.json`, when it parses and has a `customModels` key, replaces the
//!   list of `settings.json` (an empty list there means none); a file that does not parse as
//!   JSON (a comment, a trailing comma) is ignored as a whole;
//! - an entry without a string `model`, `baseUrl` or `provider` is skipped; one `provider` droid
//!   does not know (it knows `openai`, `anthropic`, `generic-chat-completion-api`) makes it
//!   ignore every entry;
//! - the id is `custom:<name>-<n>`: `<name>` is the `displayName` (the `model` when there is
//!   none), trimmed, each run of white space replaced by `-` (`"My Model"` is `My-Model`);
//!   `<n>` counts the earlier entries with the same `<name>` (`My Model` and `My-Model` are
//!   `custom:My-Model-0` and `custom:My-Model-1`). Matching is case-sensitive;
//! - under `FACTORY_AIRGAP_ENABLED=1` (or `true`), a run given no model uses the first one,
//!   though its `init` event names droid's built-in default.

use std::io::Read as _;
use std::path::Path;

use serde_json::Value;

/// Bytes of a settings file read, at most.
pub(crate) const SETTINGS_MAX: u64 = 1 << 20;

/// The providers droid 0.225.2 accepts in a custom model.
pub(crate) const KNOWN_PROVIDERS: &[&str] = &["openai", "anthropic", "generic-chat-completion-api"];

/// One custom model droid offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CustomModel {
    /// The id to pass as the model (`custom:Mock-0`).
    pub(crate) id: String,
    /// Its `model` (what droid sends to the endpoint).
    pub(crate) model: String,
}

/// What droid makes of a HOME's settings.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct CustomModels {
    /// The models, in droid's order (the first is airgap's default).
    pub(crate) models: Vec<CustomModel>,
    /// The file they come from (`~/.factory/settings.json` or `settings.local.json`).
    pub(crate) file: &'static str,
    /// What droid skips or refuses in it, each said for a person.
    pub(crate) notes: Vec<String>,
}

impl CustomModels {
    /// The ids, in droid's order.
    pub(crate) fn ids(&self) -> Vec<&str> {
        self.models.iter().map(|m| m.id.as_str()).collect()
    }

    /// Whether droid knows `model` as one of these (its id, or the bare `model` value, with or
    /// without `custom:`, which droid also accepts).
    pub(crate) fn knows(&self, model: &str) -> bool {
        let bare = model.strip_prefix("custom:").unwrap_or(model);
        self.models
            .iter()
            .any(|m| m.id == model || m.model == model || m.model == bare)
    }
}

/// Whether droid's airgap mode is on in an environment with this `FACTORY_AIRGAP_ENABLED`
/// (`1` and `true` turn it on; `0`, `false`, `yes` and empty do not: measured).
pub(crate) fn airgap(value: Option<&str>) -> bool {
    matches!(value, Some("1" | "true"))
}

/// The custom models droid finds under `home`.
pub(crate) fn read(home: &Path) -> CustomModels {
    let dir = home.join(".factory");
    let local = read_json(&dir.join("settings.local.json"));
    if let Some(list) = local.as_ref().and_then(|v| v.get("customModels")) {
        return from_list(list, "~/.factory/settings.local.json");
    }
    let file = "~/.factory/settings.json";
    match std::fs::metadata(dir.join("settings.json")) {
        Err(_) => CustomModels {
            file,
            ..CustomModels::default()
        },
        Ok(_) => match read_json(&dir.join("settings.json")) {
            Some(v) => v
                .get("customModels")
                .map_or_else(|| from_list(&Value::Null, file), |l| from_list(l, file)),
            None => CustomModels {
                file,
                notes: vec![format!(
                    "{file} is not plain JSON (droid reads none of it: no comments, no trailing \
                     commas) or is larger than {} KiB",
                    SETTINGS_MAX / 1024
                )],
                ..CustomModels::default()
            },
        },
    }
}

/// The file as JSON: a regular file (a FIFO is not waited on) of at most [`SETTINGS_MAX`] bytes.
fn read_json(path: &Path) -> Option<Value> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = Vec::new();
    file.take(SETTINGS_MAX + 1).read_to_end(&mut text).ok()?;
    if text.len() as u64 > SETTINGS_MAX {
        return None;
    }
    serde_json::from_slice(&text).ok()
}

/// The models of a `customModels` value, by droid's rules (see the module docs).
pub(crate) fn from_list(list: &Value, file: &'static str) -> CustomModels {
    let mut out = CustomModels {
        file,
        ..CustomModels::default()
    };
    let Some(entries) = list.as_array() else {
        if !list.is_null() {
            out.notes.push(format!(
                "customModels in {file} is not a list: droid ignores it"
            ));
        }
        return out;
    };
    let mut names: Vec<String> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let field = |k: &str| e.get(k).and_then(Value::as_str);
        if let Some(p) = field("provider").filter(|p| !KNOWN_PROVIDERS.contains(p)) {
            out.models.clear();
            out.notes = vec![format!(
                "entry {} of customModels in {file} has provider {p:?}, which droid does not \
                 know ({}): droid then ignores every custom model",
                i + 1,
                KNOWN_PROVIDERS.join(", ")
            )];
            return out;
        }
        let missing: Vec<&str> = ["model", "baseUrl", "provider"]
            .into_iter()
            .filter(|k| field(k).is_none())
            .collect();
        if !missing.is_empty() {
            out.notes.push(format!(
                "entry {} of customModels in {file} has no {}: droid skips it",
                i + 1,
                missing.join(", no ")
            ));
            continue;
        }
        let model = field("model").unwrap_or_default().to_owned();
        let name = field("displayName")
            .unwrap_or(&model)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join("-");
        let n = names.iter().filter(|m| **m == name).count();
        out.models.push(CustomModel {
            id: format!("custom:{name}-{n}"),
            model,
        });
        names.push(name);
    }
    out
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn entry(name: Option<&str>, model: &str) -> Value {
        let mut e = json!({"model": model, "baseUrl": "http://127.0.0.1:9/v1", "apiKey": "k",
                           "provider": "generic-chat-completion-api"});
        if let Some(n) = name {
            e["displayName"] = json!(n);
        }
        e
    }

    #[test]
    fn ids_follow_droids_rule() {
        // what droid 0.225.2 listed for these entries (its `Invalid model` message)
        let list = json!([
            entry(Some("Dup"), "a"),
            entry(Some("Dup"), "b"),
            entry(None, "bare"),
            entry(Some("My Model"), "c"),
            entry(Some("My-Model"), "d"),
            entry(Some("  two  spaces "), "e"),
            entry(Some("Tab\tX"), "f"),
            entry(Some("a.b/c:d"), "g"),
            {"displayName": "NoUrl", "model": "h", "provider": "openai"},
            entry(Some(""), "i"),
        ]);
        let got = from_list(&list, "~/.factory/settings.json");
        assert_eq!(
            got.ids(),
            [
                "custom:Dup-0",
                "custom:Dup-1",
                "custom:bare-0",
                "custom:My-Model-0",
                "custom:My-Model-1",
                "custom:two-spaces-0",
                "custom:Tab-X-0",
                "custom:a.b/c:d-0",
                "custom:-0",
            ]
        );
        assert_eq!(
            got.notes,
            ["entry 9 of customModels in ~/.factory/settings.json has no baseUrl: droid skips it"]
        );
        assert!(got.knows("custom:Dup-1"));
        assert!(got.knows("bare") && got.knows("custom:bare"));
        assert!(!got.knows("custom:dup-0") && !got.knows("custom:Dup"));
    }

    #[test]
    fn one_unknown_provider_hides_every_model() {
        let mut bad = entry(Some("Y"), "y");
        bad["provider"] = json!("bogus");
        let got = from_list(&json!([entry(Some("X"), "x"), bad]), "f");
        assert_eq!(got.ids(), Vec::<&str>::new());
        assert_eq!(
            got.notes,
            [
                "entry 2 of customModels in f has provider \"bogus\", which droid does not know \
                 (openai, anthropic, generic-chat-completion-api): droid then ignores every \
                 custom model"
            ]
        );
    }

    #[test]
    fn the_local_file_replaces_the_list_and_a_bad_file_counts_as_none() {
        let home = std::env::temp_dir().join(format!("droid-custom-{}", std::process::id()));
        let dir = home.join(".factory");
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(read(&home).ids(), Vec::<&str>::new());
        std::fs::write(
            dir.join("settings.json"),
            json!({"customModels": [entry(Some("Main"), "m")]}).to_string(),
        )
        .unwrap();
        assert_eq!(read(&home).ids(), ["custom:Main-0"]);
        // a local file without the key, or that does not parse, changes nothing
        std::fs::write(dir.join("settings.local.json"), "not json").unwrap();
        assert_eq!(read(&home).ids(), ["custom:Main-0"]);
        std::fs::write(dir.join("settings.local.json"), r#"{"customModels": []}"#).unwrap();
        let got = read(&home);
        assert_eq!(
            (got.ids(), got.file),
            (Vec::<&str>::new(), "~/.factory/settings.local.json")
        );
        std::fs::remove_file(dir.join("settings.local.json")).unwrap();
        std::fs::write(dir.join("settings.json"), "// mine\n{\"customModels\": []}").unwrap();
        let got = read(&home);
        assert_eq!(got.ids(), Vec::<&str>::new());
        assert_eq!(got.notes.len(), 1, "{:?}", got.notes);
        std::fs::remove_dir_all(&home).unwrap();
        assert!(airgap(Some("1")) && airgap(Some("true")));
        assert!(!airgap(Some("0")) && !airgap(Some("yes")) && !airgap(None));
    }
}
