//! Where the real agent CLIs the engine drives as providers are: installed by
//! `cargo xtask fetch-interop` (which `cargo xtask test` runs) under `target/agents/node`, each
//! at the version its provider pins. A test that needs one and cannot find it fails with the
//! install command; it never skips.

use std::path::PathBuf;

use crate::droid_bin::workspace_root;

/// Where `cargo xtask fetch-interop` installs the agent CLIs, relative to the workspace root.
pub const AGENTS_DIR: &str = "target/agents/node";

/// `(program, npm package, version)` of each agent CLI besides droid.
pub const AGENT_CLIS: &[(&str, &str, &str)] = &[
    ("codex", "@openai/codex", "0.169.0"),
    ("claude", "@anthropic-ai/claude-code", "2.1.330"),
    ("gemini", "@google/gemini-cli", "0.61.0"),
    ("opencode", "opencode-ai", "1.18.33"),
];

/// The launcher of the agent CLI `program` (`codex`, `claude`, `gemini`, `opencode`):
/// `target/agents/node/node_modules/.bin/<program>`.
///
/// # Panics
/// When it is not installed at the pinned version (the message says how to install it), or
/// `program` is not one of [`AGENT_CLIS`].
pub fn agent_cli(program: &str) -> PathBuf {
    let Some((_, package, version)) = AGENT_CLIS.iter().find(|(p, _, _)| *p == program) else {
        panic!("{program} is not an agent CLI the suites know");
    };
    let dir = workspace_root().join(AGENTS_DIR);
    let manifest = dir.join("node_modules").join(package).join("package.json");
    let found = std::fs::read(&manifest)
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|m| m["version"].as_str().map(str::to_owned));
    assert_eq!(
        found.as_deref(),
        Some(*version),
        "{package} {version} is not installed in {}: run `cargo xtask fetch-interop` (cargo \
         xtask test does; it needs Node.js 20 or later and npm)",
        dir.display()
    );
    dir.join("node_modules/.bin").join(program)
}
