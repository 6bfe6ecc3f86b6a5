//! Property tests for [`Redactor`]: Factory keys (`fk-…`), `FACTORY_API_KEY=…` assignments,
//! bearer tokens, `sk-…`, GitHub, Slack and AWS keys and URL passwords inserted anywhere in any text (next to other secrets, to near misses, to partial
//! prefixes) never come out, in text or inside a JSON value; text holding no secret comes out
//! unchanged.
//!
//! Secrets are as long after their prefix as the redactor's rule asks (8 characters for keys and
//! tokens, 4 for the value of a `FACTORY_API_KEY` assignment, whatever it looks like); the bearer
//! scheme and the variable name come in any ASCII case.

use pretty_assertions::assert_eq;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::json;

use super::Redactor;

/// Cases per property.
const CASES: u32 = 256;

/// Characters a token may hold: RFC 6750's `b64token` (letters, digits, `-._~+/`, trailing `=`).
const TOKEN_CHARS: &str = "[A-Za-z0-9._~+/-]";

fn regex(r: &str) -> impl Strategy<Value = String> + use<> {
    proptest::string::string_regex(r).unwrap()
}

/// A Factory API key.
fn fk_key() -> impl Strategy<Value = String> {
    regex("fk-[A-Za-z0-9_-]{8,48}")
}

/// A bearer token, as an `Authorization` header or a log line shows it.
fn bearer() -> impl Strategy<Value = (String, String)> {
    (
        regex(&format!("{TOKEN_CHARS}{{8,40}}=*")),
        select(vec![
            "Bearer ",
            "Authorization: Bearer ",
            "authorization: bearer ",
            "BEARER ",
        ]),
    )
        .prop_map(|(token, prefix)| (format!("{prefix}{token}"), token))
}

/// A secret as it appears in text, and the part that must not survive.
fn secret() -> impl Strategy<Value = (String, String)> {
    prop_oneof![
        fk_key().prop_map(|k| (k.clone(), k)),
        fk_key().prop_map(|k| (format!("FACTORY_API_KEY={k}"), k)),
        fk_key().prop_map(|k| (format!("export FACTORY_API_KEY=\"{k}\""), k)),
        regex("[a-z0-9_.+/~-]{6,40}").prop_map(|v| (format!("factory_api_key={v}"), v)),
        regex("[a-z0-9_.+/~-]{6,40}").prop_map(|v| (format!("\"FACTORY_API_KEY\": \"{v}\""), v)),
        bearer(),
        // the shapes that count at the start of a word, after a separator
        regex("sk-(proj-|ant-api03-)?[A-Za-z0-9_-]{20,48}").prop_map(|k| (format!(" {k}"), k)),
        regex("(ghp|gho|ghs)_[A-Za-z0-9]{20,40}").prop_map(|k| (format!("\n{k}"), k)),
        regex("github_pat_[A-Za-z0-9_]{20,60}").prop_map(|k| (format!("\"{k}"), k)),
        regex("xox[bp]-[0-9]{6,12}-[A-Za-z0-9]{6,24}").prop_map(|k| (format!("={k}"), k)),
        regex("AKIA[A-Z0-9]{16}").prop_map(|k| (format!(" {k}"), k[4..].to_owned())),
        (regex("[a-z]{1,8}"), regex("[A-Za-z0-9]{12,24}"))
            .prop_map(|(u, p)| (format!(" https://{u}:{p}@example.com/x"), p)),
    ]
}

/// Text around secrets: any characters, and pieces that sit right against a secret's prefix
/// (near misses, partial prefixes, token characters that extend a run).
fn filler() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        3 => vec(any::<char>(), 1..6).prop_map(String::from_iter),
        1 => select(vec![
            "fk-", "fk-ab", "fk-short ", "Bearer", "Bearer ", "bearer ", "FACTORY_API_KEY=",
            "Authorization: ", "=", "-", "_", " ", "\n", "\"", "abc", "é", "[REDACTED]",
        ])
        .prop_map(str::to_owned),
    ];
    vec(piece, 0..5).prop_map(|p| p.concat())
}

/// A long enough token run after one of the redactor's prefixes (any ASCII case) somewhere in
/// `text`: what the redactor counts as a secret.
fn looks_secret(text: &str) -> bool {
    let tok = |c: char| c.is_ascii_alphanumeric() || "-_.=+/~".contains(c);
    let lower = text.to_ascii_lowercase();
    // a superset of what the redactor masks: the word-start shapes anywhere, a URL at all
    lower.contains("://")
        || lower.contains("akia")
        || lower.contains("asia")
        || super::SECRET_PREFIXES
            .iter()
            .chain(super::WORD_PREFIXES)
            .any(|(prefix, min)| {
                lower.match_indices(prefix).any(|(i, _)| {
                    lower[i + prefix.len()..]
                        .chars()
                        .take_while(|c| tok(*c))
                        .count()
                        >= *min
                })
            })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    /// Secrets inserted anywhere never come out, in text or in any string of a JSON value.
    #[test]
    fn secrets_never_survive(parts in vec((filler(), secret()), 1..5), tail in filler()) {
        let mut text = String::new();
        let mut secrets = Vec::new();
        for (f, (written, secret)) in parts {
            text.push_str(&f);
            text.push_str(&written);
            secrets.push(secret);
        }
        text.push_str(&tail);
        let r = Redactor::default();
        let out = r.apply(&text);
        for s in &secrets {
            prop_assert!(!out.contains(s.as_str()), "{:?} survived in {:?}", s, out);
        }
        let mut v = json!({"text": text.clone(), "list": [text.clone()], "obj": {text.clone(): 1}});
        r.apply_value(&mut v);
        let v = v.to_string();
        for s in &secrets {
            prop_assert!(!v.contains(s.as_str()), "{:?} survived in {}", s, v);
        }
    }

    /// The values of droid's secret variables are hidden wherever they appear, whatever they
    /// look like.
    #[test]
    fn environment_secrets_never_survive(
        value in regex("[!-~]{8,32}"),
        name in select(vec!["FACTORY_API_KEY", "GITHUB_TOKEN", "DB_PASSWORD", "client_secret"]),
        before in filler(),
        after in filler(),
    ) {
        let r = Redactor::from_env([(name, value.as_str()), ("PATH", "/usr/bin:/bin")]);
        let out = r.apply(&format!("{before}{name}={value}{after}"));
        prop_assert!(!out.contains(&value), "{:?} survived in {:?}", value, out);
    }

    /// `apply_to`'s quick test (one search of the value's JSON text) never skips a value the
    /// masking of each string would change: secrets next to characters JSON escapes (`"`, `\`,
    /// control characters), in keys and in values, exact values holding such characters.
    #[test]
    fn apply_to_masks_what_each_string_would(
        parts in vec((filler(), secret()), 0..3),
        tail in filler(),
        value in regex("[!-~\t\n]{8,24}"),
        with_value in any::<bool>(),
    ) {
        let mut text = String::new();
        for (f, (written, _)) in parts {
            text.push_str(&f);
            text.push_str(&written);
        }
        text.push_str(&tail);
        if with_value {
            text.push_str(&value);
        }
        let r = Redactor::from_env([("GITHUB_TOKEN", value.as_str())]);
        let v = json!({"text": text.clone(), "list": [text.clone(), 1], "obj": {text.clone(): null}});
        let mut each = v.clone();
        r.apply_value(&mut each);
        prop_assert_eq!(r.apply_to(v), each);
    }

    /// Text with no secret in it comes out exactly as it went in.
    #[test]
    fn text_without_secrets_is_unchanged(text in filler()) {
        prop_assume!(!looks_secret(&text));
        let env = [("FACTORY_API_KEY", "fk-not-in-the-text"), ("PATH", "/usr/bin:/bin")];
        let r = Redactor::from_env(env);
        prop_assume!(!text.contains("fk-not-in-the-text"));
        prop_assert_eq!(r.apply(&text), text);
    }
}

/// Regressions (found by `secrets_never_survive`): a bearer token holding `~` (an RFC 6750
/// token character) kept its tail; an `fk-` run that swallowed the word `Bearer` right after it,
/// or a token run that swallowed the next `Bearer `, left the following token in clear.
#[test]
fn tokens_next_to_each_other_are_all_hidden() {
    let r = Redactor::default();
    assert_eq!(
        r.apply("Authorization: Bearer abcdefgh~SECRETTAIL"),
        "Authorization: Bearer [REDACTED]"
    );
    assert_eq!(
        r.apply("fk-abcBearer SECRETTOKEN1"),
        "fk-[REDACTED] [REDACTED]"
    );
    assert_eq!(
        r.apply("Bearer FIRSTTOKENBearer SECONDTOKEN"),
        "Bearer [REDACTED] [REDACTED]"
    );
}
