//! Security probes (issue 7, docs/architecture.md#security): every way the issue lists of making
//! droid-executor do a
//! stranger's bidding, each refused with its exact answer. One test per threat, each a table of
//! probes; a refused request must never start droid (the fake droid's `FAKE_DROID_RECORD` file
//! stays absent), and each table ends with the same request let through, so the refusal is what
//! stopped it.
//!
//! | test | threat | refusal |
//! |---|---|---|
//! | [`dns_rebinding_names_are_refused`] | a web page reaching the bridge through its own DNS name | 403 `host_not_allowed`; 400 `host_required` (no Host, two Hosts) |
//! | [`web_pages_cannot_drive_the_bridge`] | drive-by requests from a page in the user's browser | 403 `origin_not_allowed`; 415 for the bodies a page sends without a preflight; no CORS header ever |
//! | [`requests_without_the_right_token_are_refused`] | a client that does not hold the bearer token | 401 `unauthorized` with `WWW-Authenticate` |
//! | [`a_non_loopback_bind_needs_a_token`] | the bridge reachable from other machines with no token | `serve` exits 2 with the reason |
//! | [`paths_cannot_escape_the_allowed_roots_or_the_repository`] | repo_root or files_of_interest outside what is allowed (`..`, absolute, symlinks), through the bridge, the CLI and MCP | 400 / exit 2 / `isError` with one `validation_error` naming the field |
//! | [`oversized_and_deeply_nested_json_is_refused`] | bodies and lines built to exhaust memory or the stack | 413, 400 (`recursion limit exceeded`, contract lengths), MCP -32700/-32600, and the server keeps answering |
//! | [`request_smuggling_framings_run_nothing`] | ambiguous HTTP/1.1 framing hiding a second request | 400 (hyper's, empty body) or the first framing only, connection closed, the hidden request never runs |
//! | [`secrets_never_reach_results_logs_or_the_store`] | Factory keys and bearer tokens in requests and droid's output | `[REDACTED]` in results (bridge, MCP, CLI), the store, `tasks show`, the bridge's and MCP server's stderr |
//! | [`secret_shapes_and_child_credentials_are_masked_in_the_store_and_logs`] | `sk-…`, `ghp_…`, `github_pat_…`, `AKIA…`, `xoxb-…` keys, URL passwords, the bridge token and every credential droid is given, in requests and verification output | `[REDACTED]` in the store, the bridge's results, records and log; droid still gets the request as written |
//! | [`store_files_are_private`] | other local users reading tasks, results and logs | every store directory 0700, every file 0600, even under `umask 0` |
//! | [`a_token_file_other_users_can_read_is_warned_about`] | a bearer token readable by other users | a warning on `serve`'s stderr naming the file and the fix |
//! | [`snapshots_run_no_repository_code`] | hooks, filters, textconv and fsmonitor planted in the repository, run by git on droid-executor's behalf | every snapshot's git call runs with hooks off and every configured filter emptied; nothing planted runs |
//! | [`inputs_named_on_the_command_line_are_read_within_their_limits`] | `/dev/zero`, `/dev/urandom` or a huge file as `--request`, `--instructions-file`, `--config`, `--token-file` | exit 2 naming the flag, the limit and the setting; constant memory |
//! | [`a_request_fifo_without_a_writer_does_not_hang`] | a FIFO nobody writes to as `--request` | exit 2 after 30 s of silence; a FIFO with a writer runs |
//! | [`a_non_utf8_repo_path_is_refused_not_converted`] | a non-UTF-8 `--repo` converted lossily into another directory | exit 2 `validation_error`; also through a UTF-8 symlink, when the run starts |
//! | [`a_queued_task_never_runs_in_a_repo_root_swapped_for_a_symlink`] | a queued task's directory swapped for a symlink out of `allowed_roots` | the task ends `error` (`validation_error` naming both paths); droid never starts there |
//!
//! Raw requests go through `bridge_http`'s raw TCP helpers (exactly these bytes reach the
//! bridge); processes are the suites' `ServeProc` (the bridge), `mcp_stdio::Server` and
//! `DaemonGuard`, each killed with its process group if a test ends early.

use std::ffi::OsString;
use std::net::{Ipv6Addr, SocketAddr};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use droid_contract::{ExecutionResult, Status};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::droid_bin::droid_executor_bin;
use tests::temp_dir::TempDir;
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::binary::{Out, droid_executor, finish};
use super::bridge_daemon::free_port;
use super::bridge_harness::{DaemonGuard, ServeProc};
use super::bridge_http::{
    Answer, Bridged, HTTP_LIMIT, JSON, TOKEN, body, env_of, exchange, find, parse_answer, raw,
    read_all, recorded, request_for,
};
use super::mcp_stdio::{Server, assert_error, pong};

/// `serve`'s refusal of a non-loopback bind without a token, after `refusing to listen on ADDR`.
const UNSAFE_BIND: &str = "it is reachable from other machines and no token is configured; bind \
                           127.0.0.1, or set a token with --token-file FILE or \
                           DROID_EXECUTOR_TOKEN (clients then send 'Authorization: Bearer <token>')";
/// The 401 message when no bearer token was presented.
const TOKEN_REQUIRED: &str = "this bridge requires 'Authorization: Bearer <token>' (the token of \
                              its --token-file or DROID_EXECUTOR_TOKEN)";
/// The 401 message when the presented bearer token is not the bridge's.
const TOKEN_WRONG: &str = "the bearer token is wrong";
/// The bridge's body limit (`body_limit`, default 1 MiB).
const BODY_LIMIT: usize = 1024 * 1024;
/// Deeper than any parser's stack should follow (serde_json stops at 128).
const DEEP: usize = 100_000;

// ---------------------------------------------------------------------------------------------
// Helpers

/// `METHOD target HTTP/1.1` with exactly `lines` as its header lines (no Host added),
/// `Connection: close`, and `body` with its `Content-Length` when not empty.
fn request_bytes(method: &str, target: &str, lines: &[String], body: &[u8]) -> Vec<u8> {
    let mut head = format!("{method} {target} HTTP/1.1\r\n");
    for l in lines {
        head.push_str(l);
        head.push_str("\r\n");
    }
    head.push_str("Connection: close\r\n");
    if !body.is_empty() {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// Every whole answer in `bytes`, in order (each framed by its `Content-Length`).
fn answers(mut bytes: &[u8]) -> Vec<Answer> {
    let mut all = Vec::new();
    while !bytes.is_empty() {
        let end = find(bytes, b"\r\n\r\n").unwrap_or_else(|| {
            panic!(
                "not an answer head: {:?}",
                String::from_utf8_lossy(bytes).into_owned()
            )
        });
        let head = String::from_utf8_lossy(&bytes[..end]).to_ascii_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map_or(0, |n| n.trim().parse().unwrap());
        let whole = end + 4 + len;
        all.push(parse_answer(&bytes[..whole]));
        bytes = &bytes[whole..];
    }
    all
}

/// The status of an answer carrying an `error` result with exactly one issue, and that issue's
/// type and description.
fn only_issue(a: &Answer) -> (u16, String, String) {
    let r = a.result();
    assert_eq!(r.status, Status::Error, "{a:#?}");
    assert_eq!(r.issues.len(), 1, "{r:#?}");
    (
        a.status,
        r.issues[0].kind.as_str().to_owned(),
        r.issues[0].description.clone(),
    )
}

/// The `message` of a refusal, after checking its status and code.
fn refusal_message(a: &Answer, status: u16, code: &str) -> String {
    assert_eq!(a.refusal(status), code, "{a:#?}");
    a.json()["error"]["message"].as_str().unwrap().to_owned()
}

/// The 403 message for a name that is not this machine's (`what` quotes it).
fn rebinding(what: &str) -> String {
    format!(
        "{what} is not a loopback name; requests through another name are refused (DNS \
         rebinding). Use http://127.0.0.1:PORT, or add the name to allowed_hosts"
    )
}

/// That no answer carries a CORS header (a page must never be allowed to read one).
fn assert_no_cors(a: &Answer, what: &str) {
    let cors: Vec<&(String, String)> = a
        .headers
        .iter()
        .filter(|(k, _)| k.starts_with("access-control-"))
        .collect();
    assert_eq!(cors, Vec::<&(String, String)>::new(), "{what}: {a:#?}");
}

/// Checks that droid has not started yet, then sends `request` to `/execute` with `headers` and
/// checks that it runs and succeeds: the proof that the request the probes carried would have
/// run had it not been refused.
async fn runs_when_allowed(b: &Bridged, headers: &[(&str, &str)], request: &Value) {
    assert_eq!(b.record(), None, "a refused request started droid");
    let mut all = vec![JSON];
    all.extend_from_slice(headers);
    let a = b.raw("POST", "/execute", &all, &body(request)).await;
    assert_eq!(a.status, 200, "{a:#?}");
    assert_eq!(a.result().status, Status::Success, "{a:#?}");
    assert!(
        b.record().is_some(),
        "the allowed request did not start droid"
    );
}

/// `droid-executor ARGS` run through `sh` after `umask 0`, so only the modes the program asks for
/// protect what it creates.
#[allow(clippy::disallowed_methods)] // the suite runs the binary it tests
async fn under_umask_0(args: &[&str], env: &[(OsString, OsString)], cwd: &Path) -> Out {
    let child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg("umask 0 && exec \"$0\" \"$@\"")
        .arg(droid_executor_bin())
        .args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run sh ({e}): install a POSIX shell (dash)"));
    finish(child).await
}

// ---------------------------------------------------------------------------------------------
// 1. DNS rebinding

/// A page on `evil.example` that re-resolves its name to 127.0.0.1 sends the browser's requests
/// to the bridge with the page's own name in `Host` (or, written by hand, in an absolute-form
/// target). Only loopback names pass; a missing or repeated Host is malformed (RFC 9112 §3.2).
/// IP literals never go through DNS, so a loopback literal in any spelling the address parser
/// takes (`[::ffff:127.0.0.1]`) passes, and the numeric spellings browsers accept but the parser
/// does not (`0x7f000001`, `2130706433`, `127.1`, `0177.0.0.1`) are refused. `localhost.` (the
/// root-anchored `localhost`) resolves only locally (RFC 6761) and passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_rebinding_names_are_refused() {
    let b = Bridged::start(&json!([{"completion": "Done."}]), &[], &[]).await;
    let port = b.addr().port();
    let local = b.addr().to_string();
    let request = b.request("run through another name", json!({}));
    let good = body(&request);
    let host = |h: &str| format!("Host: {h}");

    let foreign = [
        "evil.example",
        "evil.example:53002",
        "127.0.0.1.evil.example",
        "localhost.evil.example",
        "0x7f000001",
        "2130706433",
        "127.1",
        "0177.0.0.1",
        "evil.example@127.0.0.1",
        "",
    ];
    for name in foreign {
        let a = exchange(
            b.addr(),
            &request_bytes("POST", "/execute", &[host(name)], &good),
        )
        .await;
        assert_eq!(
            refusal_message(&a, 403, "host_not_allowed"),
            rebinding(&format!("Host {name:?}")),
            "{name}"
        );
    }
    let listed = format!("127.0.0.1:{port}, evil.example");
    let a = exchange(
        b.addr(),
        &request_bytes("POST", "/execute", &[host(&listed)], &good),
    )
    .await;
    assert_eq!(
        refusal_message(&a, 403, "host_not_allowed"),
        rebinding(&format!("Host {listed:?}"))
    );

    // absolute form: the target names the host (RFC 9112 §3.2.2), and so does Host
    let evil_port = format!("evil.example:{port}");
    for (target, name, refused) in [
        (
            "http://evil.example/execute".to_owned(),
            local.as_str(),
            "the request target's host \"evil.example\"".to_owned(),
        ),
        (
            format!("http://{evil_port}/execute"),
            local.as_str(),
            format!("the request target's host {evil_port:?}"),
        ),
        (
            format!("http://{local}/execute"),
            "evil.example",
            "Host \"evil.example\"".to_owned(),
        ),
    ] {
        let a = exchange(
            b.addr(),
            &request_bytes("POST", &target, &[host(name)], &good),
        )
        .await;
        assert_eq!(
            refusal_message(&a, 403, "host_not_allowed"),
            rebinding(&refused),
            "{target} with Host {name}"
        );
    }

    // malformed: no Host, or more than one (which one would count is the attacker's choice)
    let missing = exchange(b.addr(), &request_bytes("POST", "/execute", &[], &good)).await;
    assert_eq!(
        refusal_message(&missing, 400, "host_required"),
        "the Host header is required (HTTP/1.1)"
    );
    for hosts in [
        [host(&local), host("evil.example")],
        [host("evil.example"), host(&local)],
        [host(&local), host(&local)],
    ] {
        let a = exchange(b.addr(), &request_bytes("POST", "/execute", &hosts, &good)).await;
        assert_eq!(
            refusal_message(&a, 400, "host_required"),
            "exactly one Host header is allowed; this request has more than one",
            "{hosts:?}"
        );
    }

    // the names of this machine pass
    for name in [
        local.clone(),
        format!("localhost:{port}"),
        format!("LocalHost:{port}"),
        "localhost.".to_owned(),
        format!("[::1]:{port}"),
        "[::ffff:127.0.0.1]".to_owned(),
        "127.0.0.2".to_owned(),
    ] {
        let a = exchange(
            b.addr(),
            &request_bytes("GET", "/health", &[host(&name)], b""),
        )
        .await;
        assert_eq!(a.status, 200, "{name}: {a:#?}");
    }
    let a = exchange(
        b.addr(),
        &request_bytes(
            "GET",
            &format!("http://localhost:{port}/health"),
            &[host(&local)],
            b"",
        ),
    )
    .await;
    assert_eq!(a.status, 200, "absolute form naming localhost: {a:#?}");
    runs_when_allowed(&b, &[], &request).await;
}

// ---------------------------------------------------------------------------------------------
// 2. Cross-origin requests

/// Any page the user visits can make the browser send a POST to `http://127.0.0.1:53002`: with
/// an `Origin` (and `Sec-Fetch-Site`) when it is cross-origin, and without a CORS preflight only
/// for `text/plain`, form and multipart bodies. Each is refused before the body is read; a
/// preflight is refused or answered 405, and no answer ever carries an `Access-Control-*` header.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_pages_cannot_drive_the_bridge() {
    let b = Bridged::start(&json!([{"completion": "Done."}]), &[], &[]).await;
    let port = b.addr().port();
    let request = b.request("run from a web page", json!({}));
    let good = body(&request);
    let own = format!("http://127.0.0.1:{port}");
    let own_name = format!("http://localhost:{port}");

    for origin in [
        "https://evil.example",
        "null",
        own.as_str(),
        own_name.as_str(),
    ] {
        for path in ["/execute", "/tasks"] {
            let a = b
                .raw("POST", path, &[JSON, ("Origin", origin)], &good)
                .await;
            let message = refusal_message(&a, 403, "origin_not_allowed");
            assert!(
                message.starts_with(&format!(
                    "requests from the web page {origin:?} are refused"
                )),
                "{origin}: {message}"
            );
            assert_no_cors(&a, origin);
        }
    }
    for site in ["cross-site", "same-site", "Cross-Site"] {
        let a = b
            .raw("POST", "/execute", &[JSON, ("Sec-Fetch-Site", site)], &good)
            .await;
        assert_eq!(
            refusal_message(&a, 403, "origin_not_allowed"),
            "requests a browser makes on behalf of another site are refused",
            "{site}"
        );
    }
    // the "simple" requests a page sends without a preflight
    for ct in [
        Some("text/plain"),
        Some("text/plain;charset=UTF-8"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=----x"),
        None,
    ] {
        let headers: Vec<(&str, &str)> = ct.map(|c| ("Content-Type", c)).into_iter().collect();
        for path in ["/execute", "/tasks"] {
            let a = b.raw("POST", path, &headers, &good).await;
            let got = ct.map_or_else(|| "no Content-Type".to_owned(), |c| format!("{c:?}"));
            assert_eq!(
                refusal_message(&a, 415, "unsupported_media_type"),
                format!(
                    "the body must be JSON sent with 'Content-Type: application/json' (got {got})"
                ),
                "{path} {ct:?}"
            );
            assert_no_cors(&a, path);
        }
    }
    let a = b
        .raw(
            "POST",
            "/execute",
            &[
                ("Content-Type", "text/plain"),
                ("Origin", "https://evil.example"),
            ],
            &good,
        )
        .await;
    assert_eq!(a.refusal(403), "origin_not_allowed");

    // a preflight is never approved
    let a = b
        .raw(
            "OPTIONS",
            "/execute",
            &[
                ("Origin", "https://evil.example"),
                ("Access-Control-Request-Method", "POST"),
                ("Access-Control-Request-Headers", "content-type"),
            ],
            b"",
        )
        .await;
    assert_eq!(a.refusal(403), "origin_not_allowed");
    assert_no_cors(&a, "preflight");
    for (path, allow) in [("/execute", "POST"), ("/tasks", "GET, HEAD, POST")] {
        let a = b.raw("OPTIONS", path, &[], b"").await;
        assert_eq!(a.refusal(405), "method_not_allowed", "{path}");
        assert_eq!(a.header("allow"), Some(allow), "{path}");
        assert_no_cors(&a, path);
    }

    // what a browser sends for its own navigation, and no browser at all, pass
    for headers in [
        &[("Sec-Fetch-Site", "none")][..],
        &[("Sec-Fetch-Site", "same-origin")][..],
        &[][..],
    ] {
        let a = b.raw("GET", "/health", headers, b"").await;
        assert_eq!(a.status, 200, "{headers:?}: {a:#?}");
        assert_no_cors(&a, "health");
    }
    assert_eq!(
        b.get("/tasks").await,
        (200, json!({"tasks": [], "damaged": []}))
    );
    runs_when_allowed(&b, &[("Sec-Fetch-Site", "none")], &request).await;
}

// ---------------------------------------------------------------------------------------------
// 3. Tokens

/// With a token configured, every route needs `Authorization: Bearer <token>`, compared exactly
/// and in constant time. The scheme is case-insensitive and followed by one or more spaces (RFC
/// 9110 §11.1, RFC 6750 §2.1). Whitespace at the end of a header line is not part of the field
/// value (RFC 9110 §5.5: hyper strips it), so `Bearer TOKEN ` is the right token; anything else
/// after the token makes it wrong. A refusal never echoes what was presented.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_without_the_right_token_are_refused() {
    let b = Bridged::start(
        &json!([{"completion": "Done."}]),
        &[],
        &[("DROID_EXECUTOR_TOKEN", TOKEN)],
    )
    .await;
    let request = b.request("run without the token", json!({}));
    let good = body(&request);
    let upper = TOKEN.to_ascii_uppercase();
    let prefix = &TOKEN[..TOKEN.len() - 1];
    let basic = format!("Basic {}", base64(&format!("user:{TOKEN}")));
    let refused: Vec<(Option<String>, &str)> = vec![
        (None, TOKEN_REQUIRED),
        (Some(String::new()), TOKEN_REQUIRED),
        (Some("Bearer".into()), TOKEN_REQUIRED),
        (Some("Bearer ".into()), TOKEN_REQUIRED),
        (Some(format!("Basic {TOKEN}")), TOKEN_REQUIRED),
        (Some(basic), TOKEN_REQUIRED),
        (Some(format!("Token {TOKEN}")), TOKEN_REQUIRED),
        (Some(TOKEN.into()), TOKEN_REQUIRED),
        (Some(format!("Bearer\t{TOKEN}")), TOKEN_REQUIRED),
        (Some(format!("Bearer{TOKEN}")), TOKEN_REQUIRED),
        (
            Some("Bearer wrong-token-wrong-token-xx".into()),
            TOKEN_WRONG,
        ),
        (Some(format!("Bearer {prefix}")), TOKEN_WRONG),
        (Some(format!("Bearer {TOKEN}x")), TOKEN_WRONG),
        (Some(format!("Bearer {TOKEN} x")), TOKEN_WRONG),
        (Some(format!("Bearer {TOKEN},")), TOKEN_WRONG),
        (Some(format!("Bearer {upper}")), TOKEN_WRONG),
        (Some(format!("Bearer x{TOKEN}")), TOKEN_WRONG),
    ];
    for (auth, message) in &refused {
        let mut headers = vec![JSON];
        if let Some(a) = auth {
            headers.push(("Authorization", a));
        }
        for path in ["/execute", "/tasks"] {
            let a = b.raw("POST", path, &headers, &good).await;
            assert_eq!(
                refusal_message(&a, 401, "unauthorized"),
                *message,
                "{auth:?}"
            );
            assert_eq!(
                a.header("www-authenticate"),
                Some("Bearer realm=\"droid-executor\""),
                "{auth:?}"
            );
            assert!(!a.body.contains(TOKEN), "{auth:?} echoed: {a:#?}");
        }
        let a = b.raw("GET", "/health", &headers[1..], b"").await;
        assert_eq!(a.refusal(401), "unauthorized", "GET /health {auth:?}");
    }
    for auth in [
        format!("Bearer {TOKEN}"),
        format!("bearer {TOKEN}"),
        format!("BEARER {TOKEN}"),
        format!("Bearer   {TOKEN}"),
        format!("Bearer {TOKEN} "),
        format!("Bearer {TOKEN} \t"),
    ] {
        let a = b
            .raw("GET", "/health", &[("Authorization", &auth)], b"")
            .await;
        assert_eq!(a.status, 200, "{auth:?}: {a:#?}");
    }
    assert_eq!(
        b.raw(
            "GET",
            "/tasks",
            &[("Authorization", &format!("Bearer {TOKEN}"))],
            b""
        )
        .await
        .json(),
        json!({"tasks": [], "damaged": []})
    );
    runs_when_allowed(
        &b,
        &[("Authorization", &format!("bearer  {TOKEN}"))],
        &request,
    )
    .await;
}

/// Standard base64 with padding (RFC 4648 §4), for a `Basic` credential.
fn base64(text: &str) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in text.as_bytes().chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// 4. Non-loopback binds

/// Listening on an address other machines reach needs a token, however the address is given
/// (flag, environment, the IPv6 wildcard in both spellings) and even when the token variable is
/// set but empty. With a token it starts, and then even a loopback client needs the token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_loopback_bind_needs_a_token() {
    let home = Bridged::home(&json!([{"completion": "Done."}]));
    for (args, extra, shown) in [
        (&["--host", "0.0.0.0"][..], &[][..], "0.0.0.0:0"),
        (&["--host", "::"][..], &[][..], "[::]:0"),
        (&["--host", "[::]"][..], &[][..], "[::]:0"),
        (
            &["--host", "::ffff:0.0.0.0"][..],
            &[][..],
            "[::ffff:0.0.0.0]:0",
        ),
        (
            &[][..],
            &[("DROID_EXECUTOR_HOST", "0.0.0.0")][..],
            "0.0.0.0:0",
        ),
        (
            &["--host", "0.0.0.0"][..],
            &[("DROID_EXECUTOR_TOKEN", "")][..],
            "0.0.0.0:0",
        ),
    ] {
        let mut all = vec!["serve", "--port", "0"];
        all.extend_from_slice(args);
        let out = droid_executor(&all, &env_of(&home, extra), home.path()).await;
        assert_eq!(
            (out.code, out.stdout.as_str(), out.stderr.as_str()),
            (
                Some(2),
                "",
                format!("droid-executor serve: refusing to listen on {shown}: {UNSAFE_BIND}\n")
                    .as_str()
            ),
            "{args:?} {extra:?}"
        );
    }
    assert_eq!(recorded(&home), None);

    let serve = ServeProc::start(
        &["--host", "::"],
        &env_of(&home, &[("DROID_EXECUTOR_TOKEN", TOKEN)]),
        home.path(),
    )
    .await;
    assert!(serve.addr.ip().is_unspecified(), "{}", serve.addr);
    let lo6 = SocketAddr::from((Ipv6Addr::LOCALHOST, serve.addr.port()));
    let missing = exchange(lo6, &raw(lo6, "GET", "/health", &[], b"")).await;
    assert_eq!(
        refusal_message(&missing, 401, "unauthorized"),
        TOKEN_REQUIRED
    );
    let bearer = format!("Bearer {TOKEN}");
    let ok = exchange(
        lo6,
        &raw(lo6, "GET", "/health", &[("Authorization", &bearer)], b""),
    )
    .await;
    assert_eq!(ok.status, 200, "{ok:#?}");
    let (code, log) = serve.stop().await;
    assert_eq!(code, Some(0), "{log}");
}

// ---------------------------------------------------------------------------------------------
// 5. Paths

/// repo_root must lie under `allowed_roots` (default HOME) once symlinks are resolved, and
/// files_of_interest must stay inside repo_root: lexically (`..`, absolute paths) and on disk
/// (a symlink inside the repository to a file or directory outside it, and a path that does not
/// exist yet under such a directory). Every front-end applies the same rules: the bridge's
/// `/execute` and `/tasks` (400), `droid-executor run` (exit 2) and MCP's `execute_droid_task`
/// and `droid_submit` (`isError`), each with exactly one `validation_error` naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_cannot_escape_the_allowed_roots_or_the_repository() {
    let b = Bridged::start(&json!([{"completion": "Done."}]), &[], &[]).await;
    let home = b.home.path().to_path_buf();
    let repo = b.home.repo();
    let outside = TempDir::new("security-outside").unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "not yours\n").unwrap();
    super::binary::git_repo_at(&outside.path().join("repo"), &[("a.txt", "a\n")]);
    let root_link = home.join("outside-repo");
    std::os::unix::fs::symlink(outside.path().join("repo"), &root_link).unwrap();
    std::os::unix::fs::symlink(outside.path(), repo.join("escape")).unwrap();
    std::os::unix::fs::symlink(&secret, repo.join("passwd")).unwrap();

    let roots = format!("({})", home.display());
    let outside_root = |p: &Path| {
        format!(
            "{:?} is outside the allowed roots {roots}; add it to allowed_roots in the config",
            p
        )
    };
    let not_in_repo = |f: &str| format!("{f:?} is outside repo_root {repo:?}");
    let dotdot = |f: &str| format!("{f:?} escapes repo_root through '..'");
    let symlink =
        |f: &str, to: &Path| format!("{f:?} leads outside repo_root (to {to:?}) through a symlink");
    let r = |p: &Path| p.display().to_string();
    let repo_s = r(&repo);
    let abs_secret = r(&secret);
    let climb = format!("{repo_s}/../x");
    let rows: Vec<(String, Option<&str>, &str, String)> = vec![
        (
            r(&outside.path().join("repo")),
            None,
            "$.context.repo_root",
            outside_root(&outside.path().join("repo")),
        ),
        (
            r(&root_link),
            None,
            "$.context.repo_root",
            outside_root(&root_link),
        ),
        (
            "/".into(),
            None,
            "$.context.repo_root",
            outside_root(Path::new("/")),
        ),
        (
            "repo".into(),
            None,
            "$.context.repo_root",
            "must be an absolute path, got \"repo\" (droid resolves a relative --cwd against \
             itself and fails silently)"
                .into(),
        ),
        (
            repo_s.clone(),
            Some("../x"),
            "$.context.files_of_interest[0]",
            dotdot("../x"),
        ),
        (
            repo_s.clone(),
            Some("a/../../x"),
            "$.context.files_of_interest[0]",
            dotdot("a/../../x"),
        ),
        (
            repo_s.clone(),
            Some("/etc/passwd"),
            "$.context.files_of_interest[0]",
            not_in_repo("/etc/passwd"),
        ),
        (
            repo_s.clone(),
            Some(&abs_secret),
            "$.context.files_of_interest[0]",
            not_in_repo(&abs_secret),
        ),
        (
            repo_s.clone(),
            Some(&climb),
            "$.context.files_of_interest[0]",
            not_in_repo(&climb),
        ),
        (
            repo_s.clone(),
            Some("escape"),
            "$.context.files_of_interest[0]",
            symlink("escape", outside.path()),
        ),
        (
            repo_s.clone(),
            Some("escape/secret.txt"),
            "$.context.files_of_interest[0]",
            symlink("escape/secret.txt", &secret),
        ),
        (
            repo_s.clone(),
            Some("passwd"),
            "$.context.files_of_interest[0]",
            symlink("passwd", &secret),
        ),
        (
            repo_s.clone(),
            Some("escape/new/file.rs"),
            "$.context.files_of_interest[0]",
            symlink("escape/new/file.rs", &outside.path().join("new/file.rs")),
        ),
    ];

    let mut mcp = Server::start(&env_of(&b.home, &[]), &repo);
    mcp.initialize().await;
    let request_file = b.home.file("request.json");
    for (i, (root, file, field, message)) in rows.iter().enumerate() {
        let mut context = json!({"repo_root": root});
        if let Some(f) = file {
            context["files_of_interest"] = json!([f]);
        }
        let request = json!({"objective": "escape", "context": context});
        let want = ("validation_error".to_owned(), format!("{field}: {message}"));
        for path in ["/execute", "/tasks"] {
            let a = b.post(path, &request).await;
            let (status, kind, description) = only_issue(&a);
            assert_eq!(
                (status, (kind, description)),
                (400, want.clone()),
                "{path} {request}"
            );
        }
        std::fs::write(&request_file, request.to_string()).unwrap();
        let out = droid_executor(
            &["run", "--request", &r(&request_file), "--json"],
            &env_of(&b.home, &[]),
            b.home.path(),
        )
        .await;
        assert_eq!(out.code, Some(2), "run {request}: {out:#?}");
        let result = out.result();
        let issues: Vec<(String, String)> = result
            .issues
            .iter()
            .map(|i| (i.kind.as_str().to_owned(), i.description.clone()))
            .collect();
        assert_eq!(issues, vec![want.clone()], "run {request}");
        let answer = mcp
            .call(
                json!(format!("{i}-0")),
                "execute_droid_task",
                request.clone(),
            )
            .await;
        assert_eq!(answer["isError"], true, "{request}: {answer:#}");
        let result: ExecutionResult =
            serde_json::from_value(answer["structuredContent"].clone()).unwrap();
        let issues: Vec<(String, String)> = result
            .issues
            .iter()
            .map(|i| (i.kind.as_str().to_owned(), i.description.clone()))
            .collect();
        assert_eq!(issues, vec![want.clone()], "execute_droid_task {request}");
        // droid_submit's output schema is `{task_id}`: the same refusal, as text only
        let answer = mcp
            .call(json!(format!("{i}-1")), "droid_submit", request.clone())
            .await;
        let said = answer["content"][0]["text"].as_str().unwrap_or_default();
        assert!(
            answer["isError"] == true
                && answer.get("structuredContent").is_none()
                && said.contains(&format!("\nissue [{}]: {} -> ", want.0, want.1)),
            "droid_submit {request}: {answer:#}"
        );
    }
    mcp.close_stdin();
    let (status, _) = mcp.exit_within(Duration::from_secs(10)).await;
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    assert_eq!(
        b.get("/tasks").await,
        (200, json!({"tasks": [], "damaged": []}))
    );
    // files inside the repository run; `escape/../a.txt` is normalised lexically to `a.txt`
    // (what droid is told), never followed through the symlink
    runs_when_allowed(
        &b,
        &[],
        &request_for(&repo, "stay inside", json!({"context": {"repo_root": repo, "files_of_interest": ["a.txt", "escape/../a.txt"]}})),
    )
    .await;
}

// ---------------------------------------------------------------------------------------------
// 6. Oversized and deeply nested JSON

/// Bodies and lines built to exhaust memory or the parser's stack: over the body limit (413 from
/// `Content-Length`, before the body is read), nested 100 000 deep (400: serde_json stops at 128
/// levels, so no stack overflow), strings over the contract's lengths (400, each field named).
/// MCP answers a deep line -32700 and a line over 8 MiB -32600, then keeps answering; the CLI
/// refuses a deep `--request` file with exit 2. The bridge process is the same one at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_and_deeply_nested_json_is_refused() {
    let b = Bridged::start(&json!([{"completion": "Done."}]), &[], &[]).await;
    let pid = b.serve.pid();
    let repo = b.home.repo();

    // one byte over the limit, the body sent in full while the answer comes
    let mut over = body(&b.request("big", json!({})));
    over.resize(BODY_LIMIT + 1, b' ');
    let stream = TcpStream::connect(b.addr()).await.unwrap();
    let (mut r, mut w) = stream.into_split();
    let head = raw(
        b.addr(),
        "POST",
        "/execute",
        &[JSON, ("Content-Length", &over.len().to_string())],
        b"",
    );
    let writer = tokio::spawn(async move {
        w.write_all(&head).await?;
        w.write_all(&over).await
    });
    let a = parse_answer(&read_all(&mut r).await);
    let _ = writer.await;
    assert_eq!(
        refusal_message(&a, 413, "body_too_large"),
        format!(
            "the body is larger than the limit of {BODY_LIMIT} bytes (body_limit); send the \
             context as file paths, not file contents"
        )
    );

    // exactly the limit is read, and then judged by the contract
    let skeleton = json!({"objective": "", "context": {"repo_root": repo}});
    let fill = BODY_LIMIT - body(&skeleton).len();
    let at_limit = json!({"objective": "x".repeat(fill), "context": {"repo_root": repo}});
    assert_eq!(body(&at_limit).len(), BODY_LIMIT);
    let a = b.post("/execute", &at_limit).await;
    assert_eq!(
        only_issue(&a),
        (
            400,
            "validation_error".to_owned(),
            format!("$.objective: is {fill} characters; the limit is 50000")
        )
    );

    let deep_request = {
        let head = format!(
            "{{\"objective\": \"deep\", \"context\": {{\"repo_root\": {}}}, \"constraints\": ",
            json!(repo)
        );
        let mut s = head.into_bytes();
        s.extend(std::iter::repeat_n(b'[', DEEP));
        s.extend(std::iter::repeat_n(b']', DEEP));
        s.push(b'}');
        s
    };
    let deep_bodies: Vec<(&str, Vec<u8>)> = vec![
        ("[[[…", vec![b'['; DEEP]),
        ("{\"a\":{\"a\":…", b"{\"a\":".repeat(DEEP)),
        ("[[[…]]]", [vec![b'['; DEEP], vec![b']'; DEEP]].concat()),
        ("constraints: [[[…]]]", deep_request),
    ];
    for (what, bytes) in &deep_bodies {
        for path in ["/execute", "/tasks"] {
            let a = b.raw("POST", path, &[JSON], bytes).await;
            let (status, kind, description) = only_issue(&a);
            assert_eq!((status, kind.as_str()), (400, "validation_error"), "{what}");
            assert!(
                description.starts_with(
                    "$: the body is not valid JSON: recursion limit exceeded at line 1"
                ),
                "{what}: {description}"
            );
        }
    }
    // nesting the parser follows is judged by the contract
    let nested = json!({
        "objective": "nested",
        "context": {"repo_root": repo},
        "constraints": serde_json::from_str::<Value>(&format!("{}{}", "[".repeat(100), "]".repeat(100))).unwrap(),
    });
    let a = b.post("/execute", &nested).await;
    assert_eq!(
        only_issue(&a),
        (
            400,
            "validation_error".to_owned(),
            "$.constraints[0]: must be a string, got an array".to_owned()
        )
    );

    // every field over its length, each named
    let long = json!({
        "task_id": "t".repeat(129),
        "objective": "o".repeat(50_001),
        "instructions": "i".repeat(100_001),
        "context": {"repo_root": repo, "files_of_interest": vec!["a.txt"; 1_001]},
        "constraints": ["c".repeat(2_001)],
        "acceptance_criteria": vec!["a"; 101],
        "suggested_commands": ["s".repeat(4_001)],
        "notes_for_human": "n".repeat(100_001),
    });
    let a = b.post("/execute", &long).await;
    assert_eq!(a.status, 400, "{a:#?}");
    let r = a.result();
    let issues: Vec<(&str, &str)> = r
        .issues
        .iter()
        .map(|i| (i.kind.as_str(), i.description.as_str()))
        .collect();
    assert_eq!(
        issues,
        [
            (
                "validation_error",
                "$.task_id: is 129 characters; the limit is 128"
            ),
            (
                "validation_error",
                "$.objective: is 50001 characters; the limit is 50000"
            ),
            (
                "validation_error",
                "$.instructions: is 100001 characters; the limit is 100000"
            ),
            (
                "validation_error",
                "$.context.files_of_interest: has 1001 items; the limit is 1000"
            ),
            (
                "validation_error",
                "$.constraints[0]: is 2001 characters; the limit is 2000"
            ),
            (
                "validation_error",
                "$.acceptance_criteria: has 101 items; the limit is 100"
            ),
            (
                "validation_error",
                "$.suggested_commands[0]: is 4001 characters; the limit is 4000"
            ),
            (
                "validation_error",
                "$.notes_for_human: is longer than 100000 characters"
            ),
        ],
        "{r:#?}"
    );

    // the CLI reads a request file with the same parser
    let deep_file = b.home.file("deep.json");
    std::fs::write(&deep_file, vec![b'['; DEEP]).unwrap();
    let out = droid_executor(
        &[
            "run",
            "--request",
            &deep_file.display().to_string(),
            "--json",
        ],
        &env_of(&b.home, &[]),
        b.home.path(),
    )
    .await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    let issues: Vec<String> = out
        .result()
        .issues
        .iter()
        .map(|i| i.description.clone())
        .collect();
    assert_eq!(
        issues,
        ["$: --request: not valid JSON: recursion limit exceeded at line 1 column 128"]
    );

    // MCP: a deep line is a parse error, an endless one is cut, and the server answers on
    let mut mcp = Server::start(&env_of(&b.home, &[]), &repo);
    mcp.initialize().await;
    let deep_call = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{{\"name\":\"execute_droid_task\",\"arguments\":{{\"objective\":{}{}}}}}}}",
        "[".repeat(DEEP),
        "]".repeat(DEEP)
    );
    for (what, line) in [
        ("[[[…", "[".repeat(DEEP)),
        ("{\"a\":…", "{\"a\":".repeat(DEEP)),
        ("a call with deep arguments", deep_call),
    ] {
        mcp.send_raw(&format!("{line}\n")).await;
        let resp = mcp.next().await;
        assert_error(&resp, &Value::Null, -32700);
        let message = resp["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("parse error: recursion limit exceeded at line 1"),
            "{what}: {message}"
        );
        assert_eq!(
            mcp.request(json!(what), "ping", Value::Null).await,
            pong(json!(what))
        );
    }
    let huge = format!("\"{}\"", "x".repeat(9 * 1024 * 1024));
    mcp.send_raw(&format!("{huge}\n")).await;
    let resp = mcp.next().await;
    assert_error(&resp, &Value::Null, -32600);
    assert_eq!(
        resp["error"]["message"],
        format!(
            "message of {} bytes is over the 8388608-byte limit",
            huge.len()
        )
    );
    assert_eq!(
        mcp.request(json!("after"), "ping", Value::Null).await,
        pong(json!("after"))
    );
    let answer = mcp
        .call(
            json!("long"),
            "execute_droid_task",
            json!({"objective": "o".repeat(50_001), "context": {"repo_root": repo}}),
        )
        .await;
    assert_eq!(answer["isError"], true, "{answer:#}");
    assert_eq!(
        answer["structuredContent"]["issues"][0]["description"],
        "$.objective: is 50001 characters; the limit is 50000"
    );
    mcp.close_stdin();
    let (status, _) = mcp.exit_within(Duration::from_secs(10)).await;
    assert!(
        status.is_some_and(|s| s.success()),
        "{status:?}\n{}",
        mcp.stderr()
    );

    assert_eq!(b.get("/health").await.0, 200);
    assert_eq!(b.serve.pid(), pid);
    assert_eq!(
        b.get("/tasks").await,
        (200, json!({"tasks": [], "damaged": []}))
    );
    runs_when_allowed(&b, &[], &b.request("small", json!({}))).await;
}

// ---------------------------------------------------------------------------------------------
// 7. Request smuggling

/// Framings that front-ends and back-ends read differently, each hiding a second request (a
/// `POST /tasks` that would start droid) after or inside the first. hyper rejects the ambiguous
/// ones outright (400 with an empty body: two different `Content-Length`s, a `Transfer-Encoding`
/// other than a final `chunked`, obs-folded lines, NUL or a bare CR in a field, a signed length,
/// chunked HTTP/1.0). With both `Content-Length` and `Transfer-Encoding: chunked` it reads the
/// chunked body (RFC 9112 §6.1) and closes the connection after answering, so what follows is
/// never read. Either way the connection carries exactly one answer and the hidden request never
/// runs. A bare LF ending a line is accepted (RFC 9112 §2.2 allows it; there is no proxy in
/// front to disagree), and an honest pipelined request after a body is answered in turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_smuggling_framings_run_nothing() {
    let b = Bridged::start(&json!([{"completion": "Done."}]), &[], &[]).await;
    let host = format!("Host: {}\r\n", b.addr());
    let hidden_body = body(&b.request("smuggled", json!({})));
    let hidden = [
        format!(
            "POST /tasks HTTP/1.1\r\n{host}Content-Type: application/json\r\nContent-Length: \
             {}\r\n\r\n",
            hidden_body.len()
        )
        .into_bytes(),
        hidden_body,
    ]
    .concat();
    let hidden_text = String::from_utf8(hidden.clone()).unwrap();
    let post = |headers: &str, body: &[u8]| -> Vec<u8> {
        [
            format!(
                "POST /execute HTTP/1.1\r\n{host}Content-Type: application/json\r\n{headers}\r\n"
            )
            .into_bytes(),
            body.to_vec(),
        ]
        .concat()
    };
    let chunk = |data: &str| format!("{:x}\r\n{data}\r\n0\r\n\r\n", data.len());
    let empty_chunked = [b"0\r\n\r\n".to_vec(), hidden.clone()].concat();

    // (probe, bytes, the one answer: status and the issue or refusal it carries; None = hyper's
    // own 400 with an empty body)
    let rows: Vec<(&str, Vec<u8>, Option<String>)> = vec![
        (
            "CL.TE: Content-Length covers the hidden request, chunked ends before it",
            post(
                &format!(
                    "Content-Length: {}\r\nTransfer-Encoding: chunked\r\n",
                    empty_chunked.len()
                ),
                &empty_chunked,
            ),
            Some(
                "$: the body is not valid JSON: EOF while parsing a value at line 1 column 0"
                    .into(),
            ),
        ),
        (
            "TE.CL: chunked carries the hidden request, Content-Length ends before it",
            post(
                "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n",
                chunk(&hidden_text).as_bytes(),
            ),
            Some("$: the body is not valid JSON: expected value at line 1 column 1".into()),
        ),
        (
            "two different Content-Lengths",
            post(
                &format!(
                    "Content-Length: 2\r\nContent-Length: {}\r\n",
                    2 + hidden.len()
                ),
                &[b"{}".to_vec(), hidden.clone()].concat(),
            ),
            None,
        ),
        (
            "Content-Length as a list",
            post(
                &format!("Content-Length: 2, {}\r\n", 2 + hidden.len()),
                &[b"{}".to_vec(), hidden.clone()].concat(),
            ),
            None,
        ),
        (
            "Transfer-Encoding: chunked, identity",
            post("Transfer-Encoding: chunked, identity\r\n", &empty_chunked),
            None,
        ),
        (
            "Transfer-Encoding: xchunked with a Content-Length",
            post(
                &format!(
                    "Transfer-Encoding: xchunked\r\nContent-Length: {}\r\n",
                    empty_chunked.len()
                ),
                &empty_chunked,
            ),
            None,
        ),
        (
            "Transfer-Encoding: identity",
            post("Transfer-Encoding: identity\r\n", &empty_chunked),
            None,
        ),
        (
            "a space before the colon",
            post(
                "Transfer-Encoding : chunked\r\nContent-Length: 2\r\n",
                b"{}",
            ),
            None,
        ),
        (
            "an obs-folded Transfer-Encoding",
            post(
                &format!(
                    "Transfer-Encoding:\r\n chunked\r\nContent-Length: {}\r\n",
                    empty_chunked.len()
                ),
                &empty_chunked,
            ),
            None,
        ),
        (
            "an obs-folded header",
            post("X-Folded: a\r\n b\r\nContent-Length: 2\r\n", b"{}"),
            None,
        ),
        (
            "a bare LF inside a field value",
            post("X-A: a\nb\r\nContent-Length: 2\r\n", b"{}"),
            None,
        ),
        (
            "a NUL in a field value",
            post("X-A: a\0b\r\nContent-Length: 2\r\n", b"{}"),
            None,
        ),
        (
            "a bare CR in a field value",
            post("X-A: a\rb\r\nContent-Length: 2\r\n", b"{}"),
            None,
        ),
        (
            "a signed Content-Length",
            post(
                "Content-Length: +2\r\n",
                &[b"{}".to_vec(), hidden.clone()].concat(),
            ),
            None,
        ),
        (
            "chunked in HTTP/1.0",
            [
                format!(
                    "POST /execute HTTP/1.0\r\n{host}Content-Type: application/json\r\n\
                     Transfer-Encoding: chunked\r\n\r\n"
                )
                .into_bytes(),
                empty_chunked.clone(),
            ]
            .concat(),
            None,
        ),
    ];
    for (what, bytes, issue) in &rows {
        let mut s = TcpStream::connect(b.addr()).await.unwrap();
        s.write_all(bytes).await.unwrap();
        let got = answers(&read_all(&mut s).await);
        assert_eq!(got.len(), 1, "{what}: {got:#?}");
        let a = &got[0];
        assert_eq!(a.header("connection"), Some("close"), "{what}: {a:#?}");
        match issue {
            None => assert_eq!(
                (a.status, a.header("content-length"), a.body.as_str()),
                (400, Some("0"), ""),
                "{what}: {a:#?}"
            ),
            Some(description) => assert_eq!(
                only_issue(a),
                (400, "validation_error".to_owned(), description.clone()),
                "{what}"
            ),
        }
    }
    assert_eq!(
        b.get("/tasks").await,
        (200, json!({"tasks": [], "damaged": []}))
    );
    assert_eq!(b.record(), None, "a smuggled request started droid");

    // a chunk size past u64: the body cannot be read
    let a = exchange(
        b.addr(),
        &post(
            "Transfer-Encoding: chunked\r\nConnection: close\r\n",
            b"fffffffffffffffffff\r\n{}\r\n0\r\n\r\n",
        ),
    )
    .await;
    assert_eq!(
        refusal_message(&a, 400, "body_unreadable"),
        "the body could not be read: error reading a body from connection"
    );

    // bare LF line endings are one request, answered once
    let lf = format!(
        "GET /health HTTP/1.1\nHost: {}\nConnection: close\n\n",
        b.addr()
    );
    let mut s = TcpStream::connect(b.addr()).await.unwrap();
    s.write_all(lf.as_bytes()).await.unwrap();
    let got = answers(&read_all(&mut s).await);
    assert_eq!(
        got.iter().map(|a| a.status).collect::<Vec<_>>(),
        [200],
        "{got:#?}"
    );

    // honest pipelining: a body framed by its Content-Length, then the next request, each
    // answered once and in order
    let run = body(&b.request("pipelined", json!({})));
    let pipelined = [
        post(&format!("Content-Length: {}\r\n", run.len()), &run),
        format!("GET /tasks HTTP/1.1\r\n{host}Connection: close\r\n\r\n").into_bytes(),
    ]
    .concat();
    let mut s = TcpStream::connect(b.addr()).await.unwrap();
    s.write_all(&pipelined).await.unwrap();
    let got = answers(&read_all(&mut s).await);
    assert_eq!(
        got.iter().map(|a| a.status).collect::<Vec<_>>(),
        [200, 200],
        "{got:#?}"
    );
    assert_eq!(got[0].result().status, Status::Success, "{got:#?}");
    assert_eq!(got[1].json(), json!({"tasks": [], "damaged": []}));
    // a body shorter than announced swallows what follows: still one request
    let short = [
        post(
            &format!(
                "Content-Length: {}\r\nConnection: close\r\n",
                2 + hidden.len()
            ),
            b"{}",
        ),
        hidden.clone(),
    ]
    .concat();
    let mut s = TcpStream::connect(b.addr()).await.unwrap();
    s.write_all(&short).await.unwrap();
    let got = answers(&read_all(&mut s).await);
    assert_eq!(got.len(), 1, "{got:#?}");
    let (status, kind, description) = only_issue(&got[0]);
    assert_eq!((status, kind.as_str()), (400, "validation_error"));
    assert!(
        description.starts_with("$: the body is not valid JSON: trailing characters"),
        "{description}"
    );
    assert_eq!(
        b.get("/tasks").await,
        (200, json!({"tasks": [], "damaged": []}))
    );
    let text = b.metrics().await;
    assert_eq!(
        super::bridge_http::metric(&text, "droid_executor_run_duration_seconds_count"),
        1,
        "only the honest pipelined run ran:\n{text}"
    );
}

// ---------------------------------------------------------------------------------------------
// 8. Secrets

/// The secrets of [`secrets_never_reach_results_logs_or_the_store`]: droid's `FACTORY_API_KEY`
/// (not `fk-` shaped, so only knowing droid's environment hides it), Factory keys the request
/// carries (bare, in `FACTORY_API_KEY=…` and in a path), one only droid prints, and a bearer
/// token. Each holds a marker (`…SECRET…`) that must appear nowhere. A `FACTORY_API_KEY=` value
/// that is neither an `fk-` key nor droid's own is not recognisable as a secret, so it is not
/// probed.
const ENV_KEY: &str = "ENVSECRETqwerty1";
const REQ_KEY: &str = "fk-REQSECRETasdfgh2";
const DROID_KEY: &str = "fk-DROIDSECRETzxcv3";
const CTX_KEY: &str = "fk-CTXSECRETpoiuy4";
const ASSIGNED_KEY: &str = "fk-ASSIGNEDSECRETlkjhg5";
const BEARER_SECRET: &str = "BEARERSECRETmnbvc6";
const MARKERS: [&str; 6] = [
    "ENVSECRET",
    "REQSECRET",
    "DROIDSECRET",
    "CTXSECRET",
    "ASSIGNEDSECRET",
    "BEARERSECRET",
];

/// That `text` (what `what` produced) holds none of the secrets.
fn assert_no_secret(text: &str, what: &str) {
    for m in MARKERS {
        assert!(!text.contains(m), "{m} leaked into {what}:\n{text}");
    }
}

/// A request carrying secrets in every text field.
fn secret_request(repo: &Path) -> Value {
    json!({
        "objective": format!("Call the API with {REQ_KEY}"),
        "instructions": format!(
            "export FACTORY_API_KEY={ENV_KEY} and send `Authorization: Bearer {BEARER_SECRET}`"
        ),
        "context": {"repo_root": repo, "files_of_interest": [format!("notes/{CTX_KEY}.txt")]},
        "constraints": [format!("FACTORY_API_KEY={ASSIGNED_KEY}"), format!("never print {REQ_KEY}")],
        "acceptance_criteria": [format!("works with {REQ_KEY}")],
        "suggested_commands": [format!(
            "echo FACTORY_API_KEY={ASSIGNED_KEY} {REQ_KEY} Bearer {BEARER_SECRET}"
        )],
        "notes_for_human": format!("rotate {REQ_KEY} afterwards"),
    })
}

/// droid printing every secret on stdout (a message, a command and its output, a line that is
/// not an event, its final report) and stderr, then finishing.
fn talker() -> Value {
    let report = json!({
        "status": "success",
        "summary": format!("used {DROID_KEY}"),
        "files": [{"path": "a.txt", "highlights": [format!("key {DROID_KEY}")]}],
        "issues": [{
            "type": "env_issue",
            "description": format!("saw FACTORY_API_KEY={ENV_KEY}"),
            "suggested_action": format!("rotate {DROID_KEY} and FACTORY_API_KEY={ASSIGNED_KEY}"),
        }],
    });
    json!([
        {"emit": super::mcp_stdio::assistant(&format!(
            "I found {ENV_KEY}, {REQ_KEY} and {DROID_KEY}; Authorization: Bearer {BEARER_SECRET}"
        ))},
        {"emit": {"type": "tool_call", "id": "call_1", "toolId": "Execute", "toolName": "Execute",
                  "parameters": {"command": format!(
                      "curl -H 'Authorization: Bearer {BEARER_SECRET}' -d key={DROID_KEY}"
                  )},
                  "timestamp": 1_795_320_771_600_u64, "session_id": "fake-session"}},
        {"emit": {"type": "tool_result", "id": "call_1", "toolId": "Execute", "isError": false,
                  "value": format!(
                      "sent {DROID_KEY} FACTORY_API_KEY={ASSIGNED_KEY}\n\n\n[Process exited with code 0]"
                  ),
                  "timestamp": 1_795_320_771_700_u64, "session_id": "fake-session"}},
        {"raw": format!("FACTORY_API_KEY={ENV_KEY}")},
        {"raw": format!("FACTORY_API_KEY={ASSIGNED_KEY} Authorization: Bearer {BEARER_SECRET}")},
        {"stderr": format!("debug: key {DROID_KEY} token Bearer {BEARER_SECRET} env {ENV_KEY}")},
        {"write_file": {"path": "a.txt", "content": format!("a\n{DROID_KEY}\n")}},
        {"completion": format!(
            "Done with {REQ_KEY}.\n```droid-executor-report\n{report}\n```"
        )},
    ])
}

/// droid failing with the secrets in its error event and the first line of its stderr.
fn failer() -> Value {
    json!([
        {"emit": {"type": "error", "source": "agent_loop",
                  "message": format!("401 Unauthorized: key {DROID_KEY} (Bearer {BEARER_SECRET})"),
                  "timestamp": 1_795_320_771_800_u64, "session_id": "fake-session"}},
        {"stderr": format!(
            "fatal: key {DROID_KEY} rejected (FACTORY_API_KEY={ASSIGNED_KEY}, Authorization: Bearer \
             {BEARER_SECRET}, env {ENV_KEY})"
        )},
        {"exit": 1},
    ])
}

/// Every file under `dir`, recursively, with its contents.
fn files_under(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut all = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                all.push((path, bytes));
            }
        }
    }
    all.sort();
    all
}

/// A task's record once it has a result.
async fn until_finished(b: &Bridged, id: &str) -> Value {
    let until = Instant::now() + HTTP_LIMIT;
    loop {
        let (status, rec) = b.get(&format!("/tasks/{id}")).await;
        assert_eq!(status, 200, "{rec:#}");
        if !rec["result"].is_null() {
            return rec;
        }
        assert!(Instant::now() < until, "{id} never finished: {rec:#}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Factory keys (`fk-…`), `FACTORY_API_KEY=…` assignments, droid's own environment values and
/// bearer tokens, in a request and in everything droid prints, are masked (`[REDACTED]`) wherever
/// they could be kept or shown: the ExecutionResult of every front-end (bridge, MCP, CLI, JSON
/// and human), the task store (every file), the task's record and `tasks show`/`tasks list`, the
/// bridge's stderr and the MCP server's stderr and stdout (progress and log notifications
/// included). Everything runs with `RUST_LOG=debug`, so the logs say as much as they can.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_never_reach_results_logs_or_the_store() {
    let debug = [("FACTORY_API_KEY", ENV_KEY), ("RUST_LOG", "debug")];
    let b = Bridged::start(&talker(), &[], &debug).await;
    let repo = b.home.repo();
    let request = secret_request(&repo);
    let env = env_of(&b.home, &debug);

    // the bridge: sync runs and background tasks
    let mut ids = Vec::new();
    for (name, steps) in [("talker", talker()), ("failer", failer())] {
        b.home.play(&steps);
        let a = b.post("/execute", &request).await;
        assert_eq!(a.status, 200, "{name}: {a:#?}");
        assert_ne!(a.result().status, Status::Error, "{name}: {a:#?}");
        assert_no_secret(&a.body, &format!("the bridge's {name} result"));
        assert!(a.body.contains("[REDACTED]"), "{name}: {a:#?}");
        let id = b.submit(&request).await;
        let rec = until_finished(&b, &id).await;
        assert_no_secret(&rec.to_string(), &format!("the {name} task's record"));
        ids.push(id);
    }
    let (_, list) = b.get("/tasks").await;
    assert_no_secret(&list.to_string(), "GET /tasks");

    // the store, every file of it
    let store = b.home.file(".local/state/droid-executor");
    let files = files_under(&store);
    assert!(
        files.iter().any(|(p, _)| p.ends_with("events.ndjson")),
        "{files:#?}"
    );
    for (path, bytes) in &files {
        assert_no_secret(&String::from_utf8_lossy(bytes), &path.display().to_string());
    }
    let events = files
        .iter()
        .find(|(p, _)| p.ends_with("events.ndjson"))
        .map(|(_, b)| String::from_utf8_lossy(b).into_owned())
        .unwrap();
    assert!(events.contains("[REDACTED]"), "{events}");

    // the CLI: tasks show and list, and a run of its own
    for id in &ids {
        for args in [
            vec!["tasks", "show", id],
            vec!["tasks", "show", id, "--json"],
        ] {
            let out = droid_executor(&args, &env, b.home.path()).await;
            assert_eq!(out.code, Some(0), "{args:?}: {out:#?}");
            assert_no_secret(
                &format!("{}{}", out.stdout, out.stderr),
                &format!("{args:?}"),
            );
        }
    }
    for args in [vec!["tasks", "list"], vec!["tasks", "list", "--json"]] {
        let out = droid_executor(&args, &env, b.home.path()).await;
        assert_eq!(out.code, Some(0), "{args:?}: {out:#?}");
        assert_no_secret(
            &format!("{}{}", out.stdout, out.stderr),
            &format!("{args:?}"),
        );
    }
    let request_file = b.home.file("secret-request.json");
    std::fs::write(&request_file, request.to_string()).unwrap();
    let file_arg = request_file.display().to_string();
    for (name, steps) in [("talker", talker()), ("failer", failer())] {
        b.home.play(&steps);
        for json_flag in [true, false] {
            let mut args = vec!["run", "--request", &file_arg];
            if json_flag {
                args.push("--json");
            }
            let out = droid_executor(&args, &env, b.home.path()).await;
            assert!(matches!(out.code, Some(0 | 1)), "{name} {args:?}: {out:#?}");
            assert_no_secret(
                &format!("{}{}", out.stdout, out.stderr),
                &format!("`droid-executor {}` ({name})", args.join(" ")),
            );
            if json_flag {
                assert!(out.stdout.contains("[REDACTED]"), "{out:#?}");
            }
        }
    }

    // MCP: results, progress and log notifications on stdout, and its stderr
    let mut mcp = Server::start(&env, &repo);
    mcp.initialize().await;
    let level = mcp
        .request(
            json!("level"),
            "logging/setLevel",
            json!({"level": "debug"}),
        )
        .await;
    assert!(level.get("error").is_none(), "{level:#}");
    let mut seen = Vec::new();
    for (name, steps) in [("talker", talker()), ("failer", failer())] {
        b.home.play(&steps);
        let id = json!(format!("run-{name}"));
        let resp = mcp
            .request(
                id.clone(),
                "tools/call",
                json!({"name": "execute_droid_task", "arguments": request,
                       "_meta": {"progressToken": name}}),
            )
            .await;
        assert!(
            resp["result"]["structuredContent"]["status"].is_string(),
            "{resp:#}"
        );
        assert!(resp.to_string().contains("[REDACTED]"), "{resp:#}");
        seen.push(resp);
        let submitted = mcp
            .call(
                json!(format!("submit-{name}")),
                "droid_submit",
                request.clone(),
            )
            .await;
        let task_id = submitted["structuredContent"]["task_id"]
            .as_str()
            .unwrap_or_else(|| panic!("{submitted:#}"))
            .to_owned();
        let pended = mcp
            .call(
                json!(format!("pend-{name}")),
                "droid_pend",
                json!({"task_id": task_id, "wait_seconds": 60}),
            )
            .await;
        assert!(
            !pended["structuredContent"]["result"].is_null(),
            "{pended:#}"
        );
        seen.push(submitted);
        seen.push(pended);
    }
    seen.extend(mcp.collect_for(Duration::from_millis(200)).await);
    assert!(
        seen.iter().any(|m| m["method"] == "notifications/progress"),
        "no progress notifications: {seen:#?}"
    );
    for m in &seen {
        assert_no_secret(&m.to_string(), "an MCP message");
    }
    mcp.close_stdin();
    let (status, _) = mcp.exit_within(Duration::from_secs(10)).await;
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    assert_no_secret(&mcp.stderr(), "the MCP server's stderr");

    // the store again, with the MCP tasks in it, and the bridge's log
    for (path, bytes) in files_under(&store) {
        assert_no_secret(
            &String::from_utf8_lossy(&bytes),
            &path.display().to_string(),
        );
    }
    let Bridged { serve, home: _home } = b;
    let (code, log) = serve.stop().await;
    assert_eq!(code, Some(0), "{log}");
    assert_no_secret(&log, "the bridge's stderr");
}

// ---------------------------------------------------------------------------------------------
// 9. Store permissions

/// Every entry under `dir` (itself included): its path relative to `dir` and its mode.
fn modes_under(dir: &Path) -> Vec<(String, bool, u32)> {
    let mut all = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let meta = std::fs::symlink_metadata(&p).unwrap();
        let rel = p.strip_prefix(dir).unwrap().display().to_string();
        assert!(
            meta.is_dir() || meta.is_file(),
            "{} is neither a file nor a directory: {meta:?}",
            p.display()
        );
        all.push((rel, meta.is_dir(), meta.permissions().mode() & 0o7777));
        if meta.is_dir() {
            for entry in std::fs::read_dir(&p).unwrap() {
                stack.push(entry.unwrap().path());
            }
        }
    }
    all.sort();
    all
}

/// That every directory under `store` is 0700 and every file 0600; the paths seen, with task ids
/// written `<id>`.
fn assert_private(store: &Path, ids: &[&str], when: &str) -> Vec<String> {
    let mut seen = Vec::new();
    for (rel, is_dir, mode) in modes_under(store) {
        let want = if is_dir { 0o700 } else { 0o600 };
        assert_eq!(mode, want, "{when}: {rel:?} is {mode:04o}");
        let mut shown = rel;
        for id in ids {
            shown = shown.replace(id, "<id>");
        }
        seen.push(shown);
    }
    seen
}

/// The task store holds requests, results and droid's output: other local users must not read
/// it. Everything in it is created with explicit modes (directories 0700, files 0600), so it
/// stays private even when the process runs under `umask 0`: a background task's files (task,
/// request, owner, lock, started, events, result, the supervisor's log), the run slots, and the
/// bridge daemon's pid, lock and log files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_files_are_private() {
    let home = Bridged::home(&super::mcp_stdio::short_run());
    let env = env_of(&home, &[]);
    let repo = home.repo().display().to_string();
    let store = home.file(".local/state/droid-executor");

    let out = under_umask_0(
        &[
            "run",
            "look around",
            "--repo",
            &repo,
            "--background",
            "--json",
        ],
        &env,
        home.path(),
    )
    .await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let submitted: Value = serde_json::from_str(&out.stdout).unwrap();
    let id = submitted["task_id"].as_str().unwrap().to_owned();
    let waited = under_umask_0(
        &["tasks", "wait", &id, "--timeout", "60", "--json"],
        &env,
        home.path(),
    )
    .await;
    assert_eq!(waited.code, Some(0), "{waited:#?}");

    let port = free_port();
    let p = port.to_string();
    let daemon = DaemonGuard::new(&store, port);
    let started = under_umask_0(&["bridge", "start", "--port", &p], &env, home.path()).await;
    assert_eq!(started.code, Some(0), "{started:#?}");
    let via = under_umask_0(
        &[
            "run",
            "look again",
            "--repo",
            &repo,
            "--via",
            "bridge",
            "--bridge-port",
            &p,
            "--background",
            "--json",
        ],
        &env,
        home.path(),
    )
    .await;
    assert_eq!(via.code, Some(0), "{via:#?}");
    let submitted: Value = serde_json::from_str(&via.stdout).unwrap();
    let id2 = submitted["task_id"].as_str().unwrap().to_owned();
    let waited = under_umask_0(
        &["tasks", "wait", &id2, "--timeout", "60", "--json"],
        &env,
        home.path(),
    )
    .await;
    assert_eq!(waited.code, Some(0), "{waited:#?}");
    let running = assert_private(&store, &[&id, &id2], "while the bridge runs");
    let stopped = under_umask_0(&["bridge", "stop", "--port", &p], &env, home.path()).await;
    assert_eq!(stopped.code, Some(0), "{stopped:#?}");
    assert_eq!(daemon.pid(), None, "the pid file is gone once stopped");
    let after = assert_private(&store, &[&id, &id2], "after the bridge stopped");

    let task_files = [
        "task.json",
        "request.json",
        "owner.json",
        "lock",
        "started",
        "events.ndjson",
        "result.json",
        "worker.log",
    ];
    let mut expected: Vec<String> = vec![String::new(), "tasks".into(), "tasks/<id>".into()];
    expected.extend(task_files.iter().map(|f| format!("tasks/<id>/{f}")));
    expected.extend(["pid", "lock", "log"].map(|ext| format!("bridge-{port}.{ext}")));
    for e in &expected {
        assert!(running.contains(e), "{e:?} missing from {running:#?}");
    }
    assert!(!after.contains(&format!("bridge-{port}.pid")), "{after:#?}");
    // the control: umask 0 did reach the runs (the fake droid writes its record without a mode)
    let record = std::fs::metadata(home.fixture("record.json")).unwrap();
    assert_eq!(record.permissions().mode() & 0o777, 0o666);
}

/// The token file is the only thing between other users and droid running commands as this
/// user: `serve` says so on stderr when the file is open to group or others, and is silent when
/// only its owner can read it. (It still starts: the token works, and the warning says the fix.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_file_other_users_can_read_is_warned_about() {
    let home = Bridged::home(&json!([{"completion": "Done."}]));
    let file = home.file("token");
    let shown = file.display().to_string();
    for (mode, warned) in [
        (0o644, true),
        (0o640, true),
        (0o604, true),
        (0o600, false),
        (0o400, false),
    ] {
        std::fs::write(&file, format!("{TOKEN}\n")).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        let serve =
            ServeProc::start(&["--token-file", &shown], &env_of(&home, &[]), home.path()).await;
        let lo = serve.addr;
        let a = exchange(lo, &raw(lo, "GET", "/health", &[], b"")).await;
        assert_eq!(a.refusal(401), "unauthorized", "{mode:o}");
        let (code, log) = serve.stop().await;
        assert_eq!(code, Some(0), "{log}");
        let warnings: Vec<&str> = log.lines().filter(|l| l.contains("warning")).collect();
        let want: Vec<String> = if warned {
            vec![format!(
                "droid-executor: warning: the token file {shown} is open to other users (mode \
                 {mode:04o}); restrict it with `chmod 600 {shown}`"
            )]
        } else {
            Vec::new()
        };
        assert_eq!(warnings, want, "mode {mode:04o}: {log}");
    }
}

// ---------------------------------------------------------------------------------------------
// Inputs named on the command line, paths checked when a run starts

/// `run` flags read from the test's HOME with the fake droid; `stdin` feeds `--request -`.
async fn run_cli(
    home: &super::binary::FakeHome,
    args: &[&str],
    extra_env: &[(&str, &str)],
    stdin: Option<std::fs::File>,
) -> Out {
    let mut cmd = super::binary::command(args, &env_of(home, extra_env), &home.repo());
    if let Some(f) = stdin {
        cmd.stdin(f);
    }
    finish(cmd.spawn().unwrap()).await
}

/// The one `validation_error` of an `error` result printed by `run --json` that exited 2.
fn only_violation(out: &Out) -> String {
    assert_eq!(out.code, Some(2), "{out:#?}");
    let r = out.result();
    assert_eq!(r.status, Status::Error, "{r:#?}");
    assert_eq!(out.issue_kinds(), ["validation_error"], "{r:#?}");
    r.issues[0].description.clone()
}

/// Every input the CLI reads from a file or stdin (`--request FILE|-`, `--instructions-file`,
/// `--config`, `serve --token-file`) is read only up to its limit (`body_limit` for a request, the
/// contract's 100 000 characters for instructions, 1 MiB for a config, 64 KiB for a token):
/// `/dev/zero`, `/dev/urandom` or a file one byte over is refused with an error naming the flag,
/// the limit and how to raise it, droid never starts, and the same input within the limit runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inputs_named_on_the_command_line_are_read_within_their_limits() {
    let home = Bridged::home(&json!([{"completion": "Done."}]));
    let over_body = |what: &str, limit: usize| {
        format!(
            "$: --request: {what} is larger than the limit of {limit} bytes (body_limit; raise it \
             in the config or with DROID_EXECUTOR_BODY_LIMIT)"
        )
    };
    for src in ["/dev/zero", "/dev/urandom"] {
        let out = run_cli(&home, &["run", "--json", "--request", src], &[], None).await;
        assert_eq!(
            only_violation(&out),
            over_body(&format!("--request {src}"), BODY_LIMIT),
            "{src}"
        );
    }
    let zero = std::fs::File::open("/dev/zero").unwrap();
    let out = run_cli(&home, &["run", "--json", "--request", "-"], &[], Some(zero)).await;
    assert_eq!(
        only_violation(&out),
        over_body("--request - (stdin)", BODY_LIMIT)
    );
    let out = run_cli(
        &home,
        &["run", "--json", "--instructions-file", "/dev/zero", "Do it"],
        &[],
        None,
    )
    .await;
    assert_eq!(
        only_violation(&out),
        "$.instructions: --instructions-file /dev/zero is larger than the limit of 400000 bytes \
         (instructions hold at most 100000 characters)"
    );
    assert_eq!(
        recorded(&home),
        None,
        "droid started for an oversized input"
    );

    // a file one byte over a lowered body_limit, then exactly at it
    let request = |len: usize| {
        let mut text = json!({"objective": "Pad", "context": {"repo_root": home.repo()}})
            .to_string()
            .into_bytes();
        assert!(text.len() <= len);
        text.resize(len, b' ');
        text
    };
    let file = home.file("padded.json");
    let shown = file.display().to_string();
    std::fs::write(&file, request(1001)).unwrap();
    let limit = [("DROID_EXECUTOR_BODY_LIMIT", "1000")];
    let out = run_cli(&home, &["run", "--json", "--request", &shown], &limit, None).await;
    assert_eq!(
        only_violation(&out),
        over_body(&format!("--request {shown}"), 1000)
    );
    assert_eq!(
        recorded(&home),
        None,
        "droid started for an oversized input"
    );

    // a config file and a token file that never end
    let out = run_cli(&home, &["--config", "/dev/zero", "run", "Do it"], &[], None).await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    assert_eq!(
        out.stderr.trim_end(),
        "droid-executor: the config file /dev/zero is larger than the limit of 1048576 bytes (a \
         config file holds at most 1 MiB)"
    );
    let out = run_cli(&home, &["serve", "--token-file", "/dev/zero"], &[], None).await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    assert!(
        out.stderr.contains(
            "the token file /dev/zero is larger than the limit of 65536 bytes (a token file \
             holds one token)"
        ),
        "{out:#?}"
    );
    assert_eq!(
        recorded(&home),
        None,
        "droid started for an oversized input"
    );

    std::fs::write(&file, request(1000)).unwrap();
    let out = run_cli(&home, &["run", "--json", "--request", &shown], &limit, None).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert_eq!(out.result().status, Status::Success);
    assert!(recorded(&home).is_some(), "droid did not run");
}

/// `--request` naming a FIFO that nobody opens for writing ends with an error naming the input
/// after 30 s of silence, instead of hanging for ever; a FIFO that a writer fills (what
/// `--request <(…)` gives) is read to its end and runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_fifo_without_a_writer_does_not_hang() {
    let home = Bridged::home(&json!([{"completion": "Done."}]));
    let fifo = home.file("request.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let shown = fifo.display().to_string();
    let out = run_cli(&home, &["run", "--json", "--request", &shown], &[], None).await;
    assert_eq!(
        only_violation(&out),
        format!(
            "$: --request: --request {shown}: nothing arrived for 30 s (a pipe or FIFO without a \
             writer?); write the input to it, or name a regular file"
        )
    );
    assert_eq!(recorded(&home), None, "droid started without a request");

    let request = json!({"objective": "From a FIFO", "context": {"repo_root": home.repo()}});
    let writer_path = fifo.clone();
    let writer = std::thread::spawn(move || {
        // opening for writing blocks until droid-executor opens the FIFO for reading
        std::fs::write(writer_path, request.to_string()).unwrap();
    });
    let out = run_cli(&home, &["run", "--json", "--request", &shown], &[], None).await;
    writer.join().unwrap();
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert_eq!(out.result().status, Status::Success);
    assert!(recorded(&home).is_some(), "droid did not run");
}

/// A `--repo` that is not valid UTF-8 is refused with exit 2 and an error naming it, instead of
/// being converted lossily (`\xff` → U+FFFD) into the name of another directory that droid
/// would then run in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_utf8_repo_path_is_refused_not_converted() {
    use std::os::unix::ffi::OsStrExt as _;
    let home = Bridged::home(&json!([
        {"write_file": {"path": "droid-was-here.txt", "content": "x\n"}},
        {"completion": "Done."}
    ]));
    // both directories exist: the lossy name is the one droid used to run in
    let raw_name = std::ffi::OsStr::from_bytes(b"repo-\xff");
    let raw = home.path().join(raw_name);
    super::binary::git_repo_at(&raw, &[("a.txt", "a\n")]);
    let lossy = home.path().join("repo-\u{fffd}");
    super::binary::git_repo_at(&lossy, &[("a.txt", "a\n")]);
    let args: Vec<&std::ffi::OsStr> = [
        std::ffi::OsStr::new("run"),
        std::ffi::OsStr::new("--json"),
        std::ffi::OsStr::new("--repo"),
        raw.as_os_str(),
        std::ffi::OsStr::new("Do it"),
    ]
    .to_vec();
    let out = finish(
        super::binary::command(&args, &env_of(&home, &[]), home.path())
            .spawn()
            .unwrap(),
    )
    .await;
    assert_eq!(
        only_violation(&out),
        format!(
            "$.context.repo_root: --repo {raw:?} is not valid UTF-8; the request carries paths \
             as UTF-8 text, so rename the directory or use a UTF-8 path to it (a symlink)"
        )
    );
    assert_eq!(
        recorded(&home),
        None,
        "droid started in a directory it was not given"
    );

    // nor can a UTF-8 symlink lead droid there: it is refused when the run starts, since droid
    // (node) would decode a non-UTF-8 `--cwd` lossily too
    let link = home.path().join("repo-link");
    std::os::unix::fs::symlink(&raw, &link).unwrap();
    let shown = link.display().to_string();
    let out = run_cli(
        &home,
        &["run", "--json", "--repo", &shown, "Do it"],
        &[],
        None,
    )
    .await;
    assert_eq!(
        only_violation(&out),
        format!(
            "$.context.repo_root: {link:?} resolves to {raw:?}, which is not valid UTF-8; droid \
             cannot be given it exactly (rename the directory)"
        )
    );
    assert_eq!(
        recorded(&home),
        None,
        "droid started in a directory it was not given"
    );

    let out = run_cli(&home, &["run", "--json", "Do it"], &[], None).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert!(home.repo().join("droid-was-here.txt").exists(), "{out:#?}");
    assert!(
        !lossy.join("droid-was-here.txt").exists(),
        "droid ran in the lossily named directory"
    );
}

/// A background task's repo_root is checked again, symlinks resolved, when it leaves the queue:
/// a directory swapped for a symlink to a place outside `allowed_roots` while the task waited
/// ends the task `error` with a `validation_error` naming both paths, and droid never runs
/// there; a symlink that stays inside the allowed roots runs, in the resolved directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_task_never_runs_in_a_repo_root_swapped_for_a_symlink() {
    use super::tasks_fake_droid::{Store, assert_task_ended, finish, reach, req, submit};
    use droid_contract::TaskState;

    let allowed = TempDir::new("security-allowed").unwrap();
    let outside = TempDir::new("security-outside").unwrap();
    let (repo_a, repo_b, target) = (
        allowed.path().join("a"),
        allowed.path().join("b"),
        outside.path().join("repo"),
    );
    for repo in [&repo_a, &repo_b, &target] {
        super::binary::git_repo_at(repo, &[("a.txt", "a\n")]);
    }
    let store = Store::new();
    let roots = vec![allowed.path().to_path_buf()];
    let tasks = store.tasks(
        "swap",
        json!([
            {"write_file": {"path": "droid-was-here.txt", "content": "x\n"}},
            {"hang": true}
        ]),
        |cfg| {
            cfg.max_concurrent = 1;
            cfg.allowed_roots.clone_from(&roots);
        },
    );
    let hang = json!({"max_runtime_seconds": 120});
    let a = submit(&tasks, &req(&repo_a, "Hold the slot", hang.clone())).await;
    reach(&tasks, &a, TaskState::Running).await;
    let b = submit(&tasks, &req(&repo_b, "Wait for the slot", hang.clone())).await;
    reach(&tasks, &b, TaskState::Queued).await;
    // `queued` is also what a task is before its supervisor has started: wait for the
    // supervisor to have admitted the request and taken its ticket in the queue, so the swap
    // below happens while the task waits for the slot (not before its admission, which would
    // refuse it with admission's own words)
    let tickets = store.root().join("queue");
    let until = tokio::time::Instant::now() + Duration::from_secs(60);
    while std::fs::read_dir(&tickets).map_or(0, Iterator::count) == 0 {
        assert!(
            tokio::time::Instant::now() < until,
            "{b} never took a ticket in {tickets:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let supervisors = [store.supervisor(&a), store.supervisor(&b)];

    std::fs::rename(&repo_b, allowed.path().join("b-moved")).unwrap();
    std::os::unix::fs::symlink(&target, &repo_b).unwrap();
    tasks.cancel(&a).await.unwrap();
    let rec = finish(&tasks, &b).await;
    assert_eq!(rec.state, TaskState::Error, "{:#?}", rec.result);
    let result = rec.result.unwrap();
    let issues: Vec<(&str, &str)> = result
        .issues
        .iter()
        .map(|i| (i.kind.as_str(), i.description.as_str()))
        .collect();
    let want = format!(
        "$.context.repo_root: when the run started, {repo_b:?} resolved to {target:?} is outside \
         the allowed roots ({}); add it to allowed_roots in the config",
        allowed.path().display()
    );
    assert_eq!(issues, [("validation_error", want.as_str())]);
    assert!(
        !target.join("droid-was-here.txt").exists(),
        "droid ran outside the allowed roots"
    );
    assert_eq!(finish(&tasks, &a).await.state, TaskState::Cancelled);
    assert_task_ended(&a, supervisors[0]).await;
    assert_task_ended(&b, supervisors[1]).await;

    // a symlink inside the allowed roots is let through, and droid works in its target
    let inside = allowed.path().join("c");
    super::binary::git_repo_at(&inside, &[("a.txt", "a\n")]);
    let link = allowed.path().join("c-link");
    std::os::unix::fs::symlink(&inside, &link).unwrap();
    let c = submit(&tasks, &req(&link, "Through a link", hang)).await;
    reach(&tasks, &c, TaskState::Running).await;
    let supervisor = store.supervisor(&c);
    // "running" is the supervisor's word, before droid's first step: wait for droid's mark
    let until = tokio::time::Instant::now() + Duration::from_secs(60);
    while !inside.join("droid-was-here.txt").exists() {
        assert!(
            tokio::time::Instant::now() < until,
            "droid never worked in the link's target"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tasks.cancel(&c).await.unwrap();
    assert_eq!(finish(&tasks, &c).await.state, TaskState::Cancelled);
    assert_task_ended(&c, supervisor).await;
}

/// Every hook name git knows, each planted by [`snapshots_run_no_repository_code`].
const GIT_HOOKS: &[&str] = &[
    "applypatch-msg",
    "pre-applypatch",
    "post-applypatch",
    "pre-commit",
    "pre-merge-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "pre-rebase",
    "post-checkout",
    "post-merge",
    "pre-push",
    "pre-receive",
    "update",
    "proc-receive",
    "post-receive",
    "post-update",
    "reference-transaction",
    "push-to-checkout",
    "pre-auto-gc",
    "post-rewrite",
    "sendemail-validate",
    "fsmonitor-watchman",
    "post-index-change",
];

/// Code the repository controls never runs when droid-executor records its working tree: with
/// every git hook planted (in `.git/hooks` and in a `core.hooksPath` directory), clean, smudge
/// and long-running process filters (one under a dotted name) and a textconv driver configured in
/// `.git/config` and named by `.gitattributes`, and an fsmonitor hook, a run whose snapshots
/// stage files those filters apply to (present before the run and written during it) leaves the
/// planted programs' marker file absent, and files_changed still lists exactly what droid wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_run_no_repository_code() {
    use super::binary::FakeHome;
    let home = FakeHome::new("repo-code", &[]);
    let repo = home.repo();
    let ran = home.file("repository-code-ran");
    let program = repo.join(".git/planted");
    std::fs::write(
        &program,
        format!(
            "#!/bin/sh\necho \"$0 $*\" >> '{}'\nexec cat\n",
            ran.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let planted = program.display().to_string();
    let hooks_path = repo.join(".git/other-hooks");
    std::fs::create_dir_all(&hooks_path).unwrap();
    for dir in [repo.join(".git/hooks"), hooks_path.clone()] {
        std::fs::create_dir_all(&dir).unwrap();
        for hook in GIT_HOOKS {
            let file = dir.join(hook);
            std::fs::write(
                &file,
                format!("#!/bin/sh\necho \"hook {hook}\" >> '{}'\n", ran.display()),
            )
            .unwrap();
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
    for (key, value) in [
        ("core.hooksPath", hooks_path.display().to_string()),
        ("core.fsmonitor", format!("{planted} fsmonitor")),
        ("filter.evil.clean", format!("{planted} clean")),
        ("filter.evil.smudge", format!("{planted} smudge")),
        ("filter.evil.required", "true".into()),
        ("filter.proc.process", format!("{planted} process")),
        ("filter.proc.required", "true".into()),
        ("filter.a.b.clean", format!("{planted} dotted-clean")),
        ("diff.evil.textconv", format!("{planted} textconv")),
    ] {
        super::common::git(&repo, &["config", key, &value]);
    }
    std::fs::write(
        repo.join(".gitattributes"),
        "*.dat filter=evil\n*.proc filter=proc\n*.dot filter=a.b\n*.txt diff=evil\n",
    )
    .unwrap();
    for name in ["before.dat", "before.proc", "before.dot"] {
        std::fs::write(repo.join(name), "present before the run\n").unwrap();
    }
    home.play(&json!([
        {"write_file": {"path": "a.txt", "content": "a\nb\n"}},
        {"write_file": {"path": "during.dat", "content": "one\ntwo\n"}},
        {"write_file": {"path": "during.proc", "content": "one\n"}},
        {"write_file": {"path": "during.dot", "content": "one\n"}},
        {"completion": "Done."},
    ]));
    let request_file = home.file("request.json");
    std::fs::write(
        &request_file,
        json!({
            "objective": "Change some files",
            "context": {"repo_root": repo.display().to_string()},
        })
        .to_string(),
    )
    .unwrap();
    let out = droid_executor(
        &[
            "run".as_ref(),
            "--json".as_ref(),
            "--request".as_ref(),
            request_file.as_os_str(),
        ],
        &home.env(),
        home.path(),
    )
    .await;
    let result = out.result();
    let ran_text = std::fs::read_to_string(&ran).unwrap_or_default();
    assert_eq!(ran_text, "", "repository code ran: {out:#?}");
    assert_eq!(result.status, Status::Success, "{out:#?}");
    let changed: Vec<Value> = result
        .files_changed
        .iter()
        .map(|f| json!([f.path, f.change_type, f.lines_added, f.lines_removed]))
        .collect();
    assert_eq!(
        changed,
        vec![
            json!(["a.txt", "modified", 1, 0]),
            json!(["during.dat", "added", 2, 0]),
            json!(["during.dot", "added", 1, 0]),
            json!(["during.proc", "added", 1, 0]),
        ],
        "{out:#?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Secret shapes and every credential droid is given (issue 16)

/// Secrets of the shapes other services use, each with a marker that must appear nowhere.
const SHAPED: [&str; 7] = [
    "sk-proj-SKSECRET0123456789abcdef",
    "sk-ant-api03-ANTSECRET0123456789abcdef",
    "ghp_GHPSECRET0123456789abcdefghijklmn",
    "github_pat_11GHPATSECRET0123456789_abcdefghijkl",
    "AKIAAKIDSECRET123456",
    "xoxb-1234567890-XOXSECRET0123",
    "https://deploy:URLSECRETpw99@git.example.com/repo.git",
];
/// A `FACTORY_*` variable droid gets that is not `FACTORY_API_KEY`, and a proxy with a password.
const FACTORY_SESSION: &str = "factory-FSESSIONSECRET-42";
const PROXY: &str = "http://proxyuser:PROXYSECRETpw77@127.0.0.1:9";
const SHAPE_MARKERS: [&str; 10] = [
    "SKSECRET",
    "ANTSECRET",
    "GHPSECRET",
    "GHPATSECRET",
    "AKIDSECRET",
    "XOXSECRET",
    "URLSECRET",
    "FSESSIONSECRET",
    "PROXYSECRET",
    // the bridge's own token (`TOKEN`)
    "bridge-test-token-0123456789",
];

/// OpenAI and Anthropic keys (`sk-…`), GitHub tokens (`ghp_…`, `github_pat_…`), AWS access key
/// ids (`AKIA…`), Slack tokens (`xoxb-…`), a URL's password, the bridge's own token, and the values
/// of the credentials droid-executor passes to droid (a `FACTORY_*` variable other than the API
/// key, a proxy's password), written into a request or printed by a verification command, are
/// masked in everything the store keeps (`request.json`, `events.ndjson`, `result.json`,
/// `worker.log`), in the results and records the bridge answers and in its log, while droid
/// itself still gets the request exactly as written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_shapes_and_child_credentials_are_masked_in_the_store_and_logs() {
    use bridge_http::Token;
    use bridge_http::client::{Client, Method};
    let extra = [
        ("DROID_EXECUTOR_TOKEN", TOKEN),
        ("FACTORY_SESSION", FACTORY_SESSION),
        ("HTTPS_PROXY", PROXY),
        ("RUST_LOG", "debug"),
    ];
    let steps = json!([
        {"emit": super::mcp_stdio::assistant(&format!("I will use {}", SHAPED.join(" ")))},
        {"completion": "Done."},
    ]);
    let b = Bridged::start(&steps, &[], &extra).await;
    let client = Client::new(b.addr(), Some(Token::new(TOKEN).unwrap()));
    let written = format!(
        "Deploy with {} and call back with {TOKEN}",
        SHAPED.join(", ")
    );
    let request = b.request(
        &format!("Use {}", SHAPED[0]),
        json!({
            "instructions": written,
            "constraints": [SHAPED[2], SHAPED[4]],
            "suggested_commands": ["echo \"$FACTORY_SESSION $HTTPS_PROXY\""],
        }),
    );
    let no_secret = |text: &str, what: &str| {
        for m in SHAPE_MARKERS {
            assert!(!text.contains(m), "{m} leaked into {what}:\n{text}");
        }
    };

    let (status, bytes) = client
        .send(Method::POST, "/execute", Some(&request), HTTP_LIMIT)
        .await
        .unwrap();
    let sync = String::from_utf8_lossy(&bytes).into_owned();
    assert_eq!(status, 200, "{sync}");
    assert!(sync.contains("\"status\":\"success\""), "{sync}");
    no_secret(&sync, "the /execute result");
    // droid got the request as written: the instructions reach it unmasked
    let prompt = b.record().unwrap()["prompt"].as_str().unwrap().to_owned();
    for s in SHAPED.iter().chain([&TOKEN]) {
        assert!(prompt.contains(s), "droid's prompt lost {s}:\n{prompt}");
    }

    let (status, bytes) = client
        .send(Method::POST, "/tasks", Some(&request), HTTP_LIMIT)
        .await
        .unwrap();
    assert_eq!(status, 202, "{}", String::from_utf8_lossy(&bytes));
    let id = serde_json::from_slice::<Value>(&bytes).unwrap()["task_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let until = Instant::now() + HTTP_LIMIT;
    let record = loop {
        let (status, bytes) = client
            .send(Method::GET, &format!("/tasks/{id}"), None, HTTP_LIMIT)
            .await
            .unwrap();
        assert_eq!(status, 200);
        let rec: Value = serde_json::from_slice(&bytes).unwrap();
        if !rec["result"].is_null() {
            break rec;
        }
        assert!(Instant::now() < until, "{id} never finished: {rec:#}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(record["state"], json!("success"), "{record:#}");
    no_secret(&record.to_string(), "the task's record");
    let verified = record["result"]["commands_run"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["source"] == json!("verify"))
        .cloned()
        .unwrap_or_else(|| panic!("no verification command: {record:#}"));
    // the verification command gets no `FACTORY_*` variable (no provider's: issue 29), and the
    // proxy's password is masked
    assert_eq!(
        verified["stdout_excerpt"],
        json!(" http://proxyuser:[REDACTED]@127.0.0.1:9\n"),
        "{verified:#}"
    );
    let (_, bytes) = client
        .send(Method::GET, "/tasks", None, HTTP_LIMIT)
        .await
        .unwrap();
    no_secret(&String::from_utf8_lossy(&bytes), "GET /tasks");

    let store = b.home.file(".local/state/droid-executor/tasks").join(&id);
    for name in ["request.json", "events.ndjson", "result.json", "worker.log"] {
        let text = std::fs::read_to_string(store.join(name)).unwrap();
        no_secret(&text, name);
    }
    let stored: Value =
        serde_json::from_slice(&std::fs::read(store.join("request.json")).unwrap()).unwrap();
    assert_eq!(
        (&stored["objective"], &stored["constraints"]),
        (
            &json!("Use sk-[REDACTED]"),
            &json!(["ghp_[REDACTED]", "AKIA[REDACTED]"])
        ),
        "{stored:#}"
    );
    assert_eq!(
        stored["instructions"],
        json!(
            "Deploy with sk-[REDACTED], sk-[REDACTED], ghp_[REDACTED], github_pat_[REDACTED], \
             AKIA[REDACTED], xoxb-[REDACTED], https://deploy:[REDACTED]@git.example.com/repo.git \
             and call back with [REDACTED]"
        ),
        "{stored:#}"
    );
    for (path, bytes) in files_under(&b.home.file(".local/state/droid-executor")) {
        no_secret(
            &String::from_utf8_lossy(&bytes),
            &path.display().to_string(),
        );
    }
    let Bridged { serve, home: _home } = b;
    let (code, log) = serve.stop().await;
    assert_eq!(code, Some(0), "{log}");
    no_secret(&log, "the bridge's stderr");
}
