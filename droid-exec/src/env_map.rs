//! The environment as the engine sees it: a map passed in by the front-end, never read from the
//! process here, so tests and front-ends decide what the engine sees. Below configuration and
//! everything that reads a variable (`config`, `client_env`, `health`).

use std::collections::BTreeMap;

/// A snapshot of environment variables (name → value).
pub type EnvMap = BTreeMap<String, String>;

/// The value of the variable `name`, if it is set to something: every variable set to `""`
/// counts as unset, for every setting alike (and `provenance` labels by the same rule).
pub(crate) fn var<'a>(env: &'a EnvMap, name: &str) -> Option<&'a String> {
    env.get(name).filter(|v| !v.is_empty())
}
