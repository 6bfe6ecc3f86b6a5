//! Registering `droid-executor acp` with Zed (`droid-executor setup acp --client zed`): an entry
//! under `agent_servers` in Zed's user settings (`$XDG_CONFIG_HOME/zed/settings.json`, default
//! `~/.config/zed/settings.json`):
//!
//! ```json
//! "agent_servers": {
//!   "Droid (droid-executor)": {"type": "custom", "command": "/abs/droid-executor", "args": ["acp"], "env": {}}
//! }
//! ```
//!
//! Zed's settings file is JSON with comments (`//`, `/* */`) and trailing commas, written by hand.
//! Reading it into a JSON value and writing that back would drop every comment and reformat the
//! file, so this module edits the text: a small JSONC parser records where each member of the
//! top-level object and of `agent_servers` lies, and the edit replaces or inserts only the bytes
//! of our entry; every other byte stays as it was. An existing entry of ours keeps what the user
//! added to it (`env` with a key, `default_mode`, …): only `type`, `command` and `args` are set.
//! The edited text is parsed again and must say exactly what the old one said plus our entry, or
//! nothing is written. A file that is not JSONC we can parse is refused with its line and column,
//! and left untouched. The file is replaced through a temporary file and a rename, with its mode;
//! a symbolic link (a dotfiles checkout) is followed and its target replaced.

use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use droid_exec::EngineError;
use droid_exec::config::EnvMap;

/// The name of the entry in Zed's agent panel, unless `--name` says otherwise.
pub const DEFAULT_NAME: &str = "Droid (droid-executor)";

/// The key under which Zed lists external agents.
const AGENT_SERVERS: &str = "agent_servers";

/// Nesting deeper than this is refused rather than recursed into.
const MAX_DEPTH: usize = 128;

/// What we register: the entry's name and the program started as `<program> acp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZedEntry<'a> {
    /// The entry's key under `agent_servers` (the name Zed shows).
    pub name: &'a str,
    /// The absolute path of `droid-executor`.
    pub program: &'a Path,
}

impl ZedEntry<'_> {
    /// The entry's value as Zed reads it.
    pub fn value(&self) -> Value {
        json!({
            "type": "custom",
            "command": self.program.display().to_string(),
            "args": ["acp"],
            "env": {},
        })
    }

    /// The `agent_servers` block to paste into Zed's settings (`setup acp --print`).
    pub fn snippet(&self) -> String {
        let member = render_member(self.name, &self.value(), "  ", "  ", "\n");
        format!("\"{AGENT_SERVERS}\": {{\n  {member}\n}}")
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
    let existing = crate::register::read_optional(path)?;
    let (content, action) = edit(existing.as_deref(), entry).map_err(|e| EngineError::Config {
        path: path.to_path_buf(),
        message: format!(
            "{e}; Zed's settings must be JSON with comments (fix the file, or paste the entry \
                 `setup acp --print` shows)"
        ),
    })?;
    Ok(ZedPlan {
        path: path.to_path_buf(),
        content,
        action,
        name: entry.name.to_owned(),
        entry: entry.value(),
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
    write_keeping_mode(&plan.path, plan.content.as_bytes())?;
    let what = format!("{AGENT_SERVERS}.{} = {}", json!(plan.name), plan.entry);
    Ok(match plan.action {
        ZedAction::Create => format!("created {}: {what}", plan.path.display()),
        _ => format!("wrote {}: {what}", plan.path.display()),
    })
}

/// Replace `path` with `bytes` through a temporary file beside it and a rename, keeping the old
/// file's permission bits (a new file gets 0644 less the umask); a symbolic link is followed.
fn write_keeping_mode(path: &Path, bytes: &[u8]) -> Result<(), EngineError> {
    let target = match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            std::fs::canonicalize(path).map_err(EngineError::io("resolve", path))?
        }
        _ => path.to_path_buf(),
    };
    let mode = match std::fs::metadata(&target) {
        Ok(m) => Some(m.permissions().mode() & 0o7777),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(EngineError::io("stat", &target)(e)),
    };
    let dir = target.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(EngineError::io("create directory", dir))?;
    let name = target
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let tmp = dir.join(format!(".{name}.{}.droid-executor.tmp", std::process::id()));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&tmp)?;
        if let Some(mode) = mode {
            f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        f.write_all(bytes)?;
        f.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(EngineError::io("write", &tmp)(e));
    }
    if let Err(e) = std::fs::rename(&tmp, &target) {
        let _ = std::fs::remove_file(&tmp);
        return Err(EngineError::io("rename", &target)(e));
    }
    if let Ok(d) = std::fs::File::open(dir) {
        // durability of the rename; a directory that cannot be synced loses nothing we can fix
        let _ = d.sync_all();
    }
    Ok(())
}

/// Where a settings text cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsoncError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column (in characters).
    pub column: usize,
    /// What was expected or found.
    pub message: String,
}

impl std::fmt::Display for JsoncError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "line {}, column {}: {}",
            self.line, self.column, self.message
        )
    }
}

/// The settings text with `entry` registered, and what that did (`None`: no file).
///
/// # Errors
/// Where `text` is not JSONC with an object at the top (and an object at `agent_servers`).
pub fn edit(text: Option<&str>, entry: &ZedEntry<'_>) -> Result<(String, ZedAction), JsoncError> {
    let wanted = entry.value();
    let Some(text) = text else {
        return Ok((new_document("", entry, "\n"), ZedAction::Create));
    };
    let nl = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let doc = parse(text)?;
    let Some(root) = doc else {
        // nothing but comments and blanks: they stay, the object follows them
        return Ok((new_document(text, entry, nl), ZedAction::Add));
    };
    let Kind::Object(members) = &root.kind else {
        return Err(error_at(
            text,
            root.start,
            "the settings are not a JSON object",
        ));
    };
    let unit = indent_unit(text, members);
    let mut edits: Vec<Edit> = Vec::new();
    let action;
    match members.iter().rev().find(|m| m.key == AGENT_SERVERS) {
        None => {
            let mut servers = Map::new();
            servers.insert(entry.name.to_owned(), wanted.clone());
            edits.extend(insert_members(
                text,
                &root,
                &[(AGENT_SERVERS.to_owned(), Value::Object(servers))],
                &unit,
                nl,
            ));
            action = ZedAction::Add;
        }
        Some(servers) => {
            let Kind::Object(entries) = &servers.value.kind else {
                return Err(error_at(
                    text,
                    servers.value.start,
                    "agent_servers is not an object",
                ));
            };
            match entries.iter().rev().find(|m| m.key == entry.name) {
                None => {
                    edits.extend(insert_members(
                        text,
                        &servers.value,
                        &[(entry.name.to_owned(), wanted.clone())],
                        &unit,
                        nl,
                    ));
                    action = ZedAction::Add;
                }
                Some(ours) => {
                    edits.extend(update_entry(text, &ours.value, &wanted, &unit, nl));
                    action = if edits.is_empty() {
                        ZedAction::Unchanged
                    } else {
                        ZedAction::Update
                    };
                }
            }
        }
    }
    // from the end of the text, so earlier positions stay valid; of two edits at one position
    // the one made later goes first, so that it ends up after the other (a comma, then members)
    let mut order: Vec<(usize, &Edit)> = edits.iter().enumerate().collect();
    order.sort_by_key(|(i, e)| std::cmp::Reverse((e.start, *i)));
    let mut out = text.to_owned();
    for (_, e) in order {
        out.replace_range(e.start..e.end, &e.text);
    }
    // the edit must say what the old text said, plus our entry
    let expected = with_entry(value_of(text, &root), entry.name, &wanted);
    let now = parse(&out).ok().flatten().map(|root| value_of(&out, &root));
    if now.as_ref() != Some(&expected) {
        return Err(error_at(
            text,
            root.start,
            "the entry could not be written without changing other settings",
        ));
    }
    Ok((out, action))
}

/// `settings` with the entry `name` under `agent_servers` set as [`edit`] sets it: `type`,
/// `command` and `args` ours, `env` an object, every other key of an existing entry kept.
fn with_entry(mut settings: Value, name: &str, wanted: &Value) -> Value {
    let Some(root) = settings.as_object_mut() else {
        return settings;
    };
    let servers = root
        .entry(AGENT_SERVERS)
        .or_insert_with(|| json!({}))
        .as_object_mut();
    if let Some(servers) = servers {
        let merged = match servers.get(name) {
            Some(Value::Object(old)) => {
                let mut merged = old.clone();
                for key in ["type", "command", "args"] {
                    merged.insert(key.to_owned(), wanted[key].clone());
                }
                if !merged.get("env").is_some_and(Value::is_object) {
                    merged.insert("env".to_owned(), json!({}));
                }
                Value::Object(merged)
            }
            _ => wanted.clone(),
        };
        servers.insert(name.to_owned(), merged);
    }
    settings
}

/// A whole new settings document after `prefix` (comments, or nothing).
fn new_document(prefix: &str, entry: &ZedEntry<'_>, nl: &str) -> String {
    let mut servers = Map::new();
    servers.insert(entry.name.to_owned(), entry.value());
    let member = render_member(AGENT_SERVERS, &Value::Object(servers), "  ", "  ", nl);
    let sep = if prefix.is_empty() || prefix.ends_with('\n') {
        ""
    } else {
        nl
    };
    format!("{prefix}{sep}{{{nl}  {member}{nl}}}{nl}")
}

/// Replace the bytes `start..end` with `text`.
#[derive(Debug)]
struct Edit {
    start: usize,
    end: usize,
    text: String,
}

/// The edits that make the existing entry `node` ours: `type`, `command` and `args` set, `env`
/// made an object when it is not one; a value that is not an object is replaced whole.
fn update_entry(text: &str, node: &Node, wanted: &Value, unit: &str, nl: &str) -> Vec<Edit> {
    let Kind::Object(members) = &node.kind else {
        let indent = line_indent(text, node.start);
        return vec![Edit {
            start: node.start,
            end: node.end,
            text: render(wanted, &indent, unit, nl),
        }];
    };
    let mut edits = Vec::new();
    let mut missing = Vec::new();
    for key in ["type", "command", "args", "env"] {
        let present: Vec<&Member> = members.iter().filter(|m| m.key == key).collect();
        if present.is_empty() {
            missing.push((key.to_owned(), wanted[key].clone()));
        }
        for m in present {
            let value = value_of(text, &m.value);
            let right = if key == "env" {
                value.is_object()
            } else {
                value == wanted[key]
            };
            if !right {
                edits.push(Edit {
                    start: m.value.start,
                    end: m.value.end,
                    text: wanted[key].to_string(),
                });
            }
        }
    }
    edits.extend(insert_members(text, node, &missing, unit, nl));
    edits
}

/// The edits that add `new` members at the end of the object `node` (before its `}`), with a
/// comma after its last member when it has none.
fn insert_members(
    text: &str,
    node: &Node,
    new: &[(String, Value)],
    unit: &str,
    nl: &str,
) -> Vec<Edit> {
    let Kind::Object(members) = &node.kind else {
        return Vec::new();
    };
    if new.is_empty() {
        return Vec::new();
    }
    let close = node.end - 1;
    let object_indent = line_indent(text, node.start);
    let indent = members
        .first()
        .and_then(|m| own_line_indent(text, m.key_start))
        .unwrap_or_else(|| format!("{object_indent}{unit}"));
    let body: Vec<String> = new
        .iter()
        .map(|(k, v)| format!("{indent}{}", render_member(k, v, &indent, unit, nl)))
        .collect();
    let body = body.join(&format!(",{nl}"));
    let mut edits = Vec::new();
    if let Some(last) = members.last()
        && last.comma.is_none()
    {
        edits.push(Edit {
            start: last.value.end,
            end: last.value.end,
            text: ",".into(),
        });
    }
    match own_line_indent(text, close) {
        // `}` on a line of its own: our members go on lines before it
        Some(_) if text[node.start..close].contains('\n') => {
            let line_start = text[..close].rfind('\n').map_or(0, |i| i + 1);
            edits.push(Edit {
                start: line_start,
                end: line_start,
                text: format!("{body}{nl}"),
            });
        }
        _ => edits.push(Edit {
            start: close,
            end: close,
            text: format!("{nl}{body}{nl}{object_indent}"),
        }),
    }
    edits
}

/// `"key": value`, the value pretty-printed for a member at `indent`.
fn render_member(key: &str, value: &Value, indent: &str, unit: &str, nl: &str) -> String {
    format!("{}: {}", json!(key), render(value, indent, unit, nl))
}

/// `value` pretty-printed as a value at `indent` (its closing bracket there); short arrays
/// and empty objects stay on one line.
fn render(value: &Value, indent: &str, unit: &str, nl: &str) -> String {
    match value {
        Value::Object(map) if !map.is_empty() => {
            let inner = format!("{indent}{unit}");
            let members: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{inner}{}", render_member(k, v, &inner, unit, nl)))
                .collect();
            format!("{{{nl}{}{nl}{indent}}}", members.join(&format!(",{nl}")))
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(Value::to_string).collect();
            format!("[{}]", items.join(", "))
        }
        other => other.to_string(),
    }
}

/// The leading blanks of the line holding `pos`.
fn line_indent(text: &str, pos: usize) -> String {
    let start = text[..pos].rfind('\n').map_or(0, |i| i + 1);
    text[start..]
        .chars()
        .take_while(|c| *c == ' ' || *c == '\t')
        .collect()
}

/// The leading blanks of the line holding `pos` when nothing else comes before `pos` on it.
fn own_line_indent(text: &str, pos: usize) -> Option<String> {
    let start = text[..pos].rfind('\n').map_or(0, |i| i + 1);
    let before = &text[start..pos];
    before
        .chars()
        .all(|c| c == ' ' || c == '\t')
        .then(|| before.to_owned())
}

/// One level of indentation as the file writes it: that of the top-level members (two spaces
/// when they do not tell).
fn indent_unit(text: &str, members: &[Member]) -> String {
    members
        .first()
        .and_then(|m| own_line_indent(text, m.key_start))
        .filter(|i| !i.is_empty())
        .unwrap_or_else(|| "  ".to_owned())
}

/// A parsed value: where it lies and, for containers, what is in it.
#[derive(Debug)]
struct Node {
    /// Its first byte.
    start: usize,
    /// One past its last byte.
    end: usize,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    /// An object's members in order (duplicates kept).
    Object(Vec<Member>),
    /// An array's items.
    Array(Vec<Node>),
    /// A string, number, `true`, `false` or `null` (its bytes are JSON).
    Scalar,
}

#[derive(Debug)]
struct Member {
    key: String,
    /// Where the key's opening quote is.
    key_start: usize,
    value: Node,
    /// Where the comma after the value is, if one follows.
    comma: Option<usize>,
}

/// The JSON value of a parsed node (a later duplicate key wins, as in Zed).
fn value_of(text: &str, node: &Node) -> Value {
    match &node.kind {
        Kind::Object(members) => {
            let mut map = Map::new();
            for m in members {
                map.insert(m.key.clone(), value_of(text, &m.value));
            }
            Value::Object(map)
        }
        Kind::Array(items) => Value::Array(items.iter().map(|i| value_of(text, i)).collect()),
        Kind::Scalar => serde_json::from_str(&text[node.start..node.end]).unwrap_or(Value::Null),
    }
}

fn error_at(text: &str, pos: usize, message: &str) -> JsoncError {
    let pos = pos.min(text.len());
    let before = &text[..pos];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    JsoncError {
        line,
        column: text[line_start..pos].chars().count() + 1,
        message: message.to_owned(),
    }
}

/// Parse a JSONC document: its top-level value, `None` when there is none (only blanks and
/// comments).
fn parse(text: &str) -> Result<Option<Node>, JsoncError> {
    let mut p = Parser {
        text,
        bytes: text.as_bytes(),
        pos: 0,
    };
    if text.starts_with('\u{feff}') {
        p.pos = '\u{feff}'.len_utf8();
    }
    p.skip()?;
    if p.pos == p.bytes.len() {
        return Ok(None);
    }
    let node = p.value(0)?;
    p.skip()?;
    if p.pos != p.bytes.len() {
        return Err(p.error("text after the settings object"));
    }
    Ok(Some(node))
}

struct Parser<'t> {
    text: &'t str,
    bytes: &'t [u8],
    pos: usize,
}

impl Parser<'_> {
    fn error(&self, message: &str) -> JsoncError {
        error_at(self.text, self.pos, message)
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    /// Skip blanks and comments.
    fn skip(&mut self) -> Result<(), JsoncError> {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\n' | b'\r') => self.pos += 1,
                Some(b'/') if self.bytes.get(self.pos + 1) == Some(&b'/') => {
                    self.pos = self.text[self.pos..]
                        .find('\n')
                        .map_or(self.bytes.len(), |i| self.pos + i);
                }
                Some(b'/') if self.bytes.get(self.pos + 1) == Some(&b'*') => {
                    match self.text[self.pos + 2..].find("*/") {
                        Some(i) => self.pos += 2 + i + 2,
                        None => return Err(self.error("a /* comment is never closed")),
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn value(&mut self, depth: usize) -> Result<Node, JsoncError> {
        if depth > MAX_DEPTH {
            return Err(self.error("nested too deeply"));
        }
        let start = self.pos;
        match self.peek() {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => {
                self.string()?;
                Ok(self.scalar(start))
            }
            Some(b'-' | b'0'..=b'9') => {
                while matches!(
                    self.peek(),
                    Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                ) {
                    self.pos += 1;
                }
                if serde_json::from_str::<serde_json::Number>(&self.text[start..self.pos]).is_err()
                {
                    self.pos = start;
                    return Err(self.error("not a valid number"));
                }
                Ok(self.scalar(start))
            }
            _ => {
                for word in ["true", "false", "null"] {
                    if self.text[start..].starts_with(word) {
                        self.pos += word.len();
                        return Ok(self.scalar(start));
                    }
                }
                Err(self.error(&match self.text[start..].chars().next() {
                    Some(c) => format!("expected a value, found {c:?}"),
                    None => "expected a value, found the end of the file".to_owned(),
                }))
            }
        }
    }

    fn scalar(&self, start: usize) -> Node {
        Node {
            start,
            end: self.pos,
            kind: Kind::Scalar,
        }
    }

    /// A string starting at `pos`; its decoded text.
    fn string(&mut self) -> Result<String, JsoncError> {
        let start = self.pos;
        self.pos += 1;
        loop {
            match self.peek() {
                None => {
                    self.pos = start;
                    return Err(self.error("a string is never closed"));
                }
                Some(b'"') => {
                    self.pos += 1;
                    break;
                }
                Some(b'\\') => self.pos += 2,
                Some(c) if c < 0x20 => {
                    return Err(self.error("a control character (a line break?) in a string"));
                }
                Some(_) => self.pos += 1,
            }
        }
        let end = self.pos.min(self.bytes.len());
        serde_json::from_str(&self.text[start..end]).map_err(|_| {
            self.pos = start;
            self.error("a string with an invalid escape")
        })
    }

    fn object(&mut self, depth: usize) -> Result<Node, JsoncError> {
        let start = self.pos;
        self.pos += 1;
        let mut members = Vec::new();
        loop {
            self.skip()?;
            match self.peek() {
                Some(b'}') => break,
                Some(b'"') => {}
                _ => return Err(self.error("expected a key in quotes or '}'")),
            }
            let key_start = self.pos;
            let key = self.string()?;
            self.skip()?;
            if self.peek() != Some(b':') {
                return Err(self.error("expected ':' after the key"));
            }
            self.pos += 1;
            self.skip()?;
            let value = self.value(depth + 1)?;
            self.skip()?;
            let comma = (self.peek() == Some(b',')).then_some(self.pos);
            members.push(Member {
                key,
                key_start,
                value,
                comma,
            });
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => break,
                _ => return Err(self.error("expected ',' or '}'")),
            }
        }
        self.pos += 1;
        Ok(Node {
            start,
            end: self.pos,
            kind: Kind::Object(members),
        })
    }

    fn array(&mut self, depth: usize) -> Result<Node, JsoncError> {
        let start = self.pos;
        self.pos += 1;
        let mut items = Vec::new();
        loop {
            self.skip()?;
            if self.peek() == Some(b']') {
                break;
            }
            items.push(self.value(depth + 1)?);
            self.skip()?;
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => break,
                _ => return Err(self.error("expected ',' or ']'")),
            }
        }
        self.pos += 1;
        Ok(Node {
            start,
            end: self.pos,
            kind: Kind::Array(items),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    const PROGRAM: &str = "/opt/bin/droid-executor";

    fn entry() -> ZedEntry<'static> {
        ZedEntry {
            name: DEFAULT_NAME,
            program: Path::new(PROGRAM),
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

    #[test]
    fn a_custom_name_and_the_snippet() {
        let named = ZedEntry {
            name: "Droid \"work\"",
            program: Path::new(PROGRAM),
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
                let root = parse(&text).unwrap().unwrap();
                prop_assert_eq!(value_of(&text, &root), settings.clone());
                match edit(Some(&text), &entry()) {
                    Ok((out, action)) => {
                        prop_assert!(settings.get("agent_servers").is_none_or(Value::is_object));
                        let now = value_of(&out, &parse(&out).unwrap().unwrap());
                        prop_assert_eq!(now, with_entry(settings, DEFAULT_NAME, &entry().value()));
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
