//! Which agent CLI runs a task: droid (the default) or one of the four others of seed 002
//! (docs/architecture.md#origin). The wire names are the CLIs' program names.

use serde::{Deserialize, Serialize};

/// One row of the provider table ([`PROVIDERS`]): everything about an agent CLI that is not its
/// behaviour (its behaviour is its folder in the engine, `droid-exec/src/providers/<id>/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProviderInfo {
    /// Which provider.
    pub id: ProviderId,
    /// The wire name: the program's name, the prefix of task ids, the `provider` of a request.
    pub name: &'static str,
    /// The product's name, for people.
    pub display_name: &'static str,
    /// The npm package that installs it.
    pub npm_package: &'static str,
    /// The version this release was tested with (pinned by `cargo xtask fetch-interop`).
    pub version: &'static str,
    /// The config file key naming its program (`<name>_bin`).
    pub bin_setting: &'static str,
    /// The variables naming its program, in the order they are applied (a later one wins).
    pub bin_vars: &'static [&'static str],
    /// Its section of the user documentation.
    pub docs: &'static str,
}

/// The provider table: one row per agent CLI, the enum [`ProviderId`] and this table generated
/// from the same rows, so a provider is added by one row here (and its folder in the engine,
/// whose missing `match` arms the compiler then names). Config keys, variables, help texts,
/// install lines and xtask's list all read it.
macro_rules! providers {
    ($(
        $(#[$attr:meta])*
        $variant:ident {
            name: $name:literal,
            display_name: $display:literal,
            npm_package: $npm:literal,
            version: $version:literal,
            bin_var: $bin_var:literal,
            docs: $docs:literal $(,)?
        }
    ),+ $(,)?) => {
        // one row of `PROVIDERS` each; the doc comment is the schemas' description, as it was
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
            // no doc comments on the variants: schemars would turn the enum into a `oneOf` of
            // five described constants in every schema that names a provider (tools/list is
            // kept small)
            $($(#[$attr])* $variant),+
        }

        /// Every provider's row, in [`ProviderId::ALL`]'s order (droid first).
        pub const PROVIDERS: &[ProviderInfo] = &[$(
            ProviderInfo {
                id: ProviderId::$variant,
                name: $name,
                display_name: $display,
                npm_package: $npm,
                version: $version,
                bin_setting: concat!($name, "_bin"),
                bin_vars: &[$bin_var],
                docs: $docs,
            }
        ),+];

        impl ProviderId {
            /// Every provider, droid first.
            pub const ALL: [Self; PROVIDERS.len()] = [$(Self::$variant),+];
        }
    };
}

providers! {
    #[default]
    Droid {
        name: "droid",
        display_name: "droid",
        npm_package: "@factory/cli",
        version: "0.225.2",
        bin_var: "DROID_EXECUTOR_DROID_BIN",
        docs: "docs/providers.md#how-each-cli-is-run",
    },
    Codex {
        name: "codex",
        display_name: "Codex CLI",
        npm_package: "@openai/codex",
        version: "0.169.0",
        bin_var: "DROID_EXECUTOR_CODEX_BIN",
        docs: "docs/providers.md#how-each-cli-is-run",
    },
    Claude {
        name: "claude",
        display_name: "Claude Code",
        npm_package: "@anthropic-ai/claude-code",
        version: "2.1.330",
        bin_var: "DROID_EXECUTOR_CLAUDE_BIN",
        docs: "docs/providers.md#how-each-cli-is-run",
    },
    Gemini {
        name: "gemini",
        display_name: "Gemini CLI",
        npm_package: "@google/gemini-cli",
        version: "0.61.0",
        bin_var: "DROID_EXECUTOR_GEMINI_BIN",
        docs: "docs/providers.md#how-each-cli-is-run",
    },
    Opencode {
        name: "opencode",
        display_name: "OpenCode",
        npm_package: "opencode-ai",
        version: "1.18.33",
        bin_var: "DROID_EXECUTOR_OPENCODE_BIN",
        docs: "docs/providers.md#how-each-cli-is-run",
    },
}

impl ProviderId {
    /// Its row of [`PROVIDERS`].
    pub const fn info(self) -> &'static ProviderInfo {
        // the rows are generated in the enum's order, so the discriminant is the row
        &PROVIDERS[self as usize]
    }

    /// The wire name (also the program's name and the prefix of task ids).
    pub const fn as_str(self) -> &'static str {
        self.info().name
    }

    /// The product's name, for people.
    pub const fn display_name(self) -> &'static str {
        self.info().display_name
    }

    /// The wire names joined with `sep` (help texts: `droid, codex, claude, gemini, opencode`).
    pub fn names(sep: &str) -> String {
        Self::ALL.map(Self::as_str).join(sep)
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

    #[test]
    fn each_row_is_its_providers_and_serde_agrees() {
        for (i, p) in ProviderId::ALL.into_iter().enumerate() {
            let row = p.info();
            assert_eq!((row.id, PROVIDERS[i].id), (p, p));
            // the wire name serde writes is the row's name
            assert_eq!(
                serde_json::to_value(p).ok(),
                Some(serde_json::json!(row.name))
            );
            assert_eq!(row.bin_setting, format!("{}_bin", row.name));
            assert_eq!(
                row.bin_vars,
                [format!("DROID_EXECUTOR_{}_BIN", row.name.to_ascii_uppercase()).as_str()]
            );
            assert!(row.docs.starts_with("docs/providers.md#"), "{}", row.docs);
        }
        assert_eq!(
            ProviderId::names(", "),
            "droid, codex, claude, gemini, opencode"
        );
    }
}
