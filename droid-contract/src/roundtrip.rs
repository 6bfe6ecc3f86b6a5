//! Property tests for the contract's wire round trips: any valid [`ExecutionRequest`] (every field,
//! unicode text at the length limits, full lists) serialized to JSON parses back to an equal
//! request, through [`ExecutionRequest::from_json`] and through serde; any [`ExecutionResult`] and
//! [`TaskRecord`] (every status, issue type, change type, command source and task state) comes
//! back equal through serde.
//!
//! The strategies build values through the types' own constructors, so every generated value is
//! one the contract accepts. The checked-in JSON Schemas are not validated here: the workspace has
//! no JSON Schema validator, and adding one only for this is not worth its weight.

use pretty_assertions::assert_eq;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;

use crate::request::{MAX_COMMANDS, MAX_LIST_ITEMS, NAME_MAX, NOTES_MAX, REASONING_EFFORTS};
use crate::text::{COMMAND_MAX, INSTRUCTIONS_MAX, LIST_ITEM_MAX, OBJECTIVE_MAX, TASK_ID_MAX};
use crate::{
    AgentInfo, Autonomy, ChangeType, CommandRun, CommandSource, Context, DroidInfo, ExecutionMode,
    ExecutionRequest, ExecutionResult, FileChange, Instructions, Issue, IssueType, ListItem,
    Objective, ProviderId, RelPath, RepoRoot, Runtime, SandboxInfo, SandboxKind, ShellCommand,
    Status, TaskId, TaskRecord, TaskState, Tests, Usage,
};
use crate::{Attempt, CheckOutcome, Diffstat, Isolation, WorktreeInfo, WorktreeState};

/// Cases per property: enough to hit every variant many times, few enough for a debug build.
const CASES: u32 = 128;
/// Fewer for requests: one can carry a megabyte of text at the limits.
const REQUEST_CASES: u32 = 64;

/// Characters JSON encoding has to work for: quotes, escapes, controls, NUL, line and paragraph
/// separators, a BOM, non-BMP characters, the highest scalar value.
const AWKWARD: &[char] = &[
    '"',
    '\\',
    '/',
    '\n',
    '\r',
    '\t',
    '\0',
    '\u{7f}',
    '\u{2028}',
    '\u{2029}',
    '\u{feff}',
    'é',
    'ß',
    '漢',
    '😀',
    '\u{10ffff}',
    '`',
    ' ',
    '-',
];

fn any_char() -> impl Strategy<Value = char> {
    prop_oneof![2 => any::<char>(), 1 => select(AWKWARD)]
}

/// Unicode text of at most `max` characters: mostly short, and a quarter of the time exactly
/// `max` characters (a short random unit repeated), so the limits themselves are exercised.
fn text(max: usize) -> BoxedStrategy<String> {
    let short = vec(any_char(), 0..=max.min(40)).prop_map(String::from_iter);
    if max <= 40 {
        return short.boxed();
    }
    let at_limit =
        vec(any_char(), 1..8).prop_map(move |unit| unit.into_iter().cycle().take(max).collect());
    prop_oneof![3 => short, 1 => at_limit].boxed()
}

/// `s` made non-blank without changing its length in characters.
fn non_blank(mut s: String) -> String {
    if s.trim().is_empty() {
        match s.chars().next() {
            Some(c) => {
                s.replace_range(..c.len_utf8(), "x");
            }
            None => s.push('x'),
        }
    }
    s
}

fn objective() -> impl Strategy<Value = Objective> {
    text(OBJECTIVE_MAX).prop_map(|s| Objective::try_from(non_blank(s)).unwrap())
}

fn instructions() -> impl Strategy<Value = Instructions> {
    text(INSTRUCTIONS_MAX).prop_map(|s| Instructions::try_from(s).unwrap())
}

fn list_item() -> impl Strategy<Value = ListItem> {
    text(LIST_ITEM_MAX).prop_map(|s| ListItem::try_from(non_blank(s)).unwrap())
}

fn command() -> impl Strategy<Value = ShellCommand> {
    text(COMMAND_MAX).prop_map(|s| ShellCommand::try_from(non_blank(s.replace('\0', " "))).unwrap())
}

/// A list of up to `max` items: usually a few different ones, sometimes exactly `max` (copies of
/// one item: the limit is on the count, and generating `max` distinct items is slow).
fn list<S>(item: fn() -> S, max: usize) -> impl Strategy<Value = Vec<S::Value>>
where
    S: Strategy + 'static,
    S::Value: Clone,
{
    prop_oneof![4 => vec(item(), 0..4), 1 => item().prop_map(move |i| vec![i; max])]
}

fn task_id() -> impl Strategy<Value = TaskId> {
    let charset = "[A-Za-z0-9._:-]";
    let regex = |r: String| proptest::string::string_regex(&r).unwrap();
    prop_oneof![
        regex(format!("{charset}{{1,20}}")),
        regex(format!("{charset}{{{TASK_ID_MAX}}}")),
    ]
    .prop_map(|s| TaskId::try_from(s).unwrap())
}

/// A model or session name: no whitespace or control characters, not starting with `-`.
fn name() -> impl Strategy<Value = String> {
    let c = || {
        any_char().prop_filter("no whitespace or control", |c| {
            !c.is_whitespace() && !c.is_control()
        })
    };
    prop_oneof![vec(c(), 1..24), vec(c(), NAME_MAX..=NAME_MAX)].prop_map(|chars| {
        let mut s = String::from_iter(chars);
        if s.starts_with('-') {
            s.replace_range(..1, "m");
        }
        s
    })
}

/// One path segment as a caller might write it: `.`, `..`, empty (from `//`), or a name of any
/// characters but `/` and NUL.
fn segment() -> impl Strategy<Value = String> {
    let name = vec(
        any_char().prop_filter("no / or NUL", |c| *c != '/' && *c != '\0'),
        1..10,
    )
    .prop_map(String::from_iter);
    prop_oneof![
        1 => Just(".".to_owned()),
        1 => Just("..".to_owned()),
        1 => Just(String::new()),
        4 => name,
    ]
}

fn repo_root() -> impl Strategy<Value = RepoRoot> {
    (vec(segment(), 0..5), any::<bool>()).prop_map(|(segs, trailing)| {
        let mut raw = format!("/{}", segs.join("/"));
        if trailing {
            raw.push('/');
        }
        RepoRoot::try_from(raw).unwrap()
    })
}

/// A file of interest under `root`, written relative or absolute (inside `root`); only the
/// spellings the contract accepts are kept.
fn file_of_interest(root: RepoRoot) -> impl Strategy<Value = RelPath> {
    (vec(segment(), 1..5), any::<bool>()).prop_filter_map(
        "the contract refuses it",
        move |(segs, absolute)| {
            let rel = segs.join("/");
            let raw = if absolute {
                format!("{}/{rel}", root.as_path().display())
            } else {
                rel
            };
            RelPath::parse(&raw, Some(&root)).ok()
        },
    )
}

fn context() -> impl Strategy<Value = Context> {
    repo_root().prop_flat_map(|root| {
        let files = vec(file_of_interest(root.clone()), 0..6);
        (Just(root), files).prop_map(|(repo_root, files_of_interest)| Context {
            repo_root,
            files_of_interest,
        })
    })
}

fn request() -> impl Strategy<Value = ExecutionRequest> {
    let what = (
        proptest::option::of(task_id()),
        objective(),
        instructions(),
        context(),
        list(list_item, MAX_LIST_ITEMS),
        list(list_item, MAX_LIST_ITEMS),
        list(command, MAX_COMMANDS),
    );
    let how = (
        select(vec![
            ExecutionMode::Code,
            ExecutionMode::Command,
            ExecutionMode::Mixed,
        ]),
        proptest::option::of(
            prop_oneof![Just(1u64), Just(86_400u64), 1u64..=86_400]
                .prop_map(|n| Runtime::try_from(n).unwrap()),
        ),
        proptest::option::of(text(NOTES_MAX)),
        proptest::option::of(select(vec![
            Autonomy::ReadOnly,
            Autonomy::Low,
            Autonomy::Medium,
            Autonomy::High,
        ])),
        proptest::option::of(name()),
        proptest::option::of(select(REASONING_EFFORTS).prop_map(str::to_owned)),
        proptest::option::of(name()),
        select(ProviderId::ALL.to_vec()),
    );
    let isolated = proptest::option::of(select(vec![Isolation::None, Isolation::Worktree]))
        .prop_flat_map(|isolation| {
            // setup commands and copied paths only go with a worktree (or the server's default)
            let extras = isolation != Some(Isolation::None);
            let copies = vec(segment(), 1..4).prop_filter_map("the contract refuses it", |segs| {
                RelPath::parse(&segs.join("/"), None).ok()
            });
            (
                Just(isolation),
                if extras {
                    list(command, 3).boxed()
                } else {
                    Just(Vec::new()).boxed()
                },
                if extras {
                    vec(copies, 0..3).boxed()
                } else {
                    Just(Vec::new()).boxed()
                },
            )
        });
    (what, how, isolated).prop_map(
        |(
            (
                task_id,
                objective,
                instructions,
                context,
                constraints,
                acceptance_criteria,
                suggested_commands,
            ),
            (
                execution_mode,
                max_runtime_seconds,
                notes_for_human,
                autonomy,
                model,
                reasoning_effort,
                session_id,
                provider,
            ),
            (isolation, setup_commands, worktree_copy),
        )| ExecutionRequest {
            task_id,
            objective,
            instructions,
            context,
            constraints,
            acceptance_criteria,
            execution_mode,
            suggested_commands,
            max_runtime_seconds,
            notes_for_human,
            autonomy,
            model,
            reasoning_effort,
            session_id,
            provider,
            sandbox_writable: Vec::new(),
            isolation,
            setup_commands,
            worktree_copy,
            // several agents have their own round trip (request/tests.rs)
            fallback: Vec::new(),
            best_of: Vec::new(),
            keep_all: false,
            max_tokens: None,
        },
    )
}

/// Every value of each wire enum. The `match`es without a wildcard make adding a variant a
/// compile error here until the list grows too.
const STATUSES: [Status; 6] = [
    Status::Success,
    Status::Partial,
    Status::Failed,
    Status::Timeout,
    Status::Cancelled,
    Status::Error,
];
const ISSUE_TYPES: [IssueType; 16] = [
    IssueType::TestFailure,
    IssueType::EnvIssue,
    IssueType::UnclearRequirement,
    IssueType::Conflict,
    IssueType::ValidationError,
    IssueType::Timeout,
    IssueType::Cancelled,
    IssueType::BridgeFailure,
    IssueType::DroidNotFound,
    IssueType::AuthFailure,
    IssueType::ModelError,
    IssueType::PermissionDenied,
    IssueType::AgentError,
    IssueType::RateLimited,
    IssueType::BudgetExceeded,
    IssueType::Internal,
];
const CHANGE_TYPES: [ChangeType; 4] = [
    ChangeType::Added,
    ChangeType::Modified,
    ChangeType::Deleted,
    ChangeType::Renamed,
];
const SOURCES: [CommandSource; 3] = [
    CommandSource::Agent,
    CommandSource::Verify,
    CommandSource::Setup,
];

fn status_index(s: Status) -> usize {
    match s {
        Status::Success => 0,
        Status::Partial => 1,
        Status::Failed => 2,
        Status::Timeout => 3,
        Status::Cancelled => 4,
        Status::Error => 5,
    }
}

fn issue_type_index(t: IssueType) -> usize {
    match t {
        IssueType::TestFailure => 0,
        IssueType::EnvIssue => 1,
        IssueType::UnclearRequirement => 2,
        IssueType::Conflict => 3,
        IssueType::ValidationError => 4,
        IssueType::Timeout => 5,
        IssueType::Cancelled => 6,
        IssueType::BridgeFailure => 7,
        IssueType::DroidNotFound => 8,
        IssueType::AuthFailure => 9,
        IssueType::ModelError => 10,
        IssueType::PermissionDenied => 11,
        IssueType::AgentError => 12,
        IssueType::RateLimited => 13,
        IssueType::BudgetExceeded => 14,
        IssueType::Internal => 15,
    }
}

fn change_type_index(c: ChangeType) -> usize {
    match c {
        ChangeType::Added => 0,
        ChangeType::Modified => 1,
        ChangeType::Deleted => 2,
        ChangeType::Renamed => 3,
    }
}

fn source_index(s: CommandSource) -> usize {
    match s {
        CommandSource::Agent => 0,
        CommandSource::Verify => 1,
        CommandSource::Setup => 2,
    }
}

/// The result status a finished task state stands for; `None` for queued and running.
fn status_of(state: TaskState) -> Option<Status> {
    match state {
        TaskState::Queued | TaskState::Running => None,
        TaskState::Success => Some(Status::Success),
        TaskState::Partial => Some(Status::Partial),
        TaskState::Failed => Some(Status::Failed),
        TaskState::Timeout => Some(Status::Timeout),
        TaskState::Cancelled => Some(Status::Cancelled),
        TaskState::Error => Some(Status::Error),
    }
}

fn short() -> BoxedStrategy<String> {
    text(40)
}

fn issue() -> impl Strategy<Value = Issue> {
    (select(ISSUE_TYPES.to_vec()), short(), short()).prop_map(|(kind, d, a)| Issue::new(kind, d, a))
}

fn file_change() -> impl Strategy<Value = FileChange> {
    (
        short(),
        select(CHANGE_TYPES.to_vec()),
        proptest::option::of(short()),
        vec(short(), 0..3),
        proptest::option::of(any::<u64>()),
        proptest::option::of(any::<u64>()),
    )
        .prop_map(
            |(path, change_type, old_path, highlights, lines_added, lines_removed)| FileChange {
                path,
                change_type,
                old_path,
                highlights,
                lines_added,
                lines_removed,
            },
        )
}

fn command_run() -> impl Strategy<Value = CommandRun> {
    (
        short(),
        proptest::option::of(any::<i32>()),
        any::<u64>(),
        short(),
        short(),
        select(SOURCES.to_vec()),
        any::<bool>(),
    )
        .prop_map(
            |(
                command,
                exit_code,
                duration_ms,
                stdout_excerpt,
                stderr_excerpt,
                source,
                truncated,
            )| CommandRun {
                command,
                exit_code,
                duration_ms,
                stdout_excerpt,
                stderr_excerpt,
                source,
                truncated,
            },
        )
}

/// Milliseconds as droid reports them: any finite, non-negative value.
fn millis() -> impl Strategy<Value = f64> {
    prop_oneof![
        (0u32..100_000).prop_map(f64::from),
        (0u32..10_000_000).prop_map(|n| f64::from(n) / 100.0),
        (0.0f64..1e9),
        any::<f64>().prop_filter("finite", |f| f.is_finite()),
    ]
}

fn usage() -> impl Strategy<Value = Usage> {
    (
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        proptest::option::of(millis()),
    )
        .prop_map(
            |(
                input_tokens,
                output_tokens,
                cache_read_input_tokens,
                cache_creation_input_tokens,
                factory_credits,
                ttft_ms,
            )| Usage {
                input_tokens,
                output_tokens,
                cache_read_input_tokens,
                cache_creation_input_tokens,
                factory_credits,
                ttft_ms,
            },
        )
}

fn droid_info() -> impl Strategy<Value = DroidInfo> {
    (
        proptest::option::of(short()),
        proptest::option::of(short()),
        proptest::option::of(any::<i32>()),
        proptest::option::of(any::<u64>()),
        proptest::option::of(usage()),
    )
        .prop_map(|(version, model, exit_code, num_turns, usage)| DroidInfo {
            provider: ProviderId::Droid,
            version,
            model,
            exit_code,
            num_turns,
            usage,
        })
}

fn agent_info() -> impl Strategy<Value = AgentInfo> {
    (select(ProviderId::ALL.to_vec()), droid_info())
        .prop_map(|(provider, d)| AgentInfo { provider, ..d })
}

fn sandbox_info() -> impl Strategy<Value = SandboxInfo> {
    (
        select(vec![SandboxKind::Landlock, SandboxKind::None]),
        proptest::option::of(1u32..10),
        vec(short(), 0..4),
        proptest::option::of(short()),
    )
        .prop_map(|(kind, abi, writable, reason)| SandboxInfo {
            kind,
            abi,
            writable,
            reason,
        })
}

fn result_with(status: impl Strategy<Value = Status>) -> impl Strategy<Value = ExecutionResult> {
    let what = (
        status,
        text(2_000),
        vec(file_change(), 0..4),
        vec(command_run(), 0..4),
        (
            proptest::option::of(any::<bool>()),
            short(),
            vec(short(), 0..3),
        )
            .prop_map(|(passed, details, commands)| Tests {
                passed,
                details,
                commands,
            }),
        vec(short(), 0..4),
    );
    let who = (
        vec(issue(), 0..5),
        proptest::option::of(short()),
        proptest::option::of(short()),
        any::<u64>(),
        proptest::option::of(droid_info()),
        proptest::option::of(text(NOTES_MAX)),
        proptest::option::of(agent_info()),
        proptest::option::of(sandbox_info()),
    );
    let several = (vec(attempt(), 0..3), proptest::option::of(usage()));
    (what, who, proptest::option::of(worktree_info()), several).prop_map(
        |(
            (status, summary, files_changed, commands_run, tests, logs),
            (issues, task_id, session_id, duration_ms, droid, notes_for_human, agent, sandbox),
            worktree,
            (attempts, usage),
        )| ExecutionResult {
            status,
            summary,
            files_changed,
            commands_run,
            tests,
            worktree,
            logs,
            issues,
            task_id,
            session_id,
            duration_ms,
            agent,
            attempts,
            usage,
            sandbox,
            droid,
            notes_for_human,
        },
    )
}

fn attempt() -> impl Strategy<Value = Attempt> {
    (
        (
            select(ProviderId::ALL.to_vec()),
            proptest::option::of(short()),
            select(STATUSES.to_vec()),
            proptest::option::of(select(ISSUE_TYPES.to_vec())),
            vec(select(ISSUE_TYPES.to_vec()), 0..3),
            any::<u64>(),
        ),
        (
            proptest::option::of(usage()),
            vec(
                (short(), proptest::option::of(any::<i32>()))
                    .prop_map(|(command, exit_code)| CheckOutcome { command, exit_code }),
                0..3,
            ),
            (any::<u64>(), any::<u64>(), any::<u64>()).prop_map(
                |(files, lines_added, lines_removed)| Diffstat {
                    files,
                    lines_added,
                    lines_removed,
                },
            ),
            any::<bool>(),
            proptest::option::of(short()),
            proptest::option::of(worktree_info()),
            short(),
        ),
    )
        .prop_map(
            |(
                (provider, model, status, reason, issues, duration_ms),
                (usage, checks, diffstat, chosen, task_id, worktree, note),
            )| Attempt {
                provider,
                model,
                status,
                reason,
                issues,
                duration_ms,
                usage,
                checks,
                diffstat,
                chosen,
                task_id,
                worktree,
                note,
            },
        )
}

fn worktree_info() -> impl Strategy<Value = WorktreeInfo> {
    (
        short(),
        short(),
        short(),
        short(),
        select(vec![
            WorktreeState::Ready,
            WorktreeState::Applied,
            WorktreeState::Discarded,
            WorktreeState::Conflicted,
        ]),
    )
        .prop_map(|(path, branch, base, head, state)| WorktreeInfo {
            path,
            branch,
            base,
            head,
            state,
        })
}

fn result() -> impl Strategy<Value = ExecutionResult> {
    result_with(select(STATUSES.to_vec()))
}

/// RFC 3339 UTC timestamps as the store writes them.
fn timestamp() -> impl Strategy<Value = String> {
    (
        2020u32..2100,
        1u32..=12,
        1u32..=28,
        0u32..24,
        0u32..60,
        0u32..60,
        proptest::option::of(0u32..1000),
    )
        .prop_map(|(y, mo, d, h, mi, s, ms)| match ms {
            Some(ms) => format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}Z"),
            None => format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z"),
        })
}

/// A consistent record: queued and running have no result; a finished state carries a result
/// whose status is that state.
fn record() -> impl Strategy<Value = TaskRecord> {
    select(TaskState::ALL.to_vec()).prop_flat_map(|state| {
        let result = match status_of(state) {
            None => Just(None).boxed(),
            Some(status) => result_with(Just(status)).prop_map(Some).boxed(),
        };
        (
            "droid-[0-9]{10}-[0-9a-f]{4}",
            timestamp(),
            timestamp(),
            result,
        )
            .prop_map(
                move |(task_id, created_at, updated_at, result)| TaskRecord {
                    task_id,
                    state,
                    created_at,
                    updated_at,
                    result,
                },
            )
    })
}

/// `value` → JSON text → `T` through serde.
fn through_serde<T: serde::Serialize + serde::de::DeserializeOwned>(value: &T) -> T {
    let text = serde_json::to_string(value).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(REQUEST_CASES))]

    /// A valid request survives serialization, parsed back with every rule (compact and pretty
    /// JSON) and through serde (how a stored request is read back).
    #[test]
    fn request_round_trips(req in request()) {
        let compact = serde_json::to_string(&req).unwrap();
        prop_assert_eq!(ExecutionRequest::from_json(&compact, None), Ok(req.clone()));
        let pretty = serde_json::to_string_pretty(&req).unwrap();
        prop_assert_eq!(ExecutionRequest::from_json(&pretty, None), Ok(req.clone()));
        prop_assert_eq!(through_serde(&req), req);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    /// A result survives serialization through serde, and every field is on the wire (optional
    /// ones as `null`), so the shape is stable, in the order a reader needs: `status`, `summary`,
    /// `issues`, `files_changed` first, the bulky `commands_run` and `logs` last (through a
    /// `Value` too: the workspace's serde_json keeps insertion order).
    #[test]
    fn result_round_trips(res in result()) {
        prop_assert_eq!(&through_serde(&res), &res);
        let wire = serde_json::to_value(&res).unwrap();
        let keys: Vec<&str> = wire.as_object().unwrap().keys().map(String::as_str).collect();
        let want = vec![
            "status", "summary", "issues", "files_changed", "tests", "worktree", "task_id",
            "session_id", "duration_ms", "agent", "attempts", "usage", "sandbox", "droid", "notes_for_human", "commands_run", "logs",
        ];
        prop_assert_eq!(keys, want);
    }

    /// A task record survives serialization through serde, in every state.
    #[test]
    fn task_record_round_trips(rec in record()) {
        prop_assert_eq!(through_serde(&rec), rec);
    }
}

/// Each variant of each wire enum round-trips inside a whole value, whatever proptest happened to
/// draw.
#[test]
fn every_variant_round_trips() {
    assert_eq!(
        STATUSES.map(status_index),
        std::array::from_fn(|i| i),
        "STATUSES lists every status once, in order"
    );
    assert_eq!(
        ISSUE_TYPES.map(issue_type_index),
        std::array::from_fn(|i| i)
    );
    assert_eq!(
        CHANGE_TYPES.map(change_type_index),
        std::array::from_fn(|i| i)
    );
    assert_eq!(SOURCES.map(source_index), std::array::from_fn(|i| i));

    let base = ExecutionResult::error(Some("T-1".into()), "s", Vec::new());
    for (i, status) in STATUSES.into_iter().enumerate() {
        let mut r = base.clone();
        r.status = status;
        r.issues = ISSUE_TYPES
            .iter()
            .map(|t| Issue::new(*t, t.as_str(), "act"))
            .collect();
        r.files_changed = CHANGE_TYPES
            .iter()
            .map(|c| FileChange {
                path: format!("f{i}"),
                change_type: *c,
                old_path: (*c == ChangeType::Renamed).then(|| "old".into()),
                highlights: vec!["h".into()],
                lines_added: Some(1),
                lines_removed: None,
            })
            .collect();
        r.commands_run = SOURCES
            .iter()
            .map(|s| CommandRun {
                command: "make".into(),
                exit_code: Some(-1),
                duration_ms: 3,
                stdout_excerpt: "o".into(),
                stderr_excerpt: String::new(),
                source: *s,
                truncated: true,
            })
            .collect();
        assert_eq!(through_serde(&r), r);
        let wire = serde_json::to_value(&r).unwrap();
        assert_eq!(wire["status"], serde_json::json!(status.as_str()));
        let types: Vec<&str> = wire["issues"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["type"].as_str().unwrap())
            .collect();
        let want: Vec<&str> = ISSUE_TYPES.iter().map(|t| t.as_str()).collect();
        assert_eq!(types, want);
    }
    for state in TaskState::ALL {
        let rec = TaskRecord {
            task_id: "droid-1795320000-0a1b".into(),
            state,
            created_at: "2026-11-20T10:00:00Z".into(),
            updated_at: "2026-11-20T10:00:01.250Z".into(),
            result: status_of(state).map(|status| {
                let mut r = base.clone();
                r.status = status;
                r
            }),
        };
        assert_eq!(through_serde(&rec), rec);
    }
}

/// Regression (found by `request_round_trips`): a file of interest naming the repository itself
/// normalised to the empty path, which serialized as `""` and did not parse back, so a background
/// task's supervisor refused the request it was handed.
#[test]
fn the_repository_itself_as_a_file_of_interest_round_trips() {
    let v = serde_json::json!({"objective": "o", "context": {"repo_root": "/r",
        "files_of_interest": [".", "a/..", "/r", "/r/./"]}});
    let req = ExecutionRequest::from_value(&v, None).unwrap();
    let wire = serde_json::to_value(&req).unwrap();
    assert_eq!(
        wire["context"]["files_of_interest"],
        serde_json::json!([".", ".", ".", "."])
    );
    assert_eq!(ExecutionRequest::from_value(&wire, None), Ok(req));
}

/// Regression (found by `result_round_trips`): without serde_json's `float_roundtrip` a float
/// read back could be its neighbour.
#[test]
fn a_float_reads_back_as_written() {
    let usage = Usage {
        ttft_ms: Some(91_097_718.322_304_76),
        ..Usage::default()
    };
    assert_eq!(through_serde(&usage), usage);
}
