//! A run reaching past its limits (issue 29, items 7 and 14). The fake droid plays a hostile
//! agent with its `sh` step:
//!
//! - it plants a test file that our verification runs, which writes out its whole environment:
//!   none of the provider keys or the bridge token the caller's environment holds may be there,
//!   whatever the run's provider needs (`droid-executor run`, as a user starts it);
//! - it reads its own cgroup and limits, starts 40 sleeps against `max_pids = 20`, and a process
//!   holding 600 MiB against `max_memory_mb = 256`: the leaf's `pids.max` and `memory.max` where
//!   the front-end's cgroup passes those controllers down, else the rlimits each process sets
//!   ([`droid_exec::process::limits::process_limits`] says which applies here, as `doctor` does),
//!   bound them.
//!
//! What the agent writes goes into the repository, which a confined run may write.

use std::ffi::OsString;
use std::time::Duration;

use droid_exec::Engine;
use droid_exec::config::RunLimits;
use droid_exec::process::cgroup::process_limits;
use droid_exec::process::limits::{Bound, ProcessLimits};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::droid_bin::droid_executor_bin;
use tests::fake_droid::SCENARIO_ENV;
use tests::temp_dir::TempDir;

use super::binary::{FakeHome, droid_executor};
use super::common::{Ran, engine, git_repo, request, run};

/// The secrets of the caller's environment: every provider's key and the bridge's token.
const SECRETS: &[(&str, &str)] = &[
    ("FACTORY_API_KEY", "fk-escape-factory-000001"),
    ("OPENAI_API_KEY", "sk-escape-openai-0000000000002"),
    ("CODEX_API_KEY", "escape-codex-000003"),
    ("ANTHROPIC_API_KEY", "sk-ant-escape-00000000000004"),
    ("ANTHROPIC_AUTH_TOKEN", "escape-anthropic-token-05"),
    ("GEMINI_API_KEY", "escape-gemini-000006"),
    ("GOOGLE_API_KEY", "escape-google-000007"),
    ("DROID_EXECUTOR_TOKEN", "escape-bridge-token-000008"),
    // a key the user passes through for an agent (OpenCode reads it)
    ("OPENROUTER_API_KEY", "escape-openrouter-000009"),
];

/// `NAME=value` lines of an environment dump.
fn names(dump: &str) -> Vec<&str> {
    dump.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, _)| k)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verification_gets_no_provider_key_and_no_token_of_ours() {
    // the token and the agent's extra key are even listed for passing through
    let fake = FakeHome::new(
        "escape-env",
        &["DROID_EXECUTOR_TOKEN", "OPENROUTER_API_KEY"],
    );
    let agent_dump = fake.fixture("agent-env.txt");
    let verify_dump = fake.fixture("verify-env.txt");
    fake.play(&json!([
        {"sh": format!(
            "env > '{}'; printf '%s\\n' \"env > '{}'\" > test_all.sh",
            agent_dump.display(),
            verify_dump.display()
        )},
        {"completion": "Planted test_all.sh."}
    ]));
    let mut env = fake.env();
    env.extend(
        SECRETS
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v))),
    );
    let repo = fake.repo().display().to_string();
    let out = droid_executor(
        &[
            "run",
            "--json",
            "--repo",
            &repo,
            "--command",
            "sh test_all.sh",
            "Add tests",
        ],
        &env,
        fake.path(),
    )
    .await;
    let result = out.result();
    assert_eq!(result.tests.passed, Some(true), "{out:#?}");

    // the agent (droid) had its own key: the caller's environment did reach the engine
    let agent = std::fs::read_to_string(&agent_dump).unwrap();
    assert!(names(&agent).contains(&"FACTORY_API_KEY"), "{agent}");
    assert!(names(&agent).contains(&"OPENROUTER_API_KEY"), "{agent}");

    let verify = std::fs::read_to_string(&verify_dump).unwrap();
    let leaked: Vec<&str> = SECRETS
        .iter()
        .filter(|(k, v)| names(&verify).contains(k) || verify.contains(v))
        .map(|(k, _)| *k)
        .collect();
    assert_eq!(
        leaked,
        Vec::<&str>::new(),
        "verification's environment:\n{verify}"
    );
    for kept in [
        "PATH",
        "HOME",
        "TMPDIR",
        "DROID_EXECUTOR_RUN_ID",
        SCENARIO_ENV,
    ] {
        assert!(names(&verify).contains(&kept), "{kept} missing:\n{verify}");
    }
}

/// Where `prefix`'s cgroup and limits go: `<prefix>cgroup.txt`, `<prefix>limits.txt` and its
/// leaf's `<prefix>pids.max.txt`, `<prefix>memory.max.txt` (`absent` without the file).
fn where_am_i(prefix: &str) -> String {
    format!(
        "cat /proc/self/cgroup > {prefix}cgroup.txt; cat /proc/self/limits > {prefix}limits.txt; \
         mnt=$(awk '{{for (i = 7; i <= NF; i++) if ($i == \"-\") {{ if ($(i + 1) == \"cgroup2\") print $5; break }}}}' /proc/self/mountinfo | head -n 1); \
         leaf=\"$mnt$(sed -n 's/^0:://p' /proc/self/cgroup)\"; \
         for f in pids.max memory.max; do \
           cat \"$leaf/$f\" > \"{prefix}$f.txt\" 2>/dev/null || echo absent > \"{prefix}$f.txt\"; \
         done"
    )
}

/// What the hostile agent does: where it is, then 40 sleeps (at most 20 s, each 3 s), and
/// 600 MiB held by `tail`.
fn probes() -> Vec<String> {
    vec![
        where_am_i(""),
        "timeout 20 sh -c 'for i in $(seq 40); do (echo $i >> started.txt; exec sleep 3) & done; wait' 2> fork.err; true".into(),
        "head -c 700m /dev/zero | tail -c 600m > /dev/null 2> hog.err; echo $? > hog.status".into(),
    ]
}

/// The limits the test asks for.
const LIMITS: RunLimits = RunLimits {
    max_pids: 20,
    max_memory_mb: 256,
};

/// An engine on the fake droid with [`LIMITS`], in a cgroup leaf where this process may make
/// one (`cgroups`), else under the run's supervisor.
struct Bounded {
    repo: TempDir,
    _files: TempDir,
    _scratch: TempDir,
    engine: Engine,
}

impl Bounded {
    fn new(cgroups: bool) -> Bounded {
        let repo = git_repo(&[("a.txt", "a\n")]);
        let files = TempDir::new("escape-limits").unwrap();
        let scratch = TempDir::new("escape-limits-scratch").unwrap();
        let env = vec![
            ("PATH".into(), std::env::var_os("PATH").unwrap_or_default()),
            (
                SCENARIO_ENV.into(),
                files.path().join("scenario.json").into(),
            ),
        ];
        let mut cfg = engine(tests::fake_droid_bin!(), env, scratch.path())
            .config()
            .clone();
        cfg.kill_grace = Duration::from_secs(1);
        cfg.supervisor = Some(droid_executor_bin());
        cfg.cgroups = cgroups;
        cfg.limits = LIMITS;
        let mut steps: Vec<Value> = probes().iter().map(|c| json!({ "sh": c })).collect();
        steps.push(json!({"completion": "Done."}));
        std::fs::write(
            files.path().join("scenario.json"),
            json!({ "steps": steps }).to_string(),
        )
        .unwrap();
        Bounded {
            repo,
            _files: files,
            _scratch: scratch,
            engine: Engine::new(cfg),
        }
    }

    async fn run(&self) -> Ran {
        // a verification command is bounded as the agent is
        let verify = json!({"suggested_commands": [where_am_i("verify-")]});
        run(&self.engine, &request(self.repo.path(), "Escape", verify)).await
    }

    /// What the agent wrote to `name` in the repository, trimmed.
    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.repo.path().join(name))
            .unwrap_or_else(|e| panic!("the agent wrote no {name}: {e}"))
            .trim()
            .to_owned()
    }
}

/// The soft and hard values of `/proc/<pid>/limits`' line `name`.
fn limit(limits: &str, name: &str) -> (String, String) {
    let line = limits
        .lines()
        .find(|l| l.starts_with(name))
        .unwrap_or_else(|| panic!("no {name} in:\n{limits}"));
    let mut values = line[name.len()..].split_whitespace();
    let soft = values.next().unwrap().to_owned();
    let hard = values.next().unwrap().to_owned();
    (soft, hard)
}

/// The agent's tree is bounded as `process_limits` says for `cgroups`, and a fork bomb and a
/// memory hog stop at the bounds.
async fn the_agent_is_bounded(cgroups: bool) {
    let expected = process_limits(cgroups, LIMITS);
    let bounded = Bounded::new(cgroups);
    let ran = bounded.run().await;
    let cgroup = bounded.read("cgroup.txt");
    let limits = bounded.read("limits.txt");
    let context = format!(
        "expected: {expected}\ncgroup: {cgroup}\n{limits}\n{:#?}",
        ran.result
    );
    let started = bounded.read("started.txt").lines().count();
    if let Bound::Cgroup(_) = expected.pids {
        // the agent, its shells and `timeout` count too
        assert!(started < 20, "{started} sleeps started: {context}");
    }
    for who in ["", "verify-"] {
        bounded_as_expected(&bounded, who, &expected, &context);
    }
    assert_ne!(
        bounded.read("hog.status"),
        "0",
        "600 MiB were held under a 256 MiB limit: {context}"
    );
    if cgroups && nix::unistd::geteuid().is_root() {
        let path = cgroup
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .unwrap_or_default();
        assert!(
            path.contains("/droid-executor-") && path.contains("/run-"),
            "the agent is not in a run's leaf: {context}"
        );
    }
}

/// What `who` (the agent, `verify-` the verification command) read of its limits matches
/// `expected`.
fn bounded_as_expected(bounded: &Bounded, who: &str, expected: &ProcessLimits, context: &str) {
    let limits = bounded.read(&format!("{who}limits.txt"));
    let context = format!("{who}limits.txt:\n{limits}\n{context}");
    match &expected.pids {
        Bound::Cgroup(n) => {
            assert_eq!(
                bounded.read(&format!("{who}pids.max.txt")),
                n.to_string(),
                "{context}"
            );
        }
        Bound::Rlimit(_) => {
            let (soft, hard) = limit(&limits, "Max processes");
            assert_eq!(soft, hard, "{context}");
            assert!(soft.parse::<u64>().is_ok(), "{context}");
        }
        Bound::Off | Bound::Unbounded(_) => {
            assert!(
                nix::unistd::geteuid().is_root(),
                "tasks unbounded though not root: {context}"
            );
        }
    }
    match &expected.memory {
        Bound::Cgroup(n) => {
            assert_eq!(
                bounded.read(&format!("{who}memory.max.txt")),
                n.to_string(),
                "{context}"
            );
        }
        Bound::Rlimit(n) => {
            let n = n.to_string();
            assert_eq!(
                limit(&limits, "Max data size"),
                (n.clone(), n),
                "the child did not set its rlimits before exec (Rlimits::set_on_self, called by \
                 process/spawn.rs and process/spawn/leaf.rs): {context}"
            );
        }
        Bound::Off | Bound::Unbounded(_) => panic!("memory unbounded: {context}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_in_a_leaf_is_bounded() {
    the_agent_is_bounded(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_under_its_supervisor_is_bounded() {
    the_agent_is_bounded(false).await;
}
