//! Secret redaction (DESIGN §8): Factory keys (`fk-…`), bearer tokens, and the exact values of
//! secret-looking variables in droid's environment are replaced before anything reaches a result,
//! a log or the store.

/// Replaces known secrets in text.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    exact: Vec<String>,
}

const MASK: &str = "[REDACTED]";

impl Redactor {
    /// A redactor that also hides the values of `env`'s secret-looking variables
    /// (`*KEY*`, `*TOKEN*`, `*SECRET*`, `*PASSWORD*`) when they are at least 8 characters long.
    pub fn from_env<'a>(env: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut exact: Vec<String> = env
            .into_iter()
            .filter(|(k, v)| {
                let k = k.to_ascii_uppercase();
                v.len() >= 8
                    && ["KEY", "TOKEN", "SECRET", "PASSWORD"]
                        .iter()
                        .any(|w| k.contains(w))
            })
            .map(|(_, v)| v.to_owned())
            .collect();
        exact.sort_by_key(|s| std::cmp::Reverse(s.len()));
        exact.dedup();
        Self { exact }
    }

    /// The redactor for a child environment (droid's, as `EngineConfig::env` holds it).
    pub fn for_child_env(env: &[(std::ffi::OsString, std::ffi::OsString)]) -> Self {
        Self::from_env(
            env.iter()
                .filter_map(|(k, v)| Some((k.to_str()?, v.to_str()?))),
        )
    }

    /// `text` with secrets replaced.
    pub fn apply(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for s in &self.exact {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), MASK);
            }
        }
        mask_after(&mask_after(&out, "fk-", 8), "Bearer ", 8)
    }

    /// Replace secrets in every string (keys included) of a JSON value, in place.
    pub fn apply_value(&self, value: &mut serde_json::Value) {
        use serde_json::Value;
        match value {
            Value::String(s) => *s = self.apply(s),
            Value::Array(items) => items.iter_mut().for_each(|v| self.apply_value(v)),
            Value::Object(map) => {
                let entries = std::mem::take(map);
                for (k, mut v) in entries {
                    self.apply_value(&mut v);
                    map.insert(self.apply(&k), v);
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
}

/// Mask every run of token characters (at least `min` long) that follows `prefix`.
fn mask_after(text: &str, prefix: &str, min: usize) -> String {
    let is_tok =
        |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '=' | '+' | '/');
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(prefix) {
        let after = &rest[i + prefix.len()..];
        let len: usize = after
            .chars()
            .take_while(|c| is_tok(*c))
            .map(char::len_utf8)
            .sum();
        out.push_str(&rest[..i + prefix.len()]);
        if len >= min {
            out.push_str(MASK);
        } else {
            out.push_str(&after[..len]);
        }
        rest = &after[len..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hides_keys_tokens_and_env_values() {
        let r = Redactor::from_env([
            ("FACTORY_API_KEY", "fk-abcdefgh123"),
            ("MY_TOKEN", "s3cr3t-value"),
            ("PATH", "/usr/bin:/bin"),
        ]);
        assert_eq!(
            r.apply("key fk-zzzzzzzzzz and fk-abcdefgh123, Authorization: Bearer abc.def.ghi.jkl, s3cr3t-value, /usr/bin:/bin, fk-short"),
            "key fk-[REDACTED] and [REDACTED], Authorization: Bearer [REDACTED], [REDACTED], /usr/bin:/bin, fk-short"
        );
        let mut v = serde_json::json!({"a": ["x s3cr3t-value", {"fk-abcdefgh123": 1}], "n": 2});
        r.apply_value(&mut v);
        assert_eq!(
            v,
            serde_json::json!({"a": ["x [REDACTED]", {"[REDACTED]": 1}], "n": 2})
        );
    }
}
