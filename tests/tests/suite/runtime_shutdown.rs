//! A runtime shut down while runs are under way (a test that fails mid-run, a front-end that
//! returns from `main`): the runs' futures are dropped with their droid alive, each born in a
//! cgroup leaf (`LeafChild`). Dropping such a child once spawned a task to reap it, which the
//! shutting-down runtime dropped at once, dropping the child again, until the stack overflowed
//! (`thread 'tokio-rt-worker' has overflowed its stack`, issue 35): the whole test binary
//! aborted. Now every child is killed, and reaped without a runtime.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use droid_exec::{EVENT_CHANNEL_CAPACITY, Engine, RunEvent};
use serde_json::json;
use tests::fake_droid::SCENARIO_ENV;
use tests::temp_dir::TempDir;
use tokio_util::sync::CancellationToken;

use super::common::{engine, git_repo, request};

/// Runs under way when the runtime goes.
const RUNS: usize = 3;
/// How long a killed process may take to be reaped (it leaves the process table then).
const REAPED: Duration = Duration::from_secs(10);

/// `pid`'s start time (field 22 of `/proc/<pid>/stat`, in clock ticks since boot): the same pid
/// with another start time is another process.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // the fields after the command name, which is in parentheses and may hold anything
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

/// `pid`'s first argument, to tell droid from a supervisor (`droid-executor guard …`).
fn first_arg(pid: u32) -> Vec<u8> {
    let argv = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    argv.split(|b| *b == 0).nth(1).unwrap_or_default().to_vec()
}

#[test]
fn a_runtime_shut_down_mid_run_kills_and_reaps_every_leaf_child_without_recursing() {
    let dir = TempDir::new("shutdown-fake-droid").unwrap();
    let scratch = TempDir::new("shutdown-scratch").unwrap();
    let scenario = dir.path().join("scenario.json");
    std::fs::write(&scenario, json!({"steps": [{"hang": true}]}).to_string()).unwrap();
    let env = vec![
        ("PATH".into(), std::env::var_os("PATH").unwrap_or_default()),
        (SCENARIO_ENV.into(), scenario.into()),
    ];
    let mut cfg = engine(tests::fake_droid_bin!(), env, scratch.path())
        .config()
        .clone();
    cfg.supervisor = Some(tests::droid_bin::droid_executor_bin());
    cfg.cgroups = true;
    cfg.max_concurrent = RUNS;
    let engine = Arc::new(Engine::new(cfg));
    let repos: Vec<TempDir> = (0..RUNS).map(|_| git_repo(&[("a.txt", "x\n")])).collect();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut droids = Vec::new();
    for repo in &repos {
        droids.push(runtime.block_on(start(&runtime, &engine, repo.path())));
    }
    for &(pid, _) in &droids {
        assert_ne!(
            first_arg(pid),
            b"guard",
            "the run went under a supervisor process, not a cgroup leaf: this machine gives no \
             writable cgroup v2 hierarchy (mount cgroup2 read-write and run the suite as a user \
             that may write to its own cgroup, e.g. root in a container or a systemd unit with \
             Delegate=yes)"
        );
    }

    // the runs' futures, each holding droid alive in its leaf, are dropped here
    drop(runtime);

    // every droid is gone from the process table: killed, and reaped (a zombie is still there)
    let until = Instant::now() + REAPED;
    let left = loop {
        let left: Vec<(u32, Option<char>)> = droids
            .iter()
            .filter(|&&(pid, started)| start_time(pid) == Some(started))
            .map(|&(pid, _)| (pid, i32::try_from(pid).ok().and_then(tests::procs::state)))
            .collect();
        if left.is_empty() || Instant::now() >= until {
            break left;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(
        left,
        Vec::new(),
        "droid processes (pid, state) of the dropped runs still in the process table after {REAPED:?}"
    );
    drop(engine);
}

/// Start a run on `repo` in `runtime`; once droid is started (it has executed), its pid and
/// start time.
async fn start(runtime: &tokio::runtime::Runtime, engine: &Arc<Engine>, repo: &Path) -> (u32, u64) {
    let (tx, mut rx) = tokio::sync::mpsc::channel(EVENT_CHANNEL_CAPACITY);
    let request = request(repo, "Work until stopped", json!({}));
    let engine = Arc::clone(engine);
    runtime.spawn(async move {
        engine
            .execute(&request, CancellationToken::new(), Some(tx))
            .await
    });
    let started = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(e) = rx.recv().await {
            if let RunEvent::Started { pid, .. } = e {
                return Some(pid);
            }
        }
        None
    })
    .await;
    let Ok(Some(pid)) = started else {
        panic!("the run's droid never started: {started:?}");
    };
    let started = start_time(pid).expect("droid is not in the process table");
    (pid, started)
}
