//! Installing the Agent Skill (`droid-executor setup skill [--dir SKILLS_ROOT]`): the bundled
//! files are written to `SKILLS_ROOT/droid-executor/`, idempotently, and local edits are never
//! overwritten silently. The fallback skills ([`crate::fallback_skills`]) are installed the same
//! way, each in its own folder `SKILLS_ROOT/ask-<provider>/` ([`plan_skill_named`]).
//!
//! Beside the files, `.droid-executor-install.json` records the FNV-1a hash of what was written.
//! For each bundled file: missing → create; identical → nothing; still as we wrote it (its hash
//! is the recorded one) → update; anything else is a local edit (or a file we never wrote) → a
//! conflict, refused unless `force`, and then the old content is kept as `<file>.bak`. Files of
//! the directory that are not bundled are left alone. The commit is as close to all-or-nothing as
//! the file system allows: new contents (backups included) are staged beside their files, every
//! file about to be replaced is kept, and only then is everything renamed into place; a failure
//! while staging changes nothing, a rename that fails puts back what was already renamed, and no
//! staged or kept file is left behind either way. Files are 0644 (a skill is documentation).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use droid_exec::EngineError;
use droid_exec::fnv;

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
    plan_skill_named(root, SKILL_NAME, files)
}

/// What installing `files` as the skill `name` (its folder `root/name`) would do: the same
/// rules as [`plan_skill`] for another skill (the fallback skills `ask-<provider>`).
///
/// # Errors
/// [`EngineError::Io`] when an existing file cannot be read.
pub fn plan_skill_named(
    root: &Path,
    name: &str,
    files: &[SkillFile],
) -> Result<SkillPlan, EngineError> {
    let dir = root.join(name);
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
    // the edited files' contents, kept as `<file>.bak`; written first, so that the edits are
    // saved before anything replaces them
    let mut backups: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    for ((_, action), f) in plan.files.iter().zip(files) {
        if *action == FileAction::Conflict {
            let path = plan.dir.join(f.rel);
            let old = std::fs::read(&path).map_err(EngineError::io("back up", &path))?;
            backups.push((sibling(&path, ".bak"), old));
        }
    }
    let mut writes: Vec<(PathBuf, &[u8])> = backups
        .iter()
        .map(|(path, old)| (path.clone(), old.as_slice()))
        .collect();
    writes.extend(
        files
            .iter()
            .zip(&plan.files)
            .filter(|(_, (_, action))| *action != FileAction::Unchanged)
            .map(|(f, _)| (plan.dir.join(f.rel), f.text.as_bytes())),
    );
    // last: it records what was written
    if std::fs::read(&manifest_path).ok().as_deref() != Some(manifest_text.as_slice()) {
        writes.push((manifest_path, &manifest_text));
    }
    commit(&writes, |from, to| std::fs::rename(from, to))
}

/// One file of a [`commit`]: its new content staged beside it, and its previous state.
#[derive(Debug)]
struct Pending {
    /// The file.
    target: PathBuf,
    /// The new content, staged (`<file>.dx-new`).
    staged: PathBuf,
    /// A hard link to (or copy of) the previous file (`<file>.dx-old`); `None` when there was
    /// none, so that undoing means removing the new file.
    previous: Option<PathBuf>,
}

/// Write every `(path, content)` of `writes` as close to all-or-nothing as the file system
/// allows: (1) every content is staged beside its file (directories created as needed), (2)
/// every existing file is kept as `<file>.dx-old` (a hard link, else a copy), (3) the staged
/// files are renamed into place in order. A failure in (1) or (2) changes nothing; a failed
/// rename in (3) puts back the files already renamed. Every staged and kept file and every
/// directory made here is removed whatever happens. `rename` is `std::fs::rename` (a parameter
/// so that a test can make one fail).
fn commit(
    writes: &[(PathBuf, &[u8])],
    rename: impl Fn(&Path, &Path) -> std::io::Result<()>,
) -> Result<(), EngineError> {
    let mut made_dirs: Vec<PathBuf> = Vec::new();
    let mut pending: Vec<Pending> = Vec::new();
    // on any failure before the renames: remove what was staged or kept, and the new directories
    let abandon = |pending: &[Pending], made_dirs: &[PathBuf]| {
        for p in pending {
            let _ = std::fs::remove_file(&p.staged);
            if let Some(prev) = &p.previous {
                let _ = std::fs::remove_file(prev);
            }
        }
        // deepest first; a directory something else was put in stays
        for dir in made_dirs.iter().rev() {
            let _ = std::fs::remove_dir(dir);
        }
    };
    for (target, bytes) in writes {
        if let Err(e) = stage(target, bytes, &mut made_dirs) {
            abandon(&pending, &made_dirs);
            return Err(e);
        }
        pending.push(Pending {
            target: target.clone(),
            staged: sibling(target, ".dx-new"),
            previous: None,
        });
    }
    for i in 0..pending.len() {
        match keep_previous(&pending[i].target) {
            Ok(previous) => pending[i].previous = previous,
            Err(e) => {
                abandon(&pending, &made_dirs);
                return Err(e);
            }
        }
    }
    for i in 0..pending.len() {
        let p = &pending[i];
        if let Err(e) = rename(&p.staged, &p.target) {
            // undo the renames done, newest first
            let mut undo_failed = Vec::new();
            for done in pending[..i].iter().rev() {
                let undone = match &done.previous {
                    Some(prev) => rename(prev, &done.target),
                    None => std::fs::remove_file(&done.target),
                };
                if let Err(u) = undone {
                    undo_failed.push(format!("{}: {u}", done.target.display()));
                }
            }
            abandon(&pending[i..], &made_dirs);
            let source = if undo_failed.is_empty() {
                e
            } else {
                std::io::Error::other(format!(
                    "{e}; putting back the previous files failed too ({}): the skill folder may \
                     be half-updated",
                    undo_failed.join(", ")
                ))
            };
            return Err(EngineError::Io {
                action: "rename",
                path: p.target.clone(),
                source,
            });
        }
    }
    for p in &pending {
        if let Some(prev) = &p.previous {
            let _ = std::fs::remove_file(prev);
        }
    }
    Ok(())
}

/// Write `bytes` to `<target>.dx-new`, creating the missing parents of `target` (recorded in
/// `made_dirs`, outermost first).
fn stage(target: &Path, bytes: &[u8], made_dirs: &mut Vec<PathBuf>) -> Result<(), EngineError> {
    if let Some(parent) = target.parent() {
        let missing: Vec<PathBuf> = parent
            .ancestors()
            .take_while(|d| !d.as_os_str().is_empty() && !d.exists())
            .map(Path::to_path_buf)
            .collect();
        std::fs::create_dir_all(parent).map_err(EngineError::io("create", parent))?;
        made_dirs.extend(missing.into_iter().rev());
    }
    write_readable(&sibling(target, ".dx-new"), bytes)
}

/// Keep the file at `target` (if any) as `<target>.dx-old`: a hard link (the very same file,
/// whatever it is), else a copy of a regular file. Anything else (a directory) is left to the
/// rename, which fails on it.
fn keep_previous(target: &Path) -> Result<Option<PathBuf>, EngineError> {
    let meta = match std::fs::symlink_metadata(target) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(EngineError::io("read", target)(e)),
    };
    let kept = sibling(target, ".dx-old");
    // a leftover of an interrupted install: ours to replace
    let _ = std::fs::remove_file(&kept);
    if std::fs::hard_link(target, &kept).is_ok() {
        return Ok(Some(kept));
    }
    if meta.is_file() {
        std::fs::copy(target, &kept).map_err(EngineError::io("back up", target))?;
        return Ok(Some(kept));
    }
    Ok(None)
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

    /// Every file under `dir` with its content, relative paths, sorted.
    fn tree(dir: &Path) -> Vec<(String, String)> {
        fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                let rel = path.strip_prefix(root).unwrap().display().to_string();
                if path.is_dir() {
                    out.push((format!("{rel}/"), String::new()));
                    walk(root, &path, out);
                } else {
                    out.push((rel, std::fs::read_to_string(&path).unwrap()));
                }
            }
        }
        let mut out = Vec::new();
        walk(dir, dir, &mut out);
        out.sort();
        out
    }

    #[test]
    fn a_rename_failing_midway_puts_back_what_was_renamed() {
        let root = std::env::temp_dir().join(format!("dx-commit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("a"), "old a\n").unwrap();
        std::fs::write(root.join("c"), "old c\n").unwrap();
        let before = tree(&root);
        let writes: Vec<(PathBuf, &[u8])> = vec![
            (root.join("a"), b"new a\n"),
            (root.join("sub/b"), b"new b\n"),
            (root.join("c"), b"new c\n"),
        ];
        // the third rename fails, after `a` was replaced and `sub/b` created
        let fail_at = root.join("c");
        let err = commit(&writes, |from, to| {
            if to == fail_at {
                Err(std::io::Error::other("injected"))
            } else {
                std::fs::rename(from, to)
            }
        })
        .unwrap_err()
        .to_string();
        assert_eq!(
            err,
            format!("rename {}: injected", root.join("c").display())
        );
        assert_eq!(
            tree(&root),
            before,
            "everything as it was, nothing staged or kept left"
        );

        // and with nothing failing, everything is replaced and nothing is left beside it
        commit(&writes, |from, to| std::fs::rename(from, to)).unwrap();
        assert_eq!(
            tree(&root),
            [
                ("a".to_owned(), "new a\n".to_owned()),
                ("c".to_owned(), "new c\n".to_owned()),
                ("sub/".to_owned(), String::new()),
                ("sub/b".to_owned(), "new b\n".to_owned()),
            ]
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_backup_that_cannot_be_written_changes_nothing() {
        use FileAction::*;
        let root = std::env::temp_dir().join(format!("dx-skill-bak-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        install_skill(&plan_skill(&root, V1).unwrap(), V1, "1", false).unwrap();
        let dir = root.join(SKILL_NAME);
        std::fs::write(dir.join("SKILL.md"), "mine\n").unwrap();
        std::fs::remove_file(dir.join("references/p.md")).unwrap();
        // `SKILL.md.bak` is a directory (with a file in it): the backup cannot be renamed there
        std::fs::create_dir_all(dir.join("SKILL.md.bak")).unwrap();
        std::fs::write(dir.join("SKILL.md.bak/keep"), "k\n").unwrap();
        let before = tree(&dir);
        let p = plan_skill(&root, V2).unwrap();
        assert_eq!(actions(&p), [Conflict, Create]);
        let err = install_skill(&p, V2, "2", true).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("rename {}: ", dir.join("SKILL.md.bak").display())),
            "{err}"
        );
        assert_eq!(tree(&dir), before);
        std::fs::remove_dir_all(&root).unwrap();
    }

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
