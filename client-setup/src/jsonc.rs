//! Editing JSON-with-comments files the way a person would: the settings files of Zed, droid,
//! Gemini CLI and OpenCode are JSON with comments (`//`, `/* */`) and trailing commas, written by
//! hand. Reading one into a JSON value and writing that back would drop every comment and
//! reformat the file, so [`set`] edits the text: a small JSONC parser records where each member
//! lies, and each change replaces or inserts only the bytes of one value; every other byte stays
//! as it was. The edited text is parsed again and must say exactly what the old one said with
//! the changes made, or nothing is returned. A text that is not JSONC we can parse is refused
//! with its line and column.

use serde_json::{Map, Value, json};

/// Nesting deeper than this is refused rather than recursed into.
const MAX_DEPTH: usize = 128;

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

/// One change: the value at `path` (keys of nested objects, from the top) made `value`; the
/// objects on the way are made when absent.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The keys leading to the value.
    pub path: Vec<String>,
    /// Its new value.
    pub value: Value,
}

impl Change {
    /// The change of the value at `path` to `value`.
    pub fn new<S: AsRef<str>>(path: &[S], value: Value) -> Change {
        Change {
            path: path.iter().map(|k| k.as_ref().to_owned()).collect(),
            value,
        }
    }
}

/// The value `text` holds (`None`: only blanks and comments).
///
/// # Errors
/// Where `text` is not JSONC.
pub fn value(text: &str) -> Result<Option<Value>, JsoncError> {
    Ok(parse(text)?.map(|root| value_of(text, &root)))
}

/// `text` (`None`: no file yet) with `changes` made, in order, every other byte kept; a value
/// that already says what a change says is left as it is.
///
/// # Errors
/// Where `text` is not JSONC with an object at the top and at every key on a change's path but
/// the last (the error names the first key that is not an object).
pub fn set(text: Option<&str>, changes: &[Change]) -> Result<String, JsoncError> {
    let Some(text) = text else {
        let mut out = new_document("", &changes[..changes.len().min(1)], "\n");
        for c in changes.iter().skip(1) {
            out = set_one(&out, c, "\n")?;
        }
        return Ok(out);
    };
    let nl = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let before = value(text)?;
    let mut out = text.to_owned();
    for c in changes {
        out = set_one(&out, c, nl)?;
    }
    // the edit must say what the old text said, with the changes made
    let mut expected = before.unwrap_or_else(|| Value::Object(Map::new()));
    for c in changes {
        with_change(&mut expected, &c.path, &c.value);
    }
    if value(&out).ok().flatten().as_ref() != Some(&expected) {
        let start = parse(text).ok().flatten().map_or(0, |r| r.start);
        return Err(error_at(
            text,
            start,
            "the entry could not be written without changing other settings",
        ));
    }
    Ok(out)
}

/// What makes the entry at `at` say what `wanted` (an object) says when it is now `current`:
/// the whole entry when there is none or it is not an object; else each key of `wanted`, and for
/// the keys named in `merged` (an `env` map) each member of its object, so that what the user
/// added to the entry and to those maps stays.
pub fn entry_changes(
    at: &[&str],
    current: Option<&Value>,
    wanted: &Value,
    merged: &[&str],
) -> Vec<Change> {
    let path =
        |keys: &[&str]| -> Vec<String> { at.iter().chain(keys).map(|k| (*k).to_owned()).collect() };
    let (Some(Value::Object(old)), Value::Object(want)) = (current, wanted) else {
        return vec![Change {
            path: path(&[]),
            value: wanted.clone(),
        }];
    };
    let mut out = Vec::new();
    for (key, value) in want {
        match (value, old.get(key)) {
            (Value::Object(members), Some(Value::Object(_))) if merged.contains(&key.as_str()) => {
                for (member, v) in members {
                    out.push(Change {
                        path: path(&[key, member]),
                        value: v.clone(),
                    });
                }
            }
            _ => out.push(Change {
                path: path(&[key]),
                value: value.clone(),
            }),
        }
    }
    out
}

/// `value` with `new` at `path` (objects made on the way, a non-object replaced).
fn with_change(value: &mut Value, path: &[String], new: &Value) {
    let Some((last, init)) = path.split_last() else {
        *value = new.clone();
        return;
    };
    let mut here = value;
    for key in init {
        if !here.is_object() {
            *here = Value::Object(Map::new());
        }
        let Some(map) = here.as_object_mut() else {
            return;
        };
        here = map
            .entry(key.clone())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    if !here.is_object() {
        *here = Value::Object(Map::new());
    }
    if let Some(map) = here.as_object_mut() {
        map.insert(last.clone(), new.clone());
    }
}

/// `path` nested around `value`: `{"a": {"b": value}}` for `["a", "b"]`.
fn nested(path: &[String], value: &Value) -> Value {
    path.iter().rev().fold(value.clone(), |inner, key| {
        let mut map = Map::new();
        map.insert(key.clone(), inner);
        Value::Object(map)
    })
}

/// A whole new document after `prefix` (comments, or nothing), holding the first change.
fn new_document(prefix: &str, first: &[Change], nl: &str) -> String {
    let doc = first
        .first()
        .map_or_else(|| Value::Object(Map::new()), |c| nested(&c.path, &c.value));
    let sep = if prefix.is_empty() || prefix.ends_with('\n') {
        ""
    } else {
        nl
    };
    format!("{prefix}{sep}{}{nl}", render(&doc, "", "  ", nl))
}

/// `text` with one change made.
fn set_one(text: &str, change: &Change, nl: &str) -> Result<String, JsoncError> {
    let Some(root) = parse(text)? else {
        // nothing but comments and blanks: they stay, the object follows them
        return Ok(new_document(text, std::slice::from_ref(change), nl));
    };
    let Kind::Object(top) = &root.kind else {
        return Err(error_at(
            text,
            root.start,
            "the settings are not a JSON object",
        ));
    };
    let unit = indent_unit(text, top);
    let mut node = &root;
    let mut edits = Vec::new();
    for (i, key) in change.path.iter().enumerate() {
        let Kind::Object(members) = &node.kind else {
            return Err(error_at(
                text,
                node.start,
                &format!("{} is not an object", change.path[..i].join(".")),
            ));
        };
        match members.iter().rev().find(|m| &m.key == key) {
            None => {
                let rest = nested(&change.path[i + 1..], &change.value);
                edits = insert_members(text, node, &[(key.clone(), rest)], &unit, nl);
                break;
            }
            Some(m) if i + 1 == change.path.len() => {
                if value_of(text, &m.value) != change.value {
                    let indent = line_indent(text, m.value.start);
                    edits.push(Edit {
                        start: m.value.start,
                        end: m.value.end,
                        text: render(&change.value, &indent, &unit, nl),
                    });
                }
            }
            Some(m) => node = &m.value,
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
    Ok(out)
}

/// Replace the bytes `start..end` with `text`.
#[derive(Debug)]
struct Edit {
    start: usize,
    end: usize,
    text: String,
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
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn nested_keys_are_made_and_values_replaced_in_place() {
        let text = "{\n  // droid's settings\n  \"model\": \"x\",\n  \"mcpAutonomyOverrides\": {\"other\": {\"defaultLevel\": \"low\"}}\n}\n";
        let out = set(
            Some(text),
            &[
                Change::new(&["blockOnMcpLoad"], json!(true)),
                Change::new(
                    &["mcpAutonomyOverrides", "droid-executor", "tools", "ask"],
                    json!("low"),
                ),
                Change::new(&["model"], json!("y")),
            ],
        )
        .unwrap();
        assert_eq!(
            out,
            "{\n  // droid's settings\n  \"model\": \"y\",\n  \"mcpAutonomyOverrides\": {\"other\": {\"defaultLevel\": \"low\"},\n    \"droid-executor\": {\n      \"tools\": {\n        \"ask\": \"low\"\n      }\n    }\n  },\n  \"blockOnMcpLoad\": true\n}\n"
        );
        assert_eq!(
            value(&out).unwrap().unwrap(),
            json!({"model": "y", "blockOnMcpLoad": true, "mcpAutonomyOverrides": {
                "other": {"defaultLevel": "low"}, "droid-executor": {"tools": {"ask": "low"}}}})
        );
        // the same changes again change nothing
        let again = set(
            Some(&out),
            &[Change::new(
                &["mcpAutonomyOverrides", "droid-executor", "tools", "ask"],
                json!("low"),
            )],
        )
        .unwrap();
        assert_eq!(again, out);
    }

    #[test]
    fn an_absent_file_and_a_key_that_is_not_an_object() {
        assert_eq!(
            set(
                None,
                &[Change::new(
                    &["mcp", "droid-executor"],
                    json!({"enabled": true})
                )]
            )
            .unwrap(),
            "{\n  \"mcp\": {\n    \"droid-executor\": {\n      \"enabled\": true\n    }\n  }\n}\n"
        );
        assert_eq!(
            set(
                Some("{\"mcp\": [1]}"),
                &[Change::new(&["mcp", "x"], json!(1))]
            )
            .unwrap_err(),
            JsoncError {
                line: 1,
                column: 9,
                message: "mcp is not an object".into()
            }
        );
    }

    #[test]
    fn an_entry_keeps_what_the_user_added() {
        let wanted = json!({"command": "/bin/x", "env": {"A": "1"}, "trust": true});
        assert_eq!(
            entry_changes(&["mcpServers", "s"], None, &wanted, &["env"]),
            vec![Change::new(&["mcpServers", "s"], wanted.clone())]
        );
        let current = json!({"command": "/old", "env": {"MINE": "2"}, "cwd": "/w"});
        assert_eq!(
            entry_changes(&["mcpServers", "s"], Some(&current), &wanted, &["env"]),
            vec![
                Change::new(&["mcpServers", "s", "command"], json!("/bin/x")),
                Change::new(&["mcpServers", "s", "env", "A"], json!("1")),
                Change::new(&["mcpServers", "s", "trust"], json!(true)),
            ]
        );
    }
}
