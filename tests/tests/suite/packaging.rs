//! The packaging files: `packaging/ecosystem.config.cjs` (pm2) and
//! `packaging/droid-executor-bridge.service` (systemd user unit) both start `droid-executor
//! serve`, restart it on failure and wait longer before SIGKILL than the bridge's worst-case
//! drain (`bridge_http::worst_case_drain` of the binary's default `--drain-grace`), as
//! `bridge stop` does: all three wait exactly `bridge_http::STOP_TIMEOUT`. Node loads the pm2
//! file (Node is required, as for the interop suites); `systemd-analyze verify` (the `systemd`
//! package; it needs no running systemd) checks every directive of the unit, whose sections are
//! also parsed here.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::droid_bin::{droid_executor_bin, workspace_root};
use tests::temp_dir::TempDir;

const PM2_FILE: &str = "packaging/ecosystem.config.cjs";
const UNIT_FILE: &str = "packaging/droid-executor-bridge.service";
/// Time for `node -e`, `systemd-analyze verify` or `droid-executor serve --help`.
const TOOL_LIMIT: Duration = Duration::from_secs(60);
/// The HOME the pm2 file is loaded with, so the paths it builds are known.
const HOME: &str = "/home/someone";

/// Runs `program ARGS` in the workspace root with exactly `env`; `None` when it cannot be
/// started (not installed).
#[allow(clippy::disallowed_methods)] // the suite runs node, systemd-analyze and the binary
async fn tool<S: AsRef<OsStr>>(program: &Path, args: &[S], env: &[(&str, &str)]) -> Option<Output> {
    let child = tokio::process::Command::new(program)
        .args(args)
        .env_clear()
        .envs(env.iter().copied())
        .current_dir(workspace_root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .ok()?;
    let out = tokio::time::timeout(TOOL_LIMIT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{} did not finish within {TOOL_LIMIT:?}", program.display()))
        .unwrap();
    Some(out)
}

fn path_var() -> String {
    std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into())
}

/// The default of the option whose help line starts with `flag` (`--name <`) in
/// `droid-executor ARGS --help`, from the binary's own help.
async fn default_of(args: &[&str], flag: &str) -> u64 {
    let mut all = args.to_vec();
    all.push("--help");
    let out = tool(&droid_executor_bin(), &all, &[])
        .await
        .unwrap_or_else(|| panic!("run droid-executor {all:?}"));
    let help = String::from_utf8(out.stdout).unwrap();
    let after = help
        .split(flag)
        .nth(1)
        .unwrap_or_else(|| panic!("no {flag} in {args:?} --help:\n{help}"));
    let default = after
        .split("[default: ")
        .nth(1)
        .and_then(|s| s.split(']').next())
        .unwrap_or_else(|| panic!("no default for {flag} in {args:?} --help:\n{help}"));
    default.parse().unwrap()
}

/// What a supervisor must wait before SIGKILL, checked against the binary: its default drain
/// grace is the server's ([`bridge_http::DRAIN_GRACE`]), and [`bridge_http::STOP_TIMEOUT`]
/// exceeds the worst-case drain with that grace. The wait, in seconds.
async fn stop_timeout_secs() -> u64 {
    let grace = default_of(&["serve"], "--drain-grace <").await;
    assert_eq!(grace, bridge_http::DRAIN_GRACE.as_secs());
    let worst = bridge_http::worst_case_drain(Duration::from_secs(grace));
    let stop = bridge_http::STOP_TIMEOUT;
    assert!(
        stop >= worst + bridge_http::STOP_MARGIN,
        "STOP_TIMEOUT {stop:?} leaves no margin over the worst-case drain {worst:?}"
    );
    stop.as_secs()
}

#[tokio::test]
async fn bridge_stop_waits_out_the_worst_case_drain() {
    let stop = stop_timeout_secs().await;
    assert_eq!(default_of(&["bridge", "stop"], "--grace <").await, stop);
}

#[tokio::test]
async fn pm2_file_loads_in_node_and_starts_serve() {
    let script =
        "process.stdout.write(JSON.stringify(require('./packaging/ecosystem.config.cjs')))";
    let path = path_var();
    let out = tool(
        Path::new("node"),
        &["-e", script],
        &[("PATH", path.as_str()), ("HOME", HOME)],
    )
    .await
    .unwrap_or_else(|| {
        panic!(
            "node is needed to check {PM2_FILE}: install Node.js 20 or later (e.g. apt-get \
             install -y nodejs)"
        )
    });
    assert!(
        out.status.success(),
        "node could not load {PM2_FILE}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let config: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        config,
        json!({"apps": [{
            "name": "droid-executor-bridge",
            "script": "/home/someone/.cargo/bin/droid-executor",
            "args": ["serve"],
            "interpreter": "none",
            "exec_mode": "fork",
            "instances": 1,
            "env": {"PORT": "53002", "DROID_TIMEOUT": "600"},
            "autorestart": true,
            "exp_backoff_restart_delay": 100,
            "min_uptime": "10s",
            "max_restarts": 10,
            "stop_exit_codes": [2],
            "kill_timeout": stop_timeout_secs().await * 1000,
            "treekill": false,
            "out_file": "/home/someone/.pm2/logs/droid-executor-bridge-out.log",
            "error_file": "/home/someone/.pm2/logs/droid-executor-bridge-error.log",
            "time": true,
        }]})
    );
}

/// `[section]` → key → values (a key may repeat, as `Environment=` does), in file order of
/// sections.
type Ini = Vec<(String, BTreeMap<String, Vec<String>>)>;

/// The unit file's sections; comments and blank lines skipped, every other line must be a
/// section header or `Key=value`.
fn parse_unit(text: &str) -> Ini {
    let mut ini: Ini = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            ini.push((name.to_owned(), BTreeMap::new()));
            continue;
        }
        let (key, value) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("{UNIT_FILE}:{}: not `Key=value`: {line}", n + 1));
        let (_, section) = ini
            .last_mut()
            .unwrap_or_else(|| panic!("{UNIT_FILE}:{}: a key before any section", n + 1));
        section
            .entry(key.trim().to_owned())
            .or_default()
            .push(value.trim().to_owned());
    }
    ini
}

#[tokio::test]
async fn systemd_unit_starts_serve_and_outlasts_the_drain() {
    let text = std::fs::read_to_string(workspace_root().join(UNIT_FILE)).unwrap();
    let ini = parse_unit(&text);
    let names: Vec<&str> = ini.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["Unit", "Service", "Install"]);
    let section = |name: &str| &ini.iter().find(|(n, _)| n == name).unwrap().1;
    let one = |name: &str, key: &str| -> String {
        let values = section(name)
            .get(key)
            .unwrap_or_else(|| panic!("[{name}] has no {key}="));
        assert_eq!(values.len(), 1, "[{name}] sets {key}= more than once");
        values[0].clone()
    };
    assert_eq!(
        one("Service", "ExecStart"),
        "%h/.cargo/bin/droid-executor serve"
    );
    assert_eq!(one("Service", "Restart"), "on-failure");
    assert_eq!(one("Service", "KillSignal"), "SIGTERM");
    assert_eq!(one("Install", "WantedBy"), "default.target");
    let stop: u64 = one("Service", "TimeoutStopSec").parse().unwrap();
    assert_eq!(
        stop,
        stop_timeout_secs().await,
        "TimeoutStopSec must be bridge_http::STOP_TIMEOUT: a shorter one cuts the drain short"
    );

    // systemd-analyze checks every directive (it needs no running systemd: system mode loads
    // the unit file alone; `--user` would need a user manager). It insists that ExecStart
    // exists, so it checks a copy that runs the built binary.
    let dir = TempDir::new("packaging").unwrap();
    let copy = dir.path().join("droid-executor-bridge.service");
    let exec = format!("ExecStart={} serve", droid_executor_bin().display());
    std::fs::write(
        &copy,
        text.replace("ExecStart=%h/.cargo/bin/droid-executor serve", &exec),
    )
    .unwrap();
    let path = path_var();
    let copy_arg = copy.as_os_str();
    let out = tool(
        Path::new("systemd-analyze"),
        &[OsStr::new("verify"), copy_arg],
        &[("PATH", path.as_str())],
    )
    .await
    .unwrap_or_else(|| {
        panic!(
            "systemd-analyze is needed to check {UNIT_FILE}: install it (apt-get install -y \
             systemd; no running systemd is needed)"
        )
    });
    // it reports a bad directive on stderr and still exits 0
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.trim().is_empty(),
        "systemd-analyze verify {UNIT_FILE} complained:\n{stderr}"
    );

    // and it does look: the same unit with a bad value and an unknown key is reported
    let bad = dir.path().join("droid-executor-bridge-bad.service");
    let broken = std::fs::read_to_string(&copy).unwrap().replace(
        "TimeoutStopSec=",
        "TimeoutStopSec=soon\nNoSuchDirective=1\n#",
    );
    std::fs::write(&bad, broken).unwrap();
    let out = tool(
        Path::new("systemd-analyze"),
        &[OsStr::new("verify"), bad.as_os_str()],
        &[("PATH", path.as_str())],
    )
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    for part in [
        "Failed to parse",
        "soon",
        "Unknown key 'NoSuchDirective' in section [Service]",
    ] {
        assert!(
            stderr.contains(part),
            "systemd-analyze verify did not report {part:?} in a broken unit:\n{stderr}"
        );
    }
}
