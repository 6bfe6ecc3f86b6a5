//! The MCP server's toolsets (issue 32): which tools `droid-executor mcp` lists and answers,
//! chosen by the setting `toolsets` (config file, `DROID_EXECUTOR_TOOLSETS`, `mcp --toolsets`),
//! in the manner of GitHub's MCP server (`--toolsets` / `GITHUB_TOOLSETS`): a comma-separated
//! list of toolset names, where `default` stands for the default toolsets and `all` for every
//! one, so `default,per_provider` adds a toolset to the default ones.
//!
//! The default is small on purpose: every client puts the model-facing part of `tools/list` into
//! the model's context (Gemini CLI and OpenCode on every request), Cursor caps all MCP tools at
//! 40 and Copilot CLI defers them beyond 30, and look-alike per-provider names (`ask_codex`,
//! `ask_claude`, …) crowded the right tool out of Codex's tool search. So by default one
//! `ask` / `pend` / `ping` / `cancel` family takes a `provider` argument; seed 002's per-provider
//! names stay available as the opt-in toolset `per_provider`.
//!
//! Unlike GitHub's server, an unknown name is refused (naming the known ones), as every setting
//! of this project is, and the precedence is the project's: flag > environment > file.

use serde::{Deserialize, Serialize};

/// One toolset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Toolset {
    /// The droid tools: `execute_droid_task`, `droid_submit`, `droid_pend`, `droid_cancel`,
    /// `droid_apply`, `droid_discard`, `droid_ping` (default).
    Droid,
    /// One delegation family for every provider: `ask`, `pend`, `ping`, `cancel`, each taking a
    /// `provider` argument (default).
    Delegate,
    /// Seed 002's per-provider delegation families: `ask_<p>`, `pend_<p>`, `ping_<p>`,
    /// `cancel_<p>` for each provider of the setting `providers` (opt-in).
    PerProvider,
}

impl Toolset {
    /// Every toolset, in `tools/list` order.
    pub const ALL: [Self; 3] = [Self::Droid, Self::Delegate, Self::PerProvider];

    /// The toolsets of a server configured with none (the keyword `default`).
    pub const DEFAULT: [Self; 2] = [Self::Droid, Self::Delegate];

    /// Its name in the setting.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Droid => "droid",
            Self::Delegate => "delegate",
            Self::PerProvider => "per_provider",
        }
    }

    /// The toolset named `name`, if there is one.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == name)
    }
}

/// The toolsets a server offers: a set, kept in [`Toolset::ALL`] order. Written in the config
/// file as a list of names (`toolsets = ["default", "per_provider"]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Vec<String>", into = "Vec<String>")]
pub struct Toolsets(Vec<Toolset>);

impl Default for Toolsets {
    fn default() -> Self {
        Self(Toolset::DEFAULT.to_vec())
    }
}

impl Toolsets {
    /// The toolsets `names` name: toolset names and the keywords `default` and `all`, each
    /// trimmed, empty ones ignored.
    ///
    /// # Errors
    /// The message for an unknown name, naming the known ones.
    pub fn from_names<S: AsRef<str>>(names: &[S]) -> Result<Self, String> {
        let mut on = Vec::new();
        for name in names
            .iter()
            .map(|n| n.as_ref().trim())
            .filter(|n| !n.is_empty())
        {
            match name {
                "all" => on.extend(Toolset::ALL),
                "default" => on.extend(Toolset::DEFAULT),
                other => on.push(Toolset::parse(other).ok_or_else(|| {
                    format!(
                        "{other:?} is not a toolset; expected a comma-separated list of {}, or \
                         the keywords default and all",
                        Toolset::ALL.map(Toolset::as_str).join(", ")
                    )
                })?),
            }
        }
        Ok(Self(
            Toolset::ALL
                .into_iter()
                .filter(|t| on.contains(t))
                .collect(),
        ))
    }

    /// The toolsets a comma-separated list names (`DROID_EXECUTOR_TOOLSETS`, `mcp --toolsets`).
    ///
    /// # Errors
    /// As [`Toolsets::from_names`].
    pub fn parse(list: &str) -> Result<Self, String> {
        Self::from_names(&list.split(',').collect::<Vec<_>>())
    }

    /// Whether `t` is on.
    pub fn contains(&self, t: Toolset) -> bool {
        self.0.contains(&t)
    }

    /// The toolsets that are on, in [`Toolset::ALL`] order.
    pub fn iter(&self) -> impl Iterator<Item = Toolset> + '_ {
        self.0.iter().copied()
    }
}

impl TryFrom<Vec<String>> for Toolsets {
    type Error = String;

    fn try_from(names: Vec<String>) -> Result<Self, String> {
        Self::from_names(&names)
    }
}

impl From<Toolsets> for Vec<String> {
    fn from(t: Toolsets) -> Self {
        t.0.iter().map(|t| t.as_str().to_owned()).collect()
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn keywords_expand_and_the_order_is_fixed() {
        let on = |list: &str| Toolsets::parse(list).map(|t| t.iter().collect::<Vec<_>>());
        assert_eq!(on("default"), Ok(Toolset::DEFAULT.to_vec()));
        assert_eq!(on(" all "), Ok(Toolset::ALL.to_vec()));
        assert_eq!(
            on("per_provider, default,,"),
            Ok(vec![
                Toolset::Droid,
                Toolset::Delegate,
                Toolset::PerProvider
            ])
        );
        assert_eq!(on("delegate,delegate"), Ok(vec![Toolset::Delegate]));
        assert_eq!(on(""), Ok(Vec::new()));
        assert_eq!(
            on("default,providers"),
            Err(
                "\"providers\" is not a toolset; expected a comma-separated list of droid, \
                 delegate, per_provider, or the keywords default and all"
                    .to_owned()
            )
        );
        assert_eq!(Toolsets::default(), Toolsets::parse("default").unwrap());
    }

    #[test]
    fn the_file_form_is_a_list_of_names() {
        let t: Toolsets = serde_json::from_value(serde_json::json!(["all"])).unwrap();
        assert_eq!(
            serde_json::to_value(&t).unwrap(),
            serde_json::json!(["droid", "delegate", "per_provider"])
        );
        assert!(serde_json::from_value::<Toolsets>(serde_json::json!(["nope"])).is_err());
    }
}
