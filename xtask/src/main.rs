//! `cargo xtask …`: the project's automation (rust-analyzer style), in Rust so it runs wherever
//! cargo does. Depends on nothing of ours but `droid-contract` (for codegen).
//!
//! - `fetch-droid`: install the real droid 0.225.2 (npm package `@factory/cli-linux-x64`) under
//!   `target/droid/0.225.2/`; the test suite drives that binary.
//! - `fetch-interop`: the real MCP clients the interop suites drive: venvs with the Python SDK
//!   (`mcp` 2.3.0 and 1.30.0 from PyPI) under `target/interop/py-mcp{2,1}/`, and the Node clients
//!   (TypeScript SDK 1.32.2 and 2.4.0, Inspector 2.12.0 and 1.0.3 from npm) under
//!   `target/interop/node/`; the agent CLIs `setup mcp` writes entries for (Codex 0.169.0, Claude
//!   Code 2.1.330 from npm) under `target/agents/node/`; the ACP clients (npm
//!   `@agentclientprotocol/sdk` 2.4.0 under `target/interop/node-acp/`, PyPI
//!   `agent-client-protocol` 0.12.1 with `jsonschema` 4.26.0 under `target/interop/py-acp/`);
//!   the MCP conformance suite (npm `@modelcontextprotocol/conformance` 0.1.16, with the Node 22
//!   it needs) under `target/interop/conformance/`.
//! - `preflight`: every program outside the workspace that the suite and these commands run
//!   (git, Node.js and npm, python3 with venv, curl, libfaketime, systemd-analyze, unshare, …),
//!   OK or missing, with the `apt-get install` line. `test`, `ci`, `demo`, `soak` and
//!   `reliability` run the same check first and stop before building when something is missing.
//! - `test`: preflight, fetch-droid, fetch-interop, then the whole test suite.
//! - `ci`: preflight, fmt check, clippy `-D warnings`, codegen check, test.
//! - `codegen [--check]`: the JSON Schemas in `schemas/` from the contract types, and the
//!   bridge's OpenAPI document built from them.
//! - `demo`: the main job end to end: a scripted model, the real droid, a sample repository.
//!   `demo --providers`: one task through each of the five agent CLIs (droid, Codex, Claude
//!   Code, Gemini CLI, OpenCode), each against a scripted model speaking its wire format.
//!   `--check-readme` fails when the documentation's block of that run (the README's tour,
//!   `docs/providers.md`'s runs) shows other commands or output; `--write-readme` rewrites it.
//! - `bench engine [--provider P|all]`: median ratio of a `droid-executor run --provider P` to a
//!   bare headless run of the same CLI on one task.
//! - `bench bridge [--seconds S] [--repos R]`: the HTTP bridge against a minimal Python bridge
//!   (`bench/python_bridge.py`; docs/architecture.md#origin) under `wrk`: requests/s and p50/p99
//!   at 1, 8 and 32 clients, processes left, and resident memory.
//! - `bench mcp`: MCP `tools/call` round trips (p50/p99) and server start-up, against the fake
//!   droid, as ratios to bare fake-droid spawns and `droid-executor --version`.
//! - `bench completion [--runs N] [--real] [--executor PATH]`: how long the result takes once a
//!   lingering droid has completed (fake droid, or the real one outside airgap mode).
//! - `bench snapshot`: a run's overhead over a bare fake droid on generated repositories (1k,
//!   10k, 100k files; clean, dirty, one untracked 1 GiB file), next to `git status` there.
//! - `bench store [--tasks N] [--runs R] [--debug]`: `tasks show`, `tasks list` and `run` against
//!   a store of N tasks (10 000), as ratios to the same commands against a store of one.
//! - `bench processes`: a run's overhead over a bare fake-droid `exec` with 0, 100 and 2,000
//!   extra idle processes on the machine (`--bins DIR` measures another build the same way).
//! - `bench report [--quick] [--write]`: the benches behind `docs/performance.md`'s figures in
//!   one go (processes, snapshot, bridge, store, engine and completion on the real droid), as one
//!   Markdown section with the performance goals judged; `--write` replaces that page's marked
//!   section.
//! - `bench sandbox [--runs N] [--bins DIR]`: a run with `DROID_EXECUTOR_SANDBOX=landlock` against
//!   the same run with `off` (the cost of write confinement per run).
//! - `bench worktree [--runs N] [--files N,N,...] [--bins DIR]`: a run in a worktree of its own
//!   (made, run, discarded) against the same run in place, next to `git worktree add` plus
//!   `remove` on 1k/10k/100k-file repositories; four worktree tasks of an agent sleeping 2 s at
//!   once against one.
//! - `bench fanout [--runs N] [--files N] [--bins DIR]`: a `best_of` of three fake agents that
//!   sleep 2 s against one such worktree task (the ratio of wall times).
//! - `bench acp [--runs N] [--agent native|ours|both] [--debug] [--ours FILE] [--keep DIR]`:
//!   droid's native ACP mode against `droid-executor acp` on the same scripted scenarios (plain
//!   streamed answer, tools with permissions, a reject, a cancel mid-stream, a model switch,
//!   streamed reasoning):
//!   schema violations of every transcript, message chunks, time to the first chunk (against
//!   droid's own first delta), and the probes of native droid's recorded failures, side by side.
//! - `soak [--time SECS] [--check]`: the bridge and the MCP server under mixed traffic against
//!   the fake droid for a bounded time; throughput, p50/p99, errors, and RSS and open
//!   descriptors after the warm-up and at the end (`--check`: no errors, no process left, no
//!   growth).
//! - `reliability [--from FILE | --check [--observed FILE]]`: `docs/reliability.md`'s fault
//!   matrix from what the fault tests record, and its list of security probes from their tests.
//! - `fuzz [--time SECS] [--target NAME] [--stable]`: the cargo-fuzz targets in `fuzz/`, each for
//!   SECS (60), from the seeds in `fuzz/seeds/`; executions, rate, corpus size, crashes.
#![allow(clippy::disallowed_methods)] // automation: xtask runs cargo, npm, tar, python3 and the binaries it builds
#![allow(clippy::print_stdout)] // its reports go to stdout

mod agents;
mod bench;
mod bench_acp;
mod bench_bridge;
mod bench_completion;
mod bench_fanout;
mod bench_processes;
mod bench_report;
mod bench_sandbox;
mod bench_snapshot;
mod bench_store;
mod bench_worktree;
mod bridge_process;
mod ci;
mod demo;
mod doc_blocks;
mod droid;
mod figures;
mod fuzz;
mod interop;
mod preflight;
mod procfs;
mod protocol_doc;
mod reliability;
mod sandbox;
mod sh;
mod soak;
mod soak_bridge;
mod soak_mcp;
mod soak_mcp_session;
mod soak_raw_http;
mod soak_report;
mod soak_tally;
mod soak_world;

use anyhow::{Context, Result, bail};

use crate::sh::{cargo, run};

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match dispatch(&args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

const USAGE: &str = "usage: cargo xtask <preflight | fetch-droid | fetch-interop | test | ci | codegen [--check] | demo [--providers] [--check-readme | --write-readme] | bench engine [--runs N] [--provider P|all] | bench mcp [--calls N] [--starts K] | bench completion [--runs N] [--real] [--executor PATH] | bench bridge [--seconds S] [--repos R] | bench report [--quick] [--write] | bench store [--tasks N] [--runs R] [--debug] | bench processes [--runs N] [--idle K,K,...] [--bins DIR] | bench snapshot [--runs N] [--files N,N,...] [--bins DIR] | bench sandbox [--runs N] [--bins DIR] | bench worktree [--runs N] [--files N,N,...] [--bins DIR] | bench fanout [--runs N] [--files N] [--bins DIR] | bench acp [--runs N] [--agent native|ours|both] [--debug] [--ours FILE] [--keep DIR] | reliability [--from FILE | --check [--observed FILE]] | soak [--time SECS] [--check] | fuzz [--time SECS] [--target NAME] [--stable]>";

fn dispatch(args: &[&str]) -> Result<()> {
    match args {
        ["preflight"] => preflight::report(),
        ["fetch-droid"] => droid::fetch().map(|p| println!("droid 0.225.2: {}", p.display())),
        ["fetch-interop"] => interop::fetch().map(|clients| {
            for (client, place) in clients {
                println!("{client}: {}", place.display());
            }
        }),
        ["test", rest @ ..] => test(rest),
        ["ci"] => ci::ci(),
        ["codegen"] => codegen(false),
        ["codegen", "--check"] => codegen(true),
        ["demo", rest @ ..] => demo::demo(rest),
        ["bench", "engine", rest @ ..] => bench::engine(rest),
        ["bench", "bridge", rest @ ..] => bench_bridge::bridge(rest),
        ["bench", "acp", rest @ ..] => bench_acp::acp(rest),
        ["bench", "mcp", rest @ ..] => bench::mcp(rest),
        ["bench", "completion", rest @ ..] => bench_completion::completion(rest),
        ["bench", "snapshot", rest @ ..] => bench_snapshot::snapshot(rest),
        ["bench", "store", rest @ ..] => bench_store::store(rest),
        ["bench", "processes", rest @ ..] => bench_processes::processes(rest),
        ["bench", "report", rest @ ..] => bench_report::report(rest),
        ["bench", "sandbox", rest @ ..] => bench_sandbox::sandbox(rest),
        ["bench", "worktree", rest @ ..] => bench_worktree::worktree(rest),
        ["bench", "fanout", rest @ ..] => bench_fanout::fanout(rest),
        ["soak", rest @ ..] => soak::soak(rest),
        ["fuzz", rest @ ..] => fuzz::fuzz(rest),
        ["reliability", rest @ ..] => reliability::reliability(rest),
        _ => bail!("{USAGE}"),
    }
}

/// The preflight, fetch-droid and fetch-interop, then every test of the workspace, with the
/// fetched droid named explicitly.
fn test(extra: &[&str]) -> Result<()> {
    preflight::require("test", preflight::TEST)?;
    test_checked(extra)
}

/// [`test`] once the preflight passed.
fn test_checked(extra: &[&str]) -> Result<()> {
    let droid = droid::fetch()?;
    interop::fetch()?;
    // the CLI suites run the real binaries; build them first so they are never stale
    run(cargo().args(["build", "--workspace", "--bins"])).context("building the binaries")?;
    let mut cmd = cargo();
    cmd.args(["test", "--workspace", "--no-fail-fast"])
        .args(extra)
        .env("DROID_EXECUTOR_TEST_DROID", &droid);
    run(&mut cmd).context("the test suite failed")
}

fn codegen(check: bool) -> Result<()> {
    let root = sh::workspace_root();
    let files = [
        (
            "schemas/request.schema.json",
            droid_contract::request_schema(),
        ),
        (
            "schemas/result.schema.json",
            droid_contract::result_schema(),
        ),
        (
            "schemas/task-record.schema.json",
            droid_contract::task_record_schema(),
        ),
        (
            "schemas/worktree-answer.schema.json",
            droid_contract::worktree_answer_schema(),
        ),
        ("schemas/openapi.json", bridge_http::openapi::document()),
    ];
    let mut generated = Vec::new();
    for (rel, schema) in files {
        generated.push((rel, format!("{}\n", serde_json::to_string_pretty(&schema)?)));
    }
    generated.push((
        "skill/droid-executor/references/droid-executor-protocol.md",
        protocol_doc::render()?,
    ));
    let mut stale = Vec::new();
    for (rel, text) in generated {
        let path = root.join(rel);
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        if current == text {
            continue;
        }
        if check {
            stale.push(rel);
        } else {
            std::fs::create_dir_all(path.parent().context("schema path has a parent")?)?;
            std::fs::write(&path, text).with_context(|| format!("write {}", path.display()))?;
            println!("wrote {rel}");
        }
    }
    if !stale.is_empty() {
        bail!(
            "stale generated files: {} (run `cargo xtask codegen`)",
            stale.join(", ")
        );
    }
    Ok(())
}
