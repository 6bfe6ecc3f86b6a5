//! A write the run's confinement refused, read back from what an agent's tool printed.
//!
//! Under Landlock (`run/sandbox.rs`) a write outside the granted trees fails with `EACCES`, and
//! every CLI reports it in its own words, with the path (recorded under a Landlock ruleset like
//! the engine's): Claude Code's Write `EACCES: permission denied, open '/h/.bashrc-planted'`,
//! Gemini CLI's write_file `Permission denied writing to file: /h/.bashrc-planted (EACCES)`,
//! OpenCode's write `PermissionDenied: FileSystem.writeFile (/h/.bashrc-planted)`, a shell's
//! `sh: 1: cannot create /h/escaped: Permission denied` or `bash: line 1: /h/escaped: Permission
//! denied`, coreutils' `touch: cannot touch '/h/x': Permission denied`. Codex's `apply_patch`
//! drops the errno (`Failed to write file /h/.bashrc-planted`, on stderr only): Codex's
//! findings read that line themselves and call [`add`]. Each provider's `findings` calls
//! [`add_issues`] on its events: one `permission_denied` issue per path, so the result names
//! what the agent tried to write.
//!
//! `Read-only file system` (`EROFS`) is not read here: it is what Codex's own read-only sandbox
//! says, which Codex's findings report in their own words.

use droid_contract::{Issue, IssueType};

use crate::providers::AgentEvent;
use crate::run::classify::Findings;

/// The texts that mark a refused write (`strerror(EACCES)`, Node's `EACCES: permission
/// denied, …`, and OpenCode's `PermissionDenied: FileSystem.writeFile (…)`).
const MARKERS: [&str; 4] = [
    "Permission denied",
    "permission denied",
    "EACCES",
    "PermissionDenied: FileSystem",
];

/// At most this many paths are named per text (a loop over a tree would list thousands).
const MAX_PATHS: usize = 20;

/// What a user does about a denied write.
const ACTION: &str = "the write was outside what the run may write (repo_root, temp, the agent's \
     own state, package caches): if the task needs that path, add it to sandbox_writable (the \
     setting, or the request field where the server allows it), or change the task to stay \
     inside repo_root";

/// Add a `permission_denied` issue to `f` for each path a tool result of `agent` (`codex`,
/// `claude`, …) says it was denied, and mark the run as denied a permission.
pub(crate) fn add_issues(f: &mut Findings, agent: &str, events: &[AgentEvent]) {
    for ev in events {
        if let AgentEvent::ToolResult { text, .. } = ev {
            for path in denied_paths(text) {
                add(f, agent, &path);
            }
        }
    }
}

/// Add the `permission_denied` issue for a write of `agent` to `path` that was refused.
pub(crate) fn add(f: &mut Findings, agent: &str, path: &str) {
    f.permission_denied = true;
    f.add(issue(agent, path));
}

/// The paths named by the refused writes in `text`, in order, each once.
pub(crate) fn denied_paths(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        if out.len() >= MAX_PATHS {
            break;
        }
        let Some(at) = MARKERS.iter().filter_map(|m| line.find(m)).min() else {
            continue;
        };
        if let Some(path) = quoted_path(line)
            .or_else(|| absolute_path(line))
            .or_else(|| path_before(&line[..at]))
            && !out.contains(&path)
        {
            out.push(path);
        }
    }
    out
}

/// The `permission_denied` issue for a write of `agent` to `path` the confinement refused.
fn issue(agent: &str, path: &str) -> Issue {
    Issue::new(
        IssueType::PermissionDenied,
        format!("{agent} was denied a write to {path} (EACCES: outside the run's writable paths)"),
        ACTION,
    )
}

/// The first quoted token that looks like a path (`'…'`, `"…"` or `` `…` ``).
fn quoted_path(line: &str) -> Option<String> {
    for quote in ['\'', '"', '`'] {
        let found = line
            .split(quote)
            .skip(1)
            .step_by(2)
            .find(|inner| ["/", "~/", "./"].iter().any(|s| inner.starts_with(s)));
        if let Some(inner) = found {
            return Some(inner.to_owned());
        }
    }
    None
}

/// The first word of `line` that is an absolute path, without the punctuation around it
/// (`(/x)`, `/x:`).
fn absolute_path(line: &str) -> Option<String> {
    line.split_whitespace()
        .map(|w| w.trim_matches(|c| matches!(c, '(' | ')' | ',' | ':' | ';')))
        .find(|w| w.starts_with('/') && w.len() > 1)
        .map(str::to_owned)
}

/// The path just before the marker: the last `: `-separated piece of `before`, from its first
/// `/` (`sh: 1: cannot create /x` → `/x`), or its last word when it has no `/`.
fn path_before(before: &str) -> Option<String> {
    let before = before.trim_end().trim_end_matches(':').trim_end();
    let piece = before.rsplit(": ").next().unwrap_or(before).trim();
    let path = match piece.find('/') {
        Some(slash) => &piece[slash..],
        None => piece.rsplit(' ').next().unwrap_or(piece),
    };
    let path = path.trim_end_matches([',', ')', '(']).trim();
    (!path.is_empty() && !path.contains(' ')).then(|| path.to_owned())
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn each_tool_text_names_its_path() {
        let cases = [
            (
                "EACCES: permission denied, open '/h/.bashrc-planted'",
                "/h/.bashrc-planted",
            ),
            (
                "sh: 1: cannot create /h/escaped: Permission denied",
                "/h/escaped",
            ),
            ("bash: line 1: /h/escaped: Permission denied", "/h/escaped"),
            ("touch: cannot touch '/h/x': Permission denied", "/h/x"),
            (
                "mkdir: cannot create directory \"/h/d\": Permission denied",
                "/h/d",
            ),
            (
                "Failed to write file /h/.bashrc-planted: Permission denied (os error 13)",
                "/h/.bashrc-planted",
            ),
            ("sh: 1: cannot create escaped: Permission denied", "escaped"),
            (
                "Permission denied writing to file: /h/.bashrc-planted (EACCES)",
                "/h/.bashrc-planted",
            ),
            (
                "PermissionDenied: FileSystem.writeFile (/h/.bashrc-planted)",
                "/h/.bashrc-planted",
            ),
        ];
        for (text, path) in cases {
            assert_eq!(denied_paths(text), vec![path.to_owned()], "{text}");
        }
    }

    #[test]
    fn other_texts_name_nothing_and_repeats_count_once() {
        assert_eq!(
            denied_paths("all good\nwrote 3 files"),
            Vec::<String>::new()
        );
        let twice = "sh: 1: cannot create /a: Permission denied\nsh: 1: cannot create /a: \
                     Permission denied\nsh: 1: cannot create /b: Permission denied";
        assert_eq!(denied_paths(twice), vec!["/a".to_owned(), "/b".to_owned()]);
        let many: String = (0..100)
            .map(|i| format!("sh: 1: cannot create /f{i}: Permission denied\n"))
            .collect();
        assert_eq!(denied_paths(&many).len(), MAX_PATHS);
    }
}
