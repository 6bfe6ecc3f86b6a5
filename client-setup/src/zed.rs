//! Registering `droid-executor acp` with Zed (`droid-executor setup acp --client zed`): an entry
//! under `agent_servers` in Zed's user settings (`$XDG_CONFIG_HOME/zed/settings.json`, default
//! `~/.config/zed/settings.json`):
//!
//! ```json
//! "agent_servers": {
//!   "Droid (droid-executor)": {"type": "custom", "command": "/abs/droid-executor", "args": ["acp"],
//!                              "env": {"DROID_CLI_CMD": "/abs/droid"}}
//! }
//! ```
//!
//! `env.DROID_CLI_CMD` is droid as `setup` found it: Zed started from the desktop has the
//! desktop session's `PATH`, not the shell's, and an agent that looks for droid on it fails at
//! the first session (issue 32). Only the program is written, never a credential: a key exported
//! in a shell profile does not reach a Zed started from the desktop either, and `setup` says so.
//!
//! Zed's settings file is JSON with comments, edited in place by [`crate::jsonc`] (every other
//! byte kept). An existing entry of ours keeps what the user added to it (other `env` keys,
//! `default_mode`, …): only `type`, `command`, `args` and `env.DROID_CLI_CMD` are set. A file
//! that is not JSONC we can parse is refused with its line and column, and left untouched. The
//! file is replaced through a temporary file and a rename, with its mode; a symbolic link (a
//! dotfiles checkout) is followed and its target replaced.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use droid_exec::EngineError;
use droid_exec::config::EnvMap;

pub use crate::jsonc::JsoncError;
use crate::jsonc::{self, Change};

/// The name of the entry in Zed's agent panel, unless `--name` says otherwise.
pub const DEFAULT_NAME: &str = "Droid (droid-executor)";

/// The key under which Zed lists external agents.
const AGENT_SERVERS: &str = "agent_servers";

/// The variable naming droid's program to the agent (the engine reads it first).
const DROID_VAR: &str = "DROID_CLI_CMD";

/// What we register: the entry's name, the program started as `<program> acp`, and droid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZedEntry<'a> {
    /// The entry's key under `agent_servers` (the name Zed shows).
    pub name: &'a str,
    /// The absolute path of `droid-executor`.
    pub program: &'a Path,
    /// droid's program as `setup` found it (`None`: not found; the agent looks on Zed's `PATH`).
    pub droid: Option<&'a Path>,
}

impl ZedEntry<'_> {
    /// The entry's `env`: droid's program, when known.
    fn env(&self) -> Value {
        match self.droid {
            Some(d) => json!({ DROID_VAR: d.display().to_string() }),
            None => json!({}),
        }
    }

    /// The entry's value as Zed reads it.
    pub fn value(&self) -> Value {
        json!({
            "type": "custom",
            "command": self.program.display().to_string(),
            "args": ["acp"],
            "env": self.env(),
        })
    }

    /// The `agent_servers` block to paste into Zed's settings (`setup acp --print`).
    pub fn snippet(&self) -> String {
        let text = jsonc::set(
            None,
            &[Change::new(&[AGENT_SERVERS, self.name], self.value())],
        )
        .unwrap_or_default();
        // the document's one member, without the braces around it
        let inner: Vec<&str> = text.trim_end().lines().collect();
        inner[1..inner.len().saturating_sub(1)]
            .iter()
            .map(|l| l.strip_prefix("  ").unwrap_or(l))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Zed's user settings file: `$XDG_CONFIG_HOME/zed/settings.json`, else
/// `$HOME/.config/zed/settings.json`.
///
/// # Errors
/// [`EngineError::Setting`] when neither variable is set.
pub fn settings_path(env: &EnvMap) -> Result<PathBuf, EngineError> {
    if let Some(xdg) = env.get("XDG_CONFIG_HOME").filter(|x| !x.is_empty()) {
        return Ok(PathBuf::from(xdg).join("zed/settings.json"));
    }
    env.get("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".config/zed/settings.json"))
        .ok_or_else(|| EngineError::Setting {
            name: "HOME".into(),
            message: "is not set; name Zed's settings file with --settings".into(),
        })
}

/// What registering does to the settings file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZedAction {
    /// The file does not exist: it is created with our entry.
    Create,
    /// The entry is added to the file.
    Add,
    /// Our entry is there with another command: it is updated.
    Update,
    /// The entry already says this: nothing to write.
    Unchanged,
}

/// One registration, planned: the file and its new text.
#[derive(Debug, Clone, PartialEq)]
pub struct ZedPlan {
    /// The settings file.
    pub path: PathBuf,
    /// Its text after the edit (the old text when [`ZedAction::Unchanged`]).
    pub content: String,
    /// What changes.
    pub action: ZedAction,
    /// The entry's name.
    pub name: String,
    /// The entry as written.
    pub entry: Value,
}

impl std::fmt::Display for ZedPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = format!("{AGENT_SERVERS}.{} = {}", json!(self.name), self.entry);
        let path = self.path.display();
        match self.action {
            ZedAction::Unchanged => write!(f, "{path} already has {what}"),
            ZedAction::Create => write!(f, "create {path}: {what}"),
            ZedAction::Add => write!(f, "write {path}: {what}"),
            ZedAction::Update => write!(f, "write {path}: {what} (replacing the old command)"),
        }
    }
}

/// Plan registering `entry` in the settings file at `path` (absent: created).
///
/// # Errors
/// [`EngineError::Config`] for a file that is not JSONC we can parse (with line and column), whose
/// top level is not an object, or whose `agent_servers` is not an object; [`EngineError::Io`] when
/// it cannot be read.
pub fn plan(path: &Path, entry: &ZedEntry<'_>) -> Result<ZedPlan, EngineError> {
    let existing = crate::registration::read_optional(path)?;
    let (content, action) = edit(existing.as_deref(), entry).map_err(|e| EngineError::Config {
        path: path.to_path_buf(),
        message: format!(
            "{e}; Zed's settings must be JSON with comments (fix the file, or paste the entry \
                 `setup acp --print` shows)"
        ),
    })?;
    let written = jsonc::value(&content)
        .ok()
        .flatten()
        .and_then(|v| v.get(AGENT_SERVERS)?.get(entry.name).cloned())
        .unwrap_or_else(|| entry.value());
    Ok(ZedPlan {
        path: path.to_path_buf(),
        content,
        action,
        name: entry.name.to_owned(),
        entry: written,
    })
}

/// Write a plan; what happened, in a sentence.
///
/// # Errors
/// [`EngineError::Io`] when the file cannot be written.
pub fn apply(plan: &ZedPlan) -> Result<String, EngineError> {
    if plan.action == ZedAction::Unchanged {
        return Ok(format!("{plan}; nothing to do"));
    }
    crate::replace_file::replace_file(&plan.path, plan.content.as_bytes())?;
    let what = format!("{AGENT_SERVERS}.{} = {}", json!(plan.name), plan.entry);
    Ok(match plan.action {
        ZedAction::Create => format!("created {}: {what}", plan.path.display()),
        _ => format!("wrote {}: {what}", plan.path.display()),
    })
}

/// The settings text with `entry` registered, and what that did (`None`: no file).
///
/// # Errors
/// Where `text` is not JSONC with an object at the top (and an object at `agent_servers`).
pub fn edit(text: Option<&str>, entry: &ZedEntry<'_>) -> Result<(String, ZedAction), JsoncError> {
    let current = match text {
        Some(t) => jsonc::value(t)?,
        None => None,
    };
    let ours = current
        .as_ref()
        .and_then(|v| v.get(AGENT_SERVERS))
        .and_then(|s| s.get(entry.name));
    let changes = changes(ours, entry);
    let out = jsonc::set(text, &changes)?;
    let action = match (text, ours) {
        (None, _) => ZedAction::Create,
        (Some(t), _) if t == out => ZedAction::Unchanged,
        (Some(_), None) => ZedAction::Add,
        (Some(_), Some(_)) => ZedAction::Update,
    };
    Ok((out, action))
}

/// What makes the entry `ours` (absent: `None`) say what `entry` says: the whole entry when
/// there is none or it is not an object; else `type`, `command`, `args` and droid's program, with
/// `env` made an object when it is not one, every other key kept.
fn changes(ours: Option<&Value>, entry: &ZedEntry<'_>) -> Vec<Change> {
    let wanted = entry.value();
    let at = |key: &str| {
        vec![
            AGENT_SERVERS.to_owned(),
            entry.name.to_owned(),
            key.to_owned(),
        ]
    };
    match ours {
        Some(Value::Object(old)) => {
            let mut out: Vec<Change> = ["type", "command", "args"]
                .into_iter()
                .map(|k| Change {
                    path: at(k),
                    value: wanted[k].clone(),
                })
                .collect();
            match (old.get("env"), entry.droid) {
                (Some(Value::Object(_)), Some(_)) => {
                    let mut path = at("env");
                    path.push(DROID_VAR.to_owned());
                    out.push(Change {
                        path,
                        value: wanted["env"][DROID_VAR].clone(),
                    });
                }
                (Some(Value::Object(_)), None) => {}
                _ => out.push(Change {
                    path: at("env"),
                    value: wanted["env"].clone(),
                }),
            }
            out
        }
        _ => vec![Change::new(&[AGENT_SERVERS, entry.name], wanted)],
    }
}

/// `settings` with the entry `name` under `agent_servers` set as [`edit`] sets it: `type`,
/// `command` and `args` ours, `env` an object holding droid's program when known, every other
/// key of an existing entry kept.
#[cfg(test)]
fn with_entry(mut settings: Value, entry: &ZedEntry<'_>) -> Value {
    let wanted = entry.value();
    let Some(root) = settings.as_object_mut() else {
        return settings;
    };
    let servers = root
        .entry(AGENT_SERVERS)
        .or_insert_with(|| json!({}))
        .as_object_mut();
    if let Some(servers) = servers {
        let merged = match servers.get(entry.name) {
            Some(Value::Object(old)) => {
                let mut merged = old.clone();
                for key in ["type", "command", "args"] {
                    merged.insert(key.to_owned(), wanted[key].clone());
                }
                match merged.get_mut("env") {
                    Some(Value::Object(env)) => {
                        if let Some(d) = wanted["env"].get(DROID_VAR) {
                            env.insert(DROID_VAR.to_owned(), d.clone());
                        }
                    }
                    _ => {
                        merged.insert("env".to_owned(), wanted["env"].clone());
                    }
                }
                Value::Object(merged)
            }
            _ => wanted.clone(),
        };
        servers.insert(entry.name.to_owned(), merged);
    }
    settings
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::os::unix::fs::PermissionsExt as _;

    const PROGRAM: &str = "/opt/bin/droid-executor";

    fn entry() -> ZedEntry<'static> {
        ZedEntry {
            name: DEFAULT_NAME,
            program: Path::new(PROGRAM),
            droid: None,
        }
    }

    fn ours(indent: &str) -> String {
        format!(
            "\"Droid (droid-executor)\": {{\n{indent}  \"type\": \"custom\",\n{indent}  \"command\": \"{PROGRAM}\",\n{indent}  \"args\": [\"acp\"],\n{indent}  \"env\": {{}}\n{indent}}}"
        )
    }

    /// Zed's own first settings file: comments, then the object.
    const ZED_DEFAULT: &str = "// Zed settings\n//\n// For information on how to configure Zed, see the Zed\n// documentation: https://zed.dev/docs/configuring-zed\n{\n  \"ui_font_size\": 16,\n  \"buffer_font_size\": 15,\n  \"theme\": {\n    \"mode\": \"system\", // follow the OS\n    \"light\": \"One Light\",\n    \"dark\": \"One Dark\",\n  },\n  /* vim forever */\n  \"vim_mode\": true\n}\n";

    #[test]
    fn comments_and_other_keys_are_kept_byte_for_byte() {
        let (out, action) = edit(Some(ZED_DEFAULT), &entry()).unwrap();
        assert_eq!(action, ZedAction::Add);
        let expected = ZED_DEFAULT.replace(
            "  \"vim_mode\": true\n}",
            &format!(
                "  \"vim_mode\": true,\n  \"agent_servers\": {{\n    {}\n  }}\n}}",
                ours("    ")
            ),
        );
        assert_eq!(out, expected);
        // running it again changes nothing
        let (again, action) = edit(Some(&out), &entry()).unwrap();
        assert_eq!(action, ZedAction::Unchanged);
        assert_eq!(again, out);
    }

    #[test]
    fn trailing_commas_and_an_existing_agent_servers_object() {
        let text = "{\n    \"agent_servers\": {\n        // Claude through its adapter\n        \"Claude Code\": {\"command\": \"claude-code-acp\",},\n    },\n    \"theme\": \"One Dark\",\n}\n";
        let (out, action) = edit(Some(text), &entry()).unwrap();
        assert_eq!(action, ZedAction::Add);
        let member = "\"Droid (droid-executor)\": {\n            \"type\": \"custom\",\n            \"command\": \"/opt/bin/droid-executor\",\n            \"args\": [\"acp\"],\n            \"env\": {}\n        }";
        let expected = text.replace(
            "\"claude-code-acp\",},\n    },",
            &format!("\"claude-code-acp\",}},\n        {member}\n    }},"),
        );
        assert_eq!(out, expected);
        assert_eq!(edit(Some(&out), &entry()).unwrap().1, ZedAction::Unchanged);
    }

    #[test]
    fn an_existing_entry_is_replaced_and_what_the_user_added_stays() {
        let text = "{\n  \"agent_servers\": {\n    \"Droid (droid-executor)\": {\n      \"type\": \"custom\",\n      \"command\": \"/old/droid-executor\", // moved\n      \"args\": [\"acp\", \"--old\"],\n      \"env\": {\"FACTORY_API_KEY\": \"fk-1\"},\n      \"default_mode\": \"low\"\n    }\n  }\n}";
        let (out, action) = edit(Some(text), &entry()).unwrap();
        assert_eq!(action, ZedAction::Update);
        let expected = text
            .replace("/old/droid-executor", PROGRAM)
            .replace("[\"acp\", \"--old\"]", "[\"acp\"]");
        assert_eq!(out, expected);
        // an entry that is not an object is replaced whole
        let text = "{\"agent_servers\": {\"Droid (droid-executor)\": null}}";
        let (out, action) = edit(Some(text), &entry()).unwrap();
        assert_eq!(action, ZedAction::Update);
        assert_eq!(
            serde_json::from_str::<Value>(&out).unwrap(),
            json!({"agent_servers": {"Droid (droid-executor)": entry().value()}})
        );
        // missing keys are added after the user's
        let text = "{\"agent_servers\": {\"Droid (droid-executor)\": {\"command\": \"x\"}}}";
        let (out, _) = edit(Some(text), &entry()).unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&out).unwrap(),
            json!({"agent_servers": {"Droid (droid-executor)": entry().value()}})
        );
    }

    #[test]
    fn absent_empty_and_comment_only_files() {
        let fresh = format!(
            "{{\n  \"agent_servers\": {{\n    {}\n  }}\n}}\n",
            ours("    ")
        );
        assert_eq!(
            edit(None, &entry()).unwrap(),
            (fresh.clone(), ZedAction::Create)
        );
        assert_eq!(
            edit(Some(""), &entry()).unwrap(),
            (fresh.clone(), ZedAction::Add)
        );
        assert_eq!(
            edit(Some("// mine"), &entry()).unwrap().0,
            format!("// mine\n{fresh}")
        );
        assert_eq!(
            edit(Some("{}"), &entry()).unwrap().0,
            format!(
                "{{\n  \"agent_servers\": {{\n    {}\n  }}\n}}",
                ours("    ")
            )
        );
        let crlf = "{\r\n  \"a\": 1\r\n}\r\n";
        let (out, _) = edit(Some(crlf), &entry()).unwrap();
        assert!(!out.replace("\r\n", "").contains('\n'), "{out:?}");
        assert!(out.starts_with("{\r\n  \"a\": 1,\r\n  \"agent_servers\": {\r\n"));
    }

    #[test]
    fn broken_files_are_refused_with_the_line() {
        let cases = [
            ("{\n  \"a\": 1\n  \"b\": 2\n}", 3, 3, "expected ',' or '}'"),
            ("{\n  \"a\": \n}", 3, 1, "expected a value, found '}'"),
            ("{ /* open", 1, 3, "a /* comment is never closed"),
            ("{\"a\": \"b}", 1, 7, "a string is never closed"),
            ("[1, 2]", 1, 1, "the settings are not a JSON object"),
            ("{} {}", 1, 4, "text after the settings object"),
            (
                "{\"agent_servers\": []}",
                1,
                19,
                "agent_servers is not an object",
            ),
            ("{\"a\": 01x}", 1, 7, "not a valid number"),
        ];
        for (text, line, column, message) in cases {
            assert_eq!(
                edit(Some(text), &entry()).unwrap_err(),
                JsoncError {
                    line,
                    column,
                    message: message.into()
                },
                "{text:?}"
            );
        }
        let deep = format!("{{\"a\": {}{}}}", "[".repeat(500), "]".repeat(500));
        assert_eq!(
            edit(Some(&deep), &entry()).unwrap_err().message,
            "nested too deeply"
        );
    }

    /// droid's program goes into `env.DROID_CLI_CMD`: added to an entry of ours whose `env`
    /// holds the user's keys (kept), updated when droid moved, and unchanged the second time.
    #[test]
    fn droid_is_named_in_env() {
        let with_droid = ZedEntry {
            droid: Some(Path::new("/opt/droid/bin/droid")),
            ..entry()
        };
        let (fresh, _) = edit(Some("{}"), &with_droid).unwrap();
        assert_eq!(
            jsonc::value(&fresh).unwrap().unwrap()["agent_servers"][DEFAULT_NAME]["env"],
            json!({"DROID_CLI_CMD": "/opt/droid/bin/droid"})
        );
        let text = "{\"agent_servers\": {\"Droid (droid-executor)\": {\"type\": \"custom\", \"command\": \"/opt/bin/droid-executor\", \"args\": [\"acp\"], \"env\": {\"RUST_LOG\": \"info\"}}}}";
        let (out, action) = edit(Some(text), &with_droid).unwrap();
        assert_eq!(action, ZedAction::Update);
        assert_eq!(
            jsonc::value(&out).unwrap().unwrap()["agent_servers"][DEFAULT_NAME]["env"],
            json!({"RUST_LOG": "info", "DROID_CLI_CMD": "/opt/droid/bin/droid"})
        );
        assert_eq!(
            edit(Some(&out), &with_droid).unwrap().1,
            ZedAction::Unchanged
        );
        let moved = ZedEntry {
            droid: Some(Path::new("/new/droid")),
            ..entry()
        };
        let (out, action) = edit(Some(&out), &moved).unwrap();
        assert_eq!(action, ZedAction::Update);
        assert_eq!(
            jsonc::value(&out).unwrap().unwrap()["agent_servers"][DEFAULT_NAME]["env"],
            json!({"RUST_LOG": "info", "DROID_CLI_CMD": "/new/droid"})
        );
        // droid not found: the user's env stays as it is
        assert_eq!(edit(Some(&out), &entry()).unwrap().1, ZedAction::Unchanged);
    }

    #[test]
    fn a_custom_name_and_the_snippet() {
        let named = ZedEntry {
            name: "Droid \"work\"",
            program: Path::new(PROGRAM),
            droid: None,
        };
        let (out, _) = edit(Some("{}"), &named).unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["agent_servers"]["Droid \"work\""], named.value());
        assert_eq!(
            entry().snippet(),
            format!("\"agent_servers\": {{\n  {}\n}}", ours("  "))
        );
    }

    mod generated {
        use super::*;
        use proptest::prelude::*;

        /// Blanks and comments between tokens, as people write them.
        fn gap() -> impl Strategy<Value = String> {
            prop::sample::select(vec![
                "",
                " ",
                "\n  ",
                "\n\n    ",
                " // a comment, with \"quotes\" and { braces }\n  ",
                " /* block */ ",
                "\n  /* multi\n     line */\n  ",
                "\t",
            ])
            .prop_map(str::to_owned)
        }

        fn scalar() -> impl Strategy<Value = Value> {
            prop::sample::select(vec![
                json!(16),
                json!(-1.5e3),
                json!(0),
                json!(true),
                json!(false),
                json!(null),
                json!("One Dark"),
                json!("a \"quoted\" // not a comment /* nor this */"),
                json!("ünïcode \\ back\tslash"),
                json!(""),
            ])
        }

        fn value() -> impl Strategy<Value = Value> {
            scalar().prop_recursive(3, 24, 4, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                    prop::collection::vec(
                        (
                            prop::sample::select(vec!["a", "b", "theme", "x y", "Claude Code"]),
                            inner
                        ),
                        0..4
                    )
                    .prop_map(|members| {
                        Value::Object(
                            members
                                .into_iter()
                                .map(|(k, v)| (k.to_owned(), v))
                                .collect(),
                        )
                    }),
                ]
            })
        }

        /// `v` as JSONC: a gap from `g` around every token, trailing commas when `trailing`.
        fn write(v: &Value, g: &mut dyn FnMut() -> String, trailing: bool) -> String {
            let (open, close, items) = match v {
                Value::Object(map) => {
                    let mut items = Vec::new();
                    for (k, v) in map {
                        let (a, b, c) = (g(), g(), g());
                        let value = write(v, g, trailing);
                        items.push(format!("{a}{}{b}:{c}{value}", json!(k)));
                    }
                    ('{', '}', items)
                }
                Value::Array(list) => {
                    let mut items = Vec::new();
                    for v in list {
                        let a = g();
                        items.push(format!("{a}{}", write(v, g, trailing)));
                    }
                    ('[', ']', items)
                }
                other => return other.to_string(),
            };
            let comma = if trailing && !items.is_empty() {
                ","
            } else {
                ""
            };
            format!("{open}{}{comma}{}{close}", items.join(","), g())
        }

        /// `small` is a subsequence of `big`.
        fn subsequence(small: &str, big: &str) -> bool {
            let mut big = big.chars();
            small.chars().all(|c| big.any(|b| b == c))
        }

        proptest! {
            #[test]
            fn any_settings_keep_their_bytes_and_values(
                members in prop::collection::vec((prop::sample::select(vec!["a", "b", "theme", "agent_servers"]), value()), 0..5),
                gaps in prop::collection::vec(gap(), 64),
                trailing in any::<bool>(),
                lead in gap(),
            ) {
                let settings = Value::Object(members.into_iter().map(|(k, v)| (k.to_owned(), v)).collect());
                let mut cycle = gaps.into_iter().cycle();
                let mut g = || cycle.next().unwrap_or_default();
                let text = format!("{lead}{}\n", write(&settings, &mut g, trailing));
                prop_assert_eq!(jsonc::value(&text).unwrap().unwrap(), settings.clone());
                match edit(Some(&text), &entry()) {
                    Ok((out, action)) => {
                        prop_assert!(settings.get("agent_servers").is_none_or(Value::is_object));
                        let now = jsonc::value(&out).unwrap().unwrap();
                        prop_assert_eq!(now, with_entry(settings, &entry()));
                        // only added: every byte of the old text is there, in order
                        prop_assert_eq!(action, ZedAction::Add);
                        prop_assert!(subsequence(&text, &out), "{}\n=>\n{}", text, out);
                        let again = edit(Some(&out), &entry()).unwrap();
                        prop_assert_eq!(again, (out, ZedAction::Unchanged));
                    }
                    Err(e) => {
                        prop_assert_eq!(e.message, "agent_servers is not an object");
                        prop_assert!(!settings["agent_servers"].is_object());
                    }
                }
            }
        }
    }

    #[test]
    fn the_file_keeps_its_mode_and_a_link_its_target() {
        let dir = std::env::temp_dir().join(format!("dx-zed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("dotfiles")).unwrap();
        let real = dir.join("dotfiles/settings.json");
        std::fs::write(&real, "{ // mine\n}\n").unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).unwrap();
        let link = dir.join("settings.json");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let p = plan(&link, &entry()).unwrap();
        assert_eq!(p.action, ZedAction::Add);
        apply(&p).unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        let mode = std::fs::metadata(&real).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(
            std::fs::read_to_string(&real)
                .unwrap()
                .starts_with("{ // mine\n  \"agent_servers\"")
        );
        let fresh = dir.join("new/zed/settings.json");
        let p = plan(&fresh, &entry()).unwrap();
        assert_eq!(p.action, ZedAction::Create);
        assert!(apply(&p).unwrap().starts_with("created "));
        assert_eq!(plan(&fresh, &entry()).unwrap().action, ZedAction::Unchanged);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
