//! The fallback skills of seed 002 (docs/architecture.md#origin): one short skill per provider,
//! `ask-<provider>`, telling an agent how to delegate through the CLI when the MCP tools
//! `ask_<provider>`/`pend_<provider>` are not registered: `droid-executor ask <p> "message"
//! --background` prints a task id, `droid-executor pend <p> <id> --wait 60` prints the reply.
//! Their texts live in the repository (`skill/ask-<provider>/SKILL.md`) and are built into the
//! binary, so `setup skill` works with no source tree around. The seed bounds each body (what
//! follows the frontmatter) to under 400 characters: a skill's body enters the model's context
//! whenever it is used, and these say one thing.
//!
//! Which ones a client gets: every provider but the client's own (droid users get `ask-codex`,
//! `ask-claude`, `ask-gemini`, `ask-opencode`; Claude Code users get `ask-droid` in place of
//! `ask-claude`).

use crate::skill::SkillFile;

/// The longest body a fallback skill may have, in characters (exclusive bound, as the seed says
/// "under 400").
pub const BODY_LIMIT: usize = 400;

/// One fallback skill.
#[derive(Debug, Clone, Copy)]
pub struct FallbackSkill {
    /// The provider it delegates to (its wire name: `codex`).
    pub provider: &'static str,
    /// The skill's name and folder (`ask-codex`).
    pub name: &'static str,
    /// Its one file, `SKILL.md`.
    pub file: SkillFile,
}

macro_rules! fallback {
    ($provider:literal) => {
        FallbackSkill {
            provider: $provider,
            name: concat!("ask-", $provider),
            file: SkillFile {
                rel: "SKILL.md",
                text: include_str!(concat!("../../skill/ask-", $provider, "/SKILL.md")),
            },
        }
    };
}

/// Every fallback skill, one per provider.
pub const ALL: [FallbackSkill; 5] = [
    fallback!("codex"),
    fallback!("claude"),
    fallback!("gemini"),
    fallback!("opencode"),
    fallback!("droid"),
];

/// The fallback skills for the client named by its provider name (`droid`, `claude`): every one
/// but the client's own.
pub fn for_client(client: &str) -> impl Iterator<Item = &'static FallbackSkill> {
    ALL.iter().filter(move |s| s.provider != client)
}

/// What follows a `SKILL.md`'s frontmatter (`---` … `---`), trimmed; `None` without a
/// frontmatter.
pub fn body(text: &str) -> Option<&str> {
    let rest = text.strip_prefix("---\n")?;
    let end = rest.find("\n---\n")?;
    Some(rest[end + "\n---\n".len()..].trim())
}

/// The value of a top-level frontmatter key written on one line (`name: ask-codex`).
pub fn frontmatter_value<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let rest = text.strip_prefix("---\n")?;
    let front = &rest[..rest.find("\n---\n")?];
    front.lines().find_map(|l| {
        l.strip_prefix(key)
            .and_then(|v| v.strip_prefix(':'))
            .map(str::trim)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_body_is_under_400_characters_and_says_the_two_commands() {
        for s in ALL {
            let body = body(s.file.text).unwrap_or_else(|| panic!("{}: no frontmatter", s.name));
            let n = body.chars().count();
            assert!(n < BODY_LIMIT, "{}: the body has {n} characters", s.name);
            let p = s.provider;
            for needle in [
                format!("droid-executor ask {p} \"MESSAGE\" --background"),
                format!("droid-executor pend {p} TASK_ID --wait 60"),
                format!("`ask_{p}`"),
            ] {
                assert!(
                    body.contains(&needle),
                    "{}: no {needle:?} in {body}",
                    s.name
                );
            }
        }
    }

    #[test]
    fn the_frontmatter_names_the_folder_and_says_when_to_use_it() {
        for s in ALL {
            assert_eq!(frontmatter_value(s.file.text, "name"), Some(s.name));
            let description = frontmatter_value(s.file.text, "description").unwrap_or_default();
            // the Agent Skills format: a description of at most 1024 characters that says when
            assert!(
                (1..=1024).contains(&description.chars().count()),
                "{}: {description}",
                s.name
            );
            assert!(
                description.contains(&format!(
                    "the MCP tools ask and pend (or ask_{} and pend_{}) are not available",
                    s.provider, s.provider
                )),
                "{}: {description}",
                s.name
            );
        }
    }

    #[test]
    fn each_client_gets_every_provider_but_itself() {
        let names = |c| for_client(c).map(|s| s.name).collect::<Vec<_>>();
        assert_eq!(
            names("droid"),
            ["ask-codex", "ask-claude", "ask-gemini", "ask-opencode"]
        );
        assert_eq!(
            names("claude"),
            ["ask-codex", "ask-gemini", "ask-opencode", "ask-droid"]
        );
    }
}
