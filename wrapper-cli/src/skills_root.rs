//! The user skills roots of the clients that read Agent Skills (`setup skill` installs there,
//! `doctor` looks there).

use std::path::PathBuf;

use clap::ValueEnum;

/// A client that reads Agent Skills from a skills root.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum SkillClient {
    /// Claude Code (`~/.claude/skills`).
    Claude,
    /// Factory's droid (`~/.factory/skills`).
    Droid,
}

/// The default skills root: Claude Code's user skills.
pub(crate) fn default_skills_root(env: &droid_exec::EnvMap) -> Option<PathBuf> {
    skills_root_of(SkillClient::Claude, env)
}

/// The client's user skills root: `~/.claude/skills` (Claude Code), `~/.factory/skills` (droid).
pub(crate) fn skills_root_of(client: SkillClient, env: &droid_exec::EnvMap) -> Option<PathBuf> {
    let sub = match client {
        SkillClient::Claude => ".claude/skills",
        SkillClient::Droid => ".factory/skills",
    };
    env.get("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(sub))
}
