//! Secret redaction (docs/architecture.md#security): Factory keys (`fk-…`), bearer tokens (the
//! scheme in any case),
//! `FACTORY_API_KEY` assignments whatever the value looks like, and the exact values of
//! secret-looking variables in droid's environment are replaced before anything reaches a result,
//! a log or the store.

/// Replaces known secrets in text.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    exact: Vec<String>,
}

const MASK: &str = "[REDACTED]";

/// What a secret follows (matched without regard to ASCII case), and the shortest run of token
/// characters after it that counts as one: a Factory key, a bearer token, or the value of a
/// `FACTORY_API_KEY` assignment (shell, `.env`, YAML or JSON style) whatever it looks like.
pub(crate) const SECRET_PREFIXES: &[(&str, usize)] = &[
    ("bearer ", 8),
    ("fk-", 8),
    ("factory_api_key=", 4),
    ("factory_api_key=\"", 4),
    ("factory_api_key='", 4),
    ("factory_api_key: ", 4),
    ("factory_api_key\": \"", 4),
    ("factory_api_key\":\"", 4),
];

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
        mask_runs(&out, SECRET_PREFIXES)
    }

    /// `value` with secrets replaced in every string of its JSON form (a result, an event);
    /// `value` itself if the masked form no longer reads back as a `T`.
    #[must_use]
    pub fn apply_to<T: serde::Serialize + serde::de::DeserializeOwned>(&self, value: T) -> T {
        let Ok(mut json) = serde_json::to_value(&value) else {
            return value;
        };
        self.apply_value(&mut json);
        serde_json::from_value(json).unwrap_or(value)
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

/// Mask every run of token characters (at least as long as its prefix asks) that follows one of
/// `prefixes`, matched without regard to ASCII case. The runs are all found in the same text
/// before any is masked, so a run that swallows the next prefix (`fk-abcBearer <token>`, two
/// tokens written back to back) cannot hide the secret after it.
fn mask_runs(text: &str, prefixes: &[(&str, usize)]) -> String {
    // RFC 6750's b64token characters (`~` included), which covers Factory keys too; all ASCII, so
    // a run's length in bytes is its length in characters
    let is_tok = |b: u8| {
        b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'=' | b'+' | b'/')
    };
    // ASCII lowercasing keeps every byte offset
    let lower = text.to_ascii_lowercase();
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for (prefix, min) in prefixes {
        let min = *min;
        for (i, _) in lower.match_indices(prefix) {
            let start = i + prefix.len();
            let len = text.as_bytes()[start..]
                .iter()
                .take_while(|b| is_tok(**b))
                .count();
            if len >= min {
                runs.push((start, start + len));
            }
        }
    }
    runs.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end) in runs {
        if start < at {
            // inside (or overlapping) a run already masked
            at = at.max(end);
            continue;
        }
        out.push_str(&text[at..start]);
        out.push_str(MASK);
        at = end;
    }
    out.push_str(&text[at..]);
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
        assert_eq!(
            r.apply("authorization: bearer abc.def.ghi.jkl BEARER abcdefghijk"),
            "authorization: bearer [REDACTED] BEARER [REDACTED]"
        );
        assert_eq!(
            r.apply("FACTORY_API_KEY=hunter22 export factory_api_key=\"abcd\" {\"FACTORY_API_KEY\": \"sk-1234\"} FACTORY_API_KEY: zz99"),
            "FACTORY_API_KEY=[REDACTED] export factory_api_key=\"[REDACTED]\" {\"FACTORY_API_KEY\": \"[REDACTED]\"} FACTORY_API_KEY: [REDACTED]"
        );
        let mut v = serde_json::json!({"a": ["x s3cr3t-value", {"fk-abcdefgh123": 1}], "n": 2});
        r.apply_value(&mut v);
        assert_eq!(
            v,
            serde_json::json!({"a": ["x [REDACTED]", {"[REDACTED]": 1}], "n": 2})
        );
    }
}

#[cfg(test)]
mod props;
