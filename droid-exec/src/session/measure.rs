//! Each turn of a session measured from the repository, as a one-shot run is: a snapshot when
//! the turn starts and one when it ends (the engine's [`Snapshot`], so git's view, renames and
//! line counts included), the changed files' text before and after (for diffs), and the
//! session's verification commands re-run by us.
//!
//! The snapshot at the start of a turn starts from the previous turn's last one (only what
//! changed since is hashed), and is taken at the start, not reused from the last turn's end:
//! what the user edited between turns is not the agent's.

use std::time::Duration;

use droid_contract::{CommandRun, FileChange, ShellCommand, Tests};
use tokio_util::sync::CancellationToken;

use crate::run::Engine;
use crate::run::redact::Redactor;
use crate::run::scratch::{Scratch, unique_id};
use crate::run::snapshot::{Snapshot, SnapshotLimits};
use crate::run::verify::{VerifyPlan, verify};
use crate::session::DroidSession;

/// A changed file's text is shown only up to this size (larger: the change is listed without
/// a diff).
pub const DIFF_MAX_BYTES: usize = 256 * 1024;

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

/// What a turn did to the repository, and what the verification commands said.
#[derive(Debug, Clone, Default)]
pub struct TurnMeasure {
    /// The changed files, sorted by path.
    pub files: Vec<MeasuredFile>,
    /// What could not be measured.
    pub warnings: Vec<String>,
    /// The verification commands' runs and verdict (`None` when the session has none).
    pub tests: Option<(Tests, Vec<CommandRun>)>,
}

/// Measures the turns of one session.
#[derive(Debug)]
pub struct TurnMeter {
    scratch: Scratch,
    last: Option<Snapshot>,
    before: Option<Snapshot>,
    turns: u64,
    verify_budget: Duration,
    keep: usize,
    redact: Redactor,
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
            last: None,
            before: None,
            turns: 0,
            verify_budget: cfg.default_timeout,
            keep: cfg.excerpt_bytes,
            redact: Redactor::for_config(cfg),
        })
    }

    /// Record the repository as the turn starts. A failure is kept and reported by
    /// [`TurnMeter::finish`].
    pub async fn begin(&mut self, session: &DroidSession) -> Result<(), String> {
        let snap = Snapshot::take(
            session.root(),
            session.env(),
            self.scratch.path(),
            &SnapshotLimits::default(),
            self.last.as_ref(),
        )
        .await
        .map_err(|e| e.to_string())?;
        self.before = Some(snap);
        Ok(())
    }

    /// Record the repository as the turn ends, compare, and run `commands` (unless `cancel`
    /// fires).
    pub async fn finish(
        &mut self,
        session: &DroidSession,
        commands: &[ShellCommand],
        cancel: &CancellationToken,
    ) -> TurnMeasure {
        self.turns += 1;
        let mut m = TurnMeasure::default();
        let env = session.env();
        let root = session.root();
        match self.before.take() {
            None => m
                .warnings
                .push("the repository was not recorded when the turn started".into()),
            Some(before) => {
                match Snapshot::take(
                    root,
                    env,
                    self.scratch.path(),
                    &SnapshotLimits::default(),
                    Some(&before),
                )
                .await
                {
                    Err(e) => m
                        .warnings
                        .push(format!("the repository could not be recorded: {e}")),
                    Ok(after) => {
                        match before.diff(&after, env).await {
                            Err(e) => m.warnings.push(format!("comparing failed: {e}")),
                            Ok(changes) => {
                                m.warnings.extend(changes.warnings);
                                if let Some(why) = changes.incomplete {
                                    m.warnings.push(why);
                                }
                                for change in changes.files {
                                    let old_path =
                                        change.old_path.as_deref().unwrap_or(&change.path);
                                    let old_text =
                                        before.text_of(old_path, env, DIFF_MAX_BYTES).await;
                                    let new_text = read_text(&root.join(&change.path));
                                    m.files.push(MeasuredFile {
                                        change,
                                        old_text,
                                        new_text,
                                    });
                                }
                            }
                        }
                        self.last = Some(after);
                    }
                }
            }
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
                // an ACP session's commands are ended by the marker sweep
                leaves: None,
            };
            let v = verify(&plan, cancel).await;
            m.tests = Some((v.tests, v.runs));
        }
        m
    }
}

/// The file's text when it is UTF-8 and at most [`DIFF_MAX_BYTES`].
fn read_text(path: &std::path::Path) -> Option<String> {
    use std::io::Read as _;
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() || meta.len() > DIFF_MAX_BYTES as u64 {
        return None;
    }
    let mut buf = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(DIFF_MAX_BYTES as u64 + 1)
        .read_to_end(&mut buf)
        .ok()?;
    String::from_utf8(buf).ok().filter(|t| !t.contains('\0'))
}
