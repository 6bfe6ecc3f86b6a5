//! Installing the Agent Skill (`droid-executor setup skill [--dir SKILLS_ROOT]`): the bundled
//! files are written to `SKILLS_ROOT/droid-executor/`, idempotently, and local edits are never
//! overwritten silently.
//!
//! Beside the files, `.droid-executor-install.json` records the FNV-1a hash of what was written.
//! For each bundled file: missing → create; identical → nothing; still as we wrote it (its hash
//! is the recorded one) → update; anything else is a local edit (or a file we never wrote) → a
//! conflict, refused unless `force`, and then the old content is kept as `<file>.bak`. Files of
//! the directory that are not bundled are left alone.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::EngineError;
use crate::fnv;
use crate::store::write_atomic;

/// The skill's folder name (it is also its `name`).
pub const SKILL_NAME: &str = "droid-executor";
const MANIFEST: &str = ".droid-executor-install.json";

/// One bundled file: its path inside the skill folder and its content.
#[derive(Debug, Clone, Copy)]
pub struct SkillFile {
    /// Relative path, `/`-separated.
    pub rel: &'static str,
    /// Content.
    pub text: &'static str,
}

/// What installing does to one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileAction {
    /// It is missing: written.
    Create,
    /// It holds an older bundled version, unedited: replaced.
    Update,
    /// It is already the bundled version.
    Unchanged,
    /// It was edited locally (or was not written by us): replaced only with `force`.
    Conflict,
}

/// What installing would do.
#[derive(Debug, Clone)]
pub struct SkillPlan {
    /// The skill folder (`SKILLS_ROOT/droid-executor`).
    pub dir: PathBuf,
    /// Each bundled file and its action.
    pub files: Vec<(&'static str, FileAction)>,
}

impl SkillPlan {
    /// The files that would be overwritten although edited.
    pub fn conflicts(&self) -> Vec<&'static str> {
        self.files
            .iter()
            .filter(|(_, a)| *a == FileAction::Conflict)
            .map(|(r, _)| *r)
            .collect()
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Manifest {
    version: String,
    files: BTreeMap<String, String>,
}

fn manifest(dir: &Path) -> Manifest {
    std::fs::read(dir.join(MANIFEST))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// What installing `files` under `root` would do.
///
/// # Errors
/// [`EngineError::Io`] when an existing file cannot be read.
pub fn plan_skill(root: &Path, files: &[SkillFile]) -> Result<SkillPlan, EngineError> {
    let dir = root.join(SKILL_NAME);
    let recorded = manifest(&dir);
    let mut out = Vec::new();
    for f in files {
        let path = dir.join(f.rel);
        let action = match std::fs::read(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => FileAction::Create,
            Err(e) => return Err(EngineError::io("read", &path)(e)),
            Ok(have) if have == f.text.as_bytes() => FileAction::Unchanged,
            Ok(have) if recorded.files.get(f.rel) == Some(&fnv::hex(&have)) => FileAction::Update,
            Ok(_) => FileAction::Conflict,
        };
        out.push((f.rel, action));
    }
    Ok(SkillPlan { dir, files: out })
}

/// Carry out `plan` (from [`plan_skill`] with the same `files`), labelled with `version`.
///
/// # Errors
/// [`EngineError::LocalEdits`] naming the edited files when there are conflicts and not `force`
/// (nothing is written then); [`EngineError::Io`] when a file cannot be written.
pub fn install_skill(
    plan: &SkillPlan,
    files: &[SkillFile],
    version: &str,
    force: bool,
) -> Result<(), EngineError> {
    let conflicts = plan.conflicts();
    if !conflicts.is_empty() && !force {
        return Err(EngineError::LocalEdits {
            dir: plan.dir.clone(),
            files: conflicts.iter().map(|c| (*c).to_owned()).collect(),
        });
    }
    let mut recorded = Manifest {
        version: version.to_owned(),
        files: BTreeMap::new(),
    };
    for (f, (_, action)) in files.iter().zip(&plan.files) {
        let path = plan.dir.join(f.rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(EngineError::io("create", parent))?;
        }
        if *action == FileAction::Conflict {
            let bak = path.with_file_name(format!(
                "{}.bak",
                path.file_name()
                    .map(|n| n.to_string_lossy())
                    .unwrap_or_default()
            ));
            std::fs::copy(&path, &bak).map_err(EngineError::io("back up", &path))?;
        }
        if *action != FileAction::Unchanged {
            write_atomic(&path, f.text.as_bytes())?;
        }
        recorded
            .files
            .insert(f.rel.to_owned(), fnv::hex(f.text.as_bytes()));
    }
    let text = serde_json::to_vec_pretty(&recorded).map_err(|e| EngineError::Io {
        action: "encode",
        path: plan.dir.join(MANIFEST),
        source: std::io::Error::other(e),
    })?;
    write_atomic(&plan.dir.join(MANIFEST), &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &[SkillFile] = &[
        SkillFile {
            rel: "SKILL.md",
            text: "one\n",
        },
        SkillFile {
            rel: "references/p.md",
            text: "ref\n",
        },
    ];
    const V2: &[SkillFile] = &[
        SkillFile {
            rel: "SKILL.md",
            text: "two\n",
        },
        SkillFile {
            rel: "references/p.md",
            text: "ref\n",
        },
    ];

    fn actions(p: &SkillPlan) -> Vec<FileAction> {
        p.files.iter().map(|(_, a)| *a).collect()
    }

    #[test]
    fn installs_updates_and_keeps_local_edits() {
        use FileAction::*;
        let root = std::env::temp_dir().join(format!("dx-skill-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let p = plan_skill(&root, V1).unwrap();
        assert_eq!(actions(&p), [Create, Create]);
        install_skill(&p, V1, "1", false).unwrap();
        let skill = root.join("droid-executor/SKILL.md");
        assert_eq!(std::fs::read_to_string(&skill).unwrap(), "one\n");
        // idempotent
        assert_eq!(
            actions(&plan_skill(&root, V1).unwrap()),
            [Unchanged, Unchanged]
        );
        // an unedited older version is updated
        let p = plan_skill(&root, V2).unwrap();
        assert_eq!(actions(&p), [Update, Unchanged]);
        install_skill(&p, V2, "2", false).unwrap();
        assert_eq!(std::fs::read_to_string(&skill).unwrap(), "two\n");
        // a local edit is refused without force, nothing changes
        std::fs::write(&skill, "mine\n").unwrap();
        let p = plan_skill(&root, V1).unwrap();
        assert_eq!(actions(&p), [Conflict, Unchanged]);
        let err = install_skill(&p, V1, "1", false).unwrap_err().to_string();
        assert!(err.contains("SKILL.md") && err.contains("--force"), "{err}");
        assert_eq!(std::fs::read_to_string(&skill).unwrap(), "mine\n");
        // with force it is replaced and kept as .bak
        install_skill(&p, V1, "1", true).unwrap();
        assert_eq!(std::fs::read_to_string(&skill).unwrap(), "one\n");
        assert_eq!(
            std::fs::read_to_string(root.join("droid-executor/SKILL.md.bak")).unwrap(),
            "mine\n"
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
