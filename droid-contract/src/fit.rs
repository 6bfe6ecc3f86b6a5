//! A result fitted into a byte budget, for clients that put it in a model's context (an MCP
//! `tools/call` result). What matters comes first and is kept whole as far as the budget allows:
//! `status`, `summary` (cut at [`SUMMARY_MAX`]), `issues`, `files_changed`; the bulky lists go
//! first: command excerpts are shortened to their last [`EXCERPT_KEEP`] bytes, then the oldest
//! commands and log lines are left out, and only then the last files and issues. A note saying
//! what was left out, and where the whole result is, becomes the last log line.

use crate::result::ExecutionResult;

/// Longest `summary` kept in a fitted result, in bytes.
pub const SUMMARY_MAX: usize = 4096;

/// Longest text of one issue, file highlight, log line or `tests.details` in a fitted result.
pub const TEXT_KEEP: usize = 1024;

/// What each command's `stdout_excerpt` / `stderr_excerpt` keeps (its tail) in a fitted result.
pub const EXCERPT_KEEP: usize = 512;

/// What [`ExecutionResult::fit`] left out or shortened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Omitted {
    /// `commands_run` entries left out (the oldest).
    pub commands: usize,
    /// `logs` lines left out (the oldest).
    pub logs: usize,
    /// `files_changed` entries left out (the last).
    pub files: usize,
    /// `issues` left out (the last).
    pub issues: usize,
    /// Whether texts (summary, excerpts, highlights, descriptions) were shortened.
    pub shortened: bool,
}

impl Omitted {
    /// Whether the fitted result is the whole result.
    pub fn nothing(&self) -> bool {
        *self == Omitted::default()
    }
}

fn json_len<T: serde::Serialize>(v: &T) -> usize {
    serde_json::to_vec(v).map_or(0, |b| b.len())
}

/// `s` cut to at most `max` bytes on a character boundary, keeping the head, `…` marking a cut.
fn head(s: &mut String, max: usize, shortened: &mut bool) {
    if s.len() <= max {
        return;
    }
    let mut cut = max.saturating_sub('…'.len_utf8());
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    s.truncate(cut);
    s.push('…');
    *shortened = true;
}

/// `s` cut to its last `max` bytes at most, on a character boundary, `…` marking the cut.
fn tail(s: &mut String, max: usize, shortened: &mut bool) -> bool {
    if s.len() <= max {
        return false;
    }
    let mut from = s.len() - max + '…'.len_utf8();
    while !s.is_char_boundary(from) {
        from += 1;
    }
    *s = format!("…{}", &s[from..]);
    *shortened = true;
    true
}

impl ExecutionResult {
    /// This result in at most `max_bytes` of compact JSON, and what was left out; `note` (given
    /// what was left out) is appended to `logs` when anything was. Unchanged when it fits. The
    /// fitted result is a valid result: every field is there, lists are shorter, a shortened
    /// excerpt says `truncated: true`. A budget too small for `status`, the bounded summary and
    /// the note is exceeded by them, never by anything else.
    pub fn fit(
        &self,
        max_bytes: usize,
        note: impl Fn(&Omitted) -> String,
    ) -> (ExecutionResult, Omitted) {
        if json_len(self) <= max_bytes {
            return (self.clone(), Omitted::default());
        }
        let mut r = self.clone();
        let mut o = Omitted::default();
        let s = &mut o.shortened;
        head(&mut r.summary, SUMMARY_MAX, s);
        head(&mut r.tests.details, TEXT_KEEP, s);
        if let Some(n) = &mut r.notes_for_human {
            head(n, TEXT_KEEP, s);
        }
        for i in &mut r.issues {
            head(&mut i.description, TEXT_KEEP, s);
            head(&mut i.suggested_action, TEXT_KEEP, s);
        }
        for f in &mut r.files_changed {
            for h in &mut f.highlights {
                head(h, TEXT_KEEP, s);
            }
        }
        for c in &mut r.commands_run {
            head(&mut c.command, TEXT_KEEP, s);
            let out = tail(&mut c.stdout_excerpt, EXCERPT_KEEP, s);
            let err = tail(&mut c.stderr_excerpt, EXCERPT_KEEP, s);
            c.truncated |= out || err;
        }
        for l in &mut r.logs {
            head(l, TEXT_KEEP, s);
        }
        // room for the note: measured with the worst counts it can carry
        let worst = Omitted {
            commands: self.commands_run.len(),
            logs: self.logs.len(),
            files: self.files_changed.len(),
            issues: self.issues.len(),
            shortened: true,
        };
        let budget = max_bytes.saturating_sub(json_len(&note(&worst)) + 1);
        let mut size = json_len(&r);
        // oldest commands, then oldest logs, then the last files, then the last issues
        while size > budget && !r.commands_run.is_empty() {
            size -= json_len(&r.commands_run.remove(0)) + 1;
            o.commands += 1;
        }
        while size > budget && !r.logs.is_empty() {
            size -= json_len(&r.logs.remove(0)) + 1;
            o.logs += 1;
        }
        while size > budget
            && let Some(f) = r.files_changed.pop()
        {
            size -= json_len(&f) + 1;
            o.files += 1;
        }
        while size > budget
            && let Some(i) = r.issues.pop()
        {
            size -= json_len(&i) + 1;
            o.issues += 1;
        }
        r.logs.push(note(&o));
        (r, o)
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;
    use crate::file_change::{ChangeType, FileChange};
    use crate::issue::{Issue, IssueType};
    use crate::result::{CommandRun, CommandSource};
    use crate::status::Status;

    fn big(commands: usize, logs: usize, files: usize, issues: usize) -> ExecutionResult {
        let mut r = ExecutionResult::error(Some("t-1".into()), "did things".repeat(1000), vec![]);
        r.status = Status::Partial;
        r.commands_run = (0..commands)
            .map(|i| CommandRun {
                command: format!("cmd {i}"),
                exit_code: Some(0),
                duration_ms: 5,
                stdout_excerpt: format!("{i}:").repeat(2000),
                stderr_excerpt: "é".repeat(3000),
                source: CommandSource::Agent,
                truncated: false,
            })
            .collect();
        r.logs = (0..logs).map(|i| format!("log {i}")).collect();
        r.files_changed = (0..files)
            .map(|i| FileChange {
                path: format!("src/f{i}.rs"),
                change_type: ChangeType::Modified,
                old_path: None,
                highlights: vec!["h".repeat(5000)],
                lines_added: Some(1),
                lines_removed: None,
            })
            .collect();
        r.issues = (0..issues)
            .map(|i| Issue::new(IssueType::TestFailure, format!("issue {i}"), "look"))
            .collect();
        r
    }

    fn note(o: &Omitted) -> String {
        format!("left out {} commands, {} logs", o.commands, o.logs)
    }

    #[test]
    fn a_small_result_is_unchanged() {
        let r = big(2, 2, 1, 1);
        let (same, o) = r.fit(1 << 20, note);
        assert_eq!((same, o.nothing()), (r, true));
    }

    #[test]
    fn a_big_result_fits_and_keeps_its_head_and_newest_commands() {
        let r = big(32, 300, 3, 2);
        let max = 24 * 1024;
        let (f, o) = r.fit(max, note);
        let len = json_len(&f);
        assert!(len <= max, "{len} bytes");
        assert_eq!(f.status, Status::Partial);
        assert!(f.summary.len() <= SUMMARY_MAX && f.summary.ends_with('…'));
        assert_eq!((f.issues.len(), f.files_changed.len()), (2, 3));
        assert!(o.commands > 0 && o.shortened, "{o:?}");
        assert_eq!(o.commands + f.commands_run.len(), 32);
        // the newest commands stay, their excerpts cut to the tail and marked
        let last = f.commands_run.last().map(|c| c.command.as_str());
        assert_eq!(last, Some("cmd 31"));
        for c in &f.commands_run {
            assert!(c.truncated && c.stdout_excerpt.len() <= EXCERPT_KEEP);
            assert!(c.stderr_excerpt.len() <= EXCERPT_KEEP);
        }
        assert_eq!(f.logs.last(), Some(&note(&o)));
    }

    #[test]
    fn huge_lists_of_files_and_issues_are_cut_last_and_counted() {
        let r = big(5, 5, 2000, 2000);
        let max = 16 * 1024;
        let (f, o) = r.fit(max, note);
        assert!(json_len(&f) <= max, "{} bytes", json_len(&f));
        assert_eq!((o.commands, o.logs), (5, 5));
        // issues come before files_changed: the files go first
        assert_eq!((o.files, f.files_changed.len()), (2000, 0));
        assert_eq!(o.issues + f.issues.len(), 2000);
        assert_eq!(f.issues[0].description, "issue 0");
    }
}
