//! Secret redaction (docs/architecture.md#security): what the store keeps (`request.json`, `events.ndjson`,
//! `result.json`), results and logs have secrets replaced by `[REDACTED]`; the request droid
//! itself gets is never changed (it needs the real instructions).
//!
//! Replaced are:
//! - known token shapes, the prefix kept: Factory keys (`fk-…`), bearer tokens (the scheme in any
//!   case), OpenAI/Anthropic-style keys (`sk-…`), GitHub tokens (`ghp_`, `gho_`, `ghu_`, `ghs_`,
//!   `ghr_`, `github_pat_`), GitLab tokens (`glpat-…`), Slack tokens (`xoxb-`, `xoxp-`, `xoxa-`,
//!   `xoxr-`, `xoxs-`, `xoxe-`), AWS access key ids (`AKIA`/`ASIA` + 16); the shapes that could
//!   end a longer word (`sk-` in `task-…`) only at the start of a word;
//! - `FACTORY_API_KEY` assignments whatever the value looks like;
//! - the password of a URL's user information (`scheme://user:password@host`, a proxy's);
//! - the exact values (8 characters or more) of the credentials droid-executor passes to the
//!   child: every variable whose name holds `KEY`, `TOKEN`, `SECRET`, `PASSWORD`, `PASSWD`,
//!   `CREDENTIAL`, `AUTH` or `COOKIE`, every `FACTORY_*` variable but the few known to hold no
//!   secret, and the password of every proxy variable;
//! - values the front-end names (the bridge's own token, [`crate::EngineConfig::redact`]).

/// Replaces known secrets in text.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    exact: Vec<String>,
    /// Each of `exact` as it reads inside a JSON string (`"` and `\` escaped, control
    /// characters too): what [`Redactor::apply_to`]'s quick test looks for.
    exact_json: Vec<String>,
}

pub(crate) const MASK: &str = "[REDACTED]";

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

/// Token shapes that count only at the start of a word (the byte before is not a letter, digit
/// or `_`), with the shortest run of token characters after the prefix that counts as one:
/// matched without regard to ASCII case.
pub(crate) const WORD_PREFIXES: &[(&str, usize)] = &[
    ("sk-", 20),
    ("ghp_", 20),
    ("gho_", 20),
    ("ghu_", 20),
    ("ghs_", 20),
    ("ghr_", 20),
    ("github_pat_", 20),
    ("glpat-", 20),
    ("xoxb-", 10),
    ("xoxp-", 10),
    ("xoxa-", 10),
    ("xoxr-", 10),
    ("xoxs-", 10),
    ("xoxe-", 10),
];

/// Words in a variable's name that say its value is a credential (matched in upper case).
const CREDENTIAL_WORDS: &[&str] = &[
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
];

/// `FACTORY_*` variables known to hold no secret (droid's documented switches and endpoints);
/// every other `FACTORY_*` value is taken for a credential.
const FACTORY_PLAIN: &[&str] = &[
    "FACTORY_AIRGAP_ENABLED",
    "FACTORY_API_BASE_URL",
    "FACTORY_TELEMETRY_INGEST_BASE_URL",
    "FACTORY_HOME",
    "FACTORY_DISABLE_SETTINGS_PERSISTENCE",
];

/// Shortest value hidden wherever it appears (a shorter one would mask ordinary words).
const MIN_EXACT: usize = 8;

/// Whether variable `name` holds a credential.
pub(crate) fn is_credential(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    // `AUTHOR` (git's author variables) is a name, not a credential
    let words = upper.replace("AUTHOR", "");
    CREDENTIAL_WORDS.iter().any(|w| words.contains(w))
        || (upper.starts_with("FACTORY_") && !FACTORY_PLAIN.contains(&upper.as_str()))
}

/// The password of a URL's user information (`scheme://user:password@host`).
fn url_password(url: &str) -> Option<&str> {
    let rest = &url[url.find("://")? + 3..];
    let authority = rest.split(['/', '?', '#']).next()?;
    let userinfo = &authority[..authority.rfind('@')?];
    let (_, password) = userinfo.split_once(':')?;
    (!password.is_empty()).then_some(password)
}

impl Redactor {
    /// A redactor that also hides the values of `env`'s credentials (see the module docs) when
    /// they are at least 8 characters long, and the password of every URL among them.
    pub fn from_env<'a>(env: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut exact = Vec::new();
        for (k, v) in env {
            if is_credential(k) {
                exact.push(v.to_owned());
            }
            if let Some(p) = url_password(v) {
                exact.push(p.to_owned());
            }
        }
        Self::with_values(exact)
    }

    fn with_values(mut exact: Vec<String>) -> Self {
        exact.retain(|v| v.len() >= MIN_EXACT);
        exact.sort_by_key(|s| std::cmp::Reverse(s.len()));
        exact.dedup();
        let exact_json = exact
            .iter()
            .map(|v| {
                serde_json::to_string(v).map_or_else(
                    |_| v.clone(),
                    |quoted| quoted[1..quoted.len() - 1].to_owned(),
                )
            })
            .collect();
        Self { exact, exact_json }
    }

    /// Whether some rule could mask something in the JSON text `json` (of a value serialized
    /// with serde_json): a string of the value holding a secret has one of [`stems`], `AKIA`,
    /// `ASIA`, `://` or an exact value (as JSON writes it) in its JSON form. `false` means
    /// masking would leave every string as it is.
    fn may_mask(&self, json: &str) -> bool {
        let (_, exact) = finders();
        stems().is_match(json)
            || exact.is_match(json)
            || self.exact_json.iter().any(|v| json.contains(v.as_str()))
    }

    /// The redactor for a child environment (droid's, as `EngineConfig::env` holds it).
    pub fn for_child_env(env: &[(std::ffi::OsString, std::ffi::OsString)]) -> Self {
        Self::from_env(
            env.iter()
                .filter_map(|(k, v)| Some((k.to_str()?, v.to_str()?))),
        )
    }

    /// The redactor for an engine configuration: its child environment, and the values its
    /// front-end named (the bridge's token).
    pub fn for_config(cfg: &crate::EngineConfig) -> Self {
        let mut r = Self::for_child_env(&cfg.env);
        r.exact.extend(cfg.redact.iter().cloned());
        Self::with_values(r.exact)
    }

    /// Whether `value` is, whole, one of the values this redactor hides wherever they appear
    /// (a credential's value, a value the front-end named such as the bridge's token).
    pub(crate) fn hides_value(&self, value: &str) -> bool {
        self.exact.iter().any(|v| v == value)
    }

    /// The values hidden wherever they appear, longest first.
    pub(crate) fn values(&self) -> &[String] {
        &self.exact
    }

    /// `text` with secrets replaced.
    pub fn apply(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for s in &self.exact {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), MASK);
            }
        }
        mask_runs(&out)
    }

    /// `value` with secrets replaced in every string of its JSON form (a result, an event);
    /// `value` itself if the masked form no longer reads back as a `T`.
    ///
    /// Most values hold no secret: their JSON text is searched once ([`Redactor::may_mask`]), and
    /// only a value it may hold one in goes through the masking of each string (a tenth of the
    /// bridge's CPU per run went there, for results and events with nothing to mask).
    #[must_use]
    pub fn apply_to<T: serde::Serialize + serde::de::DeserializeOwned>(&self, value: T) -> T {
        if serde_json::to_string(&value).is_ok_and(|text| !self.may_mask(&text)) {
            return value;
        }
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

/// The automata of [`mask_runs`], built once: [`SECRET_PREFIXES`] then [`WORD_PREFIXES`],
/// without regard to ASCII case; and, with regard to case, `AKIA` and `ASIA` (patterns 0 and 1)
/// and `://` (pattern 2).
fn finders() -> (
    &'static aho_corasick::AhoCorasick,
    &'static aho_corasick::AhoCorasick,
) {
    use std::sync::LazyLock;
    static SECRETS: LazyLock<aho_corasick::AhoCorasick> = LazyLock::new(|| {
        build(
            SECRET_PREFIXES.iter().chain(WORD_PREFIXES).map(|p| p.0),
            true,
        )
    });
    static EXACT: LazyLock<aho_corasick::AhoCorasick> =
        LazyLock::new(|| build(["AKIA", "ASIA", "://"], false));
    fn build<'a>(
        patterns: impl IntoIterator<Item = &'a str>,
        fold: bool,
    ) -> aho_corasick::AhoCorasick {
        match aho_corasick::AhoCorasick::builder()
            .ascii_case_insensitive(fold)
            .build(patterns)
        {
            Ok(ac) => ac,
            // a handful of short literal patterns is far from any limit of the builder
            Err(e) => unreachable!("the redactor's prefixes: {e}"),
        }
    }
    (&SECRETS, &EXACT)
}

/// The start of every prefix of [`SECRET_PREFIXES`] and [`WORD_PREFIXES`] up to its first
/// character JSON escapes (`factory_api_key": "` gives `factory_api_key`), matched without
/// regard to ASCII case: a string holding a prefix holds its stem, and so does the string's JSON
/// form ([`Redactor::may_mask`]).
fn stems() -> &'static aho_corasick::AhoCorasick {
    use std::sync::LazyLock;
    static STEMS: LazyLock<aho_corasick::AhoCorasick> = LazyLock::new(|| {
        let stems = SECRET_PREFIXES
            .iter()
            .chain(WORD_PREFIXES)
            .map(|(p, _)| p.split(['"', '\\']).next().unwrap_or(p));
        match aho_corasick::AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(stems)
        {
            Ok(ac) => ac,
            // a handful of short literal patterns is far from any limit of the builder
            Err(e) => unreachable!("the redactor's stems: {e}"),
        }
    });
    &STEMS
}

/// Mask every run of token characters (at least as long as its prefix asks) that follows one of
/// [`SECRET_PREFIXES`] (or, at the start of a word, [`WORD_PREFIXES`]), matched without regard
/// to ASCII case. The runs are all found in the same text before any is masked, so a run that swallows the next prefix (`fk-abcBearer <token>`, two
/// tokens written back to back) cannot hide the secret after it.
fn mask_runs(text: &str) -> String {
    let prefixes = SECRET_PREFIXES;
    // RFC 6750's b64token characters (`~` included), which covers Factory keys too; all ASCII, so
    // a run's length in bytes is its length in characters
    let is_tok = |b: u8| {
        b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'=' | b'+' | b'/')
    };
    let bytes = text.as_bytes();
    let word_start =
        |i: usize| i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let (finder, exact) = finders();
    for m in finder.find_overlapping_iter(text) {
        let (prefix, min) = if m.pattern().as_usize() < prefixes.len() {
            prefixes[m.pattern().as_usize()]
        } else {
            WORD_PREFIXES[m.pattern().as_usize() - prefixes.len()]
        };
        let start = m.start() + prefix.len();
        let len = bytes[start..].iter().take_while(|b| is_tok(**b)).count();
        let word = m.pattern().as_usize() >= prefixes.len();
        if len >= min && (!word || word_start(m.start())) {
            runs.push((start, start + len));
        }
    }
    // AWS access key ids: exactly these upper-case prefixes and 16 upper-case letters or digits
    for m in exact.find_overlapping_iter(text) {
        if m.pattern().as_usize() > 1 {
            continue;
        }
        let start = m.end();
        let len = bytes[start..]
            .iter()
            .take_while(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
            .count();
        if word_start(m.start()) && len >= 16 {
            runs.push((start, start + len));
        }
    }
    // a URL's password: `://user:password@`
    for i in exact
        .find_overlapping_iter(text)
        .filter(|m| m.pattern().as_usize() == 2)
        .map(|m| m.start())
    {
        let start = i + 3;
        let authority = bytes[start..]
            .iter()
            .take_while(|b| {
                !(b.is_ascii_whitespace()
                    || matches!(b, b'/' | b'?' | b'#' | b'"' | b'\'' | b'<' | b'>'))
            })
            .count();
        let auth = &bytes[start..start + authority];
        if let Some(at) = auth.iter().rposition(|b| *b == b'@')
            && let Some(colon) = auth[..at].iter().position(|b| *b == b':')
            && colon + 1 < at
        {
            runs.push((start + colon + 1, start + at));
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
mod shapes {
    use super::*;

    #[test]
    fn known_token_shapes_are_hidden_at_the_start_of_a_word_only() {
        let r = Redactor::default();
        let gh = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
        assert_eq!(
            r.apply(&format!(
                "key=sk-proj-0123456789abcdefghij {gh} github_pat_11ABCDEFG0123456789_abcdefghijklmnop \
                 xoxb-123456789012-abcdefghij AKIAIOSFODNN7EXAMPLE glpat-abcdefghij0123456789"
            )),
            "key=sk-[REDACTED] ghp_[REDACTED] github_pat_[REDACTED] xoxb-[REDACTED] \
             AKIA[REDACTED] glpat-[REDACTED]"
        );
        // a word that merely ends like a prefix, and short runs, are left alone
        for plain in [
            "task-droid-1795349045-3fa2-and-more-text",
            "disk-usage-report-for-all-volumes",
            "sk-short",
            "AKIAshort",
            "MAKIAIOSFODNN7EXAMPLEX",
            "https://example.com/path:x@y",
        ] {
            assert_eq!(r.apply(plain), plain);
        }
    }

    #[test]
    fn url_passwords_and_every_credential_the_child_gets_are_hidden() {
        let r = Redactor::default();
        assert_eq!(
            r.apply("proxy http://alice:pa55w0rd@proxy.example:3128/ and https://bob@host/"),
            "proxy http://alice:[REDACTED]@proxy.example:3128/ and https://bob@host/"
        );
        let r = Redactor::from_env([
            ("FACTORY_SESSION", "session-value-1"),
            ("FACTORY_API_BASE_URL", "https://api.factory.ai"),
            ("HTTPS_PROXY", "http://u:proxy-pass-9@proxy:8080"),
            ("GIT_AUTHOR_NAME", "Jane Developer"),
            ("AWS_SESSION_TOKEN", "aws-session-token-1"),
            ("SOME_AUTH", "auth-value-12"),
        ]);
        assert_eq!(
            r.apply(
                "session-value-1 https://api.factory.ai proxy-pass-9 Jane Developer \
                 aws-session-token-1 auth-value-12"
            ),
            "[REDACTED] https://api.factory.ai [REDACTED] Jane Developer [REDACTED] [REDACTED]"
        );
    }
}

#[cfg(test)]
mod props;
