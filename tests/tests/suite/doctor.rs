//! `droid-executor doctor`'s checks of this machine, with the fake droid and stand-ins built in
//! each test's temp dir: the `config` line (a `--config` file that does not exist is a FAIL, as
//! every other command refuses it), the `droid` line (a version outside the tested one is a WARN;
//! a droid whose npm package.json is fine but whose binary does not run is a FAIL: doctor runs
//! `droid --version`; its fixes name the pinned install line), the `auth` line (a key, custom
//! models with the id of each and whether a run given no model works, neither), the `store`
//! line (a store that cannot be created or written is a FAIL), the `bridge` line (the port free,
//! our bridge daemon running there with its pid, or another program listening, on the configured
//! host) and the `skill` line (not installed, up to date, edited locally; `--skills-dir` for another root),
//! each as its exact lines and with the exit code; and `allowed_roots` reported as what runs will
//! use.
//!
//! A bridge a test starts is stopped by the test; a [`DaemonGuard`] kills it by the pid its pid
//! file names if the test fails first, never by name.

use std::ffi::OsString;
use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
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
pub(super) fn line(level: &str, name: &str, detail: &str) -> String {
    format!("{level:<4} {name:<13} {detail}")
}

/// The line under a check that says how to fix it.
pub(super) fn fix(text: &str) -> String {
    format!("     {:<13} fix: {text}", "")
}

/// The lines of `out` from the check `name` on, up to the next check.
pub(super) fn check_lines<'a>(out: &'a Out, name: &str) -> Vec<&'a str> {
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

    /// `doctor ARGS` with `extra` in the environment, whatever its exit code.
    async fn doctor_with(&self, args: &[&str], extra: &[(&str, &str)]) -> Out {
        let mut all = vec!["doctor"];
        all.extend_from_slice(args);
        droid_executor(&all, &self.env(extra), &self.fake.repo()).await
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
                &format!(
                    "not installed in {} (doctor --skills-dir DIR looks in another skills root)",
                    dir.display()
                )
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
            "codex",
            "claude",
            "gemini",
            "opencode",
            "allowed_roots",
            "store",
            "git",
            "sandbox",
            "location",
            "reach",
            "limits",
            "bridge",
            "worktrees",
            "skill",
            "droid_mcp"
        ]
    );
    assert_eq!(
        checks[16],
        json!({"check": "skill", "level": "ok",
               "detail": format!("installed in {} (up to date)", dir.display()), "fix": ""})
    );
    assert_eq!(checks[14]["check"], "bridge");
    assert_eq!(checks[14]["level"], "ok");

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

/// A stand-in for an npm-installed droid in `dir`: `package/bin/droid` running `script` (a shell
/// script body), beside `package/package.json` of `@factory/cli-linux-x64` at `version`, as
/// `npm install` lays it out. Its path.
fn npm_droid(dir: &Path, version: &str, script: &[u8]) -> PathBuf {
    let package = dir.join("package");
    std::fs::create_dir_all(package.join("bin")).unwrap();
    std::fs::write(
        package.join("package.json"),
        json!({"name": "@factory/cli-linux-x64", "version": version, "main": "bin/droid"})
            .to_string(),
    )
    .unwrap();
    let bin = package.join("bin/droid");
    std::fs::write(&bin, script).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_file_named_with_the_flag_must_exist() {
    let home = Home::new("doctor-config");
    let missing = home.fake.file("missing.toml");
    let m = missing.display().to_string();
    let out = home.doctor_with(&["--config", &m], &[]).await;
    assert_eq!(out.code, Some(1), "{out:#?}");
    assert_eq!(
        check_lines(&out, "config"),
        [
            line(
                "FAIL",
                "config",
                &format!(
                    "{m} does not exist (named with --config; every other command refuses it)"
                )
            ),
            fix(&format!(
                "create it, or leave out --config (the default is {})",
                home.fake
                    .file(".config/droid-executor/config.toml")
                    .display()
            )),
        ]
    );
    // the other checks still ran, on the defaults and the environment
    assert_eq!(
        check_lines(&out, "allowed_roots"),
        [line(
            "OK",
            "allowed_roots",
            &home.fake.path().display().to_string()
        )]
    );
    // as every other command does with the same flag
    let shown = home.run(&["config", "show", "--config", &m]).await;
    assert_eq!(shown.code, Some(2), "{shown:#?}");
    assert!(shown.stderr.contains(&m), "{shown:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fix_of_an_invalid_config_lists_the_keys_config_show_lists() {
    let home = Home::new("doctor-keys");
    let bad = home.fake.file("bad.toml");
    std::fs::write(&bad, "max_concurent = 2\n").unwrap();
    let b = bad.display().to_string();
    let out = home.doctor_with(&["--config", &b], &[]).await;
    assert_eq!(out.code, Some(1), "{out:#?}");
    let shown = home.run(&["config", "show", "--json"]).await;
    assert_eq!(shown.code, Some(0), "{shown:#?}");
    let shown: Value = serde_json::from_str(&shown.stdout).unwrap();
    let keys: Vec<&str> = shown["settings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect();
    // the TOML error quotes the line: its lines stay indented under the check, then the fix
    let lines = check_lines(&out, "config");
    assert_eq!(
        lines,
        [
            line(
                "FAIL",
                "config",
                &format!("invalid config {b}: TOML parse error at line 1, column 1")
            ),
            format!("{:19}  |", ""),
            format!("{:19}1 | max_concurent = 2", ""),
            format!("{:19}  | ^^^^^^^^^^^^^", ""),
            format!(
                "{:19}unknown field `max_concurent`, expected one of {}",
                "",
                keys.iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            fix(&format!("fix the file (keys: {})", keys.join(", "))),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_setting_is_one_fail_line_with_the_fix_for_where_it_came_from() {
    let home = Home::new("doctor-setting");
    // a bad variable: reported once (not again when the file is set aside)
    let out = home.doctor_with(&[], &[("PORT", "http")]).await;
    assert_eq!(out.code, Some(1), "{out:#?}");
    let configs: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.get(5..).is_some_and(|r| r.starts_with("config ")))
        .collect();
    assert_eq!(
        configs,
        [line(
            "FAIL",
            "config",
            "invalid value for PORT: \"http\": invalid digit found in string"
        )],
        "{}",
        out.stdout
    );
    assert_eq!(
        check_lines(&out, "config")[1..],
        [fix(
            "fix PORT, or unset it (a variable set to \"\" counts as unset)"
        )]
    );

    // a key of the file out of range
    let file = home.fake.file("zero.toml");
    std::fs::write(&file, "max_concurrent = 0\n").unwrap();
    let out = home
        .doctor_with(&["--config", &file.display().to_string()], &[])
        .await;
    assert_eq!(out.code, Some(1), "{out:#?}");
    assert_eq!(
        check_lines(&out, "config"),
        [
            line(
                "FAIL",
                "config",
                "invalid value for max_concurrent: must be at least 1"
            ),
            fix("fix max_concurrent in the config file (or the variable that sets it)"),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_droid_outside_the_tested_version_is_a_warning() {
    let home = Home::new("doctor-version");
    let droid = npm_droid(
        &home.fake.file("npm"),
        "0.300.1",
        b"#!/bin/sh\necho 0.300.1\n",
    );
    let d = droid.display().to_string();
    let out = home.doctor_with(&[], &[("DROID_CLI_CMD", &d)]).await;
    assert_eq!(out.code, Some(0), "a WARN is not a failure: {out:#?}");
    assert_eq!(
        check_lines(&out, "droid"),
        [
            line(
                "WARN",
                "droid",
                &format!("{d} (from DROID_CLI_CMD), version 0.300.1")
            ),
            fix(
                "this release was tested with droid 0.225.2; other versions may change its \
                 output. To pin it: npm install -g @factory/cli-linux-x64@0.225.2, then set \
                 droid_bin to $(npm prefix -g)/lib/node_modules/@factory/cli-linux-x64/bin/droid \
                 (the droid found now would still come first)"
            ),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_droid_that_does_not_run_fails_whatever_its_package_json_says() {
    let home = Home::new("doctor-broken");
    // not the step that led there (the launcher alone): the binary, pinned
    let reinstall = |d: &str| {
        fix(&format!(
            "check that {d} is droid's binary; to install it again, pinned: npm install -g \
             @factory/cli-linux-x64@0.225.2 (a CPU without AVX2 needs \
             @factory/cli-linux-x64-baseline@0.225.2)"
        ))
    };
    // a valid package.json of the tested version, and a binary that exits non-zero
    let droid = npm_droid(
        &home.fake.file("npm-exits"),
        "0.225.2",
        b"#!/bin/sh\necho 'droid: cannot load its bundle' >&2\nexit 3\n",
    );
    let d = droid.display().to_string();
    let out = home.doctor_with(&[], &[("DROID_CLI_CMD", &d)]).await;
    assert_eq!(out.code, Some(1), "{out:#?}");
    assert_eq!(
        check_lines(&out, "droid"),
        [
            line(
                "FAIL",
                "droid",
                &format!(
                    "{d} (from DROID_CLI_CMD) found but does not run: --version exited with code \
                     3: droid: cannot load its bundle"
                )
            ),
            reinstall(&d),
        ]
    );

    // a valid package.json, and a binary that is garbage (not a program at all)
    let droid = npm_droid(
        &home.fake.file("npm-garbage"),
        "0.225.2",
        b"\x7fELF\x02\x01\x01\x00garbage, not a program\x00\x00\n",
    );
    let d = droid.display().to_string();
    let out = home.doctor_with(&[], &[("DROID_CLI_CMD", &d)]).await;
    assert_eq!(out.code, Some(1), "{out:#?}");
    let lines = check_lines(&out, "droid");
    let head = line(
        "FAIL",
        "droid",
        &format!("{d} (from DROID_CLI_CMD) found but does not run: "),
    );
    assert!(lines[0].starts_with(&head), "{}", out.stdout);
    assert_eq!(lines[1..], [reinstall(&d)], "{}", out.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_auth_line_names_the_key_or_the_custom_models_or_warns() {
    let home = Home::new("doctor-auth");
    let out = home.doctor(&[]).await;
    assert_eq!(
        check_lines(&out, "auth"),
        [
            line("WARN", "auth", "no FACTORY_API_KEY and no custom models"),
            fix(
                "export FACTORY_API_KEY=fk-… (or log in with droid, or add customModels to \
                 ~/.factory/settings.json)"
            ),
        ]
    );
    // an empty key is no key
    let out = home.doctor(&[("FACTORY_API_KEY", "")]).await;
    assert_eq!(
        check_lines(&out, "auth")[0],
        line("WARN", "auth", "no FACTORY_API_KEY and no custom models")
    );

    let out = home
        .doctor(&[("FACTORY_API_KEY", "fk-test-not-a-key")])
        .await;
    assert_eq!(
        check_lines(&out, "auth"),
        [line("OK", "auth", "FACTORY_API_KEY is set")]
    );
    assert!(!out.stdout.contains("fk-test"), "the key is not shown");

    let factory = home.fake.file(".factory");
    std::fs::create_dir_all(&factory).unwrap();
    std::fs::write(
        factory.join("settings.json"),
        json!({"customModels": [
            {"model": "m-0", "displayName": "M", "baseUrl": "http://127.0.0.1:9/v1",
             "apiKey": "x", "provider": "generic-chat-completion-api"},
            {"model": "m-1", "displayName": "N", "baseUrl": "http://127.0.0.1:9/v1",
             "apiKey": "x", "provider": "generic-chat-completion-api"},
        ]})
        .to_string(),
    )
    .unwrap();
    let out = home.doctor(&[]).await;
    let listed = |last: &str| {
        vec![
            line(
                "OK",
                "auth",
                "no FACTORY_API_KEY; custom models in ~/.factory/settings.json, each passed as \
                 the model by its id:",
            ),
            format!("{:19}custom:M-0  (model m-0)", ""),
            format!("{:19}custom:N-0  (model m-1)", ""),
            format!("{:19}{last}", ""),
        ]
    };
    // given no model, droid's built-in default needs an account: the ids to pass are the fix
    let mut warned =
        listed("a run given no model fails: droid's built-in default needs a Factory account");
    warned[0] = warned[0].replacen("OK  ", "WARN", 1);
    warned.push(fix(
        "pass one as the model (run --model custom:M-0, the request's model), or set model = \
         \"custom:M-0\" in the config (DROID_EXECUTOR_MODEL); or set FACTORY_AIRGAP_ENABLED=1, \
         and droid uses custom:M-0 when given no model",
    ));
    assert_eq!(check_lines(&out, "auth"), warned);
    // airgap mode: the first; the config's model: that one
    let out = home.doctor(&[("FACTORY_AIRGAP_ENABLED", "1")]).await;
    assert_eq!(
        check_lines(&out, "auth"),
        listed("runs given no model use custom:M-0 (FACTORY_AIRGAP_ENABLED is set)")
    );
    let out = home.doctor(&[("DROID_EXECUTOR_MODEL", "custom:N-0")]).await;
    assert_eq!(
        check_lines(&out, "auth"),
        listed("runs given no model use custom:N-0 (the config's model)")
    );
    // a model that is none of them is refused by droid
    let out = home.doctor(&[("DROID_EXECUTOR_MODEL", "custom:N")]).await;
    let lines = check_lines(&out, "auth");
    assert_eq!(
        lines[3..],
        [
            format!(
                "{:19}the config's model custom:N is none of them: droid refuses it (Invalid \
                 model)",
                ""
            ),
            fix("set model in the config to one of these ids"),
        ],
        "{}",
        out.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_cannot_be_written_fails() {
    let home = Home::new("doctor-store");
    // under a regular file: it can never be created
    let file = home.fake.file("a-file");
    std::fs::write(&file, "x\n").unwrap();
    let store = file.join("store");
    let st = store.display().to_string();
    let out = home
        .doctor_with(&[], &[("DROID_EXECUTOR_STORE_DIR", &st)])
        .await;
    assert_eq!(out.code, Some(1), "{out:#?}");
    assert_eq!(
        check_lines(&out, "store"),
        [
            line(
                "FAIL",
                "store",
                &format!(
                    "{st} cannot be created: {} is not a directory",
                    file.display()
                )
            ),
            fix("set store_dir in the config (or DROID_EXECUTOR_STORE_DIR) to a directory"),
        ]
    );

    // in a directory no one, root included, can create files in (procfs; permission bits
    // would not stop root, so doctor tries instead of asking them)
    let out = home
        .doctor_with(
            &[],
            &[("DROID_EXECUTOR_STORE_DIR", "/proc/self/fdinfo/store")],
        )
        .await;
    assert_eq!(out.code, Some(1), "{out:#?}");
    let lines = check_lines(&out, "store");
    assert!(
        lines[0].starts_with(&line(
            "FAIL",
            "store",
            "/proc/self/fdinfo is not writable: cannot create a file in it ("
        )),
        "{}",
        out.stdout
    );
    assert_eq!(
        lines[1..],
        [fix(
            "fix its permissions, or set store_dir in the config (or DROID_EXECUTOR_STORE_DIR)"
        )]
    );

    // a writable one is OK, and doctor leaves nothing in it
    let ok = home.fake.file("store-ok");
    std::fs::create_dir_all(&ok).unwrap();
    let out = home
        .doctor(&[("DROID_EXECUTOR_STORE_DIR", &ok.display().to_string())])
        .await;
    assert_eq!(
        check_lines(&out, "store"),
        [line(
            "OK",
            "store",
            &format!("{} is writable", ok.display())
        )]
    );
    assert_eq!(
        std::fs::read_dir(&ok).unwrap().count(),
        0,
        "doctor left a file"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bridge_line_probes_the_configured_host() {
    // 127.0.0.2 is a loopback address distinct from 127.0.0.1 (the whole 127/8 is loopback)
    let home = Home::new("doctor-host");
    let other = TcpListener::bind((Ipv4Addr::LOCALHOST, home.port)).unwrap();
    let out = home.doctor(&[("DROID_EXECUTOR_HOST", "127.0.0.2")]).await;
    assert!(
        check_lines(&out, "bridge")[0].starts_with(&line(
            "OK",
            "bridge",
            &format!("port {} is free;", home.port)
        )),
        "a listener on 127.0.0.1 does not hold 127.0.0.2:{}: {}",
        home.port,
        out.stdout
    );
    drop(other);
    let on_host = TcpListener::bind((Ipv4Addr::new(127, 0, 0, 2), home.port)).unwrap_or_else(|e| {
        panic!("cannot listen on 127.0.0.2 ({e}): this test needs the loopback range 127.0.0.0/8")
    });
    let out = home.doctor(&[("DROID_EXECUTOR_HOST", "127.0.0.2")]).await;
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
    drop(on_host);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_skills_dir_flag_looks_in_another_skills_root() {
    let home = Home::new("doctor-skills-dir");
    let root = home.fake.file("skills");
    let r = root.display().to_string();
    let out = home.doctor_with(&["--skills-dir", &r], &[]).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert_eq!(
        check_lines(&out, "skill"),
        [
            line(
                "WARN",
                "skill",
                &format!("not installed in {r}/droid-executor")
            ),
            fix(&format!(
                "droid-executor setup skill --dir {r} (Claude Code then offers it to the model)"
            )),
        ]
    );
    let setup = home.run(&["setup", "skill", "--dir", &r]).await;
    assert_eq!(setup.code, Some(0), "{setup:#?}");
    let out = home.doctor_with(&["--skills-dir", &r], &[]).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert_eq!(
        check_lines(&out, "skill"),
        [line(
            "OK",
            "skill",
            &format!("installed in {r}/droid-executor (up to date)")
        )]
    );
    std::fs::write(root.join("droid-executor/SKILL.md"), "my edits\n").unwrap();
    let out = home.doctor_with(&["--skills-dir", &r], &[]).await;
    assert_eq!(
        check_lines(&out, "skill"),
        [
            line(
                "WARN",
                "skill",
                &format!("{r}/droid-executor has local edits in SKILL.md")
            ),
            fix(&format!(
                "keep them, or replace them with: droid-executor setup skill --dir {r} --force"
            )),
        ]
    );
    // the default root was never touched
    assert!(!home.skill_dir().exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_git_line_warns_about_a_git_older_than_2_31() {
    let home = Home::new("doctor-git");
    let out = home.doctor(&[]).await;
    let lines = check_lines(&out, "git");
    assert_eq!(lines.len(), 1, "{}", out.stdout);
    assert!(
        lines[0].starts_with(&line("OK", "git", "git version ")),
        "{}",
        out.stdout
    );

    let path = super::common::path_with_old_git(home.fake.path());
    let out = home.doctor(&[("PATH", path.to_str().unwrap())]).await;
    assert_eq!(
        check_lines(&out, "git"),
        [
            line(
                "WARN",
                "git",
                "git version 2.30.2 is older than 2.31: work trees not read in-process (a split \
                 or sparse index, GIT_DIR set, configuration includes) are measured by walking \
                 the directory (.gitignore ignored, at most 10 s or 1,000,000 files), and \
                 changed files' old content comes from git"
            ),
            fix("install git 2.31 or later on droid's PATH")
        ]
    );

    let empty = home.fake.file("no-git-here");
    std::fs::create_dir_all(&empty).unwrap();
    let out = home
        .doctor_with(&[], &[("PATH", empty.to_str().unwrap())])
        .await;
    let lines = check_lines(&out, "git");
    assert!(
        lines[0].starts_with(&line("WARN", "git", "git cannot be used (")),
        "{}",
        out.stdout
    );
    assert_eq!(lines[1], fix("install git 2.31 or later on droid's PATH"));
}
