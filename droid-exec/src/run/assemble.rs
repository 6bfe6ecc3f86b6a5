//! The result of a run, assembled from what was measured: the snapshot's diff, the verification
//! commands' outcomes, the agent's own events and final answer (kept only where nothing can be
//! measured: its summary, its session), the sandbox's refusals, and the status decided from
//! these facts by `droid_contract::decide` (docs/architecture.md#engine-phases).

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use droid_contract::{
    AgentInfo, ExecutionRequest, ExecutionResult, FileChange, Issue, IssueType, ProviderId, RunEnd,
    StatusFacts, Tests, Usage, decide,
};

use crate::error::EngineError;
use crate::excerpt::head_str;
use crate::process::sandbox;
use crate::providers::{AgentEvent, Provider, RunFacts};
use crate::run::budget;
use crate::run::classify::{agent_commands, inside_repo, tool_files};
use crate::run::guarded_tree::Restored;
use crate::run::redact::Redactor;
use crate::run::report;
use crate::run::supervise::Supervised;
use crate::run::verify::Verified;
use crate::snapshot::Changes;

/// Most log lines in one result.
pub(crate) const MAX_LOGS: usize = 200;

/// Longest log line.
const LOG_LINE_MAX: usize = 2000;
/// Longest summary taken from droid's final message.
const SUMMARY_MAX: usize = 4000;

/// The `permission_denied` issue for writes the sandbox refused: the paths named by denials in
/// the agent's tool output, its stderr and the verification commands' output that lie outside
/// every writable path.
pub(crate) fn sandbox_denials(a: &Assembly<'_>, stderr: &str) -> Option<(Issue, Vec<String>)> {
    const MAX_PATHS: usize = 10;
    let confinement = a.sandbox.confinement.as_ref()?;
    let mut texts: Vec<&str> = vec![stderr];
    for ev in &a.sup.events {
        if let AgentEvent::ToolResult { text, .. } = ev {
            texts.push(text);
        }
    }
    if let Some(v) = &a.verified {
        for r in &v.runs {
            texts.push(&r.stdout_excerpt);
            texts.push(&r.stderr_excerpt);
        }
    }
    let mut paths: Vec<String> = Vec::new();
    for t in texts {
        for p in sandbox::denied_paths(t, MAX_PATHS) {
            let inside = confinement
                .paths()
                .iter()
                .any(|w| Path::new(&p).starts_with(w));
            if !inside && !paths.contains(&p) && paths.len() < MAX_PATHS {
                paths.push(p);
            }
        }
    }
    (!paths.is_empty()).then(|| {
        let issue = Issue::new(
            IssueType::PermissionDenied,
            format!(
                "the sandbox (Landlock) denied writes outside the run's writable paths: {}",
                paths.join(", ")
            ),
            "if the task needs one of them, add it to sandbox_writable \
             (DROID_EXECUTOR_SANDBOX_WRITABLE); otherwise nothing was written there",
        );
        (issue, paths)
    })
}

pub(crate) struct Assembly<'a> {
    pub(crate) provider: &'a dyn Provider,
    pub(crate) req: &'a ExecutionRequest,
    pub(crate) root: &'a Path,
    pub(crate) real_root: &'a Path,
    pub(crate) runtime: Duration,
    pub(crate) sup: Supervised,
    pub(crate) changes: Result<Changes, EngineError>,
    pub(crate) verified: Option<Verified>,
    pub(crate) version: Option<String>,
    pub(crate) model: Option<String>,
    /// The environment the agent ran with (what its provider reads after the run).
    pub(crate) agent_env: &'a [(OsString, OsString)],
    pub(crate) redact: &'a Redactor,
    pub(crate) excerpt_bytes: usize,
    /// Who started this process: a hint naming a variable its MCP client dropped names the
    /// client's filter.
    pub(crate) client_env: &'a crate::client_env::ClientEnv,
    pub(crate) warnings: &'a [String],
    /// Why git could not measure files_changed in a git work tree (the walk did).
    pub(crate) git_fallback: Option<&'a str>,
    /// How the run was confined.
    pub(crate) sandbox: &'a sandbox::Plan,
    /// What the run changed in `.git/hooks` and `.git/config`, undone.
    pub(crate) restored: Option<&'a Restored>,
}

pub(crate) fn push_issue(issues: &mut Vec<Issue>, issue: Issue) {
    if !issues.iter().any(|i| i.kind == issue.kind) {
        issues.push(issue);
    }
}

pub(crate) fn assemble(a: &Assembly<'_>) -> ExecutionResult {
    let sup = &a.sup;
    let n = a.provider.name();
    let mut logs: Vec<String> = a.warnings.to_vec();
    let mut issues: Vec<Issue> = Vec::new();
    logs.extend(a.sandbox.warning.iter().cloned());

    let mut session_id = None;
    let mut init_model = None;
    let mut completion = None;
    for ev in &sup.events {
        match ev {
            AgentEvent::Init {
                session_id: s,
                model,
            } => {
                session_id.clone_from(s);
                init_model.clone_from(model);
            }
            AgentEvent::Completion {
                final_text,
                num_turns,
                session_id: s,
                usage,
            } => {
                if s.is_some() {
                    session_id.clone_from(s);
                }
                completion = Some((final_text.clone(), *num_turns, usage.clone()));
            }
            AgentEvent::Error { source, message } => {
                logs.push(format!("{n} {source} error: {message}"));
            }
            AgentEvent::Unknown(line) => logs.push(format!("{n} output: {line}")),
            AgentEvent::Usage(_)
            | AgentEvent::Message { .. }
            | AgentEvent::ToolCall { .. }
            | AgentEvent::ToolResult { .. } => {}
        }
    }
    if sup.unknown_lines > 50 {
        logs.push(format!(
            "{} further lines of {n} output were not events and were dropped",
            sup.unknown_lines - 50
        ));
    }
    for len in &sup.oversized {
        logs.push(format!("{n} printed a {len}-byte line; it was skipped"));
    }
    if sup.tool_calls_dropped > 0 {
        logs.push(format!(
            "{n} made {} more tool calls than the {} kept for commands_run; they are left out \
             (files_changed still comes from the repository)",
            sup.tool_calls_dropped,
            sup.events
                .iter()
                .filter(|e| matches!(e, AgentEvent::ToolCall { .. }))
                .count()
        ));
    }
    let stderr = sup.stderr.text();
    let stderr_lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    for l in stderr_lines.iter().rev().take(50).rev() {
        logs.push(format!("{n} stderr: {l}"));
    }

    let (prose, report) = completion
        .as_ref()
        .map_or((String::new(), None), |(text, _, _)| report::extract(text));
    let report = report.unwrap_or_default();

    // files: ground truth from the repository, detail from the agent
    let tools = tool_files(&sup.events, a.root, a.real_root, n);
    let mut files: Vec<FileChange> = match &a.changes {
        Ok(c) => {
            logs.extend(c.warnings.iter().cloned());
            if let Some(why) = &c.incomplete {
                issues.push(Issue::new(
                    IssueType::EnvIssue,
                    format!("files_changed may be incomplete: {why}"),
                    "make repo_root a git repository (git snapshots have no such limit) or \
                     narrow it to the directory the task needs",
                ));
            }
            c.files.clone()
        }
        Err(e) => {
            issues.push(Issue::new(
                IssueType::EnvIssue,
                format!("could not read the repository's changes: {e}"),
                "check that git works in repo_root; files_changed is empty because it could not be measured",
            ));
            Vec::new()
        }
    };
    if let Some(why) = a.git_fallback {
        // the status stays what the run earned: the files listed did change; what may be
        // missing is said here (a walk ignores .gitignore and is bounded). The
        // snapshot's own warning is already a line of `logs`.
        issues.push(Issue::new(
            IssueType::EnvIssue,
            format!(
                "git could not be used in this git work tree ({why}); files_changed comes from \
                 walking the directory, which ignores .gitignore and stops after 10 s or \
                 1,000,000 files, so it may list ignored files or miss changes"
            ),
            "install git 2.31 or later (droid-executor doctor checks it), then run the task \
             again for an exact files_changed",
        ));
    }
    let reported: HashMap<PathBuf, &Vec<String>> = report
        .files
        .iter()
        .filter_map(|(p, h)| Some((inside_repo(p, a.root, a.real_root)?, h)))
        .collect();
    for f in &mut files {
        let key = PathBuf::from(&f.path);
        if let Some(h) = reported.get(&key) {
            f.highlights.extend(h.iter().map(|s| a.redact.apply(s)));
        }
        if let Some(h) = tools.highlights.get(&key) {
            f.highlights.extend(h.iter().cloned());
        }
    }
    // a write the sandbox refused did not happen: it is a `permission_denied`, not a conflict
    let denied = sandbox_denials(a, &stderr);
    // under Landlock a path outside every writable path cannot have been written, whatever the
    // agent's tool call says (its CLI's own words for the refusal may not be recognised)
    let confined = a.sandbox.confinement.as_ref();
    let outside: Vec<&String> = tools
        .outside
        .iter()
        .filter(|p| !denied.as_ref().is_some_and(|(_, paths)| paths.contains(p)))
        .filter(|p| {
            confined.is_none_or(|c| {
                c.paths()
                    .iter()
                    .any(|w| Path::new(p.as_str()).starts_with(w))
            })
        })
        .collect();
    if !outside.is_empty() {
        let outside: Vec<&str> = outside.iter().map(|p| p.as_str()).collect();
        issues.push(Issue::new(
            IssueType::Conflict,
            format!("{n} wrote outside repo_root: {}", outside.join(", ")),
            "inspect and revert those paths; they are not listed in files_changed",
        ));
    }

    let mut commands = agent_commands(&sup.events, a.excerpt_bytes, a.redact);
    let completed = sup.end == RunEnd::Completed;
    // what the provider reads of the run's setup beyond its events: the model that really
    // answered, and what a failure of authentication or of the model needs
    let facts = RunFacts {
        cwd: a.real_root,
        model: a.model.as_deref(),
        reported_model: init_model.as_deref(),
        session_id: session_id.as_deref(),
        env: a.agent_env,
    };
    let used = a.provider.model_used(&facts);
    logs.extend(used.note.iter().cloned());
    let mut found = a.provider.findings(&sup.events, &stderr, completed);
    a.provider.advise(&facts, &mut found.issues);
    a.client_env.amend_issues(&mut found.issues);
    if found.from_stderr && matches!(sup.end, RunEnd::TimedOut | RunEnd::Cancelled) {
        // we stopped it: what it printed while waiting is in `logs`, not a failure of its own
        found.issues.retain(|i| {
            !(i.kind == IssueType::AgentError && i.description.contains(" said on stderr: "))
        });
    }
    issues.extend(found.issues.iter().cloned());
    issues.extend(report.issues.iter().map(|i| Issue {
        description: a.redact.apply(&i.description),
        ..i.clone()
    }));

    let sandbox_denied = denied.is_some();
    let wrote_outside = !outside.is_empty();
    issues.extend(denied.map(|(issue, _)| issue));
    if let Some(r) = a.restored.filter(|r| !r.is_clean()) {
        let mut said = Vec::new();
        if !r.changed.is_empty() {
            said.push(format!(
                "the run changed {} (git or an agent CLI runs or obeys them later on the user's \
                 behalf); \
                 they were restored to what they were before the run",
                r.changed.join(", ")
            ));
        }
        if !r.failed.is_empty() {
            said.push(format!("could not restore {}", r.failed.join(", ")));
        }
        said.extend(r.refused.iter().cloned());
        issues.push(Issue::new(
            IssueType::Conflict,
            a.redact.apply(&said.join("; ")),
            "inspect the agent's transcript for why it touched them; if a hook or setting is \
             wanted, add it yourself",
        ));
    }
    if let Some(why) = a.restored.and_then(|r| r.incomplete.as_deref()) {
        logs.push(format!(
            ".git could not be recorded whole ({why}); files the run added there were not \
             looked for"
        ));
    }

    let exit_code = sup.exit.and_then(|s| s.code());
    let exit_ok = (sup.stopped_by_us && completed) || exit_code == Some(0);
    // the completion's count, else the last the agent reported (a run stopped early)
    let usage = completion
        .as_ref()
        .and_then(|(_, _, u)| u.clone())
        .or_else(|| sup.usage.clone());
    let over_budget = a
        .req
        .max_tokens
        .filter(|max| usage.as_ref().is_some_and(|u| u.budget_tokens() > *max));
    if let (Some(max), Some(spent)) = (over_budget, usage.as_ref()) {
        // first: it is what ended the run (docs/protocol.md#token-budget)
        issues.insert(0, budget::exceeded(n, spent, max, sup.budget_stop));
    }
    let suspect_truncated = completed
        && usage
            .as_ref()
            .is_some_and(|u| u.input_tokens == 0 && u.output_tokens == 0);

    match sup.end {
        RunEnd::TimedOut => issues.push(Issue::new(
            IssueType::Timeout,
            format!("{n} did not finish within {} s and was stopped", a.runtime.as_secs()),
            "raise max_runtime_seconds or split the task; partial changes are listed in files_changed",
        )),
        RunEnd::Cancelled => issues.push(Issue::new(
            IssueType::Cancelled,
            format!("the run was cancelled and {n} was stopped"),
            "partial changes are listed in files_changed; submit again if still wanted",
        )),
        // stopped for its budget: that is why it has no final event
        RunEnd::Failed if found.issues.is_empty() && !sup.budget_stop => {
            let why = match (a.provider.exit_note(exit_code), exit_code, sup.exit) {
                (Some(note), _, _) => note,
                (None, Some(code), _) => {
                    format!("{n} exited {code} without a final event or an error message")
                }
                (None, None, Some(status)) => format!("{n} was killed ({status})"),
                (None, None, None) => format!("{n} ended without a final event"),
            };
            issues.push(Issue::new(
                IssueType::AgentError,
                why,
                "run droid-executor doctor; check the model configuration; run the task again",
            ));
        }
        RunEnd::Failed | RunEnd::Completed | RunEnd::NotStarted => {}
    }

    let (tests, verify_codes) = match &a.verified {
        Some(v) => {
            commands.extend(v.runs.iter().cloned());
            if v.cancelled {
                issues.push(Issue::new(
                    IssueType::Cancelled,
                    "cancelled during verification",
                    "run the suggested commands yourself",
                ));
            }
            (v.tests.clone(), v.codes.clone())
        }
        None => {
            if !a.req.suggested_commands.is_empty() {
                logs.push(format!(
                    "verification skipped: {n} did not finish (or verification is off)"
                ));
            }
            (
                Tests {
                    passed: None,
                    details: String::new(),
                    commands: a
                        .req
                        .suggested_commands
                        .iter()
                        .map(|c| c.as_str().to_owned())
                        .collect(),
                },
                Vec::new(),
            )
        }
    };

    let verdict = decide(&StatusFacts {
        end: if a.verified.as_ref().is_some_and(|v| v.cancelled) {
            RunEnd::Cancelled
        } else {
            sup.end
        },
        exit_ok,
        reported: report.status,
        verify_exit_codes: verify_codes,
        files_changed: files.len(),
        permission_denied: found.permission_denied || sandbox_denied,
        suspect_truncated,
        wrote_outside,
        over_budget: over_budget.is_some(),
    });
    for r in verdict.reasons {
        push_issue(&mut issues, r);
    }

    let summary = match (&report.summary, sup.end) {
        (Some(s), _) => head_str(s, SUMMARY_MAX),
        (None, RunEnd::Completed) if !prose.is_empty() => head_str(&prose, SUMMARY_MAX),
        (None, RunEnd::Completed) => format!("{n} finished without a final message"),
        (None, RunEnd::TimedOut) => format!(
            "timed out after {} s; {} file(s) changed before {n} was stopped",
            a.runtime.as_secs(),
            files.len()
        ),
        (None, RunEnd::Cancelled) => format!(
            "cancelled; {} file(s) changed before {n} was stopped",
            files.len()
        ),
        (None, RunEnd::Failed) if sup.budget_stop => format!(
            "stopped: {n} used {} of its {} tokens; {} file(s) changed before it was stopped",
            usage.as_ref().map_or(0, Usage::budget_tokens),
            a.req.max_tokens.unwrap_or(0),
            files.len()
        ),
        (None, RunEnd::Failed | RunEnd::NotStarted) => match &found.headline {
            Some(h) => format!("{n} failed: {}", head_str(h, 500)),
            None => format!("{n} failed without saying why"),
        },
    };

    let agent = AgentInfo {
        provider: a.provider.id(),
        version: a.version.clone(),
        model: used.model,
        exit_code,
        num_turns: completion.as_ref().and_then(|(_, turns, _)| *turns),
        usage,
    };

    let logs: Vec<String> = logs
        .iter()
        .rev()
        .take(MAX_LOGS)
        .rev()
        .map(|l| a.redact.apply(&head_str(l, LOG_LINE_MAX)))
        .collect();

    ExecutionResult {
        status: verdict.status,
        summary: a.redact.apply(&summary),
        files_changed: files,
        commands_run: commands,
        tests,
        worktree: None,
        logs,
        issues,
        task_id: None,
        session_id,
        duration_ms: 0,
        droid: (a.provider.id() == ProviderId::Droid).then(|| agent.as_droid()),
        // one attempt: the total is its own (a `fallback` or `best_of` sums them, `fanout/`)
        usage: agent.usage.clone(),
        attempts: Vec::new(),
        agent: Some(agent),
        sandbox: Some(a.sandbox.info.clone()),
        notes_for_human: None,
    }
}
