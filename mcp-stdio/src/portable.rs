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

/// How deep [`compact`] follows `$ref`s: the contract's definitions are not recursive, and a
/// schema that were would keep its deeper `$ref`s rather than loop.
const INLINE_DEPTH: usize = 8;

/// `schema` as small as a model-facing input schema can be while it keeps every rule a model
/// must follow (types, enums, maximum lengths, counts, ranges, patterns, required fields):
/// [`terse`], then each `$ref` replaced by the definition it names (the definitions dropped),
/// every `default` and `$schema` dropped, `minLength: 1` dropped (the server refuses a blank
/// value naming the field), and the `null` alternative of an optional field left out (a model
/// leaves the field out; the server still takes `null` as absent). For the default
/// `tools/list`, whose model-facing part every client puts in the model's context.
pub fn compact(schema: &Value) -> Value {
    let mut v = terse(schema);
    let defs = match v.as_object_mut() {
        Some(m) => {
            m.shift_remove("$schema");
            m.shift_remove("$defs").unwrap_or(Value::Null)
        }
        None => Value::Null,
    };
    inline(&mut v, &defs, 0);
    v
}

fn inline(v: &mut Value, defs: &Value, depth: usize) {
    match v {
        Value::Array(a) => a.iter_mut().for_each(|x| inline(x, defs, depth)),
        Value::Object(m) => {
            let target = m
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix("#/$defs/"))
                .and_then(|name| defs.get(name))
                .filter(|_| depth < INLINE_DEPTH)
                .cloned();
            if let Some(Value::Object(def)) = target {
                m.shift_remove("$ref");
                for (k, x) in def {
                    m.entry(k).or_insert(x);
                }
                inline(v, defs, depth + 1);
                return;
            }
            m.shift_remove("default");
            // non-blank: a model sends a sentence or a path, and the server's refusal of a
            // blank one names the field; the bytes go to the rules a model may break (lengths)
            if m.get("minLength") == Some(&json!(1)) {
                m.shift_remove("minLength");
            }
            // {"anyOf": [X, {"type": "null"}]} is X for a model
            let non_null = match m.get("anyOf") {
                Some(Value::Array(alts)) if alts.len() == 2 => {
                    let null = json!({"type": "null"});
                    match (&alts[0], &alts[1]) {
                        (x, n) | (n, x) if *n == null && *x != null => Some(x.clone()),
                        _ => None,
                    }
                }
                _ => None,
            };
            if let Some(Value::Object(x)) = non_null {
                m.shift_remove("anyOf");
                for (k, val) in x {
                    m.entry(k).or_insert(val);
                }
                // what it became may be a `$ref` itself
                inline(v, defs, depth + 1);
                return;
            }
            for x in m.values_mut() {
                inline(x, defs, depth);
            }
        }
        _ => {}
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
    fn compact_inlines_definitions_and_drops_defaults_and_nulls() {
        let s = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object", "description": "d",
            "properties": {
                "a": {"$ref": "#/$defs/A", "description": "a", "default": ""},
                "b": {"anyOf": [{"$ref": "#/$defs/A"}, {"type": "null"}], "default": null},
                "c": {"type": "array", "items": {"$ref": "#/$defs/A"}, "maxItems": 3, "default": []},
                "d": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            },
            "required": ["a"],
            "$defs": {"A": {"type": "string", "maxLength": 9, "description": "x"}},
        });
        let a = json!({"type": "string", "maxLength": 9});
        assert_eq!(
            compact(&json!({"type": "string", "minLength": 1, "maxLength": 2})),
            json!({"type": "string", "maxLength": 2})
        );
        assert_eq!(
            compact(&s),
            json!({
                "type": "object",
                "properties": {
                    "a": a,
                    "b": a,
                    "c": {"type": "array", "items": a, "maxItems": 3},
                    "d": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                },
                "required": ["a"],
            })
        );
        // the request keeps its limits: lengths, counts and ranges
        let req = compact(&portable(&droid_contract::request_schema())).to_string();
        for rule in [
            "\"maxLength\":50000",
            "\"maxLength\":100000",
            "\"maxItems\":100",
            "\"maximum\":86400",
        ] {
            assert!(req.contains(rule), "{rule} missing from {req}");
        }
        assert!(!req.contains("$ref") && !req.contains("\"null\""), "{req}");
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
