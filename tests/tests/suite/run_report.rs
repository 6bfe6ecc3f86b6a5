//! The human report of `droid-executor run` (no `--json`) over the real binary and the fake
//! droid: a failing verification command shows the end of its output under it (a few lines per
//! stream, each cut to a width, control characters shown as `?`, secrets redacted as in the
//! result), so the reason is read without running the task again; a command the shell could not
//! run (exit 127, not found; 126, not executable) is an `env_issue`, not a `test_failure`, in the
//! JSON result and the report alike.

use pretty_assertions::assert_eq;
use serde_json::json;

use super::binary::{FakeHome, Out, droid_executor};

/// `run --repo REPO [--json] --command C… Do it` in `home`, the fake droid completing at once.
async fn run(home: &FakeHome, json: bool, commands: &[&str], extra_env: &[(&str, &str)]) -> Out {
    home.play(&json!([{"completion": "Done."}]));
    let repo = home.repo().display().to_string();
    let mut args = vec!["run", "--repo", repo.as_str()];
    if json {
        args.push("--json");
    }
    for c in commands {
        args.extend(["--command", c]);
    }
    args.push("Do it");
    let mut env = home.env();
    env.extend(extra_env.iter().map(|(k, v)| ((*k).into(), (*v).into())));
    droid_executor(&args, &env, home.path()).await
}

/// The report's lines from `commands:` to just before `issues:`.
fn commands_block(out: &Out) -> Vec<&str> {
    let lines: Vec<&str> = out.stdout.lines().collect();
    let from = lines
        .iter()
        .position(|l| *l == "commands:")
        .unwrap_or_else(|| panic!("no commands: in the report\n{out:#?}"));
    let to = lines
        .iter()
        .position(|l| *l == "issues:")
        .unwrap_or(lines.len());
    lines[from..to].to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_verification_command_shows_the_end_of_its_output() {
    let home = FakeHome::new("report-tail", &[]);
    // six lines on stdout, a terminal escape, a credential (whole only in the output) and one
    // very long line on stderr
    let command = "printf 'line %s\\n' 1 2 3 4 5 6; \
                   printf '\\033[31mred\\n' >&2; \
                   echo \"token $(printf fk-report-)secret-0123456789\" >&2; \
                   printf 'x%.0s' $(seq 1 300) >&2; exit 3";
    let out = run(
        &home,
        false,
        &[command, "true"],
        &[("FACTORY_API_KEY", "fk-report-secret-0123456789")],
    )
    .await;
    assert_eq!(out.code, Some(1), "{out:#?}");
    let long = format!("            stderr: {}…", "x".repeat(200));
    assert_eq!(
        commands_block(&out),
        vec![
            "commands:",
            &format!("  verify    exit 3  {command}"),
            "            stdout: … 2 earlier lines (--json has the excerpt)",
            "            stdout: line 3",
            "            stdout: line 4",
            "            stdout: line 5",
            "            stdout: line 6",
            "            stderr: ?[31mred",
            "            stderr: token [REDACTED]",
            &long,
            "  verify    exit 0  true",
            "tests: FAILED",
        ],
        "{out:#?}"
    );
    assert!(
        out.stdout.contains(
            "  [test_failure] 1 of 2 verification commands failed\n      → read the failing \
             verification command's output (commands_run, source verify), fix the code, and run \
             the task again"
        ),
        "{out:#?}"
    );
    assert!(!out.stdout.contains("fk-report-secret"), "{out:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verification_command_the_shell_cannot_run_is_an_env_issue() {
    let home = FakeHome::new("report-env", &[]);
    let script = home.repo().join("check.sh");
    std::fs::write(&script, "#!/bin/sh\necho checked\n").unwrap();
    // not executable: sh answers 126; a program on no PATH: 127
    let commands = ["no-such-test-runner-xyz -q", "./check.sh"];

    let out = run(&home, true, &commands, &[]).await;
    assert_eq!(out.code, Some(1), "{out:#?}");
    let result = out.result();
    assert_eq!(
        result.status,
        droid_contract::Status::Partial,
        "{result:#?}"
    );
    assert_eq!(out.issue_kinds(), vec!["env_issue"], "{result:#?}");
    assert_eq!(
        result.issues[0].description,
        "2 of 2 verification commands could not be run: the shell found no such program (exit \
         127) or could not execute it (exit 126)"
    );
    let codes: Vec<Option<i32>> = result.commands_run.iter().map(|c| c.exit_code).collect();
    assert_eq!(codes, vec![Some(127), Some(126)]);
    assert_eq!(result.tests.passed, Some(false));

    let out = run(&home, false, &commands, &[]).await;
    assert_eq!(out.code, Some(1), "{out:#?}");
    let block = commands_block(&out);
    assert_eq!(
        block[1], "  verify   exit 127  no-such-test-runner-xyz -q",
        "{out:#?}"
    );
    assert!(
        block[2].starts_with("            stderr: ")
            && block[2].ends_with("no-such-test-runner-xyz: not found"),
        "{out:#?}"
    );
    assert_eq!(block[3], "  verify   exit 126  ./check.sh", "{out:#?}");
    assert!(
        block[4].starts_with("            stderr: ") && block[4].ends_with("Permission denied"),
        "{out:#?}"
    );
    assert_eq!(
        block[5], "tests: not verified (a verification command was not found or not executable)",
        "{out:#?}"
    );
    assert!(out.stdout.contains("  [env_issue] 2 of 2"), "{out:#?}");
    assert!(!out.stdout.contains("test_failure"), "{out:#?}");
}

/// At most three failing commands get their output in the report; the rest are counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_output_of_at_most_three_failing_commands_is_shown() {
    let home = FakeHome::new("report-many", &[]);
    let commands = [
        "echo one; exit 1",
        "echo two; exit 1",
        "echo three; exit 1",
        "echo four; exit 1",
        "echo five; exit 1",
    ];
    let out = run(&home, false, &commands, &[]).await;
    assert_eq!(out.code, Some(1), "{out:#?}");
    let block = commands_block(&out);
    let told: Vec<&str> = block
        .iter()
        .filter_map(|l| l.strip_prefix("            stdout: "))
        .collect();
    assert_eq!(told, vec!["one", "two", "three"], "{out:#?}");
    assert!(
        block.contains(&"  (the output of 2 more failing verification commands is in --json)"),
        "{out:#?}"
    );
}
