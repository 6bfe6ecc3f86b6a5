//! Tool schemas every MCP client can read. The contract's schemas are valid JSON Schema 2020-12,
//! but two of schemars' habits trip real clients: `"type": ["string", "null"]` (the Inspector's
//! `--strict` lint asks for `anyOf`, and some model providers reject type arrays) and
//! `"format": "uint64"` and friends (the TypeScript SDK v1's ajv logs "unknown format" for each).
//! [`portable`] rewrites the first into `anyOf` and drops the second; what the schema accepts is
//! unchanged (the numeric bounds stay as `minimum`).

use serde_json::{Map, Value, json};

/// Keywords that stay on the outside of an `anyOf` made from a type array: they describe the
/// property, not one of its alternatives.
const ANNOTATIONS: &[&str] = &["description", "default", "title", "examples", "deprecated"];

fn numeric_format(f: &str) -> bool {
    ["int", "uint", "float", "double"]
        .iter()
        .any(|p| f.starts_with(p))
}

/// `schema` with type arrays as `anyOf` and schemars' numeric formats removed, everywhere.
pub fn portable(schema: &Value) -> Value {
    let mut v = schema.clone();
    rewrite(&mut v);
    v
}

fn rewrite(v: &mut Value) {
    match v {
        Value::Array(a) => a.iter_mut().for_each(rewrite),
        Value::Object(m) => {
            if m.get("format")
                .and_then(Value::as_str)
                .is_some_and(numeric_format)
            {
                m.shift_remove("format");
            }
            split_type_array(m);
            m.values_mut().for_each(rewrite);
        }
        _ => {}
    }
}

/// `{"type": [T, "null"], …}` → `{"anyOf": [{"type": T, …}, {"type": "null"}], description…}`.
fn split_type_array(m: &mut Map<String, Value>) {
    let Some(Value::Array(types)) = m.get("type") else {
        return;
    };
    let has_null = types.iter().any(|t| t == "null");
    let others: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
    if !has_null || others.len() != 1 {
        return;
    }
    let mut branch = Map::new();
    branch.insert("type".into(), others[0].clone());
    let keys: Vec<String> = m.keys().cloned().collect();
    for k in keys {
        if k == "type" || ANNOTATIONS.contains(&k.as_str()) {
            continue;
        }
        if let Some(val) = m.shift_remove(&k) {
            branch.insert(k, val);
        }
    }
    if let Some(Value::Array(e)) = branch.get_mut("enum") {
        e.retain(|x| !x.is_null());
    }
    m.shift_remove("type");
    m.insert(
        "anyOf".into(),
        json!([Value::Object(branch), {"type": "null"}]),
    );
}

/// Keywords that are prose for a reader, not rules: [`terse`] drops them.
const PROSE: &[&str] = &["description", "title", "examples", "$comment"];

/// `schema` without its prose, validating exactly what it validates: every `description` and
/// `title` of a schema (never a property that happens to be named so) removed, and a `oneOf` of
/// string constants written as the `enum` it is. For the schemas a model does not need to read
/// twice: output schemas (the result explains itself, and three tools share it) and the input of
/// `droid_submit` (its description says the arguments are `execute_droid_task`'s).
pub fn terse(schema: &Value) -> Value {
    let mut v = schema.clone();
    strip(&mut v);
    v
}

fn strip(v: &mut Value) {
    let Value::Object(m) = v else {
        return;
    };
    for k in PROSE {
        m.shift_remove(*k);
    }
    for key in ["properties", "$defs", "definitions", "patternProperties"] {
        if let Some(Value::Object(named)) = m.get_mut(key) {
            named.values_mut().for_each(strip);
        }
    }
    for key in [
        "items",
        "additionalProperties",
        "not",
        "contains",
        "if",
        "then",
        "else",
    ] {
        if let Some(sub) = m.get_mut(key) {
            strip(sub);
        }
    }
    for key in ["anyOf", "oneOf", "allOf", "prefixItems"] {
        if let Some(Value::Array(subs)) = m.get_mut(key) {
            subs.iter_mut().for_each(strip);
        }
    }
    // {"oneOf": [{"type": "string", "const": "a"}, …]} is {"type": "string", "enum": ["a", …]}
    let consts: Option<Vec<Value>> = match m.get("oneOf") {
        Some(Value::Array(subs)) if !subs.is_empty() => subs
            .iter()
            .map(|b| match b.as_object() {
                Some(o) if o.len() == 2 && o.get("type") == Some(&json!("string")) => {
                    o.get("const").filter(|c| c.is_string()).cloned()
                }
                _ => None,
            })
            .collect(),
        _ => None,
    };
    if let Some(values) = consts
        && !m.contains_key("type")
        && !m.contains_key("enum")
    {
        m.shift_remove("oneOf");
        m.insert("type".into(), json!("string"));
        m.insert("enum".into(), Value::Array(values));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_arrays_become_any_of_and_numeric_formats_go() {
        let s = json!({
            "type": "object",
            "properties": {
                "model": {"type": ["string", "null"], "maxLength": 256, "description": "m", "default": null},
                "effort": {"type": ["string", "null"], "enum": ["low", "high", null]},
                "n": {"type": "integer", "format": "uint64", "minimum": 0},
                "when": {"type": "string", "format": "date-time"},
            },
        });
        let p = portable(&s);
        assert_eq!(
            p["properties"]["model"],
            json!({"anyOf": [{"type": "string", "maxLength": 256}, {"type": "null"}], "description": "m", "default": null})
        );
        assert_eq!(
            p["properties"]["effort"],
            json!({"anyOf": [{"type": "string", "enum": ["low", "high"]}, {"type": "null"}]})
        );
        assert_eq!(
            p["properties"]["n"],
            json!({"type": "integer", "minimum": 0})
        );
        assert_eq!(p["properties"]["when"]["format"], "date-time");
    }

    #[test]
    fn terse_drops_prose_but_not_properties_named_like_it_and_keeps_the_rules() {
        let s = json!({
            "type": "object", "title": "T", "description": "d",
            "properties": {
                "description": {"type": "string", "description": "a property named description"},
                "kind": {"oneOf": [{"type": "string", "const": "a", "description": "A"},
                                   {"type": "string", "const": "b"}], "description": "k"},
                "mixed": {"oneOf": [{"type": "string", "const": "a"}, {"type": "integer"}]},
                "list": {"type": "array", "items": {"$ref": "#/$defs/X"}, "maxItems": 3},
            },
            "required": ["description"],
            "$defs": {"X": {"type": "string", "maxLength": 9, "title": "X"}},
        });
        assert_eq!(
            terse(&s),
            json!({
                "type": "object",
                "properties": {
                    "description": {"type": "string"},
                    "kind": {"type": "string", "enum": ["a", "b"]},
                    "mixed": {"oneOf": [{"type": "string", "const": "a"}, {"type": "integer"}]},
                    "list": {"type": "array", "items": {"$ref": "#/$defs/X"}, "maxItems": 3},
                },
                "required": ["description"],
                "$defs": {"X": {"type": "string", "maxLength": 9}},
            })
        );
    }

    #[test]
    fn the_contract_schemas_come_out_clean() {
        fn walk(v: &Value, bad: &mut Vec<String>) {
            match v {
                Value::Object(m) => {
                    if m.get("type").is_some_and(Value::is_array) {
                        bad.push(format!("type array in {v}"));
                    }
                    if m.get("format")
                        .and_then(Value::as_str)
                        .is_some_and(numeric_format)
                    {
                        bad.push(format!("format in {v}"));
                    }
                    m.values().for_each(|x| walk(x, bad));
                }
                Value::Array(a) => a.iter().for_each(|x| walk(x, bad)),
                _ => {}
            }
        }
        for s in [
            droid_contract::request_schema(),
            droid_contract::result_schema(),
            droid_contract::task_record_schema(),
        ] {
            let mut bad = Vec::new();
            walk(&portable(&s), &mut bad);
            assert!(bad.is_empty(), "{bad:#?}");
        }
    }
}
