use std::collections::HashMap;
use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

/// A host made of a table: path → (kind, canonical form).
#[derive(Default)]
struct Table(HashMap<PathBuf, (PathKind, PathBuf)>);

impl Table {
    fn dir(mut self, p: &str) -> Self {
        self.0.insert(p.into(), (PathKind::Dir, p.into()));
        self
    }
    fn link(mut self, p: &str, to: &str, kind: PathKind) -> Self {
        self.0.insert(p.into(), (kind, to.into()));
        self
    }
}

impl PathFacts for Table {
    fn kind(&self, path: &Path) -> PathKind {
        self.0.get(path).map_or(PathKind::Missing, |(k, _)| *k)
    }
    fn canonical(&self, path: &Path) -> Option<PathBuf> {
        self.0.get(path).map(|(_, c)| c.clone())
    }
}

fn violations(v: serde_json::Value, host: Option<HostCheck<'_>>) -> Vec<(String, String)> {
    match ExecutionRequest::from_value(&v, host) {
        Ok(_) => Vec::new(),
        Err(e) => e.0.into_iter().map(|v| (v.path, v.message)).collect(),
    }
}

fn paths(v: serde_json::Value) -> Vec<String> {
    violations(v, None).into_iter().map(|(p, _)| p).collect()
}

#[test]
fn a_minimal_request_parses_with_defaults() {
    let r = ExecutionRequest::from_value(
        &json!({"objective": "add a test", "context": {"repo_root": "/repo"}}),
        None,
    )
    .unwrap();
    assert_eq!(r.execution_mode, ExecutionMode::Mixed);
    assert_eq!(r.instructions.as_str(), "");
    assert_eq!(r.max_runtime_seconds, None);
    assert_eq!(r.effective_autonomy(Autonomy::Medium), Autonomy::Medium);
    assert_eq!(
        serde_json::to_value(&r).unwrap(),
        json!({
            "task_id": null, "objective": "add a test", "instructions": "",
            "context": {"repo_root": "/repo", "files_of_interest": []},
            "constraints": [], "acceptance_criteria": [], "execution_mode": "mixed",
            "suggested_commands": [], "max_runtime_seconds": null, "notes_for_human": null,
            "autonomy": null, "model": null, "reasoning_effort": null, "session_id": null,
            "provider": "droid", "sandbox_writable": [], "isolation": null,
            "setup_commands": [], "worktree_copy": [], "fallback": [], "best_of": [],
            "keep_all": false, "max_tokens": null
        })
    );
}

#[test]
fn isolation_and_its_fields_parse_and_are_refused_in_place() {
    let r = ExecutionRequest::from_value(
        &json!({"objective": "x", "context": {"repo_root": "/repo"}, "isolation": "worktree",
                "setup_commands": ["npm ci"], "worktree_copy": [".env", "conf/local.toml"]}),
        None,
    )
    .unwrap();
    assert_eq!(r.isolation, Some(crate::Isolation::Worktree));
    assert_eq!(r.setup_commands.len(), 1);
    assert_eq!(r.worktree_copy.len(), 2);
    assert_eq!(
        violations(
            json!({"objective": "x", "context": {"repo_root": "/repo"}, "isolation": "none",
                   "setup_commands": ["npm ci"], "worktree_copy": ["../up"]}),
            None,
        ),
        vec![
            (
                "$.worktree_copy[0]".to_string(),
                "\"../up\" escapes repo_root through '..'".to_string()
            ),
            (
                "$.setup_commands".to_string(),
                "applies only to isolation \"worktree\" (this request asks for \"none\")"
                    .to_string()
            ),
        ]
    );
    assert_eq!(
        violations(
            json!({"objective": "x", "context": {"repo_root": "/repo"}, "isolation": "docker"}),
            None,
        ),
        vec![(
            "$.isolation".to_string(),
            "must be one of \"none\", \"worktree\", got \"docker\"".to_string()
        )]
    );
}

#[test]
fn every_violation_is_reported_at_once() {
    let got = violations(
        json!({
            "objective": "   ",
            "instructions": "x".repeat(100_001),
            "context": {"repo_root": "relative/dir", "files_of_interest": ["../up", 3], "extra": 1},
            "constraints": "not a list",
            "execution_mode": "yolo",
            "max_runtime_seconds": 0,
            "surprise": true,
            "model": "-x",
            "reasoning_effort": "extreme"
        }),
        None,
    );
    let got: Vec<&str> = got.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        got,
        vec![
            "$.surprise",
            "$.objective",
            "$.instructions",
            "$.context.extra",
            "$.context.repo_root",
            "$.context.files_of_interest[0]",
            "$.context.files_of_interest[1]",
            "$.constraints",
            "$.execution_mode",
            "$.max_runtime_seconds",
            "$.model",
            "$.reasoning_effort",
        ]
    );
}

#[test]
fn messages_name_the_problem() {
    let got = violations(
        json!({"objective": "x".repeat(50_001), "context": "/repo", "bogus": 1}),
        None,
    );
    assert_eq!(
        got,
        vec![
            (
                "$.bogus".to_string(),
                "unknown field \"bogus\"; allowed fields: task_id, objective, instructions, context, constraints, acceptance_criteria, execution_mode, suggested_commands, max_runtime_seconds, notes_for_human, autonomy, model, reasoning_effort, session_id, provider, sandbox_writable, isolation, setup_commands, worktree_copy, fallback, best_of, keep_all, max_tokens".to_string()
            ),
            (
                "$.objective".to_string(),
                "is 50001 characters; the limit is 50000".to_string()
            ),
            (
                "$.context".to_string(),
                "must be an object, got a string; write {\"repo_root\": \"/abs/path\", \"files_of_interest\": [\"src/x.rs\"]}".to_string()
            ),
        ]
    );
}

#[test]
fn missing_required_fields() {
    assert_eq!(paths(json!({})), vec!["$.objective", "$.context"]);
    assert_eq!(
        paths(json!({"objective": "o", "context": {}})),
        vec!["$.context.repo_root"]
    );
    assert_eq!(paths(json!([1])), vec!["$"]);
    assert_eq!(
        ExecutionRequest::from_json("{not json", None)
            .unwrap_err()
            .0[0]
            .path,
        "$"
    );
}

#[test]
fn list_limits() {
    let many: Vec<String> = (0..101).map(|i| format!("c{i}")).collect();
    let cmds: Vec<String> = (0..51).map(|i| format!("echo {i}")).collect();
    assert_eq!(
        paths(json!({"objective": "o", "context": {"repo_root": "/r"},
                     "constraints": many, "acceptance_criteria": ["", "x".repeat(2001)],
                     "suggested_commands": cmds})),
        vec![
            "$.constraints",
            "$.acceptance_criteria[0]",
            "$.acceptance_criteria[1]",
            "$.suggested_commands"
        ]
    );
}

#[test]
fn host_checks_repo_root_and_symlinks() {
    let host = Table::default()
        .dir("/home/u/repo")
        .dir("/home/u")
        .dir("/elsewhere")
        .link("/home/u/repo/link", "/etc/passwd", PathKind::File)
        .link("/home/u/repo/ok", "/home/u/repo/src/ok.rs", PathKind::File)
        .link(
            "/home/u/repo/file.txt",
            "/home/u/repo/file.txt",
            PathKind::File,
        );
    let roots = [PathBuf::from("/home/u")];
    let check = HostCheck {
        facts: &host,
        allowed_roots: &roots,
    };
    let got = violations(
        json!({"objective": "o", "context": {"repo_root": "/home/u/repo",
               "files_of_interest": ["link", "ok", "new/file.rs"]}}),
        Some(check),
    );
    assert_eq!(
        got,
        vec![(
            "$.context.files_of_interest[0]".to_string(),
            "\"link\" leads outside repo_root (to \"/etc/passwd\") through a symlink".to_string()
        )]
    );
    let missing = violations(
        json!({"objective": "o", "context": {"repo_root": "/home/u/nope"}}),
        Some(check),
    );
    assert_eq!(
        missing,
        vec![(
            "$.context.repo_root".to_string(),
            "\"/home/u/nope\" does not exist".to_string()
        )]
    );
    let outside = paths_with(
        json!({"objective": "o", "context": {"repo_root": "/elsewhere"}}),
        check,
    );
    assert_eq!(outside, vec!["$.context.repo_root"]);
    let file = paths_with(
        json!({"objective": "o", "context": {"repo_root": "/home/u/repo/file.txt"}}),
        check,
    );
    assert_eq!(file, vec!["$.context.repo_root"]);
}

fn paths_with(v: serde_json::Value, check: HostCheck<'_>) -> Vec<String> {
    violations(v, Some(check))
        .into_iter()
        .map(|(p, _)| p)
        .collect()
}

#[test]
fn autonomy_is_capped_and_defaults_by_mode() {
    let base = json!({"objective": "o", "context": {"repo_root": "/r"}, "execution_mode": "code"});
    let r = ExecutionRequest::from_value(&base, None).unwrap();
    assert_eq!(r.effective_autonomy(Autonomy::High), Autonomy::Low);
    let mut high = base.clone();
    high["autonomy"] = json!("high");
    let r = ExecutionRequest::from_value(&high, None).unwrap();
    assert_eq!(r.effective_autonomy(Autonomy::Medium), Autonomy::Medium);
    assert_eq!(r.effective_autonomy(Autonomy::High), Autonomy::High);
}

#[test]
fn round_trips_through_serde() {
    let v = json!({"task_id": "T-1", "objective": "o", "instructions": "i",
                   "context": {"repo_root": "/r/./x", "files_of_interest": ["/r/x/a.rs", "b/../c.rs"]},
                   "constraints": ["c"], "acceptance_criteria": ["a"], "execution_mode": "command",
                   "suggested_commands": ["make test"], "max_runtime_seconds": 30,
                   "notes_for_human": "n", "autonomy": "low", "model": "custom:M-0",
                   "reasoning_effort": "high", "session_id": "s-1"});
    let r = ExecutionRequest::from_value(&v, None).unwrap();
    assert_eq!(r.context.files_of_interest[0].as_path(), Path::new("a.rs"));
    assert_eq!(r.context.files_of_interest[1].as_path(), Path::new("c.rs"));
    let back: ExecutionRequest = serde_json::from_value(serde_json::to_value(&r).unwrap()).unwrap();
    assert_eq!(back, r);
    // a background task's supervisor re-parses the serialized form with the full rules
    let reparsed = ExecutionRequest::from_value(&serde_json::to_value(&r).unwrap(), None).unwrap();
    assert_eq!(reparsed, r);
    let minimal = ExecutionRequest::from_value(
        &json!({"objective": "o", "context": {"repo_root": "/r"}}),
        None,
    )
    .unwrap();
    let wire = serde_json::to_value(&minimal).unwrap();
    assert_eq!(
        ExecutionRequest::from_value(&wire, None).unwrap(),
        minimal,
        "{wire}"
    );
}

mod props {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Any objective within the rules parses, any outside them is reported at `$.objective`.
        #[test]
        fn objective_rule(s in "\\PC{0,60}") {
            let v = json!({"objective": s, "context": {"repo_root": "/r"}});
            let res = ExecutionRequest::from_value(&v, None);
            prop_assert_eq!(res.is_ok(), !s.trim().is_empty());
            if let Err(e) = res {
                prop_assert_eq!(e.0.len(), 1);
                prop_assert_eq!(e.0[0].path.as_str(), "$.objective");
            }
        }

        /// files_of_interest never contain a path that climbs out of the repository.
        #[test]
        fn files_never_escape(parts in proptest::collection::vec(prop_oneof!["..", ".", "a", "b"], 1..6)) {
            let p = parts.join("/");
            let v = json!({"objective": "o", "context": {"repo_root": "/r", "files_of_interest": [p]}});
            if let Ok(r) = ExecutionRequest::from_value(&v, None) {
                let rel = r.context.files_of_interest[0].as_path();
                prop_assert!(!rel.components().any(|c| matches!(c, std::path::Component::ParentDir)));
                prop_assert!(!rel.is_absolute());
            }
        }

        /// Parsing never panics and always reports at least one violation on failure, whatever the
        /// shape of the value.
        #[test]
        fn arbitrary_json_never_panics(v in arb_json()) {
            if let Err(e) = ExecutionRequest::from_value(&v, None) {
                prop_assert!(!e.0.is_empty());
            }
        }

        /// The runtime rule: 1..=86400 parses, anything else is reported.
        #[test]
        fn runtime_rule(n in proptest::num::i64::ANY) {
            let v = json!({"objective": "o", "context": {"repo_root": "/r"}, "max_runtime_seconds": n});
            prop_assert_eq!(ExecutionRequest::from_value(&v, None).is_ok(), (1..=86_400).contains(&n));
        }
    }

    fn arb_json() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            "[a-z/ ]{0,8}".prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(3, 24, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
                proptest::collection::hash_map(
                    prop_oneof![
                        "objective",
                        "context",
                        "repo_root",
                        "files_of_interest",
                        "constraints",
                        "x"
                    ],
                    inner,
                    0..4
                )
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }
}

#[test]
fn several_agents_parse_in_both_forms_and_round_trip() {
    let r = ExecutionRequest::from_value(
        &json!({"objective": "x", "context": {"repo_root": "/repo"}, "provider": "droid",
                "fallback": ["codex", {"provider": "claude", "model": "opus"}, "droid:custom:M-0"],
                "max_tokens": 2000}),
        None,
    )
    .unwrap();
    assert_eq!(
        r.fallback
            .iter()
            .map(AgentChoice::label)
            .collect::<Vec<_>>(),
        ["codex", "claude:opus", "droid:custom:M-0"]
    );
    assert_eq!(r.max_tokens, Some(2000));
    let again = ExecutionRequest::from_value(&serde_json::to_value(&r).unwrap(), None).unwrap();
    assert_eq!(again, r);

    let b = ExecutionRequest::from_value(
        &json!({"objective": "x", "context": {"repo_root": "/repo"},
                "best_of": ["codex", "claude"], "keep_all": true, "suggested_commands": ["make test"]}),
        None,
    )
    .unwrap();
    assert_eq!(b.best_of.len(), 2);
    assert!(b.keep_all);
    let again = ExecutionRequest::from_value(&serde_json::to_value(&b).unwrap(), None).unwrap();
    assert_eq!(again, b);
}

#[test]
fn several_agents_are_refused_with_their_reasons() {
    let paths = |v: serde_json::Value| -> Vec<(String, String)> {
        ExecutionRequest::from_value(&v, None)
            .unwrap_err()
            .0
            .into_iter()
            .map(|v| (v.path, v.message))
            .collect()
    };
    let got = paths(json!({"objective": "x", "context": {"repo_root": "/repo"},
                           "best_of": ["codex", "claude"]}));
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].0, "$.best_of");
    assert!(got[0].1.contains("needs suggested_commands"), "{got:?}");

    let got = paths(json!({"objective": "x", "context": {"repo_root": "/repo"},
                           "provider": "codex", "fallback": ["codex", "cursor", "claude", "claude"],
                           "keep_all": true, "max_tokens": 5}));
    let at: Vec<&str> = got.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        at,
        [
            "$.fallback[1]",
            "$.fallback[3]",
            "$.fallback[0]",
            "$.keep_all",
            "$.max_tokens"
        ],
        "{got:?}"
    );

    let got = paths(json!({"objective": "x", "context": {"repo_root": "/repo"},
                           "provider": "codex", "model": "m", "isolation": "none",
                           "session_id": "s", "suggested_commands": ["true"],
                           "best_of": ["claude"], "fallback": ["gemini"]}));
    let at: Vec<&str> = got.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        at,
        [
            "$.best_of",
            "$.fallback",
            "$.provider",
            "$.model",
            "$.isolation",
            "$.session_id"
        ],
        "{got:?}"
    );
}
