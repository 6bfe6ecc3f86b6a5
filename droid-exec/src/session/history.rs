//! droid's stored sessions, for listing and loading: droid keeps each conversation in
//! `$HOME/.factory/sessions/<cwd, every "/" replaced by "-">/<session id>.jsonl`, whose first
//! record is `session_start {id, title, cwd, …}` (the droid recording `session-files-example`).
//!
//! Reads are bounded: at most [`MAX_FILES`] files looked at, the first line of each at most
//! [`FIRST_LINE_MAX`] bytes.

use std::io::{BufRead as _, Read as _};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::Value;

/// Files looked at by one listing.
pub const MAX_FILES: usize = 10_000;
/// Bytes read of a session file's first line.
pub const FIRST_LINE_MAX: u64 = 64 * 1024;

/// One stored session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSession {
    /// droid's session id.
    pub id: String,
    /// Its working directory.
    pub cwd: String,
    /// Its title, when droid gave one.
    pub title: Option<String>,
    /// When its file last changed.
    pub updated: SystemTime,
}

/// The directory droid keeps `cwd`'s sessions in.
pub fn dir_for(home: &Path, cwd: &Path) -> PathBuf {
    let name = crate::providers::droid::session_settings::dir_name(cwd);
    home.join(".factory/sessions").join(name)
}

fn read_start(path: &Path) -> Option<(String, String, Option<String>)> {
    let file = std::fs::File::open(path).ok()?;
    let mut line = String::new();
    std::io::BufReader::new(file.take(FIRST_LINE_MAX))
        .read_line(&mut line)
        .ok()?;
    let v: Value = serde_json::from_str(line.trim()).ok()?;
    if v.get("type").and_then(Value::as_str) != Some("session_start") {
        return None;
    }
    Some((
        v.get("id")?.as_str()?.to_owned(),
        v.get("cwd")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        v.get("title")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .map(str::to_owned),
    ))
}

fn sessions_in(dir: &Path, budget: &mut usize, out: &mut Vec<StoredSession>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if *budget == 0 {
            return;
        }
        let path = e.path();
        if path.extension().and_then(|x| x.to_str()) != Some("jsonl") {
            continue;
        }
        *budget -= 1;
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        if let Some((id, cwd, title)) = read_start(&path) {
            out.push(StoredSession {
                id,
                cwd,
                title,
                updated: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            });
        }
    }
}

/// The stored sessions of `cwd` (every directory when `None`), newest first.
pub fn list(home: &Path, cwd: Option<&Path>) -> Vec<StoredSession> {
    let mut out = Vec::new();
    let mut budget = MAX_FILES;
    match cwd {
        Some(c) => sessions_in(&dir_for(home, c), &mut budget, &mut out),
        None => {
            if let Ok(dirs) = std::fs::read_dir(home.join(".factory/sessions")) {
                for d in dirs.flatten() {
                    if d.file_type().is_ok_and(|t| t.is_dir()) {
                        sessions_in(&d.path(), &mut budget, &mut out);
                    }
                }
            }
        }
    }
    if let Some(c) = cwd {
        let c = c.display().to_string();
        out.retain(|s| s.cwd == c);
    }
    out.sort_by(|a, b| b.updated.cmp(&a.updated).then_with(|| a.id.cmp(&b.id)));
    out
}

/// The stored session `id` of `cwd`, if droid has it.
pub fn find(home: &Path, cwd: &Path, id: &str) -> Option<StoredSession> {
    if id.is_empty() || id.contains('/') || id.contains('\0') || id.starts_with('.') {
        return None;
    }
    let path = dir_for(home, cwd).join(format!("{id}.jsonl"));
    let meta = std::fs::symlink_metadata(&path).ok()?;
    let (found, cwd, title) = read_start(&path)?;
    (found == id).then(|| StoredSession {
        id: found,
        cwd,
        title,
        updated: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
    })
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn sessions_are_listed_newest_first_and_found_by_id() {
        let home = std::env::temp_dir().join(format!("droid-history-{}", std::process::id()));
        let cwd = Path::new("/w/repo");
        let dir = dir_for(&home, cwd);
        std::fs::create_dir_all(&dir).unwrap();
        assert!(dir.ends_with(".factory/sessions/-w-repo"));
        std::fs::write(
            dir.join("s1.jsonl"),
            "{\"type\":\"session_start\",\"id\":\"s1\",\"title\":\"First\",\"cwd\":\"/w/repo\"}\n{}\n",
        )
        .unwrap();
        std::fs::write(dir.join("bad.jsonl"), "not json\n").unwrap();
        std::fs::write(dir.join("s1.settings.json"), "{}").unwrap();
        let all = list(&home, Some(cwd));
        assert_eq!(all.len(), 1);
        assert_eq!(
            (all[0].id.as_str(), all[0].title.as_deref()),
            ("s1", Some("First"))
        );
        assert_eq!(list(&home, None).len(), 1);
        assert!(find(&home, cwd, "s1").is_some());
        assert!(find(&home, cwd, "nope").is_none());
        assert!(find(&home, cwd, "../x").is_none());
        std::fs::remove_dir_all(&home).unwrap();
    }
}
