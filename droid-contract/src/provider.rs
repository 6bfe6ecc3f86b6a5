//! Which agent CLI runs a task: droid (the default) or one of the four others of seed 002
//! (docs/architecture.md#origin). The wire names are the CLIs' program names.

use serde::{Deserialize, Serialize};

/// An agent CLI the engine can drive: `droid` (Factory's droid exec), `codex` (OpenAI's Codex
/// CLI), `claude` (Anthropic's Claude Code), `gemini` (Google's Gemini CLI), `opencode`
/// (OpenCode).
#[allow(missing_docs)]
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ProviderId {
    // no doc comments on the variants: schemars would turn the enum into a `oneOf` of five
    // described constants in every schema that names a provider (tools/list is kept small)
    #[default]
    Droid,
    Codex,
    Claude,
    Gemini,
    Opencode,
}

impl ProviderId {
    /// Every provider, droid first.
    pub const ALL: [Self; 5] = [
        Self::Droid,
        Self::Codex,
        Self::Claude,
        Self::Gemini,
        Self::Opencode,
    ];

    /// The wire name (also the program's name and the prefix of task ids).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Droid => "droid",
            Self::Codex => "codex",
            Self::Claude => "claude",
            Self::Gemini => "gemini",
            Self::Opencode => "opencode",
        }
    }

    /// The product's name, for people.
    pub fn display_name(self) -> &'static str {
        match self {
            Self::Droid => "droid",
            Self::Codex => "Codex CLI",
            Self::Claude => "Claude Code",
            Self::Gemini => "Gemini CLI",
            Self::Opencode => "OpenCode",
        }
    }

    /// The provider with this wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == s)
    }

    /// The wire names, quoted and comma-separated, for error messages.
    pub fn choices() -> String {
        Self::ALL
            .iter()
            .map(|p| format!("{:?}", p.as_str()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl std::fmt::Display for ProviderId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_round_trip() {
        for p in ProviderId::ALL {
            assert_eq!(ProviderId::parse(p.as_str()), Some(p));
            let json = serde_json::to_string(&p).unwrap_or_default();
            assert_eq!(json, format!("\"{p}\""));
        }
        assert_eq!(ProviderId::parse("Codex"), None);
        assert_eq!(ProviderId::default(), ProviderId::Droid);
    }
}
