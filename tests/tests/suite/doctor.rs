//! `droid-executor doctor`'s checks of this machine beyond droid itself, with the fake droid: the
//! `bridge` line (the port free, our bridge daemon running there with its pid, or another
//! program listening) and the `skill` line (not installed, up to date, edited locally), in the
//! listing and in `--json`; and `allowed_roots` reported as what runs will use.
//!
//! A bridge a test starts is stopped by the test; a [`DaemonGuard`] kills it by the pid its pid
//! file names if the test fails first, never by name.

use std::ffi::OsString;
use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::procs::wait_gone;

use super::binary::{FakeHome, Out, droid_executor};
use super::bridge_harness::DaemonGuard;

/// Time a stopped bridge gets to be gone.
const GONE_LIMIT: Duration = Duration::from_secs(10);

/// A port on 127.0.0.1 that was free a moment ago.
fn free_port() -> u16 {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    l.local_addr().unwrap().port()
}

/// One line of the listing: the level padded to 4, the check's name to 13.
fn line(level: &str, name: &str, detail: &str) -> String {
    format!("{level:<4} {name:<13} {detail}")
}

/// The line under a check that says how to fix it.
fn fix(text: &str) -> String {
    format!("     {:<13} fix: {text}", "")
}

/// The lines of `out` from the check `name` on, up to the next check.
fn check_lines<'a>(out: &'a Out, name: &str) -> Vec<&'a str> {
    let lines: Vec<&str> = out.stdout.lines().collect();
    let at = lines
        .iter()
        .position(|l| {
            l.get(5..)
                .is_some_and(|r| r.split_whitespace().next() == Some(name))
        })
        .unwrap_or_else(|| panic!("no {name} line:\n{}", out.stdout));
    let mut mine = vec![lines[at]];
    mine.extend(
        lines[at + 1..]
            .iter()
            .take_while(|l| l.starts_with("     ")),
    );
    mine
}

/// The fake droid's HOME and a port for its bridge.
struct Home {
    fake: FakeHome,
    port: u16,
}

impl Home {
    fn new(prefix: &str) -> Home {
        Home {
            fake: FakeHome::new(prefix, &[]),
            port: free_port(),
        }
    }

    fn store(&self) -> PathBuf {
        self.fake.file(".local/state/droid-executor")
    }

    fn skill_dir(&self) -> PathBuf {
        self.fake.file(".claude/skills/droid-executor")
    }

    /// The fake droid's environment with `PORT` = this HOME's port, and `extra`.
    fn env(&self, extra: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        let mut env = self.fake.env();
        env.push(("PORT".into(), self.port.to_string().into()));
        env.extend(extra.iter().map(|(k, v)| ((*k).into(), (*v).into())));
        env
    }

    async fn run(&self, args: &[&str]) -> Out {
        droid_executor(args, &self.env(&[]), &self.fake.repo()).await
    }

    /// `doctor`, checked to have run every check without a FAIL.
    async fn doctor(&self, extra: &[(&str, &str)]) -> Out {
        let out = droid_executor(&["doctor"], &self.env(extra), &self.fake.repo()).await;
        assert_eq!(out.code, Some(0), "{out:#?}");
        out
    }
}

/// The pid in `… (pid N)…`.
fn pid_in(text: &str) -> i32 {
    text.split("(pid ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no \"(pid N)\" in {text:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bridge_line_says_a_free_port_is_free() {
    let home = Home::new("doctor-free");
    let out = home.doctor(&[]).await;
    assert_eq!(
        check_lines(&out, "bridge"),
        [line(
            "OK",
            "bridge",
            &format!(
                "port {} is free; the bridge is not running (`droid-executor bridge start` or \
                 `run --via bridge` starts it)",
                home.port
            )
        )]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bridge_line_names_our_running_bridge_and_its_pid() {
    let home = Home::new("doctor-bridge");
    let guard = DaemonGuard::new(&home.store(), home.port);
    let p = home.port.to_string();
    let started = home.run(&["bridge", "start", "--port", &p]).await;
    assert_eq!(started.code, Some(0), "{started:#?}");
    let pid = pid_in(&started.stdout);
    guard.saw(pid);

    let out = home.doctor(&[]).await;
    assert_eq!(
        check_lines(&out, "bridge"),
        [line(
            "OK",
            "bridge",
            &format!("running on http://127.0.0.1:{p} (pid {pid})")
        )]
    );

    let stopped = home.run(&["bridge", "stop", "--port", &p]).await;
    assert_eq!(stopped.code, Some(0), "{stopped:#?}");
    assert!(
        wait_gone(pid, GONE_LIMIT).await,
        "the bridge {pid} survived"
    );
    let out = home.doctor(&[]).await;
    assert!(
        check_lines(&out, "bridge")[0].starts_with(&line(
            "OK",
            "bridge",
            &format!("port {p} is free;")
        )),
        "{}",
        out.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bridge_line_warns_of_another_program_on_the_port() {
    let home = Home::new("doctor-foreign");
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, home.port)).unwrap();
    let out = home.doctor(&[]).await;
    assert_eq!(
        check_lines(&out, "bridge"),
        [
            line(
                "WARN",
                "bridge",
                &format!(
                    "port {} is in use by another program (or a bridge with another store)",
                    home.port
                )
            ),
            fix("set port in the config (or PORT) to a free port for the bridge"),
        ]
    );
    drop(listener);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_skill_line_follows_the_installed_skill() {
    let home = Home::new("doctor-skill");
    let dir = home.skill_dir();
    let out = home.doctor(&[]).await;
    assert_eq!(
        check_lines(&out, "skill"),
        [
            line(
                "WARN",
                "skill",
                &format!("not installed in {}", dir.display())
            ),
            fix("droid-executor setup skill (Claude Code then offers it to the model)"),
        ]
    );

    let setup = home.run(&["setup", "skill"]).await;
    assert_eq!(setup.code, Some(0), "{setup:#?}");
    let out = home.doctor(&[]).await;
    assert_eq!(
        check_lines(&out, "skill"),
        [line(
            "OK",
            "skill",
            &format!("installed in {} (up to date)", dir.display())
        )]
    );
    let json_out = droid_executor(&["doctor", "--json"], &home.env(&[]), &home.fake.repo()).await;
    assert_eq!(json_out.code, Some(0), "{json_out:#?}");
    let checks: Value = serde_json::from_str(&json_out.stdout).unwrap();
    let names: Vec<&str> = checks
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["check"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "config",
            "droid",
            "auth",
            "allowed_roots",
            "store",
            "bridge",
            "skill"
        ]
    );
    assert_eq!(
        checks[6],
        json!({"check": "skill", "level": "ok",
               "detail": format!("installed in {} (up to date)", dir.display()), "fix": ""})
    );
    assert_eq!(checks[5]["check"], "bridge");
    assert_eq!(checks[5]["level"], "ok");

    std::fs::write(dir.join("SKILL.md"), "my edits\n").unwrap();
    let out = home.doctor(&[]).await;
    assert_eq!(
        check_lines(&out, "skill"),
        [
            line(
                "WARN",
                "skill",
                &format!("{} has local edits in SKILL.md", dir.display())
            ),
            fix("keep them, or replace them with: droid-executor setup skill --force"),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_allowed_roots_variable_is_reported_as_what_runs_use() {
    // `DROID_EXECUTOR_ALLOWED_ROOTS=` either means unset (HOME, as with no variable) or no
    // restriction (any directory may be a repo_root, a WARN); an OK with no root named is neither
    let home = Home::new("doctor-roots");
    let out = home.doctor(&[("DROID_EXECUTOR_ALLOWED_ROOTS", "")]).await;
    let got = check_lines(&out, "allowed_roots");
    let as_unset = vec![line(
        "OK",
        "allowed_roots",
        &home.fake.path().display().to_string(),
    )];
    let as_open = vec![
        line(
            "WARN",
            "allowed_roots",
            "none configured: any directory may be a repo_root",
        ),
        fix("set allowed_roots in the config"),
    ];
    assert!(
        got == as_unset || got == as_open,
        "DROID_EXECUTOR_ALLOWED_ROOTS= is reported as {got:?}"
    );
}
