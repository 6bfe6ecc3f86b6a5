//! client-setup: what `droid-executor setup` does to the clients around the engine — registering
//! droid-executor as an MCP server with droid, Claude Code, Codex, Gemini CLI and OpenCode
//! ([`register`]; droid's settings in [`droid_settings`], the JSON-with-comments edits in
//! [`jsonc`]), installing
//! the Agent Skill ([`skill`]) and the short fallback skills `ask-<provider>` ([`fallback_skills`])
//! — registering `droid-executor acp` as an agent server in Zed's settings ([`zed`], a JSONC
//! edit that keeps the user's comments) — and `doctor`'s checks of that skill ([`skill_check`])
//! and of droid's registration ([`droid_settings::droid_mcp_check`]).
//! These are
//! front-end concerns: the engine (`droid-exec`) runs tasks and knows nothing of them.
//!
//! It must not depend on a front-end crate (wrapper-cli, bridge-http, mcp-stdio), hyper or clap;
//! every process it starts (`droid mcp add`, `claude mcp add`) is started through the engine's
//! `droid_exec::process::spawn`.

pub mod droid_settings;
pub mod fallback_skills;
pub mod gemini;
pub mod jsonc;
pub mod opencode;
pub mod register;
pub mod registration;
mod replace_file;
pub mod skill;
pub mod skill_check;
pub mod zed;

pub use skill_check::{SkillsRoot, skill_check};
