//! The `droid-executor` binary over real processes: `run` through the real droid and the scripted
//! model, every request flag (checked in what the fake droid records), `--request FILE|-`, invalid
//! requests as `error` results, droid missing, a `DROID_CLI_CMD` with extra words, Ctrl-C, the exit
//! codes, `schema` (the staleness test of `schemas/`), and `doctor`.
//!
//! The binary is run as built by `cargo build -p wrapper-cli` (`cargo xtask test` builds it first),
//! with an empty environment plus exactly what each test gives it. Its `HOME` is a temp dir that
//! holds the repository, since `allowed_roots` defaults to `HOME`.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use droid_contract::{ChangeType, FileChange, Status};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::droid_bin::{real_droid, workspace_root};
use tests::droid_home::DroidHome;
use tests::fake_droid::{RECORD_ENV, SCENARIO_ENV};
use tests::procs::{pids_with_env, wait_gone};
use tests::scripted_model::ScriptedModel;
use tests::temp_dir::TempDir;
use tokio::io::AsyncWriteExt as _;

use super::binary::{NO_DROID_PATH, Out, command, droid_executor, finish, git_repo_at, path_var};
use super::common::read_pid_file;

/// The variable the engine marks every process of a run with.
const MARKER_VAR: &str = "DROID_EXECUTOR_RUN_ID";

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// A HOME for the binary with a git repository in it and a config that passes the fake droid's
/// variables through to droid; `DROID_CLI_CMD` is the fake droid playing `steps`.
struct FakeHome {
    home: TempDir,
}

impl FakeHome {
    fn new(steps: Value) -> FakeHome {
        let home = TempDir::new("cli-home").unwrap();
        let config = home.path().join(".config/droid-executor");
        std::fs::create_dir_all(&config).unwrap();
        // what the fake droid writes for the test goes to `fixture/`, granted to runs
        let fixture = home.path().join("fixture");
        std::fs::create_dir_all(&fixture).unwrap();
        std::fs::write(
            config.join("config.toml"),
            format!(
                "env_passthrough = [\"{SCENARIO_ENV}\", \"{RECORD_ENV}\"]\n\
                 sandbox_writable = [\"{}\"]\n",
                fixture.display()
            ),
        )
        .unwrap();
        let fake = FakeHome { home };
        git_repo_at(&fake.repo(), &[("a.txt", "hello\n")]);
        fake.play(steps);
        fake
    }

    fn path(&self) -> &Path {
        self.home.path()
    }

    fn repo(&self) -> PathBuf {
        self.path().join("repo")
    }

    fn file(&self, name: &str) -> PathBuf {
        self.path().join(name)
    }

    /// A path in the directory runs may write besides the repository.
    fn fixture(&self, name: &str) -> PathBuf {
        self.path().join("fixture").join(name)
    }

    fn play(&self, steps: Value) {
        let scenario = json!({ "steps": steps }).to_string();
        std::fs::write(self.file("scenario.json"), scenario).unwrap();
    }

    fn env(&self) -> Vec<(OsString, OsString)> {
        self.env_with_droid(tests::fake_droid_bin!().into_os_string())
    }

    fn env_with_droid(&self, droid_cli_cmd: OsString) -> Vec<(OsString, OsString)> {
        vec![
            ("HOME".into(), self.path().into()),
            ("PATH".into(), path_var()),
            ("LANG".into(), "C.UTF-8".into()),
            ("DROID_CLI_CMD".into(), droid_cli_cmd),
            (SCENARIO_ENV.into(), self.file("scenario.json").into()),
            (RECORD_ENV.into(), self.fixture("record.json").into()),
        ]
    }

    /// What the fake droid recorded of its last invocation; `None` when it never started.
    fn record(&self) -> Option<Value> {
        let bytes = std::fs::read(self.fixture("record.json")).ok()?;
        Some(serde_json::from_slice(&bytes).unwrap())
    }

    async fn run<S: AsRef<OsStr>>(&self, args: &[S]) -> Out {
        droid_executor(args, &self.env(), self.path()).await
    }
}

fn argv(record: &Value) -> Vec<String> {
    record["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect()
}

/// The value after `flag` in `argv`.
fn flag<'a>(argv: &'a [String], flag: &str) -> Option<&'a str> {
    let i = argv.iter().position(|a| a == flag)?;
    argv.get(i + 1).map(String::as_str)
}

/// The real droid with its HOME (the repository inside it) and a scripted model that creates
/// `b.txt`.
struct RealHome {
    _model: ScriptedModel,
    home: DroidHome,
}

impl RealHome {
    async fn new() -> RealHome {
        // the script needs the repository's path; the home must exist first
        let model = ScriptedModel::start(json!([{"text": "placeholder"}]))
            .await
            .unwrap();
        let home = DroidHome::new(&[("Mock", &model.base_url())]).unwrap();
        let repo = home.path().join("repo");
        git_repo_at(&repo, &[("a.txt", "hello\n")]);
        model.set_script(json!([
            {"tool": [{"name": "Create", "args": {"file_path": s(&repo.join("b.txt")), "content": "b\n"}}]},
            {"text": "Created b.txt."}
        ]));
        RealHome {
            _model: model,
            home,
        }
    }

    fn repo(&self) -> PathBuf {
        self.home.path().join("repo")
    }

    async fn run(&self, json: bool) -> Out {
        let mut env = self.home.env();
        env.push(("DROID_CLI_CMD".into(), real_droid().into()));
        let mut args = vec![
            "run".to_owned(),
            "--repo".to_owned(),
            s(&self.repo()),
            "--model".to_owned(),
            self.home.model_id("Mock"),
            "--command".to_owned(),
            "test -f b.txt".to_owned(),
        ];
        if json {
            args.push("--json".to_owned());
        }
        args.push("Create b.txt".to_owned());
        droid_executor(&args, &env, self.home.path()).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_json_through_the_real_droid() {
    let world = RealHome::new().await;
    let out = world.run(true).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let result = out.result();
    assert_eq!(result.status, Status::Success, "{result:#?}");
    assert_eq!(result.issues, vec![]);
    assert_eq!(
        result.files_changed,
        vec![FileChange {
            path: "b.txt".into(),
            change_type: ChangeType::Added,
            old_path: None,
            highlights: vec!["created by droid (1 line)".into()],
            lines_added: Some(1),
            lines_removed: Some(0),
        }]
    );
    assert_eq!(result.tests.passed, Some(true));
    assert_eq!(result.summary, "Created b.txt.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_prints_a_report_through_the_real_droid() {
    let world = RealHome::new().await;
    let out = world.run(false).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(lines[0].starts_with("status: success ("), "{}", out.stdout);
    assert!(
        lines.contains(&"  A b.txt (+1 -0)  created by droid (1 line)"),
        "{}",
        out.stdout
    );
    assert!(lines.contains(&"summary: Created b.txt."), "{}", out.stdout);
    assert!(lines.contains(&"tests: passed"), "{}", out.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_flags_reach_droid() {
    // droid hangs, so --max-runtime shows in the timeout
    let fake = FakeHome::new(json!([{"hang": true}]));
    let instructions = fake.file("instructions.md");
    std::fs::write(&instructions, "INSTRUCTIONS-FROM-FILE\nsecond line\n").unwrap();
    let context = json!({"repo_root": s(&fake.repo()), "files_of_interest": ["a.txt"]});
    let out = fake
        .run(&[
            "run",
            "--json",
            "--instructions-file",
            &s(&instructions),
            "--context",
            &context.to_string(),
            "--constraint",
            "CONSTRAINT-ONE",
            "--constraint",
            "CONSTRAINT-TWO",
            "--accept",
            "ACCEPT-ONE",
            "--accept",
            "ACCEPT-TWO",
            "--command",
            "test -f a.txt",
            "--command",
            "true",
            "--mode",
            "code",
            "--max-runtime",
            "2",
            "--autonomy",
            "medium",
            "--task-id",
            "SEED-1",
            "--notes",
            "NOTES-FOR-HUMAN",
            "OBJECTIVE-ARG greet",
        ])
        .await;
    assert_eq!(out.code, Some(1), "{out:#?}");
    let result = out.result();
    assert_eq!(result.status, Status::Timeout, "{result:#?}");
    assert_eq!(out.issue_kinds(), vec!["timeout"]);
    assert_eq!(
        result.issues[0].description,
        "droid did not finish within 2 s and was stopped"
    );
    assert_eq!(result.task_id.as_deref(), Some("SEED-1"));
    assert_eq!(result.notes_for_human.as_deref(), Some("NOTES-FOR-HUMAN"));
    assert_eq!(result.tests.commands, ["test -f a.txt", "true"]);

    let record = fake.record().expect("droid never started");
    let argv = argv(&record);
    assert_eq!(flag(&argv, "--cwd"), Some(s(&fake.repo()).as_str()));
    // --autonomy overrides the mode's default (code: low)
    assert_eq!(flag(&argv, "--auto"), Some("medium"));
    let prompt = record["prompt"].as_str().unwrap();
    for part in [
        "# Task\n\nOBJECTIVE-ARG greet\n",
        "## Instructions\n\nINSTRUCTIONS-FROM-FILE\nsecond line\n",
        "Files of interest (relative to it):\n- `a.txt`\n",
        "- CONSTRAINT-ONE\n- CONSTRAINT-TWO\n",
        "- ACCEPT-ONE\n- ACCEPT-TWO\n",
        "- `test -f a.txt`\n- `true`\n",
        "code: the work is mainly changing code.",
    ] {
        assert!(prompt.contains(part), "missing {part:?} in:\n{prompt}");
    }
    assert!(!prompt.contains("NOTES-FOR-HUMAN"));
    let marker = record["env"][MARKER_VAR].as_str().unwrap();
    assert_eq!(pids_with_env(MARKER_VAR, marker), Vec::<i32>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_from_a_file_or_stdin_with_flags_on_top() {
    let fake = FakeHome::new(json!([{"completion": "Done."}]));
    let request = json!({
        "objective": "FILE-OBJECTIVE",
        "context": {"repo_root": s(&fake.repo())},
        "task_id": "FILE-ID",
        "constraints": ["FILE-CONSTRAINT"],
        "execution_mode": "code",
    });
    let file = fake.file("request.json");
    std::fs::write(&file, request.to_string()).unwrap();

    let out = fake
        .run(&[
            "run",
            "--json",
            "--request",
            &s(&file),
            "--task-id",
            "FLAG-ID",
            "--constraint",
            "FLAG-CONSTRAINT",
            "--mode",
            "mixed",
        ])
        .await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let result = out.result();
    assert_eq!(result.status, Status::Success, "{result:#?}");
    assert_eq!(result.task_id.as_deref(), Some("FLAG-ID"));
    let record = fake.record().unwrap();
    assert_eq!(flag(&argv(&record), "--auto"), Some("medium"));
    let prompt = record["prompt"].as_str().unwrap();
    assert!(prompt.contains("FILE-OBJECTIVE"), "{prompt}");
    assert!(prompt.contains("- FLAG-CONSTRAINT\n"), "{prompt}");
    assert!(!prompt.contains("FILE-CONSTRAINT"), "{prompt}");

    std::fs::remove_file(fake.fixture("record.json")).unwrap();
    let mut child = command(
        &["run", "--json", "--request", "-"],
        &fake.env(),
        fake.path(),
    )
    .stdin(Stdio::piped())
    .spawn()
    .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(request.to_string().as_bytes())
        .await
        .unwrap();
    drop(stdin);
    let out = finish(child).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let result = out.result();
    assert_eq!(result.status, Status::Success, "{result:#?}");
    assert_eq!(result.task_id.as_deref(), Some("FILE-ID"));
    let record = fake.record().unwrap();
    assert_eq!(flag(&argv(&record), "--auto"), Some("low"));
    let prompt = record["prompt"].as_str().unwrap();
    assert!(prompt.contains("FILE-OBJECTIVE"), "{prompt}");
    assert!(prompt.contains("- FILE-CONSTRAINT\n"), "{prompt}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_request_is_exit_2_with_every_violation() {
    let fake = FakeHome::new(json!([{"completion": "never"}]));
    let file = fake.file("request.json");
    std::fs::write(&file, json!({"objective": "   ", "bogus": 1}).to_string()).unwrap();
    let out = fake
        .run(&[
            "run",
            "--json",
            "--request",
            &s(&file),
            "--context",
            r#"{"repo_root": "relative/dir"}"#,
        ])
        .await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    let result = out.result();
    assert_eq!(result.status, Status::Error);
    let got: Vec<(&str, &str, &str)> = result
        .issues
        .iter()
        .map(|i| {
            (
                i.kind.as_str(),
                i.description.split(": ").next().unwrap(),
                i.suggested_action.as_str(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "validation_error",
                "$.bogus",
                "fix $.bogus and send the request again"
            ),
            (
                "validation_error",
                "$.objective",
                "fix $.objective and send the request again"
            ),
            (
                "validation_error",
                "$.context.repo_root",
                "fix $.context.repo_root and send the request again"
            ),
        ]
    );
    assert_eq!(fake.record(), None, "droid was started");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_that_is_not_json_is_a_validation_error() {
    let fake = FakeHome::new(json!([{"completion": "never"}]));
    let out = fake
        .run(&["run", "--json", "--context", "not json", "Do it"])
        .await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    let result = out.result();
    assert_eq!(result.status, Status::Error);
    assert_eq!(out.issue_kinds(), vec!["validation_error"]);
    assert!(
        result.issues[0]
            .description
            .starts_with("$.context: --context is not valid JSON"),
        "{:#?}",
        result.issues
    );
    assert_eq!(fake.record(), None, "droid was started");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_droid_is_exit_2_droid_not_found() {
    let fake = FakeHome::new(json!([]));
    let env = vec![
        ("HOME".into(), fake.path().into()),
        ("PATH".into(), NO_DROID_PATH.into()),
        ("DROID_CLI_CMD".into(), "/nonexistent/droid".into()),
    ];
    let out = droid_executor(
        &["run", "--json", "--repo", &s(&fake.repo()), "Do it"],
        &env,
        fake.path(),
    )
    .await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    let result = out.result();
    assert_eq!(result.status, Status::Error);
    assert_eq!(out.issue_kinds(), vec!["droid_not_found"]);
    assert_eq!(
        result.summary,
        "droid was not found: DROID_CLI_CMD /nonexistent/droid (not found); nothing ran"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extra_words_in_droid_cli_cmd_are_ignored_with_a_warning() {
    let fake = FakeHome::new(json!([{"completion": "Done."}]));
    let mut cmd = tests::fake_droid_bin!().into_os_string();
    cmd.push(" exec --output-format json --auto high");
    let env = fake.env_with_droid(cmd);
    let out = droid_executor(
        &["run", "--json", "--repo", &s(&fake.repo()), "Do it"],
        &env,
        fake.path(),
    )
    .await;
    let warning = "DROID_CLI_CMD: ignoring \"exec --output-format json --auto high\"; droid-executor sets droid's flags itself";
    assert!(
        out.stderr
            .lines()
            .any(|l| l == format!("droid-executor: warning: {warning}")),
        "{out:#?}"
    );
    assert_eq!(out.code, Some(0), "{out:#?}");
    let result = out.result();
    assert_eq!(result.status, Status::Success, "{result:#?}");
    assert_eq!(result.logs, vec![warning.to_owned()]);
    let argv = argv(&fake.record().unwrap());
    assert_eq!(argv[..3], ["exec", "--output-format", "stream-json"]);
    assert_eq!(flag(&argv, "--auto"), Some("medium"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_cancels_the_run_and_stops_droid() {
    a_signal_cancels_the_run_and_stops_droid(Signal::SIGINT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_to_the_cli_cancels_the_run_and_stops_droid() {
    a_signal_cancels_the_run_and_stops_droid(Signal::SIGTERM).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_to_the_cli_cancels_the_run_and_stops_droid() {
    a_signal_cancels_the_run_and_stops_droid(Signal::SIGHUP).await;
}

/// The CLI stops droid and everything it started, and still prints the result, whichever of the
/// usual termination signals it gets (droid is in its own process group, so only we can stop it).
async fn a_signal_cancels_the_run_and_stops_droid(signal: Signal) {
    let fake = FakeHome::new(json!([]));
    let pid_file = fake.fixture("sh.pid");
    fake.play(json!([
        {"spawn_grandchild": {"command": "sleep 600; exit 0", "pid_file": pid_file}},
        {"hang": true},
    ]));
    let child = command(
        &[
            "run",
            "--json",
            "--max-runtime",
            "60",
            "--repo",
            &s(&fake.repo()),
            "Hang",
        ],
        &fake.env(),
        fake.path(),
    )
    .spawn()
    .unwrap();
    let cli = i32::try_from(child.id().unwrap()).unwrap();
    let sh = read_pid_file(&pid_file, Duration::from_secs(30)).await;
    let record = fake.record().unwrap();
    let marker = record["env"][MARKER_VAR].as_str().unwrap().to_owned();
    // fake droid, sh and its sleep. Polled: sh may still be exec'ing (setsid, then sh), and a
    // process in the middle of an exec shows an empty /proc/<pid>/environ.
    let until = tokio::time::Instant::now() + Duration::from_secs(5);
    let run_pids = loop {
        let pids = pids_with_env(MARKER_VAR, &marker);
        if pids.len() >= 3 && pids.contains(&sh) {
            break pids;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "the run's processes never all showed up: {pids:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    kill(Pid::from_raw(cli), signal).unwrap();
    let out = finish(child).await;
    assert_eq!(out.code, Some(1), "{out:#?}");
    let result = out.result();
    assert_eq!(result.status, Status::Cancelled, "{result:#?}");
    assert_eq!(out.issue_kinds(), vec!["cancelled"]);
    for pid in run_pids {
        assert!(
            wait_gone(pid, Duration::from_secs(2)).await,
            "pid {pid} of the run survived"
        );
    }
    assert_eq!(pids_with_env(MARKER_VAR, &marker), Vec::<i32>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partial_run_exits_1() {
    let fake = FakeHome::new(json!([{"completion": "Done."}]));
    let out = fake
        .run(&[
            "run",
            "--json",
            "--repo",
            &s(&fake.repo()),
            "--command",
            "false",
            "Do it",
        ])
        .await;
    assert_eq!(out.code, Some(1), "{out:#?}");
    let result = out.result();
    assert_eq!(result.status, Status::Partial, "{result:#?}");
    assert_eq!(out.issue_kinds(), vec!["test_failure"]);
    assert_eq!(result.tests.passed, Some(false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemas_match_the_checked_in_files() {
    let home = TempDir::new("cli-home").unwrap();
    let env = vec![
        ("HOME".into(), home.path().into()),
        ("PATH".into(), path_var()),
    ];
    for which in ["request", "result", "task-record"] {
        let out = droid_executor(&["schema", which], &env, home.path()).await;
        assert_eq!(out.code, Some(0), "{out:#?}");
        let file = workspace_root().join(format!("schemas/{which}.schema.json"));
        let checked_in = std::fs::read_to_string(&file).unwrap();
        assert!(
            out.stdout == checked_in,
            "{} is stale: run `cargo xtask codegen`",
            file.display()
        );
        let _: Value = serde_json::from_str(&out.stdout).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_finds_the_real_droid() {
    let home = TempDir::new("cli-home").unwrap();
    let env = vec![
        ("HOME".into(), home.path().into()),
        ("PATH".into(), path_var()),
        ("DROID_CLI_CMD".into(), real_droid().into()),
    ];
    let out = droid_executor(&["doctor"], &env, home.path()).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    // doctor ran the real droid (`droid --version`), not only read its package.json
    let droid: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("OK   droid "))
        .collect();
    assert_eq!(
        droid,
        [format!(
            "OK   droid         {} (from DROID_CLI_CMD), version 0.225.2",
            real_droid().display()
        )],
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("FAIL"), "{}", out.stdout);
    let store = home.path().join(".local/state/droid-executor");
    let expected = format!(
        "OK   store         {} will be created (under {}, writable)",
        store.display(),
        home.path().display()
    );
    assert!(
        out.stdout.lines().any(|l| l == expected),
        "{expected}\n{}",
        out.stdout
    );
    assert!(!store.exists(), "doctor only looks");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_fails_without_droid() {
    let home = TempDir::new("cli-home").unwrap();
    let env = vec![
        ("HOME".into(), home.path().into()),
        ("PATH".into(), NO_DROID_PATH.into()),
        ("DROID_CLI_CMD".into(), "/nonexistent/droid".into()),
    ];
    let out = droid_executor(&["doctor"], &env, home.path()).await;
    assert_eq!(out.code, Some(1), "{out:#?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("FAIL droid "))
        .unwrap_or_else(|| panic!("no FAIL droid line:\n{}", out.stdout));
    assert!(lines[at].contains("/nonexistent/droid"), "{}", out.stdout);
    assert!(
        lines[at + 1].trim_start().starts_with("fix: install it"),
        "{}",
        out.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_fails_on_an_invalid_config() {
    let home = TempDir::new("cli-home").unwrap();
    let config = home.path().join("bad.toml");
    std::fs::write(&config, "port = \"x\"\n").unwrap();
    let env = vec![
        ("HOME".into(), home.path().into()),
        ("PATH".into(), path_var()),
        ("DROID_CLI_CMD".into(), real_droid().into()),
    ];
    let out = droid_executor(&["doctor", "--config", &s(&config)], &env, home.path()).await;
    assert_eq!(out.code, Some(1), "{out:#?}");
    let fails: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("FAIL"))
        .collect();
    assert_eq!(fails.len(), 1, "{}", out.stdout);
    assert!(fails[0].starts_with("FAIL config "), "{}", out.stdout);
    assert!(fails[0].contains(&s(&config)), "{}", out.stdout);
    assert!(fails[0].contains("line 1"), "{}", out.stdout);
}
