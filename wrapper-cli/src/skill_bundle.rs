//! The Agent Skill, built into the binary (`skill/droid-executor/` of the repository), so that
//! `droid-executor setup skill` works from an installed binary with no source tree around.

use client_setup::skill::SkillFile;

/// Every file of the skill.
pub(crate) const FILES: &[SkillFile] = &[
    SkillFile {
        rel: "SKILL.md",
        text: include_str!("../../skill/droid-executor/SKILL.md"),
    },
    SkillFile {
        rel: "references/droid-executor-protocol.md",
        text: include_str!("../../skill/droid-executor/references/droid-executor-protocol.md"),
    },
    SkillFile {
        rel: "LICENSE.txt",
        text: include_str!("../../skill/droid-executor/LICENSE.txt"),
    },
];
