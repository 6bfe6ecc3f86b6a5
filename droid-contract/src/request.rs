//! The execution request: what the caller wants done, where, under which rules.
//!
//! Parsing walks the JSON document by hand (rather than `#[derive(Deserialize)]`) so that it can
//! report every violation at once, each with its JSON path; serde's derive stops at the first.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

use crate::attempt::{
    AgentChoice, MAX_BEST_OF, MAX_FALLBACK, MAX_TOKEN_BUDGET, MIN_BEST_OF, MIN_TOKEN_BUDGET,
};
use crate::isolation::Isolation;
use crate::paths::{PathFacts, PathKind, RelPath, RepoRoot};
use crate::provider::ProviderId;
use crate::text::{Instructions, ListItem, Objective, Runtime, ShellCommand, TaskId};
use crate::violation::{Violation, Violations};

/// Most constraints or acceptance criteria in one request.
pub(crate) const MAX_LIST_ITEMS: usize = 100;
/// Most suggested commands in one request.
pub(crate) const MAX_COMMANDS: usize = 50;
/// Most files of interest in one request.
pub(crate) const MAX_FILES: usize = 1_000;
/// Longest `notes_for_human`, in characters.
pub(crate) const NOTES_MAX: usize = 100_000;
/// Most extra writable directories in one request.
pub(crate) const MAX_WRITABLE: usize = 20;
/// Most untracked paths copied into a worktree (`worktree_copy`).
pub(crate) const MAX_WORKTREE_COPY: usize = 100;
/// Longest `model` / `session_id` value, in characters.
pub(crate) const NAME_MAX: usize = 256;
/// Reasoning efforts droid 0.225.2 accepts (`droid exec -r`).
pub(crate) const REASONING_EFFORTS: &[&str] = &[
    "none", "dynamic", "off", "minimal", "low", "medium", "high", "xhigh", "max",
];

/// What kind of work the task is; selects the default autonomy (code → low, otherwise medium).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionMode {
    /// Mostly code changes.
    Code,
    /// Mostly running commands.
    Command,
    /// Both (the default).
    #[default]
    Mixed,
}

impl ExecutionMode {
    /// The autonomy this mode runs with when the request names none.
    pub fn default_autonomy(self) -> Autonomy {
        match self {
            Self::Code => Autonomy::Low,
            Self::Command | Self::Mixed => Autonomy::Medium,
        }
    }
}

/// How much droid may do without asking (droid's `--auto` levels). Ordered from least to most.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Autonomy {
    /// No `--auto`: reads, plus commands the model itself labels low-risk.
    ReadOnly,
    /// `--auto low`: file edits and low-risk commands.
    Low,
    /// `--auto medium`: most development commands.
    Medium,
    /// `--auto high`: everything but droid's deny-list.
    High,
}

impl Autonomy {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "read_only",
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
        }
    }
}

/// Where the task runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Context {
    /// Absolute path of the repository (must exist, be a directory, lie under an allowed root).
    pub repo_root: RepoRoot,
    /// Files or directories the task is about, relative to `repo_root` (or absolute inside it).
    #[serde(default)]
    #[schemars(length(max = 1000))]
    pub files_of_interest: Vec<RelPath>,
}

/// A decided, well-specified coding task for droid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "ExecutionRequest")]
pub struct ExecutionRequest {
    /// The caller's id for this task, echoed back in the result.
    #[serde(default)]
    pub task_id: Option<TaskId>,
    /// What must be achieved, in a sentence or two.
    pub objective: Objective,
    /// How to do it, in detail.
    #[serde(default)]
    pub instructions: Instructions,
    /// Where.
    pub context: Context,
    /// Rules droid must keep.
    #[serde(default)]
    #[schemars(length(max = 100))]
    pub constraints: Vec<ListItem>,
    /// How the caller will judge the work.
    #[serde(default)]
    #[schemars(length(max = 100))]
    pub acceptance_criteria: Vec<ListItem>,
    /// code | command | mixed (default).
    #[serde(default)]
    pub execution_mode: ExecutionMode,
    /// Commands droid should run, which the executor re-runs itself to verify the work.
    #[serde(default)]
    #[schemars(length(max = 50))]
    pub suggested_commands: Vec<ShellCommand>,
    /// Wall-clock budget in seconds; the server's default (600) when absent.
    #[serde(default)]
    pub max_runtime_seconds: Option<Runtime>,
    /// Echoed back, never sent to droid.
    #[serde(default)]
    #[schemars(length(max = 100000))]
    pub notes_for_human: Option<String>,
    /// Requested autonomy, capped by the server's `max_autonomy`; from `execution_mode` when absent.
    #[serde(default)]
    pub autonomy: Option<Autonomy>,
    /// droid model id (`-m`), e.g. `custom:MyModel-0`.
    #[serde(default)]
    #[schemars(length(min = 1, max = 256))]
    pub model: Option<String>,
    /// droid reasoning effort (`-r`).
    #[serde(default)]
    #[schemars(extend("enum" = ["none", "dynamic", "off", "minimal", "low", "medium", "high", "xhigh", "max", null]))]
    pub reasoning_effort: Option<String>,
    /// droid session to continue (`-s`).
    #[serde(default)]
    #[schemars(length(min = 1, max = 256))]
    pub session_id: Option<String>,
    /// The agent CLI that runs the task (default droid); model, reasoning_effort, session_id
    /// and autonomy map onto its own flags, and a value it cannot honour is an `error`.
    #[serde(default)]
    pub provider: ProviderId,
    /// Directories the agent may write besides repo_root when the run is confined (the
    /// server's `sandbox` setting); each must exist and lie under the allowed roots, as
    /// repo_root must.
    #[serde(default)]
    #[schemars(length(max = 20))]
    pub sandbox_writable: Vec<RepoRoot>,
    /// `none`: in repo_root; `worktree`: in a git worktree of its own, the change applied later
    /// (`droid_apply`). The server's `isolation` when absent; a follow-up in its session's.
    #[serde(default)]
    pub isolation: Option<Isolation>,
    /// Run in a new worktree before the agent (`npm ci`); the server's when empty.
    #[serde(default)]
    #[schemars(length(max = 50))]
    pub setup_commands: Vec<ShellCommand>,
    /// Untracked paths copied into a new worktree (`.env`); the server's when empty.
    #[serde(default)]
    #[schemars(length(max = 100))]
    pub worktree_copy: Vec<RelPath>,
    /// Agents tried in turn after `provider` when an attempt ends for a reason another agent
    /// could overcome (not installed, authentication, rate limit or quota, model error), each
    /// `"codex"`, `"claude:opus"` or `{"provider", "model"}`; the result lists every attempt.
    #[serde(default)]
    #[schemars(with = "Vec<AgentChoiceWire>", length(max = 4))]
    pub fallback: Vec<AgentChoice>,
    /// 2 to 5 agents that run the task at once, each in its own worktree; the winner is judged
    /// by ground truth (verification passed, fewer issues, smaller diff, less time) and left
    /// ready to apply. Needs `suggested_commands`; `model` is then left out, and `provider`
    /// is the first candidate's.
    #[serde(default)]
    #[schemars(with = "Vec<AgentChoiceWire>", length(max = 5))]
    pub best_of: Vec<AgentChoice>,
    /// With `best_of`: keep every candidate's worktree, not only the winner's.
    #[serde(default)]
    pub keep_all: bool,
    /// Most input + output tokens one attempt may use, as the agent reports them (cache reads
    /// apart); over it the attempt ends with `budget_exceeded`, resumable with a larger budget.
    #[serde(default)]
    #[schemars(range(min = 100, max = 1_000_000_000))]
    pub max_tokens: Option<u64>,
}

/// How the schema shows one agent of `fallback` / `best_of`: a string or an object.
#[derive(schemars::JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum AgentChoiceWire {
    /// `"codex"` or `"claude:opus"`: the provider, then the model after the first `:`.
    Name(String),
    /// The provider and its model.
    Choice(AgentChoice),
}

/// The request's fields for several agents and tokens, parsed together.
struct Several {
    fallback: Vec<AgentChoice>,
    best_of: Vec<AgentChoice>,
    keep_all: bool,
    max_tokens: Option<u64>,
}

/// A model name's rules (those of `model`): not empty, not too long, no leading `-`, no
/// whitespace or control characters.
fn model_name(s: &str) -> Result<(), String> {
    if s.is_empty() {
        Err("must not be empty (leave it out instead)".to_owned())
    } else if s.chars().count() > NAME_MAX {
        Err(format!("is longer than {NAME_MAX} characters"))
    } else if s.starts_with('-') {
        Err("must not start with '-' (the agent CLI would read it as an option)".to_owned())
    } else if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Err("must not contain whitespace or control characters".to_owned())
    } else {
        Ok(())
    }
}

/// Host facts plus policy for the checks that need the file system: `repo_root` must exist, be a
/// directory and lie under one of `allowed_roots` (an empty list allows any directory), and
/// `files_of_interest` must not leave the repository through a symlink.
#[derive(Clone, Copy)]
pub struct HostCheck<'a> {
    /// How to ask the host about paths.
    pub facts: &'a dyn PathFacts,
    /// Directories under which a repo_root may lie.
    pub allowed_roots: &'a [PathBuf],
}

impl std::fmt::Debug for HostCheck<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostCheck")
            .field("allowed_roots", &self.allowed_roots)
            .finish_non_exhaustive()
    }
}

const FIELDS: &[&str] = &[
    "task_id",
    "objective",
    "instructions",
    "context",
    "constraints",
    "acceptance_criteria",
    "execution_mode",
    "suggested_commands",
    "max_runtime_seconds",
    "notes_for_human",
    "autonomy",
    "model",
    "reasoning_effort",
    "session_id",
    "provider",
    "sandbox_writable",
    "isolation",
    "setup_commands",
    "worktree_copy",
    "fallback",
    "best_of",
    "keep_all",
    "max_tokens",
];
const CONTEXT_FIELDS: &[&str] = &["repo_root", "files_of_interest"];

impl ExecutionRequest {
    /// Parse a request from JSON text, checking every rule, host rules included when `host` is
    /// given.
    ///
    /// # Errors
    /// Every violation found, each with its JSON path.
    pub fn from_json(text: &str, host: Option<HostCheck<'_>>) -> Result<Self, Violations> {
        match serde_json::from_str::<Value>(text) {
            Ok(v) => Self::from_value(&v, host),
            Err(e) => Err(Violations(vec![Violation::new(
                "$",
                format!("not valid JSON: {e}"),
            )])),
        }
    }

    /// Parse a request from a JSON value; see [`ExecutionRequest::from_json`].
    ///
    /// # Errors
    /// Every violation found, each with its JSON path.
    pub fn from_value(value: &Value, host: Option<HostCheck<'_>>) -> Result<Self, Violations> {
        let mut p = Parser { out: Vec::new() };
        let req = p.request(value, host);
        match req {
            Some(r) if p.out.is_empty() => Ok(r),
            _ => {
                if p.out.is_empty() {
                    p.out.push(Violation::new("$", "invalid request"));
                }
                Err(Violations(p.out))
            }
        }
    }

    /// The autonomy this request runs with: the requested one (or the mode's default), capped at
    /// `max`.
    pub fn effective_autonomy(&self, max: Autonomy) -> Autonomy {
        self.autonomy
            .unwrap_or_else(|| self.execution_mode.default_autonomy())
            .min(max)
    }
}

impl<'de> serde::Deserialize<'de> for ExecutionRequest {
    /// Shape rules only (no host checks): for reading back a request that was accepted before.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        Self::from_value(&v, None).map_err(serde::de::Error::custom)
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

struct Parser {
    out: Vec<Violation>,
}

impl Parser {
    fn bad(&mut self, path: impl Into<String>, msg: impl Into<String>) {
        self.out.push(Violation::new(path, msg));
    }

    fn unknown(&mut self, obj: &Map<String, Value>, base: &str, allowed: &[&str]) {
        for k in obj.keys() {
            if !allowed.contains(&k.as_str()) {
                self.bad(
                    format!("{base}.{k}"),
                    format!(
                        "unknown field {k:?}; allowed fields: {}",
                        allowed.join(", ")
                    ),
                );
            }
        }
    }

    /// A string field; `None` when absent or null (and not required), or when it is the wrong type.
    fn string<'v>(
        &mut self,
        obj: &'v Map<String, Value>,
        key: &str,
        base: &str,
        required: bool,
    ) -> Option<&'v str> {
        match obj.get(key) {
            None | Some(Value::Null) => {
                if required {
                    self.bad(format!("{base}.{key}"), "is required");
                }
                None
            }
            Some(Value::String(s)) => Some(s),
            Some(other) => {
                self.bad(
                    format!("{base}.{key}"),
                    format!("must be a string, got {}", type_name(other)),
                );
                None
            }
        }
    }

    fn typed<T: TryFrom<String, Error = String>>(
        &mut self,
        obj: &Map<String, Value>,
        key: &str,
        base: &str,
        required: bool,
    ) -> Option<T> {
        let s = self.string(obj, key, base, required)?;
        match T::try_from(s.to_owned()) {
            Ok(v) => Some(v),
            Err(e) => {
                self.bad(format!("{base}.{key}"), e);
                None
            }
        }
    }

    fn list<T: TryFrom<String, Error = String>>(
        &mut self,
        obj: &Map<String, Value>,
        key: &str,
        max: usize,
    ) -> Vec<T> {
        let path = format!("$.{key}");
        let items = match obj.get(key) {
            None | Some(Value::Null) => return Vec::new(),
            Some(Value::Array(a)) => a,
            Some(Value::String(_)) => {
                self.bad(
                    path,
                    "must be an array of strings, got a string; wrap it in [ ]",
                );
                return Vec::new();
            }
            Some(other) => {
                self.bad(
                    path,
                    format!("must be an array of strings, got {}", type_name(other)),
                );
                return Vec::new();
            }
        };
        if items.len() > max {
            self.bad(
                path.clone(),
                format!("has {} items; the limit is {max}", items.len()),
            );
        }
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            match item {
                Value::String(s) => match T::try_from(s.clone()) {
                    Ok(v) => out.push(v),
                    Err(e) => self.bad(format!("{path}[{i}]"), e),
                },
                other => self.bad(
                    format!("{path}[{i}]"),
                    format!("must be a string, got {}", type_name(other)),
                ),
            }
        }
        out
    }

    fn enumeration<T: serde::de::DeserializeOwned>(
        &mut self,
        obj: &Map<String, Value>,
        key: &str,
        allowed: &str,
    ) -> Option<T> {
        let v = obj.get(key)?;
        if v.is_null() {
            return None;
        }
        match serde_json::from_value::<T>(v.clone()) {
            Ok(t) => Some(t),
            Err(_) => {
                self.bad(
                    format!("$.{key}"),
                    format!("must be one of {allowed}, got {v}"),
                );
                None
            }
        }
    }

    fn name(&mut self, obj: &Map<String, Value>, key: &str) -> Option<String> {
        let s = self.string(obj, key, "$", false)?;
        let path = format!("$.{key}");
        if s.is_empty() {
            self.bad(path, "must not be empty (leave it out instead)");
            return None;
        }
        if s.chars().count() > NAME_MAX {
            self.bad(path, format!("is longer than {NAME_MAX} characters"));
            return None;
        }
        if s.starts_with('-') {
            self.bad(
                path,
                "must not start with '-' (droid would read it as an option)",
            );
            return None;
        }
        if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
            self.bad(path, "must not contain whitespace or control characters");
            return None;
        }
        Some(s.to_owned())
    }

    fn request(&mut self, value: &Value, host: Option<HostCheck<'_>>) -> Option<ExecutionRequest> {
        let Value::Object(obj) = value else {
            self.bad(
                "$",
                format!("must be a JSON object, got {}", type_name(value)),
            );
            return None;
        };
        self.unknown(obj, "$", FIELDS);

        let task_id = self.typed::<TaskId>(obj, "task_id", "$", false);
        let objective = self.typed::<Objective>(obj, "objective", "$", true);
        let instructions = match self.string(obj, "instructions", "$", false) {
            None => Some(Instructions::default()),
            Some(s) => match Instructions::try_from(s.to_owned()) {
                Ok(v) => Some(v),
                Err(e) => {
                    self.bad("$.instructions", e);
                    None
                }
            },
        };
        let context = self.context(obj, host);
        let constraints = self.list::<ListItem>(obj, "constraints", MAX_LIST_ITEMS);
        let acceptance_criteria = self.list::<ListItem>(obj, "acceptance_criteria", MAX_LIST_ITEMS);
        let execution_mode = self
            .enumeration::<ExecutionMode>(obj, "execution_mode", "\"code\", \"command\", \"mixed\"")
            .unwrap_or_default();
        let suggested_commands = self.list::<ShellCommand>(obj, "suggested_commands", MAX_COMMANDS);
        let max_runtime_seconds = match obj.get("max_runtime_seconds") {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) => match n.as_u64() {
                Some(u) => match Runtime::try_from(u) {
                    Ok(r) => Some(r),
                    Err(e) => {
                        self.bad("$.max_runtime_seconds", e);
                        None
                    }
                },
                None => {
                    self.bad(
                        "$.max_runtime_seconds",
                        format!("must be a whole number of seconds from 1 to 86400, got {n}"),
                    );
                    None
                }
            },
            Some(other) => {
                self.bad(
                    "$.max_runtime_seconds",
                    format!(
                        "must be a whole number of seconds, got {}",
                        type_name(other)
                    ),
                );
                None
            }
        };
        let notes_for_human = self
            .string(obj, "notes_for_human", "$", false)
            .map(str::to_owned);
        if let Some(n) = &notes_for_human
            && n.chars().count() > NOTES_MAX
        {
            self.bad(
                "$.notes_for_human",
                format!("is longer than {NOTES_MAX} characters"),
            );
        }
        let autonomy = self.enumeration::<Autonomy>(
            obj,
            "autonomy",
            "\"read_only\", \"low\", \"medium\", \"high\"",
        );
        let model = self.name(obj, "model");
        let reasoning_effort = self
            .string(obj, "reasoning_effort", "$", false)
            .and_then(|s| {
                if REASONING_EFFORTS.contains(&s) {
                    Some(s.to_owned())
                } else {
                    self.bad(
                        "$.reasoning_effort",
                        format!("must be one of {}, got {s:?}", REASONING_EFFORTS.join(", ")),
                    );
                    None
                }
            });
        let session_id = self.name(obj, "session_id");
        let provider = self
            .enumeration::<ProviderId>(obj, "provider", &ProviderId::choices())
            .unwrap_or_default();
        let sandbox_writable = self.list::<RepoRoot>(obj, "sandbox_writable", MAX_WRITABLE);
        if let Some(host) = host {
            for (i, dir) in sandbox_writable.iter().enumerate() {
                if let Some(problem) = host.repo_root_problem(dir.as_path()) {
                    self.bad(format!("$.sandbox_writable[{i}]"), problem);
                }
            }
        }

        let isolation = self.enumeration::<Isolation>(obj, "isolation", "\"none\", \"worktree\"");
        let setup_commands = self.list::<ShellCommand>(obj, "setup_commands", MAX_COMMANDS);
        let worktree_copy = self.list::<RelPath>(obj, "worktree_copy", MAX_WORKTREE_COPY);
        if isolation == Some(Isolation::None) {
            for (key, given) in [
                ("setup_commands", !setup_commands.is_empty()),
                ("worktree_copy", !worktree_copy.is_empty()),
            ] {
                if given {
                    self.bad(
                        format!("$.{key}"),
                        "applies only to isolation \"worktree\" (this request asks for \"none\")",
                    );
                }
            }
        }

        let several = self.several(obj, provider, model.as_deref(), &suggested_commands);
        let isolated_by_best_of = !several.best_of.is_empty();
        if isolated_by_best_of {
            if isolation == Some(Isolation::None) {
                self.bad(
                    "$.isolation",
                    "must not be \"none\" with best_of: each candidate runs in a worktree of its own",
                );
            }
            if session_id.is_some() {
                self.bad(
                    "$.session_id",
                    "cannot go with best_of: a session belongs to one agent (resume the winner's \
                     task alone)",
                );
            }
        }

        // with best_of, the request's provider is its first candidate's (task ids start with it)
        let provider = several.best_of.first().map_or(provider, |c| c.provider);
        Some(ExecutionRequest {
            task_id,
            objective: objective?,
            instructions: instructions?,
            context: context?,
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
            sandbox_writable,
            isolation,
            setup_commands,
            worktree_copy,
            fallback: several.fallback,
            best_of: several.best_of,
            keep_all: several.keep_all,
            max_tokens: several.max_tokens,
        })
    }

    /// `fallback`, `best_of`, `keep_all` and `max_tokens`, with their rules.
    fn several(
        &mut self,
        obj: &Map<String, Value>,
        provider: ProviderId,
        model: Option<&str>,
        suggested_commands: &[ShellCommand],
    ) -> Several {
        let fallback = self.agents(obj, "fallback", MAX_FALLBACK);
        let best_of = self.agents(obj, "best_of", MAX_BEST_OF);
        let primary = AgentChoice {
            provider,
            model: model.map(str::to_owned),
        };
        for (i, a) in fallback.iter().enumerate() {
            if *a == primary {
                self.bad(
                    format!("$.fallback[{i}]"),
                    format!(
                        "is the request's own agent ({}); a fallback must be another",
                        a.label()
                    ),
                );
            }
        }
        if !best_of.is_empty() {
            if best_of.len() < MIN_BEST_OF {
                self.bad(
                    "$.best_of",
                    format!(
                        "has {} agent; best_of needs {MIN_BEST_OF} to {MAX_BEST_OF} (for one agent, \
                         name it in provider and model)",
                        best_of.len()
                    ),
                );
            }
            if !fallback.is_empty() {
                self.bad(
                    "$.fallback",
                    "cannot go with best_of: best_of already runs several agents (choose one)",
                );
            }
            if suggested_commands.is_empty() {
                self.bad(
                    "$.best_of",
                    "needs suggested_commands: the candidates are judged by the verification \
                     commands droid-executor re-runs, and without any there is nothing to judge by",
                );
            }
            if let Some(first) = best_of.first()
                && obj.get("provider").is_some_and(|v| !v.is_null())
                && provider != first.provider
            {
                self.bad(
                    "$.provider",
                    format!(
                        "is the first best_of candidate's ({}) with best_of; leave it out",
                        first.provider.as_str()
                    ),
                );
            }
            if model.is_some() {
                self.bad(
                    "$.model",
                    "must be left out with best_of: each candidate names its own model",
                );
            }
        }
        let keep_all = match obj.get("keep_all") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                self.bad(
                    "$.keep_all",
                    format!("must be true or false, got {}", type_name(other)),
                );
                false
            }
        };
        if keep_all && best_of.is_empty() {
            self.bad("$.keep_all", "applies only to best_of");
        }
        let max_tokens = match obj.get("max_tokens") {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) => match n.as_u64() {
                Some(u) if (MIN_TOKEN_BUDGET..=MAX_TOKEN_BUDGET).contains(&u) => Some(u),
                _ => {
                    self.bad(
                        "$.max_tokens",
                        format!(
                            "must be a whole number of tokens from {MIN_TOKEN_BUDGET} to \
                             {MAX_TOKEN_BUDGET}, got {n}"
                        ),
                    );
                    None
                }
            },
            Some(other) => {
                self.bad(
                    "$.max_tokens",
                    format!("must be a whole number of tokens, got {}", type_name(other)),
                );
                None
            }
        };
        Several {
            fallback,
            best_of,
            keep_all,
            max_tokens,
        }
    }

    /// A list of agents (`fallback`, `best_of`): each a string `provider[:model]` or an object
    /// `{provider, model}`, none twice.
    fn agents(&mut self, obj: &Map<String, Value>, key: &str, max: usize) -> Vec<AgentChoice> {
        let path = format!("$.{key}");
        let items = match obj.get(key) {
            None | Some(Value::Null) => return Vec::new(),
            Some(Value::Array(a)) => a,
            Some(other) => {
                self.bad(
                    path,
                    format!(
                        "must be a list of agents (\"codex\", \"claude:opus\" or {{\"provider\", \
                         \"model\"}}), got {}",
                        type_name(other)
                    ),
                );
                return Vec::new();
            }
        };
        if items.len() > max {
            self.bad(
                path.clone(),
                format!("has {} agents; the limit is {max}", items.len()),
            );
        }
        let mut out: Vec<AgentChoice> = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let at = format!("{path}[{i}]");
            let choice = match item {
                Value::String(s) => AgentChoice::parse(s),
                Value::Object(o) => self.agent_object(o, &at),
                other => Err(format!(
                    "must be a string (\"claude:opus\") or an object {{\"provider\", \"model\"}}, \
                     got {}",
                    type_name(other)
                )),
            };
            match choice {
                Ok(c) => {
                    if let Some(m) = &c.model
                        && let Err(e) = model_name(m)
                    {
                        self.bad(format!("{at}.model"), e);
                    } else if out.contains(&c) {
                        self.bad(at, format!("names {} twice", c.label()));
                    } else {
                        out.push(c);
                    }
                }
                Err(e) => self.bad(at, e),
            }
        }
        out
    }

    fn agent_object(&mut self, o: &Map<String, Value>, at: &str) -> Result<AgentChoice, String> {
        self.unknown(o, at, &["provider", "model"]);
        let provider = match o.get("provider") {
            Some(Value::String(p)) => ProviderId::parse(p).ok_or_else(|| {
                format!(
                    "provider {p:?} is unknown; one of {}",
                    ProviderId::choices()
                )
            })?,
            None | Some(Value::Null) => return Err("needs a provider".to_owned()),
            Some(other) => {
                return Err(format!(
                    "provider must be a string, got {}",
                    type_name(other)
                ));
            }
        };
        let model = match o.get("model") {
            None | Some(Value::Null) => None,
            Some(Value::String(m)) => Some(m.clone()),
            Some(other) => {
                return Err(format!("model must be a string, got {}", type_name(other)));
            }
        };
        Ok(AgentChoice { provider, model })
    }

    fn context(
        &mut self,
        obj: &Map<String, Value>,
        host: Option<HostCheck<'_>>,
    ) -> Option<Context> {
        let ctx = match obj.get("context") {
            None | Some(Value::Null) => {
                self.bad("$.context", "is required: {\"repo_root\": \"/abs/path\"}");
                return None;
            }
            Some(Value::Object(o)) => o,
            Some(Value::String(_)) => {
                self.bad(
                    "$.context",
                    "must be an object, got a string; write {\"repo_root\": \"/abs/path\", \"files_of_interest\": [\"src/x.rs\"]}",
                );
                return None;
            }
            Some(other) => {
                self.bad(
                    "$.context",
                    format!(
                        "must be an object {{\"repo_root\", \"files_of_interest\"}}, got {}",
                        type_name(other)
                    ),
                );
                return None;
            }
        };
        self.unknown(ctx, "$.context", CONTEXT_FIELDS);
        let root = self.typed::<RepoRoot>(ctx, "repo_root", "$.context", true);
        if let (Some(root), Some(host)) = (&root, host) {
            self.host_root(root, host);
        }
        let mut files = Vec::new();
        match ctx.get("files_of_interest") {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                if items.len() > MAX_FILES {
                    self.bad(
                        "$.context.files_of_interest",
                        format!("has {} items; the limit is {MAX_FILES}", items.len()),
                    );
                }
                for (i, item) in items.iter().enumerate() {
                    let path = format!("$.context.files_of_interest[{i}]");
                    let Value::String(s) = item else {
                        self.bad(path, format!("must be a string, got {}", type_name(item)));
                        continue;
                    };
                    match RelPath::parse(s, root.as_ref()) {
                        Ok(rel) => {
                            if let (Some(root), Some(host)) = (&root, host)
                                && let Some(msg) = symlink_escape(root, &rel, host.facts)
                            {
                                self.bad(path, msg);
                                continue;
                            }
                            files.push(rel);
                        }
                        Err(e) => self.bad(path, e),
                    }
                }
            }
            Some(other) => self.bad(
                "$.context.files_of_interest",
                format!("must be an array of paths, got {}", type_name(other)),
            ),
        }
        Some(Context {
            repo_root: root?,
            files_of_interest: files,
        })
    }

    fn host_root(&mut self, root: &RepoRoot, host: HostCheck<'_>) {
        if let Some(problem) = host.repo_root_problem(root.as_path()) {
            self.bad("$.context.repo_root", problem);
        }
    }
}

impl HostCheck<'_> {
    /// Why `root` cannot be a repo_root on this host, `None` when it can: it must exist, be a
    /// directory and (symlinks resolved) lie under one of `allowed_roots`. The engine asks
    /// again, on the resolved path, when a queued run starts.
    pub fn repo_root_problem(&self, root: &Path) -> Option<String> {
        match self.facts.kind(root) {
            PathKind::Dir => {}
            PathKind::Missing => return Some(format!("{root:?} does not exist")),
            PathKind::File | PathKind::Other => {
                return Some(format!("{root:?} is not a directory"));
            }
        }
        if self.allowed_roots.is_empty() {
            return None;
        }
        let real = self
            .facts
            .canonical(root)
            .unwrap_or_else(|| root.to_path_buf());
        let inside = self.allowed_roots.iter().any(|allowed| {
            let allowed = self
                .facts
                .canonical(allowed)
                .unwrap_or_else(|| allowed.clone());
            real.starts_with(&allowed)
        });
        if inside {
            return None;
        }
        let list: Vec<String> = self
            .allowed_roots
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        Some(format!(
            "{root:?} is outside the allowed roots ({}); add it to allowed_roots in the config",
            list.join(", ")
        ))
    }
}

/// When `rel`'s real location (symlinks resolved) is outside the real repo root. A path that does
/// not exist (yet) is judged by its nearest existing ancestor inside the repository:
/// `link/new.rs`, where `link` leads out of the repository, escapes as much as `link` does.
fn symlink_escape(root: &RepoRoot, rel: &RelPath, facts: &dyn PathFacts) -> Option<String> {
    let full = root.as_path().join(rel.as_path());
    let (real, rest) = full
        .ancestors()
        .take_while(|a| a.starts_with(root.as_path()))
        .find_map(|a| Some((facts.canonical(a)?, full.strip_prefix(a).ok()?)))?;
    let real = if rest.as_os_str().is_empty() {
        real
    } else {
        real.join(rest)
    };
    let real_root = facts
        .canonical(root.as_path())
        .unwrap_or_else(|| root.as_path().to_path_buf());
    if real.starts_with(&real_root) {
        None
    } else {
        Some(format!(
            "{:?} leads outside repo_root (to {:?}) through a symlink",
            rel.as_path(),
            real
        ))
    }
}

#[cfg(test)]
mod tests;
