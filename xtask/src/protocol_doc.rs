//! The skill's protocol reference (`skill/droid-executor/references/droid-executor-protocol.md`),
//! generated from the contract types' JSON Schemas so it cannot drift from what the binary
//! accepts and returns: one table per object type (field, type, required, meaning) and one list
//! per enumeration, in a fixed order. Every object and enumeration of the schemas must be listed
//! here and every listed name must exist: a type added, renamed or removed in the contract is an
//! error, never a section silently missing. The end-to-end suite (`suite::skill`) compiles this
//! file too and compares [`render`] with the checked-in reference, so the check runs with the
//! tests as well as in `cargo xtask codegen --check`.

use std::fmt::Write as _;

use anyhow::{Result, bail};
use serde_json::{Map, Value};

/// The object types, in reading order, and the enumerations after them.
const OBJECTS: &[&str] = &[
    "ExecutionRequest",
    "Context",
    "AgentChoice",
    "ExecutionResult",
    "FileChange",
    "CommandRun",
    "Tests",
    "Issue",
    "AgentInfo",
    "Usage",
    "Attempt",
    "CheckOutcome",
    "Diffstat",
    "SandboxInfo",
    "WorktreeInfo",
    "TaskRecord",
    "WorktreeAnswer",
];
const ENUMS: &[&str] = &[
    "ExecutionMode",
    "Autonomy",
    "ProviderId",
    "Status",
    "IssueType",
    "ChangeType",
    "CommandSource",
    "SandboxKind",
    "Isolation",
    "WorktreeState",
    "TaskState",
    "WorktreeAction",
    "WorktreeOutcome",
];

/// Every definition by name: the top-level schemas and their `$defs`.
fn definitions() -> Map<String, Value> {
    let mut defs = Map::new();
    for (name, mut schema) in [
        ("ExecutionRequest", droid_contract::request_schema()),
        ("ExecutionResult", droid_contract::result_schema()),
        ("TaskRecord", droid_contract::task_record_schema()),
        ("WorktreeAnswer", droid_contract::worktree_answer_schema()),
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

/// Every `$ref` name under `v`.
fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::Object(m) => {
            if let Some(name) = ref_name(v) {
                out.push(name);
            }
            for x in m.values() {
                refs(x, out);
            }
        }
        Value::Array(a) => {
            for x in a {
                refs(x, out);
            }
        }
        _ => {}
    }
}

/// Is `def` documented as a table (an object) or a list (an enumeration), rather than inline
/// where it is used (a scalar newtype such as `Objective`)?
fn is_object(def: &Value) -> bool {
    def.get("properties").is_some()
}

fn is_enum(def: &Value) -> bool {
    def.get("oneOf").is_some() || def.get("enum").is_some()
}

/// The lists above against the schemas: every listed name is there and of its kind, every
/// object and enumeration is listed, every `$ref` resolves.
fn check_listed(defs: &Map<String, Value>) -> Result<()> {
    let mut problems = Vec::new();
    for (list, names, kind, fits) in [
        (
            "OBJECTS",
            OBJECTS,
            "an object",
            is_object as fn(&Value) -> bool,
        ),
        ("ENUMS", ENUMS, "an enumeration", is_enum),
    ] {
        for name in names {
            match defs.get(*name) {
                None => problems.push(format!(
                    "{name} is listed in {list} but the contract's schemas have no such type \
                     (renamed or removed?)"
                )),
                Some(def) if !fits(def) => {
                    problems.push(format!("{name} is listed in {list} but is not {kind}"));
                }
                Some(_) => {}
            }
        }
    }
    for (name, def) in defs {
        let listed = OBJECTS.contains(&name.as_str()) || ENUMS.contains(&name.as_str());
        if !listed && (is_object(def) || is_enum(def)) {
            problems.push(format!(
                "the contract type {name} is not listed in OBJECTS or ENUMS: add it so the \
                 reference documents it"
            ));
        }
    }
    let mut used = Vec::new();
    for def in defs.values() {
        refs(def, &mut used);
    }
    for name in used {
        if !defs.contains_key(name) {
            problems.push(format!("$ref {name} does not resolve"));
        }
    }
    problems.sort();
    problems.dedup();
    if !problems.is_empty() {
        bail!(
            "the protocol reference cannot be generated (xtask/src/protocol_doc.rs):\n  {}",
            problems.join("\n  ")
        );
    }
    Ok(())
}

fn ref_name(v: &Value) -> Option<&str> {
    v.get("$ref")?.as_str()?.strip_prefix("#/$defs/")
}

/// A short type expression: `string`, `integer ≥ 1`, `[Issue]`, `Status`, `string | null`.
fn type_of(v: &Value, defs: &Map<String, Value>) -> String {
    if let Some(name) = ref_name(v) {
        // scalar newtypes (Objective, RelPath…) read better as their base type and limits
        // (every `$ref` resolves: `check_listed` ran first)
        if let Some(def) = defs.get(name).filter(|d| !is_object(d) && !is_enum(d)) {
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
///
/// # Errors
/// When the lists above and the contract's types disagree (a type missing, renamed or not
/// listed).
pub(crate) fn render() -> Result<String> {
    let defs = definitions();
    check_listed(&defs)?;
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
    // every name is there (`check_listed`)
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
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_unlisted_type_is_an_error() {
        let mut defs = definitions();
        check_listed(&defs).unwrap();
        let usage = defs.remove("Usage").unwrap();
        let err = check_listed(&defs).unwrap_err().to_string();
        assert!(
            err.contains("Usage is listed in OBJECTS but the contract's schemas have no such type"),
            "{err}"
        );
        assert!(err.contains("$ref Usage does not resolve"), "{err}");
        defs.insert("UsageRenamed".into(), usage);
        let err = check_listed(&defs).unwrap_err().to_string();
        assert!(
            err.contains("the contract type UsageRenamed is not listed in OBJECTS or ENUMS"),
            "{err}"
        );
    }
}
