//! The skill's protocol reference (`skill/droid-executor/references/droid-executor-protocol.md`),
//! generated from the contract types' JSON Schemas so it cannot drift from what the binary
//! accepts and returns: one table per object type (field, type, required, meaning) and one list
//! per enumeration, in a fixed order.

use std::fmt::Write as _;

use serde_json::{Map, Value};

/// The object types, in reading order, and the enumerations after them.
const OBJECTS: &[&str] = &[
    "ExecutionRequest",
    "Context",
    "ExecutionResult",
    "FileChange",
    "CommandRun",
    "Tests",
    "Issue",
    "DroidInfo",
    "Usage",
    "TaskRecord",
];
const ENUMS: &[&str] = &[
    "ExecutionMode",
    "Autonomy",
    "Status",
    "IssueType",
    "ChangeType",
    "CommandSource",
    "TaskState",
];

/// Every definition by name: the three top-level schemas and their `$defs`.
fn definitions() -> Map<String, Value> {
    let mut defs = Map::new();
    for (name, mut schema) in [
        ("ExecutionRequest", droid_contract::request_schema()),
        ("ExecutionResult", droid_contract::result_schema()),
        ("TaskRecord", droid_contract::task_record_schema()),
    ] {
        if let Some(Value::Object(d)) = schema.as_object_mut().and_then(|m| m.remove("$defs")) {
            for (k, v) in d {
                defs.entry(k).or_insert(v);
            }
        }
        defs.insert(name.to_owned(), schema);
    }
    defs
}

fn ref_name(v: &Value) -> Option<&str> {
    v.get("$ref")?.as_str()?.strip_prefix("#/$defs/")
}

/// A short type expression: `string`, `integer ≥ 1`, `[Issue]`, `Status`, `string | null`.
fn type_of(v: &Value, defs: &Map<String, Value>) -> String {
    if let Some(name) = ref_name(v) {
        let def = &defs[name];
        // scalar newtypes (Objective, RelPath…) read better as their base type and limits
        if def.get("properties").is_none()
            && def.get("oneOf").is_none()
            && def.get("enum").is_none()
        {
            return type_of(def, defs);
        }
        return format!("[{name}](#{})", name.to_ascii_lowercase());
    }
    if let Some(any) = v.get("anyOf").and_then(Value::as_array) {
        return any
            .iter()
            .map(|x| type_of(x, defs))
            .collect::<Vec<_>>()
            .join(" \\| ");
    }
    if let Some(e) = v.get("enum").and_then(Value::as_array) {
        return e
            .iter()
            .map(|x| match x {
                Value::String(s) => format!("`{s}`"),
                other => format!("`{other}`"),
            })
            .collect::<Vec<_>>()
            .join(" \\| ");
    }
    let base = match v.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" \\| "),
        _ => "any".to_owned(),
    };
    let mut out = if base.starts_with("array") {
        let item = v
            .get("items")
            .map_or("any".to_owned(), |i| type_of(i, defs));
        base.replacen("array", &format!("list of {item}"), 1)
    } else {
        base
    };
    let mut limits = Vec::new();
    for (key, label) in [
        ("minLength", "min length"),
        ("maxLength", "max length"),
        ("minimum", "≥"),
        ("maximum", "≤"),
        ("maxItems", "max items"),
    ] {
        if let Some(n) = v.get(key) {
            limits.push(format!("{label} {n}"));
        }
    }
    if !limits.is_empty() {
        let _ = write!(out, " ({})", limits.join(", "));
    }
    out
}

/// `s` on one line, table-safe, with rustdoc links (`` [`crate::X`] ``) reduced to the name.
fn one_line(s: &str) -> String {
    let mut text = s.split_whitespace().collect::<Vec<_>>().join(" ");
    while let Some(start) = text.find("[`crate::") {
        let Some(len) = text[start..].find("`]") else {
            break;
        };
        let name = text[start + "[`crate::".len()..start + len].to_owned();
        text.replace_range(start..start + len + 2, &name);
    }
    text.replace('|', "\\|")
}

fn object_table(name: &str, def: &Value, defs: &Map<String, Value>, out: &mut String) {
    let _ = writeln!(out, "### {name}\n");
    if let Some(d) = def.get("description").and_then(Value::as_str) {
        let _ = writeln!(out, "{}\n", one_line(d));
    }
    let required: Vec<&str> = def
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "| field | type | required | meaning |\n|---|---|---|---|"
    );
    if let Some(props) = def.get("properties").and_then(Value::as_object) {
        for (field, p) in props {
            let mut meaning = p
                .get("description")
                .and_then(Value::as_str)
                .map(one_line)
                .unwrap_or_default();
            if let Some(d) = p.get("default").filter(|d| !d.is_null()) {
                let _ = write!(meaning, " Default: `{d}`.");
            }
            let _ = writeln!(
                out,
                "| `{field}` | {} | {} | {} |",
                type_of(p, defs),
                if required.contains(&field.as_str()) {
                    "yes"
                } else {
                    "no"
                },
                meaning.trim()
            );
        }
    }
    out.push('\n');
}

fn enum_list(name: &str, def: &Value, out: &mut String) {
    let _ = writeln!(out, "### {name}\n");
    if let Some(d) = def.get("description").and_then(Value::as_str) {
        let _ = writeln!(out, "{}\n", one_line(d));
    }
    if let Some(variants) = def.get("oneOf").and_then(Value::as_array) {
        for v in variants {
            let value = v
                .get("const")
                .or_else(|| v.get("enum").and_then(|e| e.get(0)));
            let value = value.and_then(Value::as_str).unwrap_or("?");
            let d = v
                .get("description")
                .and_then(Value::as_str)
                .map(one_line)
                .unwrap_or_default();
            let _ = writeln!(out, "- `{value}`: {d}");
        }
    } else if let Some(values) = def.get("enum").and_then(Value::as_array) {
        for v in values.iter().filter_map(Value::as_str) {
            let _ = writeln!(out, "- `{v}`");
        }
    }
    out.push('\n');
}

/// The document.
pub(crate) fn render() -> String {
    let defs = definitions();
    let mut out = String::from(
        "# droid-executor protocol\n\n\
         <!-- Generated by `cargo xtask codegen` from the contract types (droid-contract); do not \
         edit. `cargo xtask codegen --check` fails when it is stale. -->\n\n\
         A calling agent sends an **ExecutionRequest** (JSON) and gets back an \
         **ExecutionResult**. Background tasks are reported as a **TaskRecord** whose `result` is \
         the ExecutionResult once the task has finished. Unknown request fields are refused; \
         every violation is reported at once, each as a `validation_error` issue naming its JSON \
         path (`$.context.repo_root`).\n\n\
         JSON Schemas (draft 2020-12): `droid-executor schema request|result|task-record`.\n\n\
         ## Objects\n\n",
    );
    for name in OBJECTS {
        if let Some(def) = defs.get(*name) {
            object_table(name, def, &defs, &mut out);
        }
    }
    out.push_str("## Enumerations\n\n");
    for name in ENUMS {
        if let Some(def) = defs.get(*name) {
            enum_list(name, def, &mut out);
        }
    }
    out.truncate(out.trim_end().len());
    out.push('\n');
    out
}
