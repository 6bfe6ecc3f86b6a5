//! `cargo xtask demo`: the product's main job, end to end, on a fresh machine: the real droid
//! (fetched from npm), a scripted model standing in for the LLM, a sample repository in a temp
//! HOME, and one `droid-executor run` whose result is printed; then the same task again as a
//! background task (`run --background`, `tasks list`, `tasks wait`), and through the HTTP bridge
//! (`run --via bridge` starting the daemon, `bridge status`, `bridge stop`).

use std::path::Path;

use anyhow::{Context, Result};
use serde_json::json;

use crate::droid;
use crate::sandbox::{MODEL, Sandbox};
use crate::sh::{cargo, output, run, workspace_root};

pub(crate) const OBJECTIVE: &str =
    "Add farewell(name) to greet.py, returning \"Goodbye, <name>!\", with a test";

/// The scripted model's turns: edit, test, run the test, report.
pub(crate) fn script(repo: &Path) -> serde_json::Value {
    let greet = repo.join("greet.py").display().to_string();
    let test = repo.join("test_greet.py").display().to_string();
    json!([
        {"text": "I'll add farewell() next to greet().",
         "tool": [{"name": "Edit", "args": {"file_path": greet,
            "old_str": "    return \"Hello, \" + name + \"!\"\n",
            "new_str": "    return \"Hello, \" + name + \"!\"\n\n\ndef farewell(name):\n    return \"Goodbye, \" + name + \"!\"\n"}}]},
        {"tool": [{"name": "Edit", "args": {"file_path": test,
            "old_str": "from greet import greet\n\nassert greet(\"Ada\") == \"Hello, Ada!\"\n",
            "new_str": "from greet import farewell, greet\n\nassert greet(\"Ada\") == \"Hello, Ada!\"\nassert farewell(\"Ada\") == \"Goodbye, Ada!\"\n"}}]},
        {"tool": [{"name": "Execute", "args": {"summary": "Run the tests", "command": "python3 test_greet.py",
            "riskLevel": "low", "riskLevelReason": "Runs the project's own tests."}}]},
        {"text": "Added farewell(name) and a test; the tests pass.\n\n```droid-executor-report\n{\"status\": \"success\", \"summary\": \"Added farewell(name) to greet.py and a test for it in test_greet.py; python3 test_greet.py passes.\", \"files\": [{\"path\": \"greet.py\", \"highlights\": [\"new farewell(name) returning Goodbye, <name>!\"]}, {\"path\": \"test_greet.py\", \"highlights\": [\"asserts farewell(\\\"Ada\\\")\"]}], \"issues\": []}\n```"}
    ])
}

pub(crate) fn demo() -> Result<()> {
    let droid = droid::fetch()?;
    run(cargo().args([
        "build",
        "--quiet",
        "-p",
        "wrapper-cli",
        "-p",
        "tests",
        "--bins",
    ]))
    .context("building droid-executor and scripted-model")?;
    let bins = workspace_root().join("target/debug");
    let sandbox = Sandbox::new(&bins, script)?;
    println!("sample repository: {}", sandbox.repo.display());
    println!(
        "$ droid-executor run --repo {} --model {MODEL} --mode code --command 'python3 test_greet.py' --accept 'python3 test_greet.py passes' '{OBJECTIVE}'\n",
        sandbox.repo.display()
    );
    let mut cmd = sandbox.command(&bins.join("droid-executor"));
    cmd.env("DROID_CLI_CMD", &droid)
        .arg("run")
        .arg("--repo")
        .arg(&sandbox.repo)
        .args([
            "--model",
            MODEL,
            "--mode",
            "code",
            "--command",
            "python3 test_greet.py",
        ])
        .args(["--accept", "python3 test_greet.py passes", OBJECTIVE]);
    run(&mut cmd).context("the demo run did not succeed")?;
    println!("\n(add --json for the full ExecutionResult)");

    sandbox.reset()?;
    println!("\nThe same task in the background:\n");
    println!(
        "$ droid-executor run --background --model {MODEL} --mode code --command 'python3 test_greet.py' '{OBJECTIVE}'"
    );
    let mut submit = sandbox.command(&bins.join("droid-executor"));
    submit
        .env("DROID_CLI_CMD", &droid)
        .args(["run", "--background", "--model", MODEL, "--mode", "code"])
        .args(["--command", "python3 test_greet.py", OBJECTIVE]);
    let id = output(&mut submit).context("submitting the background task")?;
    let id = id.trim().to_owned();
    println!("{id}");
    for args in [vec!["tasks", "list"], vec!["tasks", "wait", id.as_str()]] {
        println!("$ droid-executor {}", args.join(" "));
        let mut cmd = sandbox.command(&bins.join("droid-executor"));
        cmd.env("DROID_CLI_CMD", &droid).args(&args);
        run(&mut cmd).with_context(|| format!("droid-executor {}", args.join(" ")))?;
    }

    sandbox.reset()?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let port = port.to_string();
    println!("\nThe same task through the HTTP bridge, started on demand:\n");
    println!(
        "$ droid-executor run --via bridge --bridge-port {port} --model {MODEL} --mode code --command 'python3 test_greet.py' '{OBJECTIVE}'"
    );
    let bridge = |args: &[&str]| {
        let mut cmd = sandbox.command(&bins.join("droid-executor"));
        cmd.env("DROID_CLI_CMD", &droid).args(args);
        cmd
    };
    let outcome = run(&mut bridge(&[
        "run",
        "--via",
        "bridge",
        "--bridge-port",
        &port,
        "--model",
        MODEL,
        "--mode",
        "code",
        "--command",
        "python3 test_greet.py",
        OBJECTIVE,
    ]))
    .context("the run through the bridge did not succeed")
    .and_then(|()| {
        println!("$ droid-executor bridge status --port {port}");
        run(&mut bridge(&["bridge", "status", "--port", &port]))
    });
    // the daemon is stopped whatever happened
    println!("$ droid-executor bridge stop --port {port}");
    let stopped = run(&mut bridge(&["bridge", "stop", "--port", &port]));
    outcome.and(stopped)
}
