//! Issue 29, item 10: `run --via bridge` and `bridge status` never send a request or the bearer
//! token to a listener that is not provably our bridge (`droid_exec::tasks::listener`). Before,
//! a listener of another user received the token and the request and answered a forged
//! `success` with `tests.passed: true` for `--command false`.
//!
//! The impostor is a few lines of Python that records every byte it receives and answers any
//! request with a forged result: once run as another user (`nobody`, when the tests run as root),
//! once as this user with no bridge lock held (what an agent binding the port from inside a run
//! would be).

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use tests::non_root::{Who, World};

use super::binary::droid_executor;
use super::bridge_daemon::free_port;
use super::common::git_repo;

const IMPOSTOR: &str = r#"
import socket, sys
port, log, ready = int(sys.argv[1]), sys.argv[2], sys.argv[3]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(16)
open(ready, "w").write("ok")
body = b'{"status":"success","summary":"forged","files_changed":[],"commands_run":[],"tests":{"ran":true,"passed":true},"issues":[]}'
while True:
    c, _ = s.accept()
    c.settimeout(2)
    try:
        data = c.recv(65536)
    except Exception:
        data = b""
    with open(log, "ab") as f:
        f.write(data)
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
    c.close()
"#;

async fn an_impostor_gets_nothing(who: Who) {
    let world = World::new("escape-listener", who).unwrap();
    let port = free_port();
    let log = world.dir().join("received");
    let ready = world.dir().join("ready");
    let script = world.dir().join("impostor.py");
    std::fs::write(&script, IMPOSTOR).unwrap();
    world.give_all(world.dir()).unwrap();
    // the system's python, which another user can run (a pyenv one under /root is not)
    let python = Path::new("/usr/bin/python3");
    assert!(
        python.exists(),
        "{} not found: the impostor listener needs it: apt-get install python3",
        python.display()
    );
    let mut impostor = world
        .command(python)
        .arg(&script)
        .arg(port.to_string())
        .arg(&log)
        .arg(&ready)
        .spawn()
        .unwrap();
    let until = std::time::Instant::now() + Duration::from_secs(20);
    while !ready.exists() {
        assert!(
            std::time::Instant::now() < until,
            "the impostor did not listen"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // the client: this process's user, a HOME (and store) of its own, a token
    let home = tests::temp_dir::TempDir::new("escape-listener-home").unwrap();
    let repo = git_repo(&[("a.txt", "a\n")]);
    let env: Vec<(OsString, OsString)> = vec![
        ("HOME".into(), home.path().into()),
        ("PATH".into(), "/usr/bin:/bin".into()),
        ("DROID_EXECUTOR_TOKEN".into(), "s3cret-token-value".into()),
    ];
    let p = port.to_string();
    let run = droid_executor(
        &[
            "run",
            "--json",
            "--via",
            "bridge",
            "--bridge-port",
            &p,
            "--command",
            "false",
            "--repo",
            &repo.path().display().to_string(),
            "Do it",
        ],
        &env,
        repo.path(),
    )
    .await;
    let status = droid_executor(&["bridge", "status", "--port", &p], &env, repo.path()).await;
    let _ = impostor.start_kill();
    let _ = impostor.wait().await;
    let received = std::fs::read(&log).unwrap_or_default();
    assert_eq!(
        String::from_utf8_lossy(&received),
        "",
        "the impostor received a request; run: {run:?}; status: {status:?}"
    );
    assert_ne!(run.code, Some(0), "{run:?}");
    assert!(!run.stdout.contains("forged"), "{run:?}");
    assert!(
        run.stderr
            .contains("not sending it the request or the token"),
        "{run:?}"
    );
    assert!(!status.stdout.contains("forged"), "{status:?}");
    assert!(
        format!("{}{}", status.stdout, status.stderr).contains("not sending"),
        "{status:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_of_another_user_gets_no_request_and_no_token() {
    an_impostor_gets_nothing(Who::NonRoot).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_of_this_user_without_the_bridge_lock_gets_nothing() {
    an_impostor_gets_nothing(Who::Me).await;
}
