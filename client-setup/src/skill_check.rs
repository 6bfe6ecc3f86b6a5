//! `doctor`'s Agent Skill line: is the skill installed under a skills root, and is it the
//! bundled version?

use std::path::Path;

use droid_exec::health::{Check, Level};

use crate::skill::{FileAction, SkillFile, plan_skill};

/// Where `doctor` looks for the Agent Skill.
#[derive(Debug, Clone, Copy)]
pub enum SkillsRoot<'a> {
    /// Named with `doctor --skills-dir DIR`.
    Named(&'a Path),
    /// The default root (`~/.claude/skills`); `None` when there is none (HOME unset).
    Default(Option<&'a Path>),
}

/// Is the Agent Skill installed in `skills`, and is it the bundled version? The fixes name the
/// root when it is not the default one (`setup skill --dir`).
pub fn skill_check(skills: SkillsRoot<'_>, skill: &[SkillFile]) -> Check {
    let (root, named) = match skills {
        SkillsRoot::Named(r) => (r, true),
        SkillsRoot::Default(Some(r)) => (r, false),
        SkillsRoot::Default(None) => {
            return Check {
                name: "skill",
                level: Level::Warn,
                detail: "no skills root (HOME unset)".into(),
                fix: "droid-executor setup skill --dir SKILLS_ROOT, then doctor --skills-dir SKILLS_ROOT".into(),
            };
        }
    };
    // `setup skill` with the same root
    let setup = if named {
        format!("droid-executor setup skill --dir {}", root.display())
    } else {
        "droid-executor setup skill".to_owned()
    };
    let plan = match plan_skill(root, skill) {
        Ok(p) => p,
        Err(e) => {
            return Check {
                name: "skill",
                level: Level::Warn,
                detail: e.to_string(),
                fix: "check the permissions of the skills folder".into(),
            };
        }
    };
    let count = |a: FileAction| plan.files.iter().filter(|(_, x)| *x == a).count();
    let dir = plan.dir.display();
    if count(FileAction::Unchanged) == plan.files.len() {
        Check {
            name: "skill",
            level: Level::Ok,
            detail: format!("installed in {dir} (up to date)"),
            fix: String::new(),
        }
    } else if count(FileAction::Create) == plan.files.len() {
        Check {
            name: "skill",
            level: Level::Warn,
            detail: if named {
                format!("not installed in {dir}")
            } else {
                format!(
                    "not installed in {dir} (doctor --skills-dir DIR looks in another skills root)"
                )
            },
            fix: format!("{setup} (Claude Code then offers it to the model)"),
        }
    } else if count(FileAction::Conflict) > 0 {
        Check {
            name: "skill",
            level: Level::Warn,
            detail: format!("{dir} has local edits in {}", plan.conflicts().join(", ")),
            fix: format!("keep them, or replace them with: {setup} --force"),
        }
    } else {
        Check {
            name: "skill",
            level: Level::Warn,
            detail: format!("{dir} holds another version of the skill"),
            fix: setup,
        }
    }
}
