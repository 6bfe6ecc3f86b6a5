//! Installing the Agent Skill (`droid-executor setup skill [--dir SKILLS_ROOT]`): the bundled
//! files are written to `SKILLS_ROOT/droid-executor/`, idempotently, and local edits are never
//! overwritten silently.
//!
//! Beside the files, `.droid-executor-install.json` records the FNV-1a hash of what was written.
//! For each bundled file: missing → create; identical → nothing; still as we wrote it (its hash
//! is the recorded one) → update; anything else is a local edit (or a file we never wrote) → a
//! conflict, refused unless `force`, and then the old content is kept as `<file>.bak`. Files of
//! the directory that are not bundled are left alone. New contents are staged beside their files
//! and renamed into place only once all are written, so a failure changes nothing; files are
//! 0644 (a skill is documentation).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::EngineError;
use crate::fnv;

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
    let recorded = Manifest {
        version: version.to_owned(),
        files: files
            .iter()
            .map(|f| (f.rel.to_owned(), fnv::hex(f.text.as_bytes())))
            .collect(),
    };
    let manifest_text = serde_json::to_vec_pretty(&recorded).map_err(|e| EngineError::Io {
        action: "encode",
        path: plan.dir.join(MANIFEST),
        source: std::io::Error::other(e),
    })?;
    let manifest_path = plan.dir.join(MANIFEST);
    let mut writes: Vec<(PathBuf, &[u8])> = files
        .iter()
        .zip(&plan.files)
        .filter(|(_, (_, action))| *action != FileAction::Unchanged)
        .map(|(f, _)| (plan.dir.join(f.rel), f.text.as_bytes()))
        .collect();
    if std::fs::read(&manifest_path).ok().as_deref() != Some(manifest_text.as_slice()) {
        writes.push((manifest_path, &manifest_text));
    }
    // two phases, so a failure leaves the skill as it was: every new content is written beside
    // its file first; only when all are there are they renamed into place
    let mut staged: Vec<(PathBuf, PathBuf)> = Vec::new();
    let stage = |path: &Path, bytes: &[u8]| -> Result<PathBuf, EngineError> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(EngineError::io("create", parent))?;
        }
        let tmp = sibling(path, ".dx-new");
        write_readable(&tmp, bytes)?;
        Ok(tmp)
    };
    for (path, bytes) in &writes {
        match stage(path, bytes) {
            Ok(tmp) => staged.push((tmp, path.clone())),
            Err(e) => {
                for (tmp, _) in &staged {
                    let _ = std::fs::remove_file(tmp);
                }
                return Err(e);
            }
        }
    }
    for ((_, action), f) in plan.files.iter().zip(files) {
        if *action == FileAction::Conflict {
            let path = plan.dir.join(f.rel);
            std::fs::copy(&path, sibling(&path, ".bak"))
                .map_err(EngineError::io("back up", &path))?;
        }
    }
    for (tmp, path) in staged {
        std::fs::rename(&tmp, &path).map_err(EngineError::io("rename", &path))?;
    }
    Ok(())
}

/// `path` with `suffix` appended to its file name.
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!("{name}{suffix}"))
}

/// Write `bytes` to `path` (0644: a skill is documentation other users may read), synced.
fn write_readable(path: &Path, bytes: &[u8]) -> Result<(), EngineError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o644)
        .open(path)
        .map_err(EngineError::io("write", path))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(EngineError::io("write", path))
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
