//! Issue 29, items 8 and 9: a run reaching out of itself by signals and abstract Unix sockets,
//! which Landlock's scopes (ABI 6, Linux 6.12; this suite expects a kernel that has them, as the
//! `sandbox` suite expects ABI 7) keep inside the run. The fake droid plays a hostile agent with
//! its `sh` step:
//!
//! - it stops a process the test started (a stand-in for the bridge, another run, any process of
//!   the user), and so does a verification command: both are refused, the process runs on;
//! - under the run's supervisor (`cgroups = false`, and every non-root user), it starts a
//!   `setsid env -i` survivor (no marker, a session of its own) and SIGKILLs the supervisor:
//!   refused, and the survivor ends with the run. Before the fix the supervisor died and the
//!   survivor lived on with ppid 1;
//! - it connects to an abstract Unix socket the test listens on: refused.
//!
//! Through the engine as root (a cgroup leaf, and the supervisor), and through the real
//! `droid-executor run` as a non-root user whose HOME is outside the system temp directory
//! ([`tests::non_root`]). What the agent writes (exit statuses, pids) goes into the repository;
//! every process a test starts, or finds in a pid file there, is killed by pid when it ends.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use droid_contract::Status;
use droid_exec::Engine;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::droid_bin::droid_executor_bin;
use tests::fake_droid::SCENARIO_ENV;
use tests::non_root::{Who, World};
use tests::procs::{is_alive, state, wait_gone};
use tests::temp_dir::TempDir;

use super::common::{Ran, engine, git, request, run};
use super::escape_git::Hostile;

/// How long a process of a finished run may take to be gone (the run's result comes at the
/// completion event; the tree is ended in the background, after a kill grace of 1 s here).
const GONE: Duration = Duration::from_secs(10);

/// The agent's `sh` step that starts the survivor of item 8 and then SIGKILLs droid's parent
/// (the supervisor), writing the survivor's pid, the supervisor's and `kill`'s exit status into
/// the repository.
const KILL_THE_SUPERVISOR: &str = "setsid env -i sh -c 'echo $$ > survivor.pid; exec sleep 4321' \
     < /dev/null > /dev/null 2>&1 & \
     while [ ! -s survivor.pid ]; do sleep 0.01; done; \
     sup=$(cut -d' ' -f4 /proc/$PPID/stat); echo $sup > supervisor.txt; \
     kill -KILL $sup; echo $? > kill.status; sleep 0.2";

/// How the engine holds the run's tree.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Tree {
    /// A cgroup leaf where this process may make one (root in a container), else the supervisor.
    Cgroup,
    /// The run's supervisor process (`droid-executor guard`), as for a user without cgroups.
    Supervisor,
}

/// The engine driving the fake droid in a repository `~/repo` of a world laid out as the
/// non-root one, as this process's user.
struct Probe {
    world: World,
    /// The engine's scratch root, held for the test's length.
    _scratch: TempDir,
    engine: Engine,
}

impl Probe {
    fn new(tree: Tree, commands: &[String]) -> Probe {
        let world = World::as_root("escape-signals").unwrap();
        let repo = world.home().join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        std::fs::write(repo.join("a.txt"), "a\n").unwrap();
        git(&repo, &["init", "-q"]);
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-qm", "initial"]);
        let scenario = world.dir().join("scenario.json");
        std::fs::write(&scenario, json!({ "steps": steps(commands) }).to_string()).unwrap();
        let scratch = TempDir::new("escape-scratch").unwrap();
        let env = vec![
            ("PATH".into(), std::env::var_os("PATH").unwrap_or_default()),
            ("HOME".into(), world.home().into()),
            (SCENARIO_ENV.into(), scenario.into()),
        ];
        let mut cfg = engine(tests::fake_droid_bin!(), env, scratch.path())
            .config()
            .clone();
        cfg.kill_grace = Duration::from_secs(1);
        cfg.supervisor = Some(droid_executor_bin());
        cfg.cgroups = tree == Tree::Cgroup;
        Probe {
            world,
            _scratch: scratch,
            engine: Engine::new(cfg),
        }
    }

    fn repo(&self) -> PathBuf {
        self.world.home().join("repo")
    }

    async fn run(&self, extra: Value) -> Ran {
        run(&self.engine, &request(&self.repo(), "Escape", extra)).await
    }
}

/// The fake droid's steps: each command as an `sh` step, then a completion.
fn steps(commands: &[String]) -> Value {
    let mut steps: Vec<Value> = commands.iter().map(|c| json!({ "sh": c })).collect();
    steps.push(json!({"completion": "Done."}));
    Value::Array(steps)
}

/// What the agent wrote to `name` in `repo`, trimmed.
fn read(repo: &Path, name: &str) -> String {
    std::fs::read_to_string(repo.join(name))
        .unwrap_or_else(|e| panic!("the agent wrote no {name}: {e}"))
        .trim()
        .to_owned()
}

/// Kills, when dropped, every live process a `*.pid` file in the repository names (what a
/// failed test would otherwise leave behind).
struct KillListed(PathBuf);

impl Drop for KillListed {
    fn drop(&mut self) {
        let Ok(entries) = std::fs::read_dir(&self.0) else {
            return;
        };
        for e in entries.flatten() {
            if e.path().extension().is_some_and(|x| x == "pid")
                && let Ok(pid) = std::fs::read_to_string(e.path())
                && let Ok(pid) = pid.trim().parse::<i32>()
                && is_alive(pid)
            {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

/// A process outside every run, as `world`'s user (a stand-in for the bridge or any process of
/// that user); killed when dropped.
async fn victim(world: &World) -> (tokio::process::Child, i32) {
    let child = world
        .command(Path::new("sleep"))
        .arg("4322")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = i32::try_from(child.id().unwrap()).unwrap();
    // `setpriv` (as root, for the non-root user) executes `sleep` in the same process
    let until = tokio::time::Instant::now() + Duration::from_secs(5);
    while std::fs::read_to_string(format!("/proc/{pid}/comm")).map_or(true, |c| c.trim() != "sleep")
    {
        assert!(tokio::time::Instant::now() < until, "sleep never started");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    (child, pid)
}

/// `pid` is neither stopped nor gone.
fn assert_running(pid: i32, who: &str) {
    assert_eq!(
        state(pid),
        Some('S'),
        "pid {pid} (outside the run) was stopped or ended by {who}"
    );
}

/// The agent stops the victim; so does a verification command. Both are refused (`kill`
/// fails), and the victim is not stopped.
async fn signals_stay_inside(tree: Tree) {
    let world = World::as_root("escape-signals-victim").unwrap();
    let (_victim, pid) = victim(&world).await;
    let p = Probe::new(tree, &[format!("kill -STOP {pid}; echo $? > kill.status")]);
    let ran = p
        .run(json!({"suggested_commands": [format!("kill -STOP {pid}")]}))
        .await;
    assert_ne!(
        read(&p.repo(), "kill.status"),
        "0",
        "the agent stopped pid {pid}: {:#?}",
        ran.result
    );
    assert_running(pid, "the agent");
    let verify: Vec<_> = ran
        .commands()
        .into_iter()
        .filter(|c| c.0 == "verify")
        .collect();
    assert_eq!(verify.len(), 1, "{:#?}", ran.result);
    assert_ne!(
        verify[0].2,
        Some(0),
        "the verification command stopped pid {pid}"
    );
    assert_running(pid, "the verification command");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_in_a_leaf_cannot_signal_a_process_outside_it() {
    signals_stay_inside(Tree::Cgroup).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_supervised_run_cannot_signal_a_process_outside_it() {
    signals_stay_inside(Tree::Supervisor).await;
}

/// As a non-root user through `droid-executor run`: the victim is that user's own process (the
/// case of the probe: `kill -STOP <bridge pid>` froze the bridge).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_cannot_signal_its_own_user_s_processes_as_non_root() {
    let h = Hostile::new(
        "escape-signals-user",
        Who::NonRoot,
        &steps(&["kill -STOP $(cat victim.pid); echo $? > kill.status".to_owned()]),
    );
    let (_victim, pid) = victim(&h.world).await;
    h.write("repo/victim.pid", &format!("{pid}\n"));
    let res = h.run().await;
    assert_ne!(
        read(&h.repo(), "kill.status"),
        "0",
        "the agent stopped pid {pid}: {res:#?}"
    );
    assert_running(pid, "the agent");
}

/// Item 8 through the engine as root, with the supervisor (`cgroups = false`): the agent aims
/// at its supervisor, the kill is refused (the supervisor is outside droid's Landlock domain),
/// and the supervisor ends the tree, survivor included, when droid is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_kills_its_supervisor_leaves_nothing_behind() {
    let p = Probe::new(Tree::Supervisor, &[KILL_THE_SUPERVISOR.to_owned()]);
    let _cleanup = KillListed(p.repo());
    let ran = p.run(json!({})).await;
    let repo = p.repo();
    let survivor: i32 = read(&repo, "survivor.pid").parse().unwrap();
    assert!(
        wait_gone(survivor, GONE).await,
        "pid {survivor} (setsid env -i sleep 4321) survived the run: {:#?}",
        ran.result
    );
    // the agent aimed at the supervisor: the process the engine started
    assert_eq!(read(&repo, "supervisor.txt"), ran.droid_pid().to_string());
    assert_ne!(
        read(&repo, "kill.status"),
        "0",
        "the agent killed its supervisor"
    );
    assert_eq!(ran.result.status, Status::Success, "{:#?}", ran.result);
}

/// Item 8 as the probe ran it: a non-root user (no cgroup to be had, so the supervisor) through
/// `droid-executor run`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_kills_its_supervisor_leaves_nothing_behind_as_non_root() {
    let h = Hostile::new(
        "escape-signals-survivor",
        Who::NonRoot,
        &steps(&[KILL_THE_SUPERVISOR.to_owned()]),
    );
    let _cleanup = KillListed(h.repo());
    let res = h.run().await;
    let survivor: i32 = read(&h.repo(), "survivor.pid").parse().unwrap();
    assert!(
        wait_gone(survivor, GONE).await,
        "pid {survivor} (setsid env -i sleep 4321) survived the run: {res:#?}"
    );
    assert_ne!(
        read(&h.repo(), "kill.status"),
        "0",
        "the agent killed its supervisor"
    );
    assert_eq!(res.status, Status::Success, "{res:#?}");
}

/// An abstract Unix socket the test listens on (a stand-in for a front-end's or another
/// program's) cannot be reached from a run; the same client, run by the test, can.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_cannot_connect_to_an_abstract_socket_outside_it() {
    use std::os::linux::net::SocketAddrExt as _;
    let name = format!("droid-executor-escape-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let _listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    let client = format!(
        "perl -MSocket -e 'socket(my $s, AF_UNIX, SOCK_STREAM, 0) or exit 2; \
         connect($s, pack_sockaddr_un(\"\\0{name}\")) or exit 1; exit 0'"
    );
    assert_eq!(sh_status(&client), Some(0), "{client}");
    let p = Probe::new(
        Tree::Cgroup,
        &[format!("{client}; echo $? > connect.status")],
    );
    let ran = p.run(json!({})).await;
    assert_eq!(
        read(&p.repo(), "connect.status"),
        "1",
        "the agent reached @{name}: {:#?}",
        ran.result
    );
}

/// `sh -c command`'s exit code, run by the test itself.
#[allow(clippy::disallowed_methods)] // the control case runs outside any run
fn sh_status(command: &str) -> Option<i32> {
    std::process::Command::new("sh")
        .args(["-c", command])
        .status()
        .unwrap_or_else(|e| panic!("sh -c {command:?}: {e} (perl is part of every Debian base)"))
        .code()
}
