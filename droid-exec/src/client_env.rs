//! Who started this process, and what that did to the environment it was given: the MCP client
//! an `droid-executor mcp` server runs under filters the environment before the server sees it,
//! and a hint that says "set ANTHROPIC_API_KEY" to someone who has it set in their shell sends
//! them the wrong way. This module knows each client's filter (measured, docs/operations.md),
//! the variables `setup mcp` asks each client to pass by name ([`pass_names`]), and rewrites a
//! hint that names a variable the client dropped so that it names the filter instead
//! ([`ClientEnv::amend`]).
//!
//! The client is named by [`CLIENT_VAR`] in the server's environment: `setup mcp --client X`
//! writes `DROID_EXECUTOR_CLIENT=X` into the entry it registers, and `droid-executor mcp` sets
//! `mcp` (an MCP client we know nothing of: the MCP Inspector, a hand-written entry) when the
//! entry did not. The CLI and the bridge, started from a shell or a service manager, have none:
//! their environment is the user's, and their hints stay as they are.
//!
//! What the clients pass to a stdio MCP server (measured with a server printing its
//! environment's names):
//! - droid 0.225.2, Claude Code 2.1.330, OpenCode 1.18.33: their whole environment;
//! - Codex 0.169.0: `HOME`, `LANG`, `LC_ALL`, `LOGNAME`, `PATH`, `SHELL`, `TERM`, `TMPDIR`, `TZ`,
//!   `USER` when set, and the names its entry's `env_vars` lists;
//! - Gemini CLI 0.61.0: everything but names containing `TOKEN`, `SECRET`, `PASSWORD`, `PASSWD`,
//!   `KEY`, `AUTH`, `CREDENTIAL`, `CREDS`, `PRIVATE` or `CERT` (and a few fixed names), plus its
//!   entry's `env` map, whose `$NAME` values it expands from its own environment;
//! - the MCP Inspector 2.12 and any client on the MCP TypeScript SDK that names no environment:
//!   `HOME`, `LOGNAME`, `PATH`, `SHELL`, `TERM`, `USER`, plus what it is told (`-e NAME=…`).

use droid_contract::ProviderId;
use serde::{Deserialize, Serialize};

use crate::env_map::{EnvMap, var};
use crate::providers::provider;

/// The variable naming the MCP client that started this server (`setup mcp` writes it).
pub const CLIENT_VAR: &str = "DROID_EXECUTOR_CLIENT";

/// [`CLIENT_VAR`]'s value for an MCP client that did not name itself.
pub const UNKNOWN_CLIENT: &str = "mcp";

/// What Codex 0.169.0 gives a stdio MCP server besides the names `env_vars` lists.
const CODEX_PASSES: &[&str] = &[
    "HOME", "LANG", "LC_ALL", "LOGNAME", "PATH", "SHELL", "TERM", "TMPDIR", "TZ", "USER",
];

/// What the MCP TypeScript SDK's stdio transport gives a server when its client names no
/// environment (`getDefaultEnvironment`): the MCP Inspector's servers get this.
const SDK_PASSES: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// The parts of a name that make Gemini CLI 0.61.0 drop a variable from an MCP server's
/// environment (`NEVER_ALLOWED_NAME_PATTERNS`, matched anywhere, in any case).
const GEMINI_DROPS_PARTS: &[&str] = &[
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "KEY",
    "AUTH",
    "CREDENTIAL",
    "CREDS",
    "PRIVATE",
    "CERT",
];

/// Names Gemini CLI drops whatever they look like (`NEVER_ALLOWED_ENVIRONMENT_VARIABLES`).
const GEMINI_DROPS_NAMES: &[&str] = &[
    "CLIENT_ID",
    "DB_URI",
    "CONNECTION_STRING",
    "AWS_DEFAULT_REGION",
    "AZURE_CLIENT_ID",
    "AZURE_TENANT_ID",
    "SLACK_WEBHOOK_URL",
    "TWILIO_ACCOUNT_SID",
    "DATABASE_URL",
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_CLOUD_ACCOUNT",
    "FIREBASE_PROJECT_ID",
];

/// Names Gemini CLI always passes (`ALWAYS_ALLOWED_ENVIRONMENT_VARIABLES`, the Unix ones).
const GEMINI_KEEPS: &[&str] = &[
    "PATH",
    "HOME",
    "LANG",
    "SHELL",
    "TMPDIR",
    "USER",
    "LOGNAME",
    "TERM",
    "COLORTERM",
];

/// Whether Gemini CLI drops `name` from the environment of an MCP server whose entry does not
/// pass it (the name rules of its `shouldRedactEnvironmentVariable`; a value that looks like a
/// private key or a token is dropped too, which a name cannot tell).
pub fn gemini_drops(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if upper.starts_with("GEMINI_CLI_") || upper.starts_with("GIT_CONFIG_") {
        return false;
    }
    if GEMINI_KEEPS.contains(&upper.as_str()) {
        return false;
    }
    GEMINI_DROPS_NAMES.contains(&upper.as_str())
        || GEMINI_DROPS_PARTS.iter().any(|p| upper.contains(p))
}

/// Names under a provider's prefixes (`ANTHROPIC_*`, `CODEX_*`, …) that `setup mcp` lists by
/// name, since a client's pass-through list holds names, not prefixes: where each CLI finds its
/// endpoint, its model and its own files. A provider's credentials are its `auth_vars`.
const NAMED_UNDER_PREFIX: &[&str] = &[
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_MODEL",
    "ANTHROPIC_SMALL_FAST_MODEL",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "CODEX_HOME",
    "GEMINI_API_KEY",
    "GEMINI_MODEL",
    "GEMINI_CLI_HOME",
    "OPENCODE_CONFIG_DIR",
];

/// The variables a client that filters the environment (Codex's `env_vars`, Gemini's `env`) is
/// asked to pass to droid-executor by name, never by value: what the server itself reads
/// (`server_names`: `config::server_env_names`), then for each of `providers` (the setting) its
/// credentials, its exact names and the [`NAMED_UNDER_PREFIX`] names under its prefixes, then
/// every variable of `env` (the environment `setup` runs in) that one of those providers reads
/// (`ANTHROPIC_FOO` set now is passed too). In order, each once.
pub fn pass_names(
    server_names: Vec<String>,
    providers: &[ProviderId],
    env: &EnvMap,
) -> Vec<String> {
    let mut names = listed_names(server_names, providers);
    for name in env.keys() {
        let read = providers
            .iter()
            .any(|&p| provider(p).env_names().contains(name));
        if read && !names.contains(name) {
            names.push(name.clone());
        }
    }
    names
}

/// [`pass_names`] without the part read from the environment: what every `setup mcp` with these
/// settings lists, whatever the environment it ran in.
fn listed_names(server_names: Vec<String>, providers: &[ProviderId]) -> Vec<String> {
    let mut names = server_names;
    for &p in providers {
        let cli = provider(p);
        let env_names = cli.env_names();
        let own = cli
            .auth_vars()
            .iter()
            .chain(env_names.exact)
            .chain(NAMED_UNDER_PREFIX.iter().filter(|n| env_names.contains(n)));
        for name in own {
            if !names.iter().any(|n| n == name) {
                names.push((*name).to_owned());
            }
        }
    }
    names
}

/// Who started this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Origin {
    /// A shell or a service manager: the environment is the user's (the CLI, the bridge).
    #[default]
    Shell,
    /// An agent CLI as an MCP client, as `setup mcp --client` registered it.
    Client {
        /// Which one.
        client: ProviderId,
    },
    /// An MCP client that did not name itself (the MCP Inspector, an entry written by hand).
    UnknownClient,
}

/// The origin of this process's environment, and what `setup mcp` lists for a client that
/// filters it; part of the engine's configuration, so that a background task's supervisor
/// words its hints as the server that started it would.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ClientEnv {
    /// Who started this process.
    pub origin: Origin,
    /// The variables `setup mcp` asks a filtering client to pass, whatever the environment
    /// `setup` ran in.
    pub listed: Vec<String>,
    /// The names (never the values) of the variables this process was given, set and not
    /// empty; kept under an MCP client only, where a hint asks whether one is missing.
    pub present: Vec<String>,
}

impl ClientEnv {
    /// The origin `env` names ([`CLIENT_VAR`]; absent: a shell), with what `setup mcp` lists
    /// for a server reading `server_names` and delegating to `providers` ([`pass_names`]).
    pub fn of(env: &EnvMap, server_names: Vec<String>, providers: &[ProviderId]) -> ClientEnv {
        let origin = match var(env, CLIENT_VAR).map(String::as_str) {
            None => Origin::Shell,
            Some(name) => ProviderId::parse(name)
                .map_or(Origin::UnknownClient, |client| Origin::Client { client }),
        };
        let listed = match origin {
            Origin::Client {
                client: ProviderId::Codex | ProviderId::Gemini,
            } => listed_names(server_names, providers),
            _ => Vec::new(),
        };
        let present = match origin {
            Origin::Shell => Vec::new(),
            _ => env
                .iter()
                .filter(|(_, v)| !v.is_empty())
                .map(|(k, _)| k.clone())
                .collect(),
        };
        ClientEnv {
            origin,
            listed,
            present,
        }
    }

    /// Whether `name` is missing from this process's environment (unset or empty).
    pub fn missing(&self, name: &str) -> bool {
        !self.present.iter().any(|n| n == name)
    }

    /// Whether the client that started this process drops `name` from the environment it gives
    /// it (a variable that is set where the client runs, and missing here).
    pub fn drops(&self, name: &str) -> bool {
        let listed = self.listed.iter().any(|n| n == name);
        match self.origin {
            Origin::Shell => false,
            Origin::Client { client } => match client {
                ProviderId::Droid | ProviderId::Claude | ProviderId::Opencode => false,
                ProviderId::Codex => !listed && !CODEX_PASSES.contains(&name),
                ProviderId::Gemini => !listed && gemini_drops(name),
            },
            Origin::UnknownClient => !SDK_PASSES.contains(&name),
        }
    }

    /// `hint` for a process whose environment lacks the variables `missing` says it lacks: when
    /// the hint names variables that are missing and that the client would have dropped, the
    /// client's filter and how to let them through come first, and the hint follows as what to
    /// do if they are not set where the client runs either. `None`: the hint holds as it is.
    pub fn amend(&self, hint: &str, missing: impl Fn(&str) -> bool) -> Option<String> {
        let mut names: Vec<&str> = Vec::new();
        for name in variable_names(hint) {
            if missing(name) && self.drops(name) && !names.contains(&name) {
                names.push(name);
            }
        }
        if names.is_empty() {
            return None;
        }
        let list = names.join(", ");
        let (them, it_is) = if names.len() == 1 {
            ("it", "it is")
        } else {
            ("them", "they are")
        };
        let (filter, runs) = match self.origin {
            Origin::Shell => return None,
            Origin::Client {
                client: ProviderId::Codex,
            } => (
                format!(
                    "{list} did not reach droid-executor: Codex passes an MCP server only HOME, LANG, \
                     LC_ALL, LOGNAME, PATH, SHELL, TERM, TMPDIR, TZ, USER and what env_vars of \
                     [mcp_servers.droid-executor] in ~/.codex/config.toml (or $CODEX_HOME's) lists: \
                     add {them} there, or run `droid-executor setup mcp --client codex`, then \
                     restart Codex"
                ),
                "where Codex runs",
            ),
            Origin::Client {
                client: ProviderId::Gemini,
            } => {
                let entries: Vec<String> =
                    names.iter().map(|n| format!("\"{n}\": \"${n}\"")).collect();
                (
                    format!(
                        "{list} did not reach droid-executor: Gemini CLI drops variables whose \
                         names contain KEY, TOKEN, SECRET, PASSWORD, AUTH, CREDENTIAL, PRIVATE or \
                         CERT unless mcpServers.droid-executor.env in ~/.gemini/settings.json \
                         passes them: add {}, or run `droid-executor setup mcp --client gemini`, \
                         then restart Gemini CLI",
                        entries.join(", ")
                    ),
                    "where Gemini CLI runs",
                )
            }
            // the clients that pass their whole environment drop nothing
            Origin::Client { .. } => return None,
            Origin::UnknownClient => {
                let flags: Vec<String> = names.iter().map(|n| format!("-e {n}=…")).collect();
                (
                    format!(
                        "{list} {} not in droid-executor's environment: the MCP Inspector and \
                         other MCP SDK clients pass a server only HOME, LOGNAME, PATH, SHELL, TERM \
                         and USER unless told (Inspector: {}; `droid-executor setup mcp --client \
                         <client>` writes what each client needs)",
                        if names.len() == 1 { "is" } else { "are" },
                        flags.join(" ")
                    ),
                    "where you start the client",
                )
            }
        };
        Some(format!(
            "{filter}. If {it_is} not set {runs} either: {hint}"
        ))
    }

    /// [`ClientEnv::amend`] applied to each issue's hint, for the variables missing from this
    /// process's environment.
    pub fn amend_issues(&self, issues: &mut [droid_contract::Issue]) {
        if self.origin == Origin::Shell {
            return;
        }
        for issue in issues {
            if let Some(hint) = self.amend(&issue.suggested_action, |n| self.missing(n)) {
                issue.suggested_action = hint;
            }
        }
    }
}

/// The environment variable names a text mentions: words of capitals, digits and underscores
/// with at least one underscore, starting with a capital (`ANTHROPIC_API_KEY`, not `OK` or
/// `HOME`, which no client drops).
fn variable_names(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
        .map(|w| w.trim_matches('_'))
        .filter(|w| {
            w.contains('_') && w.starts_with(|c: char| c.is_ascii_uppercase()) && w.len() > 2
        })
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> EnvMap {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn of(client: Option<&str>) -> ClientEnv {
        let e = match client {
            Some(c) => env(&[(CLIENT_VAR, c)]),
            None => env(&[]),
        };
        let settings = crate::config::Settings::default();
        let names = crate::config::server_env_names(&settings);
        ClientEnv::of(&e, names, &settings.providers)
    }

    const HINT: &str = "set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN), or log in with `claude`";

    #[test]
    fn the_origin_comes_from_the_variable() {
        assert_eq!(of(None).origin, Origin::Shell);
        assert_eq!(of(Some("")).origin, Origin::Shell);
        assert_eq!(of(Some(UNKNOWN_CLIENT)).origin, Origin::UnknownClient);
        assert_eq!(of(Some("vscode")).origin, Origin::UnknownClient);
        assert_eq!(
            of(Some("codex")).origin,
            Origin::Client {
                client: ProviderId::Codex
            }
        );
        // only a filtering client needs the list
        assert!(of(Some("claude")).listed.is_empty());
        assert!(
            of(Some("codex"))
                .listed
                .contains(&"ANTHROPIC_API_KEY".to_owned())
        );
    }

    #[test]
    fn a_shell_and_a_whole_environment_keep_the_hint() {
        for client in [None, Some("claude"), Some("droid"), Some("opencode")] {
            assert_eq!(of(client).amend(HINT, |_| true), None, "{client:?}");
        }
    }

    /// Codex with setup's entry passes the credentials when they are set: missing means unset,
    /// and "set it" is right. A variable the entry does not list was dropped.
    #[test]
    fn codex_names_env_vars_for_what_it_does_not_list() {
        let codex = of(Some("codex"));
        assert_eq!(codex.amend(HINT, |_| true), None);
        let custom = "set MOCK_API_KEY, the env_key of your Codex model provider";
        let amended = codex.amend(custom, |n| n == "MOCK_API_KEY").unwrap();
        assert!(
            amended.starts_with(
                "MOCK_API_KEY did not reach droid-executor: Codex passes an MCP server only HOME,"
            ),
            "{amended}"
        );
        assert!(amended.contains("lists: add it there"), "{amended}");
        assert!(amended.ends_with(&format!(
            ". If it is not set where Codex runs either: {custom}"
        )));
        // present: nothing to say
        assert_eq!(codex.amend(custom, |_| false), None);
    }

    #[test]
    fn gemini_names_its_env_map() {
        assert!(gemini_drops("ANTHROPIC_API_KEY"));
        assert!(gemini_drops("my_token"));
        assert!(gemini_drops("DATABASE_URL"));
        assert!(!gemini_drops("ANTHROPIC_BASE_URL"));
        assert!(!gemini_drops("GEMINI_CLI_HOME"));
        assert!(!gemini_drops("HOME"));
        let gemini = of(Some("gemini"));
        assert_eq!(gemini.amend(HINT, |_| true), None, "setup lists them");
        let hint = "export SOME_SERVICE_TOKEN and OTHER_SECRET";
        let amended = gemini.amend(hint, |_| true).unwrap();
        assert!(
            amended.starts_with(
                "SOME_SERVICE_TOKEN, OTHER_SECRET did not reach droid-executor: Gemini CLI drops"
            ),
            "{amended}"
        );
        assert!(
            amended.contains(
                "passes them: add \"SOME_SERVICE_TOKEN\": \"$SOME_SERVICE_TOKEN\", \"OTHER_SECRET\": \"$OTHER_SECRET\", or run"
            ),
            "{amended}"
        );
        assert!(amended.ends_with(
            ". If they are not set where Gemini CLI runs either: export SOME_SERVICE_TOKEN and OTHER_SECRET"
        ));
    }

    #[test]
    fn an_unknown_client_names_the_sdk_default() {
        let unknown = of(Some(UNKNOWN_CLIENT));
        let hint = "export FACTORY_API_KEY=fk-… (or log in with droid)";
        let amended = unknown.amend(hint, |n| n == "FACTORY_API_KEY").unwrap();
        assert_eq!(
            amended,
            "FACTORY_API_KEY is not in droid-executor's environment: the MCP Inspector and other \
             MCP SDK clients pass a server only HOME, LOGNAME, PATH, SHELL, TERM and USER unless \
             told (Inspector: -e FACTORY_API_KEY=…; `droid-executor setup mcp --client <client>` \
             writes what each client needs). If it is not set where you start the client either: \
             export FACTORY_API_KEY=fk-… (or log in with droid)"
        );
        // PATH is passed by everyone; a name that is set is not the problem
        assert_eq!(unknown.amend("check PATH", |_| true), None);
        assert_eq!(unknown.amend(hint, |_| false), None);
    }

    #[test]
    fn names_are_words_with_an_underscore() {
        let found: Vec<&str> = variable_names(
            "set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN), `FOO_1`=x; not OK, HOME, _X_ or A_",
        )
        .collect();
        assert_eq!(
            found,
            ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "FOO_1"]
        );
    }

    #[test]
    fn setup_lists_each_enabled_providers_names_and_what_is_set() {
        let settings = crate::config::Settings::default();
        let names = pass_names(
            crate::config::server_env_names(&settings),
            &[ProviderId::Claude],
            &env(&[
                ("ANTHROPIC_CUSTOM_HEADERS", "x"),
                ("OPENAI_API_KEY", "sk"),
                ("HOME", "/h"),
            ]),
        );
        for n in [
            "DROID_CLI_CMD",
            "FACTORY_API_KEY",
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_AUTH_TOKEN",
            "CLAUDE_CODE_OAUTH_TOKEN",
            "CLAUDE_CONFIG_DIR",
            "ANTHROPIC_BASE_URL",
            "ANTHROPIC_CUSTOM_HEADERS",
        ] {
            assert!(names.contains(&n.to_owned()), "{n}: {names:?}");
        }
        // Codex is not enabled: its names are not asked for
        assert!(!names.contains(&"OPENAI_API_KEY".to_owned()), "{names:?}");
        assert!(!names.contains(&"CODEX_HOME".to_owned()), "{names:?}");
        let mut once = names.clone();
        once.dedup();
        assert_eq!(once.len(), names.len());
    }
}
