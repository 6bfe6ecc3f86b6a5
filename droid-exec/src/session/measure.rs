//! Each turn of a session measured from the repository, as a one-shot run is: a snapshot when
//! the turn starts and one when it ends (the engine's [`Snapshot`], so git's view, renames and
//! line counts included), the changed files' text before and after (for diffs), and the
//! session's verification commands re-run by us.
//!
//! The record at the start of a turn is a fresh record of the tree as the turn starts, taken
//! as a run's first record is (never derived from the previous turn's records, and not the
//! previous turn's end record either: what the user edited between turns is not the agent's).
//! A record derived from an earlier turn's end record kept none of the contents the first
//! record of that turn had kept (a second record stores only what it needs for its own
//! comparison), so a file changed by an earlier turn came out as `added`, whole, at every
//! later turn (issue 33: edit, then two questions, reported `1 file (+3 −0)` twice more). The
//! end record is made from the start record, as a run's second record is.
//!
//! As for a run, what git runs or consults later on the user's behalf (`.git/hooks`,
//! `.git/config`, …; [`GitGuard`]) is recorded when the turn starts and put back when it ends,
//! after the turn's processes are gone and before the repository is recorded again, and once
//! more after verification; what was put back is part of the measure.
//!
//! The measure is bounded, as a run's result is, since a client puts it in one message (and
//! often in a model's context): at most [`LIST_MAX_FILES`] files (and [`LIST_MAX_BYTES`] of
//! paths) are listed, the rest counted; the files' texts take at most [`DIFFS_MAX_BYTES`] in
//! all as JSON writes them ([`DIFF_MAX_BYTES`] a file), and a file beyond is listed without
//! them. No text is read past that budget.

use std::time::Duration;

use droid_contract::{CommandRun, FileChange, ShellCommand, Tests};
use tokio_util::sync::CancellationToken;

use crate::process::scratch::{Scratch, unique_id};
use crate::run::Engine;
use crate::run::git_guard::GitGuard;
use crate::run::guarded_tree::{RecordCache, Restored};
use crate::run::redact::Redactor;
use crate::run::verify::{VerifyPlan, verify};
use crate::session::DroidSession;
use crate::snapshot::{Snapshot, SnapshotLimits};

/// A changed file's text is shown only up to this size (larger: the change is listed without
/// a diff).
pub const DIFF_MAX_BYTES: usize = 256 * 1024;
/// The texts of a turn's diffs in all, as JSON writes them (beyond: files listed without text).
pub const DIFFS_MAX_BYTES: usize = 1024 * 1024;
/// Most changed files listed in a turn's measure (the rest are counted).
pub const LIST_MAX_FILES: usize = 1000;
/// Most bytes of paths listed in a turn's measure (the rest are counted).
pub const LIST_MAX_BYTES: usize = 256 * 1024;

/// One changed file, measured.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasuredFile {
    /// What changed (path relative to the root, kind, line counts).
    pub change: FileChange,
    /// Its text before the turn (`None`: it did not exist, or is binary, large, or not in git).
    pub old_text: Option<String>,
    /// Its text after the turn (`None`: deleted, binary or large).
    pub new_text: Option<String>,
}

/// What the turn changed among what git runs or consults later on the user's behalf
/// (`.git/hooks`, `.git/config`, `.git/info/…`), now put back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GitRestored {
    /// Paths the turn changed (relative to the repository), put back as they were.
    pub changed: Vec<String>,
    /// Paths that could not be put back, with why.
    pub failed: Vec<String>,
    /// What was found changed and could not be made as before, with why (nothing was written
    /// through it).
    pub refused: Vec<String>,
}

impl GitRestored {
    fn of(r: Restored) -> Option<Self> {
        (!r.is_clean()).then_some(Self {
            changed: r.changed,
            failed: r.failed,
            refused: r.refused,
        })
    }

    /// Whether something could not be put back.
    pub fn failed(&self) -> bool {
        !self.failed.is_empty() || !self.refused.is_empty()
    }
}

/// What a turn did to the repository, and what the verification commands said.
#[derive(Debug, Clone, Default)]
pub struct TurnMeasure {
    /// The changed files, sorted by path (at most [`LIST_MAX_FILES`]).
    pub files: Vec<MeasuredFile>,
    /// Changed files in all, listed or not.
    pub changed: usize,
    /// Lines added and removed in all (as git counts them; files without counts add none).
    pub lines: (u64, u64),
    /// Listed files without their text because the turn's diffs reached [`DIFFS_MAX_BYTES`]
    /// (counted once the budget left is short of a whole file's).
    pub texts_left_out: usize,
    /// What the turn changed under `.git` that git runs later, put back (`None`: nothing).
    pub restored: Option<GitRestored>,
    /// Processes the turn started and left running, ended before the measure.
    pub processes_ended: usize,
    /// What could not be measured.
    pub warnings: Vec<String>,
    /// The verification commands' runs and verdict (`None` when the session has none).
    pub tests: Option<(Tests, Vec<CommandRun>)>,
}

/// Measures the turns of one session.
#[derive(Debug)]
pub struct TurnMeter {
    /// Holds one directory per turn (`turn-<n>`: the records' git index and objects where git
    /// processes record the tree), removed when the turn's measure is done.
    scratch: Scratch,
    /// The running turn's directory in [`Self::scratch`].
    turn_dir: Option<std::path::PathBuf>,
    before: Option<Snapshot>,
    /// `.git`'s hooks and config as the turn started.
    guard: Option<GitGuard>,
    /// What earlier turns' guards read, reused while unchanged.
    guard_records: RecordCache,
    turns: u64,
    verify_budget: Duration,
    keep: usize,
    redact: Redactor,
    limits: crate::process::limits::RunLimits,
}

impl TurnMeter {
    /// A meter for sessions of `engine` (its scratch directory lives as long as the meter).
    ///
    /// # Errors
    /// When the scratch directory cannot be made.
    pub fn new(engine: &Engine) -> Result<Self, crate::EngineError> {
        let cfg = engine.config();
        Ok(Self {
            scratch: Scratch::create(&cfg.scratch_root, &format!("acp-{}", unique_id()))?,
            turn_dir: None,
            before: None,
            guard: None,
            guard_records: RecordCache::default(),
            turns: 0,
            verify_budget: cfg.default_timeout,
            keep: cfg.excerpt_bytes,
            redact: Redactor::for_config(cfg),
            limits: cfg.limits,
        })
    }

    /// Record the repository (and what git runs later) as the turn starts: a fresh record, as
    /// a run's first one (see the module docs). A failure is kept and reported by
    /// [`TurnMeter::finish`].
    pub async fn begin(&mut self, session: &DroidSession) -> Result<(), String> {
        self.guard = GitGuard::record(session.root(), &self.guard_records);
        let dir = self.scratch.path().join(format!("turn-{}", self.turns));
        self.turn_dir = Some(dir.clone());
        // left by a turn whose measure never finished
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let snap = Snapshot::take(
            session.root(),
            session.env(),
            &dir,
            &SnapshotLimits::default(),
            None,
        )
        .await
        .map_err(|e| e.to_string())?;
        self.before = Some(snap);
        Ok(())
    }

    /// End what the turn left running (droid stays: [`DroidSession::end_turn_processes`];
    /// `commands_ran` as it says), put back what it changed under `.git` that git runs later,
    /// record the repository as the turn ends, compare, and run `commands` (unless `cancel`
    /// fires), in that order: the measure is taken once nothing the turn started runs.
    pub async fn finish(
        &mut self,
        session: &DroidSession,
        commands_ran: bool,
        commands: &[ShellCommand],
        cancel: &CancellationToken,
    ) -> TurnMeasure {
        self.turns += 1;
        let mut m = TurnMeasure::default();
        let ended = session.end_turn_processes(commands_ran).await;
        m.processes_ended = ended.killed;
        if ended.left > 0 {
            m.warnings.push(format!(
                "{} process(es) the turn started could not be ended; what they change from \
                 now on is not measured",
                ended.left
            ));
        }
        let guard = self.guard.take();
        let mut restored = guard.as_ref().map(GitGuard::restore);
        let env = session.env();
        let root = session.root();
        match self.before.take() {
            None => m
                .warnings
                .push("the repository was not recorded when the turn started".into()),
            Some(before) => {
                let dir = self
                    .turn_dir
                    .clone()
                    .unwrap_or_else(|| self.scratch.path().to_path_buf());
                match Snapshot::take(root, env, &dir, &SnapshotLimits::default(), Some(&before))
                    .await
                {
                    Err(e) => m
                        .warnings
                        .push(format!("the repository could not be recorded: {e}")),
                    Ok(after) => match before.diff(&after, env).await {
                        Err(e) => m.warnings.push(format!("comparing failed: {e}")),
                        Ok(changes) => {
                            m.warnings.extend(changes.warnings);
                            if let Some(why) = changes.incomplete {
                                m.warnings.push(why);
                            }
                            list(&mut m, changes.files, &before, env, root).await;
                        }
                    },
                }
            }
        }
        if let Some(dir) = self.turn_dir.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
        if !commands.is_empty() {
            let marker = format!("{}-verify-{}", session.marker(), self.turns);
            let plan = VerifyPlan {
                commands,
                cwd: root,
                env,
                deadline: tokio::time::Instant::now() + self.verify_budget,
                keep: self.keep,
                marker: &marker,
                redact: &self.redact,
                confine: session.confinement(),
                // each command in a cgroup leaf of its own where the engine has them, else
                // ended by the marker sweep
                leaves: session.leaves(),
                limits: self.limits,
            };
            let v = verify(&plan, cancel).await;
            m.tests = Some((v.tests, v.runs));
            // what the commands changed there too
            if let (Some(first), Some(guard)) = (restored.as_mut(), guard.as_ref()) {
                first.merge(guard.restore());
            }
        }
        if let Some(r) = restored {
            if let Some(why) = &r.incomplete {
                m.warnings.push(format!(
                    ".git could not be recorded whole ({why}); files the turn added there were \
                     not looked for"
                ));
            }
            m.restored = GitRestored::of(r);
        }
        m
    }
}

/// List `changes` in `m`, with the texts before (from `before`) and after (from disk) while
/// the bounds allow (see the module docs).
async fn list(
    m: &mut TurnMeasure,
    changes: Vec<FileChange>,
    before: &Snapshot,
    env: &[(std::ffi::OsString, std::ffi::OsString)],
    root: &std::path::Path,
) {
    use droid_contract::ChangeType;
    let mut path_bytes = 0;
    let mut text_budget = DIFFS_MAX_BYTES;
    for change in changes {
        m.changed += 1;
        m.lines.0 += change.lines_added.unwrap_or(0);
        m.lines.1 += change.lines_removed.unwrap_or(0);
        let size = change.path.len() + change.old_path.as_ref().map_or(0, String::len);
        if m.files.len() >= LIST_MAX_FILES || path_bytes + size > LIST_MAX_BYTES {
            continue;
        }
        path_bytes += size;
        let max = DIFF_MAX_BYTES.min(text_budget);
        let old_text = if change.change_type == ChangeType::Added || max == 0 {
            None
        } else {
            let old_path = change.old_path.as_deref().unwrap_or(&change.path);
            before.text_of(old_path, env, max).await
        };
        let new_text = if change.change_type == ChangeType::Deleted || max == 0 {
            None
        } else {
            read_text(&root.join(&change.path), max)
        };
        let cost =
            old_text.as_deref().map_or(0, json_len) + new_text.as_deref().map_or(0, json_len);
        // no text, or too much, once the budget is short of a whole file's: left out for it
        let short = max < DIFF_MAX_BYTES && old_text.is_none() && new_text.is_none();
        let (old_text, new_text) = if cost > text_budget || short {
            m.texts_left_out += 1;
            (None, None)
        } else {
            text_budget -= cost;
            (old_text, new_text)
        };
        m.files.push(MeasuredFile {
            change,
            old_text,
            new_text,
        });
    }
}

/// The length of `text` as a JSON string (quotes and escapes included).
fn json_len(text: &str) -> usize {
    2 + text
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0..0x20 => 6,
            _ => 1,
        })
        .sum::<usize>()
}

/// The file's text when it is UTF-8 and at most `max` bytes.
fn read_text(path: &std::path::Path, max: usize) -> Option<String> {
    use std::io::Read as _;
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() || meta.len() > max as u64 {
        return None;
    }
    let mut buf = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(max as u64 + 1)
        .read_to_end(&mut buf)
        .ok()?;
    if buf.len() > max {
        return None;
    }
    String::from_utf8(buf).ok().filter(|t| !t.contains('\0'))
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn json_lengths_count_escapes() {
        for text in [
            "",
            "plain",
            "a \"quoted\" \\ line\n\ttab",
            "\u{1}ctl",
            "é ü",
        ] {
            assert_eq!(
                json_len(text),
                serde_json::to_string(text).unwrap().len(),
                "{text:?}"
            );
        }
    }

    /// A directory of `n` files of `size` bytes each appearing in a turn: listed while the
    /// list's bounds allow, their texts while the diffs' budget does.
    async fn measure_added(n: usize, size: usize) -> TurnMeasure {
        static DIRS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "droid-measure-test-{}-{}",
            std::process::id(),
            DIRS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let (root, scratch) = (dir.join("repo"), dir.join("scratch"));
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&scratch).unwrap();
        let env: Vec<(OsString, OsString)> = vec![("PATH".into(), "/usr/bin:/bin".into())];
        let limits = SnapshotLimits::default();
        let before = Snapshot::take(&root, &env, &scratch, &limits, None)
            .await
            .unwrap();
        let line = "x".repeat(63) + "\n";
        let text = line.repeat(size / 64);
        for i in 0..n {
            std::fs::write(root.join(format!("f{i:04}.txt")), &text).unwrap();
        }
        let after = Snapshot::take(&root, &env, &scratch, &limits, Some(&before))
            .await
            .unwrap();
        let changes = before.diff(&after, &env).await.unwrap();
        let mut m = TurnMeasure::default();
        list(&mut m, changes.files, &before, &env, &root).await;
        std::fs::remove_dir_all(&dir).unwrap();
        m
    }

    fn text_bytes(m: &TurnMeasure) -> usize {
        m.files
            .iter()
            .map(|f| {
                f.old_text.as_deref().map_or(0, json_len)
                    + f.new_text.as_deref().map_or(0, json_len)
            })
            .sum()
    }

    #[tokio::test]
    async fn the_diffs_of_a_turn_are_bounded_and_the_rest_listed_without_text() {
        // 400 files of 240 KiB (each under the per-file bound): 98 MB of text in all
        let m = measure_added(400, 240 * 1024).await;
        assert_eq!((m.changed, m.files.len()), (400, 400));
        let with_text = m.files.iter().filter(|f| f.new_text.is_some()).count();
        assert_eq!(with_text, DIFFS_MAX_BYTES / (240 * 1024 + 2));
        assert!(text_bytes(&m) <= DIFFS_MAX_BYTES, "{}", text_bytes(&m));
        assert_eq!(m.texts_left_out, 400 - with_text);
        // the first files, in path order, are the ones with text
        assert!(m.files[..with_text].iter().all(|f| f.new_text.is_some()));
    }

    #[tokio::test]
    async fn at_most_so_many_files_are_listed_and_all_counted() {
        let m = measure_added(LIST_MAX_FILES + 25, 64).await;
        assert_eq!(m.changed, LIST_MAX_FILES + 25);
        assert_eq!(m.files.len(), LIST_MAX_FILES);
        assert_eq!(m.texts_left_out, 0);
    }
}
