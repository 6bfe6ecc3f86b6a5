//! Reading an agent's normalized events for what they mean, whichever provider ran: the commands
//! it ran (shell calls paired with their results), the files its tools wrote inside and outside
//! the repository, and the [`Findings`] a provider reads from its own failure texts
//! (`crate::providers`). Nothing here knows a provider's tool names or error texts.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use droid_contract::{CommandRun, CommandSource, normalize};

use crate::excerpt::tail_str;
use crate::providers::{AgentEvent, ToolKind, WriteChange};
use crate::run::redact::Redactor;

/// Commands the agent ran: each shell call with its result, in call order.
pub(crate) fn agent_commands(
    events: &[AgentEvent],
    keep: usize,
    redact: &Redactor,
) -> Vec<CommandRun> {
    let mut results: HashMap<&str, (&str, Option<i32>, Option<u64>)> = HashMap::new();
    for ev in events {
        if let AgentEvent::ToolResult {
            id,
            text,
            exit_code,
            timestamp_ms,
            ..
        } = ev
        {
            results.insert(id.as_str(), (text.as_str(), *exit_code, *timestamp_ms));
        }
    }
    let mut out = Vec::new();
    for ev in events {
        let AgentEvent::ToolCall {
            id,
            kind: ToolKind::Shell { command },
            timestamp_ms,
            ..
        } = ev
        else {
            continue;
        };
        let (exit_code, output, duration_ms) = match results.get(id.as_str()) {
            Some((text, code, done)) => (
                *code,
                (*text).to_owned(),
                match (timestamp_ms, done) {
                    (Some(a), Some(b)) => b.saturating_sub(*a),
                    _ => 0,
                },
            ),
            None => (
                None,
                "no result: the run ended before this command finished".to_owned(),
                0,
            ),
        };
        let (excerpt, truncated) = tail_str(&output, keep);
        out.push(CommandRun {
            command: redact.apply(command),
            exit_code,
            duration_ms,
            stdout_excerpt: redact.apply(&excerpt),
            stderr_excerpt: String::new(),
            source: CommandSource::Agent,
            truncated,
        });
    }
    out
}

/// `path` (as the agent wrote it) relative to the repository, or `None` when it lies outside.
pub(crate) fn inside_repo(path: &str, root: &Path, real_root: &Path) -> Option<PathBuf> {
    let p = Path::new(path);
    let abs = if p.is_absolute() {
        normalize(p)?
    } else {
        normalize(&root.join(p))?
    };
    abs.strip_prefix(root)
        .or_else(|_| abs.strip_prefix(real_root))
        .ok()
        .map(Path::to_path_buf)
}

/// What the agent's tool calls say about files: highlights per repository path, and paths
/// written outside the repository.
pub(crate) struct ToolFiles {
    pub highlights: HashMap<PathBuf, Vec<String>>,
    pub outside: Vec<String>,
}

/// Read the write calls of `events`; `agent` names the agent in the highlights.
pub(crate) fn tool_files(
    events: &[AgentEvent],
    root: &Path,
    real_root: &Path,
    agent: &str,
) -> ToolFiles {
    let mut ok: HashMap<&str, Option<(u64, u64)>> = HashMap::new();
    for ev in events {
        if let AgentEvent::ToolResult {
            id,
            is_error: false,
            diffstat,
            ..
        } = ev
        {
            ok.insert(id.as_str(), *diffstat);
        }
    }
    let mut highlights: HashMap<PathBuf, Vec<String>> = HashMap::new();
    let mut outside = Vec::new();
    for ev in events {
        let AgentEvent::ToolCall {
            id,
            tool,
            kind: ToolKind::Write { paths, change },
            ..
        } = ev
        else {
            continue;
        };
        for path in paths {
            match inside_repo(path, root, real_root) {
                None => {
                    if !outside.contains(path) {
                        outside.push(path.clone());
                    }
                }
                Some(rel) => {
                    let Some(diffstat) = ok.get(id.as_str()) else {
                        continue;
                    };
                    let note = match (change, diffstat) {
                        (WriteChange::Create { lines: Some(n) }, _) => {
                            let noun = if *n == 1 { "line" } else { "lines" };
                            format!("created by {agent} ({n} {noun})")
                        }
                        (WriteChange::Create { lines: None }, _) => format!("created by {agent}"),
                        (WriteChange::Edit, Some((a, r))) => {
                            format!("edited by {agent} (+{a} -{r})")
                        }
                        (WriteChange::Edit, None) => format!("edited by {agent}"),
                        (WriteChange::Delete, _) => format!("deleted by {agent}"),
                        (WriteChange::Patch, _) => format!("changed by {agent} ({tool})"),
                    };
                    highlights.entry(rel).or_default().push(note);
                }
            }
        }
    }
    ToolFiles {
        highlights,
        outside,
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;
    use droid_contract::{CommandRun, CommandSource};

    use crate::providers::droid::Droid;

    fn recorded(name: &str) -> Vec<AgentEvent> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/droid")
            .join(format!("{name}.ndjson"));
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| Droid.parse_line(l.as_bytes()))
            .collect()
    }

    #[test]
    fn commands_from_the_recorded_tool_dance() {
        let cmds = agent_commands(&recorded("tools-stream-json"), 4096, &Redactor::default());
        assert_eq!(
            cmds,
            vec![
                CommandRun {
                    command: "cat /tmp/rw/t1/hello.txt && echo done".into(),
                    exit_code: Some(0),
                    duration_ms: 120,
                    stdout_excerpt: "hello droid\ndone".into(),
                    stderr_excerpt: String::new(),
                    source: CommandSource::Agent,
                    truncated: false,
                },
                CommandRun {
                    command: "echo to-stderr >&2; exit 3".into(),
                    exit_code: Some(3),
                    duration_ms: 38,
                    stdout_excerpt: "to-stderr".into(),
                    stderr_excerpt: String::new(),
                    source: CommandSource::Agent,
                    truncated: false,
                },
            ]
        );
    }

    #[test]
    fn tool_files_in_and_out_of_the_repo() {
        let ev = recorded("tools-stream-json");
        let t = tool_files(
            &ev,
            Path::new("/tmp/rw/t1"),
            Path::new("/tmp/rw/t1"),
            "droid",
        );
        assert_eq!(
            t.highlights.get(Path::new("hello.txt")),
            Some(&vec![
                "created by droid (1 line)".to_owned(),
                "edited by droid (+1 -1)".to_owned()
            ])
        );
        assert!(t.outside.is_empty());
        let t = tool_files(
            &ev,
            Path::new("/tmp/other"),
            Path::new("/tmp/other"),
            "droid",
        );
        assert_eq!(t.outside, vec!["/tmp/rw/t1/hello.txt".to_owned()]);
    }
}
