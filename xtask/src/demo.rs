//! `cargo xtask demo [--providers] [--check-readme | --write-readme]`: the README's tour, run
//! for real on this machine: the real droid (fetched from npm), a scripted model standing in for
//! the LLM, a sample repository in a temp HOME. Every path a user takes is shown: `doctor`,
//! `setup skill`, `setup mcp --client droid` (and droid listing our tools), a sync `run`, a
//! background task, and a run through the HTTP bridge (started on demand, then stopped).
//!
//! Each command is printed as `$ …` (the temp HOME shown as `~`) before its real output, and the
//! whole transcript is kept. `--check-readme` compares it with the README's tour block (between
//! `<!-- tour:begin -->` and `<!-- tour:end -->`), commands and output alike, with what varies
//! between runs and machines masked ([`crate::doc_blocks`]), so the README cannot show a command
//! or an output the binary no longer gives; `--write-readme` replaces the block with it.
//!
//! `--providers`: one task (write `farewell.py` and its test, run the test) through each of the
//! five agents with `droid-executor run --provider P` (autonomy `medium`, the default of mode
//! `mixed`, so each CLI may run the test), each CLI against its own scripted model speaking its
//! wire format and calling its own tools (see [`providers_script`]). `docs/providers.md` shows
//! this output (its `providers` block; `--check-readme` and `--write-readme` work on it).

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::json;

use crate::agents::MODEL;
use crate::agents::{self, Agent, AgentCli};
use crate::doc_blocks::{self, Block};
use crate::droid;
use crate::sandbox::Sandbox;
use crate::sh::{build_bins, output, workspace_root};

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

/// The task `demo --providers` gives each agent: two new files, then the test.
pub(crate) const PROVIDERS_OBJECTIVE: &str = "Add farewell(name) in a new farewell.py, returning \"Goodbye, <name>!\", with a test in test_farewell.py";
const PROVIDERS_TEST: &str = "python3 test_farewell.py";
const FAREWELL_PY: &str = "def farewell(name):\n    return \"Goodbye, \" + name + \"!\"\n";
const TEST_FAREWELL_PY: &str = "from farewell import farewell\n\nassert farewell(\"Ada\") == \"Goodbye, Ada!\"\nprint(\"ok\")\n";

/// The final answer of every agent in `demo --providers`: a sentence and the report block the
/// engine asks for (its highlights annotate `files changed`).
fn providers_answer(agent: Agent) -> String {
    let report = json!({"status": "success",
        "summary": format!("{} added farewell(name) in farewell.py and a test in test_farewell.py; python3 test_farewell.py passes.", agent.name()),
        "files": [{"path": "farewell.py", "highlights": ["farewell(name) returns Goodbye, <name>!"]},
                  {"path": "test_farewell.py", "highlights": ["asserts farewell(\"Ada\")"]}],
        "issues": []});
    format!(
        "Added farewell.py and its test; the test passes.\n\n```droid-executor-report\n{report}\n```"
    )
}

/// The scripted turns of `demo --providers` for `agent`, in its wire format and with its own
/// tools: write farewell.py and test_farewell.py, run the test, report.
pub(crate) fn providers_script(agent: Agent, repo: &Path) -> serde_json::Value {
    let abs = |f: &str| repo.join(f).display().to_string();
    let answer = providers_answer(agent);
    match agent {
        Agent::Droid => json!([
            {"text": "I'll write farewell.py and its test.", "tool": [
                {"name": "Create", "args": {"file_path": abs("farewell.py"), "content": FAREWELL_PY}},
                {"name": "Create", "args": {"file_path": abs("test_farewell.py"), "content": TEST_FAREWELL_PY}}]},
            {"tool": [{"name": "Execute", "args": {"summary": "Run the test", "command": PROVIDERS_TEST,
                "riskLevel": "low", "riskLevelReason": "Runs the project's own test."}}]},
            {"text": answer}
        ]),
        Agent::Codex => {
            let patch = format!(
                "*** Begin Patch\n*** Add File: farewell.py\n{}*** Add File: test_farewell.py\n{}*** End Patch\n",
                plus_lines(FAREWELL_PY),
                plus_lines(TEST_FAREWELL_PY)
            );
            json!([
                {"output": [
                    {"type": "message", "role": "assistant", "status": "completed",
                     "content": [{"type": "output_text", "text": "I'll write farewell.py and its test.", "annotations": []}]},
                    {"type": "custom_tool_call", "status": "completed", "call_id": "call_0",
                     "name": "apply_patch", "input": patch}]},
                {"output": [{"type": "function_call", "status": "completed", "call_id": "call_1",
                     "name": "exec_command", "arguments": json!({"cmd": PROVIDERS_TEST}).to_string()}]},
                {"output": [{"type": "message", "role": "assistant", "status": "completed",
                     "content": [{"type": "output_text", "text": answer, "annotations": []}]}]}
            ])
        }
        Agent::Claude => json!([
            {"content": [
                {"type": "text", "text": "I'll write farewell.py and its test."},
                {"type": "tool_use", "id": "toolu_0", "name": "Write",
                 "input": {"file_path": abs("farewell.py"), "content": FAREWELL_PY}},
                {"type": "tool_use", "id": "toolu_1", "name": "Write",
                 "input": {"file_path": abs("test_farewell.py"), "content": TEST_FAREWELL_PY}}]},
            {"content": [{"type": "tool_use", "id": "toolu_2", "name": "Bash",
                 "input": {"command": PROVIDERS_TEST, "description": "Run the test"}}]},
            {"content": [{"type": "text", "text": answer}]}
        ]),
        Agent::Gemini => json!([
            {"parts": [
                {"text": "I'll write farewell.py and its test."},
                {"functionCall": {"name": "write_file", "args": {"file_path": "farewell.py", "content": FAREWELL_PY}}},
                {"functionCall": {"name": "write_file", "args": {"file_path": "test_farewell.py", "content": TEST_FAREWELL_PY}}}]},
            {"parts": [{"functionCall": {"name": "run_shell_command",
                "args": {"command": PROVIDERS_TEST, "description": "Run the test"}}}]},
            {"parts": [{"text": answer}]}
        ]),
        Agent::Opencode => json!([
            {"text": "I'll write farewell.py and its test.", "tool": [
                {"name": "write", "args": {"filePath": abs("farewell.py"), "content": FAREWELL_PY}},
                {"name": "write", "args": {"filePath": abs("test_farewell.py"), "content": TEST_FAREWELL_PY}}]},
            {"tool": [{"name": "bash", "args": {"command": PROVIDERS_TEST, "description": "Run the test"}}]},
            {"text": answer}
        ]),
    }
}

/// `text` as the added lines of an `apply_patch` hunk.
fn plus_lines(text: &str) -> String {
    text.lines().map(|l| format!("+{l}\n")).collect()
}

/// An argument as a shell would need it written.
fn quote(arg: &str) -> String {
    if !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=~@%+,".contains(c))
    {
        arg.to_owned()
    } else {
        format!("'{}'", arg.replace('\'', "'\\''"))
    }
}

/// The tour: runs commands in the sandbox, prints each with its output, and keeps the whole
/// transcript as the documentation shows it.
struct Tour<'a> {
    sandbox: &'a Sandbox,
    droid: &'a Path,
    bin: &'a Path,
    transcript: String,
}

impl Tour<'_> {
    /// `text` with the temp HOME as `~` and this clone as `.`, as the README shows it.
    fn tidy(&self, text: &str) -> String {
        let home = self.sandbox.home.display().to_string();
        let root = workspace_root().display().to_string();
        text.replace(&home, "~").replace(&format!("{root}/"), "./")
    }

    /// Print `text` (tidied) and add it to the transcript, ending in a newline.
    fn say(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let mut text = self.tidy(text);
        if !text.ends_with('\n') {
            text.push('\n');
        }
        print!("{text}");
        self.transcript.push_str(&text);
    }

    fn show(&mut self, line: String) {
        self.say(&format!("$ {line}"));
    }

    fn command(&self, program: &Path, args: &[&str]) -> Command {
        let mut cmd = self.sandbox.command(program);
        cmd.env("DROID_CLI_CMD", self.droid).args(args);
        cmd
    }

    /// Show and run `droid-executor ARGS`, print its output (stderr first: it carries the
    /// progress notes that come before the result), and return its stdout. `any_code`: a
    /// non-zero exit is part of the show (doctor with a warning).
    fn dx_with(&mut self, args: &[&str], any_code: bool) -> Result<String> {
        let line = std::iter::once("droid-executor".to_owned())
            .chain(args.iter().map(|a| quote(a)))
            .collect::<Vec<_>>()
            .join(" ");
        self.show(line.clone());
        let out = self
            .command(self.bin, args)
            .output()
            .with_context(|| line.clone())?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        self.say(&String::from_utf8_lossy(&out.stderr));
        self.say(&stdout);
        if !any_code && !out.status.success() {
            bail!("{line} exited with {}", out.status);
        }
        Ok(stdout)
    }

    fn dx(&mut self, args: &[&str]) -> Result<()> {
        self.dx_with(args, false).map(drop)
    }
}

/// `head` then `task`.
fn with<'a>(head: &[&'a str], task: &[&'a str]) -> Vec<&'a str> {
    head.iter().chain(task).copied().collect()
}

/// What `demo` does with the transcript besides printing it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Readme {
    /// Print only.
    Show,
    /// Fail when the documentation's block differs from the run.
    Check,
    /// Replace the documentation's block with the run.
    Write,
}

const USAGE: &str = "usage: cargo xtask demo [--providers] [--check-readme | --write-readme]";

/// `demo`'s flags: whether to run the providers' demo, and what to do with the documentation.
fn parse(args: &[&str]) -> Result<(bool, Readme)> {
    let mut providers = false;
    let mut readme = Readme::Show;
    for arg in args {
        match (*arg, readme) {
            ("--providers", _) if !providers => providers = true,
            ("--check-readme", Readme::Show) => readme = Readme::Check,
            ("--write-readme", Readme::Show) => readme = Readme::Write,
            _ => bail!("{USAGE}"),
        }
    }
    Ok((providers, readme))
}

/// Check or write `block` from the run's `transcript`, as `readme` says.
fn finish(block: &Block, transcript: &str, readme: Readme, providers: bool) -> Result<()> {
    let flag = if providers {
        "--providers --write-readme"
    } else {
        "--write-readme"
    };
    match readme {
        Readme::Show => Ok(()),
        Readme::Check => {
            doc_blocks::check(block, transcript, flag)?;
            println!(
                "\n{}: the {} block shows this run ({} lines, times, ids and the machine's own lines masked)",
                block.file,
                block.name,
                transcript.lines().count()
            );
            Ok(())
        }
        Readme::Write => {
            doc_blocks::write(block, transcript)?;
            println!("\nwrote the {} block of {}", block.name, block.file);
            Ok(())
        }
    }
}

pub(crate) fn demo(args: &[&str]) -> Result<()> {
    let (providers_demo, readme) = parse(args)?;
    if providers_demo {
        return providers(readme);
    }
    crate::preflight::require("demo", crate::preflight::DEMO)?;
    let droid = droid::fetch()?;
    let bins = build_bins("debug")?;
    let sandbox = Sandbox::new(&bins, script)?;
    let bin = bins.join("droid-executor");
    // droid-executor on PATH, as after `cargo install`
    let mut tour = Tour {
        sandbox: &sandbox,
        droid: &droid,
        bin: &bin,
        transcript: String::new(),
    };
    println!("sample repository: {}", sandbox.repo.display());
    tour.show("cd ~/sample-repo".into());
    tour.dx_with(&["doctor"], true)?;
    tour.dx(&["setup", "skill"])?;
    tour.dx(&["setup", "mcp", "--client", "droid"])?;
    tour.show(format!(
        "droid exec --list-tools -m {MODEL} | grep droid-executor"
    ));
    let listed = output(&mut tour.command(&droid, &["exec", "--list-tools", "-m", MODEL]))
        .context("droid exec --list-tools")?;
    let ours: String = listed
        .lines()
        .filter(|l| l.contains("droid-executor"))
        .map(|l| format!("{l}\n"))
        .collect();
    tour.say(&ours);
    let task = [
        "--mode",
        "code",
        "--model",
        MODEL,
        "--command",
        "python3 test_greet.py",
        "--accept",
        "python3 test_greet.py passes",
        OBJECTIVE,
    ];
    tour.dx(&with(&["run"], &task))?;

    sandbox.reset()?;
    let id = tour.dx_with(&with(&["run", "--background"], &task), false)?;
    let id = id.trim().to_owned();
    tour.dx(&["tasks", "wait", &id])?;

    sandbox.reset()?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let port = port.to_string();
    let outcome = tour
        .dx(&with(
            &["run", "--via", "bridge", "--bridge-port", &port],
            &task,
        ))
        .and_then(|()| tour.dx(&["bridge", "status", "--port", &port]));
    // the daemon is stopped whatever happened
    let stopped = tour.dx(&["bridge", "stop", "--port", &port]);
    outcome.and(stopped)?;

    finish(&doc_blocks::TOUR, &tour.transcript, readme, false)
}

/// `demo --providers`: the same task through each of the five agents, every result verified
/// (files from git, the test re-run by droid-executor). Every agent runs; the demo fails when
/// one of them did not succeed (its result says why).
fn providers(readme: Readme) -> Result<()> {
    crate::preflight::require("demo --providers", crate::preflight::PROVIDERS)?;
    let programs = agents::programs(&Agent::ALL)?;
    let droid = programs
        .iter()
        .find(|(a, _)| *a == Agent::Droid)
        .map(|(_, p)| p.clone())
        .context("droid is one of the five")?;
    let bins = build_bins("debug")?;
    let sandbox = Sandbox::with_agents(&bins, &programs, providers_script)?;
    let bin = bins.join("droid-executor");
    let mut tour = Tour {
        sandbox: &sandbox,
        droid: &droid,
        bin: &bin,
        transcript: String::new(),
    };
    println!("sample repository: {}", sandbox.repo.display());
    tour.show("cd ~/sample-repo".into());
    let mut failed = Vec::new();
    for agent in Agent::ALL {
        sandbox.reset()?;
        let mut args = vec!["run", "--provider", agent.name()];
        if let Some(model) = agent.model() {
            args.extend(["--model", model]);
        }
        args.extend([
            "--command",
            PROVIDERS_TEST,
            "--accept",
            "python3 test_farewell.py passes",
            PROVIDERS_OBJECTIVE,
        ]);
        if tour.dx_with(&args, false).is_err() {
            failed.push(agent.name());
        }
    }
    if !failed.is_empty() {
        bail!("the run did not succeed for: {}", failed.join(", "));
    }
    finish(&doc_blocks::PROVIDERS, &tour.transcript, readme, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_in_any_order_and_only_once() {
        assert_eq!(parse(&[]).unwrap(), (false, Readme::Show));
        assert_eq!(parse(&["--check-readme"]).unwrap(), (false, Readme::Check));
        assert_eq!(
            parse(&["--check-readme", "--providers"]).unwrap(),
            (true, Readme::Check)
        );
        assert_eq!(
            parse(&["--providers", "--write-readme"]).unwrap(),
            (true, Readme::Write)
        );
        for bad in [
            &["--check-readme", "--write-readme"][..],
            &["--providers", "--providers"],
            &["--check"],
        ] {
            assert_eq!(parse(bad).unwrap_err().to_string(), USAGE);
        }
    }

    #[test]
    fn arguments_are_quoted_as_a_shell_needs() {
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), "'it'\\''s'");
        assert_eq!(quote("--mode"), "--mode");
    }
}
