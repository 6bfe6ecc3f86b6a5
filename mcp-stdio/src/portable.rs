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
                m.remove("format");
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
        if let Some(val) = m.remove(&k) {
            branch.insert(k, val);
        }
    }
    if let Some(Value::Array(e)) = branch.get_mut("enum") {
        e.retain(|x| !x.is_null());
    }
    m.remove("type");
    m.insert(
        "anyOf".into(),
        json!([Value::Object(branch), {"type": "null"}]),
    );
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
