//! What one of droid's tool calls is, for a client to show and a policy to decide on: its class
//! (read, edit, execute…), a title, the paths it touches, the change it proposes, and its
//! risk.
//!
//! The risk map is seed 001's: a file read is low; a file write and a `git commit` are
//! medium; a `git push`, a command that works outside the repository, a delete (`rm`,
//! `git rm`, …) and a network fetch are high. Also high, where the seed is silent: a write to
//! a file outside the repository. droid's own `riskLevel`/impact can raise a risk, never lower
//! it (droid trusts the model's label; we do not).

use std::path::{Component, Path, PathBuf};

use serde_json::Value;

/// How risky a tool call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Risk {
    /// Reads and searches.
    Low,
    /// Writes and commands inside the repository, `git commit`.
    Medium,
    /// `git push`, deletes, anything outside the repository, the network.
    High,
}

impl Risk {
    /// The lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::Low => "low",
            Risk::Medium => "medium",
            Risk::High => "high",
        }
    }

    fn from_label(label: &str) -> Option<Risk> {
        match label {
            "low" => Some(Risk::Low),
            "medium" => Some(Risk::Medium),
            "high" => Some(Risk::High),
            _ => None,
        }
    }
}

/// What kind of thing a tool does (ACP's tool kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolClass {
    /// Reads a file or lists a directory.
    Read,
    /// Creates or changes a file.
    Edit,
    /// Removes a file.
    Delete,
    /// Searches (grep, glob).
    Search,
    /// Runs a command.
    Execute,
    /// Plans (TodoWrite) or delegates.
    Think,
    /// Fetches from the network.
    Fetch,
    /// Anything else (MCP tools, skills).
    Other,
}

impl ToolClass {
    /// ACP's name for it.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolClass::Read => "read",
            ToolClass::Edit => "edit",
            ToolClass::Delete => "delete",
            ToolClass::Search => "search",
            ToolClass::Execute => "execute",
            ToolClass::Think => "think",
            ToolClass::Fetch => "fetch",
            ToolClass::Other => "other",
        }
    }
}

/// A change a tool proposes to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProposedDiff {
    /// Absolute path.
    pub path: String,
    /// The text replaced (`None`: a new file).
    pub old_text: Option<String>,
    /// The text written.
    pub new_text: String,
}

/// One entry of a plan (droid's TodoWrite).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanEntry {
    /// What to do.
    pub content: String,
    /// `pending`, `in_progress` or `completed`.
    pub status: &'static str,
    /// `high`, `medium` or `low`.
    pub priority: &'static str,
}

/// A tool call seen by a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolView {
    /// Its class.
    pub class: ToolClass,
    /// A short human title.
    pub title: String,
    /// Absolute paths it touches, with a line where one is known.
    pub locations: Vec<(String, Option<u64>)>,
    /// The change it proposes.
    pub diff: Option<ProposedDiff>,
    /// How risky it is, and why.
    pub risk: Risk,
    /// Why it has that risk.
    pub risk_reason: String,
    /// The command of an Execute.
    pub command: Option<String>,
}

/// How much of a file is read to find where an edit lands.
pub const EDIT_SCAN_BYTES: u64 = 4 * 1024 * 1024;

impl ToolView {
    /// This view with the line an edit lands on (where its old text starts in the file as it
    /// is now, 1-based) as its location's line, so a client can follow the agent there; the
    /// view as it was when the file cannot be read (in its first 4 MiB) or does not hold the
    /// text once.
    pub fn with_edit_line(mut self) -> Self {
        use std::io::Read as _;
        let Some(d) = &self.diff else { return self };
        let Some(old) = d.old_text.as_deref().filter(|o| !o.is_empty()) else {
            return self;
        };
        let mut text = Vec::new();
        let read = std::fs::File::open(&d.path)
            .and_then(|f| f.take(EDIT_SCAN_BYTES).read_to_end(&mut text));
        if read.is_err() {
            return self;
        }
        let text = String::from_utf8_lossy(&text);
        let Some(at) = text.find(old) else {
            return self;
        };
        if text[at + 1..].contains(old) {
            return self;
        }
        let line = 1 + text[..at].matches('\n').count() as u64;
        for loc in &mut self.locations {
            if loc.0 == d.path {
                loc.1 = Some(line);
            }
        }
        self
    }
}

fn str_of<'a>(input: &'a Value, keys: &[&str]) -> Option<&'a str> {
    keys.iter()
        .find_map(|k| input.get(*k).and_then(Value::as_str))
}

/// `path` made absolute against `root`, `.` and `..` folded (without touching the disk).
fn absolute(root: &Path, path: &str) -> PathBuf {
    let joined = root.join(path);
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

fn first_line(s: &str, max: usize) -> String {
    let line = s.lines().next().unwrap_or("");
    if line.chars().count() > max {
        let cut: String = line.chars().take(max).collect();
        format!("{cut}…")
    } else if s.lines().nth(1).is_some() {
        format!("{line} …")
    } else {
        line.to_owned()
    }
}

/// Classify droid's tool `name` called with `input`, in a session rooted at `root`.
pub fn view(name: &str, input: &Value, root: &Path) -> ToolView {
    let path = str_of(input, &["file_path", "path", "directory_path", "filePath"]);
    let abs = path.map(|p| absolute(root, p));
    let inside = abs.as_deref().is_none_or(|p| p.starts_with(root));
    let location = || {
        abs.as_ref()
            .map(|p| {
                let line = input
                    .get("offset")
                    .and_then(Value::as_u64)
                    .map(|o| o.max(1));
                vec![(p.display().to_string(), line)]
            })
            .unwrap_or_default()
    };
    let shown = || {
        abs.as_ref().map_or_else(String::new, |p| {
            p.strip_prefix(root)
                .ok()
                .filter(|r| !r.as_os_str().is_empty())
                .map_or_else(|| p.display().to_string(), |r| r.display().to_string())
        })
    };
    let declared = str_of(input, &["riskLevel"]).and_then(Risk::from_label);
    let mut v = match name {
        "Read" | "LS" => ToolView {
            class: ToolClass::Read,
            title: format!("{} {}", if name == "LS" { "List" } else { "Read" }, shown()),
            locations: location(),
            diff: None,
            risk: Risk::Low,
            risk_reason: "reads a file".into(),
            command: None,
        },
        "Grep" | "Glob" => ToolView {
            class: ToolClass::Search,
            title: format!(
                "Search {}",
                str_of(input, &["pattern", "query"])
                    .map(str::to_owned)
                    .or_else(|| input.get("patterns").map(Value::to_string))
                    .unwrap_or_default()
            ),
            locations: location(),
            diff: None,
            risk: Risk::Low,
            risk_reason: "searches files".into(),
            command: None,
        },
        "Create" | "Write" | "Edit" | "MultiEdit" | "ApplyPatch" => {
            let diff = abs.as_ref().and_then(|p| {
                let path = p.display().to_string();
                match name {
                    "Create" | "Write" => Some(ProposedDiff {
                        path,
                        old_text: None,
                        new_text: str_of(input, &["content"]).unwrap_or("").to_owned(),
                    }),
                    "Edit" => Some(ProposedDiff {
                        path,
                        old_text: Some(
                            str_of(input, &["old_str", "old_string"])
                                .unwrap_or("")
                                .to_owned(),
                        ),
                        new_text: str_of(input, &["new_str", "new_string"])
                            .unwrap_or("")
                            .to_owned(),
                    }),
                    _ => None,
                }
            });
            let (risk, risk_reason) = if inside {
                (Risk::Medium, "writes a file in the repository".to_owned())
            } else {
                (
                    Risk::High,
                    "writes a file outside the repository".to_owned(),
                )
            };
            ToolView {
                class: ToolClass::Edit,
                title: format!(
                    "{} {}",
                    if name == "Create" || name == "Write" {
                        "Create"
                    } else {
                        "Edit"
                    },
                    shown()
                ),
                locations: location(),
                diff,
                risk,
                risk_reason,
                command: None,
            }
        }
        "Execute" => {
            let command = str_of(input, &["command"]).unwrap_or("").to_owned();
            let (risk, risk_reason, class) = command_risk(&command, root);
            ToolView {
                class,
                title: format!("`{}`", first_line(&command, 120)),
                locations: Vec::new(),
                diff: None,
                risk,
                risk_reason,
                command: Some(command),
            }
        }
        "TodoWrite" => ToolView {
            class: ToolClass::Think,
            title: "Update the plan".into(),
            locations: Vec::new(),
            diff: None,
            risk: Risk::Low,
            risk_reason: "updates the plan".into(),
            command: None,
        },
        "FetchUrl" | "WebSearch" | "WebFetch" => ToolView {
            class: ToolClass::Fetch,
            title: format!(
                "Fetch {}",
                str_of(input, &["url", "query"]).unwrap_or_default()
            ),
            locations: Vec::new(),
            diff: None,
            risk: Risk::High,
            risk_reason: "reaches the network".into(),
            command: None,
        },
        "Task" => ToolView {
            class: ToolClass::Think,
            title: format!(
                "Delegate: {}",
                first_line(str_of(input, &["description", "prompt"]).unwrap_or(""), 80)
            ),
            locations: Vec::new(),
            diff: None,
            risk: Risk::Medium,
            risk_reason: "starts a sub-agent".into(),
            command: None,
        },
        other => ToolView {
            class: ToolClass::Other,
            title: other.to_owned(),
            locations: location(),
            diff: None,
            risk: Risk::Medium,
            risk_reason: format!("tool {other}"),
            command: None,
        },
    };
    if let Some(d) = declared.filter(|d| *d > v.risk) {
        v.risk = d;
        v.risk_reason = format!("droid labels it {}", d.as_str());
    }
    v
}

/// The risk of a shell command run in `root`, why, and its class.
fn command_risk(command: &str, root: &Path) -> (Risk, String, ToolClass) {
    let words: Vec<&str> = command
        .split(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')'))
        .filter(|w| !w.is_empty())
        .collect();
    let has_seq = |seq: &[&str]| words.windows(seq.len()).any(|w| w == seq);
    if has_seq(&["git", "push"]) {
        return (Risk::High, "pushes to a remote".into(), ToolClass::Execute);
    }
    let deletes = words
        .iter()
        .any(|w| matches!(*w, "rm" | "rmdir" | "unlink" | "shred"))
        || has_seq(&["git", "rm"])
        || has_seq(&["git", "clean"]);
    if deletes {
        return (Risk::High, "deletes files".into(), ToolClass::Delete);
    }
    // a path outside the repository (other than the usual system ones a command reads)
    let outside = words.iter().find(|w| {
        let w = w.trim_matches(|c| c == '"' || c == '\'');
        (w.starts_with('/') || w.starts_with('~'))
            && !w.starts_with("/dev/null")
            && !["/usr/", "/bin/", "/sbin/", "/lib"]
                .iter()
                .any(|sys| w.starts_with(sys))
            && !(w.starts_with('/') && absolute(root, w).starts_with(root))
    });
    if let Some(p) = outside {
        return (
            Risk::High,
            format!("works outside the repository ({p})"),
            ToolClass::Execute,
        );
    }
    if has_seq(&["git", "commit"]) {
        return (Risk::Medium, "commits".into(), ToolClass::Execute);
    }
    (
        Risk::Medium,
        "runs a command in the repository".into(),
        ToolClass::Execute,
    )
}

/// The plan droid's `TodoWrite` input describes: `todos` as a list of `{content, status,
/// priority}` (or `activeForm`/`text`), or as text, one entry per line (`1. [completed] …`).
pub fn plan(input: &Value) -> Vec<PlanEntry> {
    fn status(s: &str) -> &'static str {
        match s.to_ascii_lowercase().replace(['-', ' '], "_").as_str() {
            "completed" | "done" | "x" => "completed",
            "in_progress" | "active" | "doing" => "in_progress",
            _ => "pending",
        }
    }
    fn priority(s: &str) -> &'static str {
        match s {
            "high" => "high",
            "low" => "low",
            _ => "medium",
        }
    }
    match input.get("todos") {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|t| {
                let content = str_of(t, &["content", "text", "activeForm", "title"])?;
                Some(PlanEntry {
                    content: content.to_owned(),
                    status: status(str_of(t, &["status"]).unwrap_or("")),
                    priority: priority(str_of(t, &["priority"]).unwrap_or("")),
                })
            })
            .collect(),
        Some(Value::String(text)) => text
            .lines()
            .filter_map(|l| {
                let l = l.trim().trim_start_matches(|c: char| {
                    c.is_ascii_digit() || c == '.' || c == '-' || c == '*'
                });
                let l = l.trim();
                if l.is_empty() {
                    return None;
                }
                let (st, rest) = match l.strip_prefix('[').and_then(|r| r.split_once(']')) {
                    Some((s, rest)) => (status(s.trim()), rest.trim()),
                    None => ("pending", l),
                };
                Some(PlanEntry {
                    content: rest.to_owned(),
                    status: st,
                    priority: "medium",
                })
            })
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    const ROOT: &str = "/w/repo";

    fn risk(name: &str, input: Value) -> Risk {
        view(name, &input, Path::new(ROOT)).risk
    }

    #[test]
    fn the_seed_risk_map() {
        assert_eq!(
            risk("Read", json!({"file_path": "/w/repo/a.rs"})),
            Risk::Low
        );
        assert_eq!(risk("Grep", json!({"pattern": "x"})), Risk::Low);
        assert_eq!(
            risk(
                "Create",
                json!({"file_path": "/w/repo/b.txt", "content": "b"})
            ),
            Risk::Medium
        );
        assert_eq!(
            risk("Create", json!({"file_path": "/etc/x", "content": "b"})),
            Risk::High
        );
        assert_eq!(
            risk("Create", json!({"file_path": "../other/x", "content": "b"})),
            Risk::High
        );
        assert_eq!(
            risk("Execute", json!({"command": "cargo test"})),
            Risk::Medium
        );
        assert_eq!(
            risk("Execute", json!({"command": "git commit -m x"})),
            Risk::Medium
        );
        assert_eq!(
            risk("Execute", json!({"command": "git push origin HEAD"})),
            Risk::High
        );
        assert_eq!(
            risk("Execute", json!({"command": "cd /tmp && ls"})),
            Risk::High
        );
        assert_eq!(
            risk("Execute", json!({"command": "cat /w/repo/a > /dev/null"})),
            Risk::Medium
        );
        assert_eq!(
            risk("Execute", json!({"command": "/usr/bin/env ls"})),
            Risk::Medium
        );
        assert_eq!(
            risk("Execute", json!({"command": "rm -f a.txt"})),
            Risk::High
        );
        // droid's label raises a risk, never lowers it
        assert_eq!(
            risk(
                "Execute",
                json!({"command": "git push", "riskLevel": "low"})
            ),
            Risk::High
        );
        assert_eq!(
            risk("Execute", json!({"command": "make", "riskLevel": "high"})),
            Risk::High
        );
    }

    #[test]
    fn views_carry_titles_locations_and_diffs() {
        let v = view(
            "Edit",
            &json!({"file_path": "src/a.rs", "old_str": "a", "new_str": "b"}),
            Path::new(ROOT),
        );
        assert_eq!(v.class, ToolClass::Edit);
        assert_eq!(v.title, "Edit src/a.rs");
        assert_eq!(v.locations, vec![("/w/repo/src/a.rs".to_owned(), None)]);
        assert_eq!(
            v.diff,
            Some(ProposedDiff {
                path: "/w/repo/src/a.rs".into(),
                old_text: Some("a".into()),
                new_text: "b".into()
            })
        );
        let r = view(
            "Read",
            &json!({"file_path": "/w/repo/a", "offset": 40}),
            Path::new(ROOT),
        );
        assert_eq!(r.locations, vec![("/w/repo/a".to_owned(), Some(40))]);
        let e = view("Execute", &json!({"command": "rm x"}), Path::new(ROOT));
        assert_eq!((e.class, e.title.as_str()), (ToolClass::Delete, "`rm x`"));
        assert_eq!(
            view("Mystery", &json!(null), Path::new(ROOT)).class,
            ToolClass::Other
        );
    }

    #[test]
    fn an_edit_is_located_at_the_line_its_old_text_starts() {
        let dir = std::env::temp_dir().join(format!("tools-edit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("a.rs"),
            "fn a() {}\nfn b() {}\nfn c() {}\nfn b() {}\n",
        )
        .unwrap();
        let at = |old: &str| {
            view(
                "Edit",
                &json!({"file_path": "a.rs", "old_str": old, "new_str": "x"}),
                &dir,
            )
            .with_edit_line()
            .locations[0]
                .1
        };
        assert_eq!(at("fn c() {}"), Some(3));
        assert_eq!(at("fn a"), Some(1));
        // twice in the file, absent, or no file: no line rather than a wrong one
        assert_eq!(at("fn b() {}"), None);
        assert_eq!(at("fn z"), None);
        let gone = view(
            "Edit",
            &json!({"file_path": "none.rs", "old_str": "a"}),
            &dir,
        );
        assert_eq!(gone.with_edit_line().locations[0].1, None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn plans_from_either_todo_shape() {
        let list = plan(&json!({"todos": [
            {"content": "Read", "status": "completed", "priority": "high"},
            {"content": "Patch", "status": "in_progress"},
            {"text": "Test"}
        ]}));
        assert_eq!(
            list.iter()
                .map(|e| (e.content.as_str(), e.status, e.priority))
                .collect::<Vec<_>>(),
            vec![
                ("Read", "completed", "high"),
                ("Patch", "in_progress", "medium"),
                ("Test", "pending", "medium")
            ]
        );
        let text =
            plan(&json!({"todos": "1. [completed] Read\n2. [in_progress] Patch\n\n3. Test"}));
        assert_eq!(
            text.iter()
                .map(|e| (e.content.as_str(), e.status))
                .collect::<Vec<_>>(),
            vec![
                ("Read", "completed"),
                ("Patch", "in_progress"),
                ("Test", "pending")
            ]
        );
        assert!(plan(&json!({"todos": 3})).is_empty());
    }
}
