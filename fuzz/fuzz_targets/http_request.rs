//! Fuzz target `http_request`: the HTTP bridge's real request path. Once per process a loopback
//! listener on port 0 is served by `bridge_http::serve` on a background runtime, in front of an
//! engine that can start nothing (`droid_executor_fuzz::engine`, no task store). Each input is
//! written raw on a fresh TCP connection, the write half is shut, and the answer is read to EOF
//! (hyper takes that EOF for a client that left, so a slow answer may be dropped: see
//! [`AfterSend`]).
//!
//! Invariants: the bridge closes every connection within [`ANSWER_LIMIT`] (a hang is a crash);
//! an answer is empty or starts with an `HTTP/1.1 NNN ` status line (`HTTP/1.0` for an HTTP/1.0
//! request: hyper answers in the request's version) with no 5xx but 503; and the server still
//! answers `GET /health` with 200, checked every [`HEALTH_EVERY`] inputs (a wedged accept loop,
//! an exhausted connection limit or a dead runtime would fail it).
#![no_main]

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bridge_http::{Bridge, BridgeConfig};
use droid_executor_fuzz::{WorkDir, engine};
use libfuzzer_sys::fuzz_target;
use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;

/// Longest the bridge may take to answer and close one connection. Its own header and body read
/// timeouts are set to 5 s below, and the write half is shut at once, so nothing should wait.
const ANSWER_LIMIT: Duration = Duration::from_secs(20);
/// How often the health probe runs (a probe per input would halve the rate).
const HEALTH_EVERY: u64 = 32;

/// The bridge, started once per process; the runtime lives as long as the process.
struct Harness {
    _rt: Runtime,
    addr: SocketAddr,
}

static HARNESS: LazyLock<Harness> = LazyLock::new(|| {
    let rt = tokio::runtime::Builder::new_multi_thread()
        // two cores on the build machines: the fuzzer's thread and one for the server
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("cannot build a tokio runtime: {e}"));
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap_or_else(|e| panic!("cannot bind a loopback port: {e}"));
    let addr = listener
        .local_addr()
        .unwrap_or_else(|e| panic!("no local address: {e}"));
    let dir = WorkDir::new("http_request");
    let cfg = BridgeConfig {
        header_timeout: Duration::from_secs(5),
        body_timeout: Duration::from_secs(5),
        // one extra name and one browser origin, so those branches of the guard are reachable
        allowed_hosts: vec!["droid.test".into()],
        allowed_origins: vec!["http://127.0.0.1:3000".into()],
        ..BridgeConfig::default()
    };
    let bridge = Bridge::new(engine(&dir), cfg);
    rt.spawn(bridge_http::serve(
        listener,
        bridge,
        CancellationToken::new(),
    ));
    Harness { _rt: rt, addr }
});

static INPUTS: AtomicU64 = AtomicU64::new(0);

/// Whether the client shuts its write half once the request is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AfterSend {
    /// Shut it: every input ends in EOF, so a cut request is answered (or dropped) at once
    /// instead of waiting for the bridge's read timeouts. hyper takes that EOF for a client that
    /// went away (the bridge relies on it to cancel the sync run of a client that disconnected),
    /// so an answer still being computed then is dropped: an empty answer is allowed.
    ShutWrite,
    /// Keep it open; the request says `Connection: close`, so the bridge closes after answering.
    Wait,
}

/// Send `request` on a new connection and read the answer to EOF.
fn exchange(addr: SocketAddr, request: &[u8], after: AfterSend) -> Vec<u8> {
    let mut s =
        TcpStream::connect(addr).unwrap_or_else(|e| panic!("cannot connect to the bridge: {e}"));
    let started = Instant::now();
    s.set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap_or_else(|e| panic!("set_read_timeout: {e}"));
    s.set_write_timeout(Some(ANSWER_LIMIT))
        .unwrap_or_else(|e| panic!("set_write_timeout: {e}"));
    // the bridge may answer (413, 431, 400) and close before it read everything: a failed write
    // is allowed, the answer is what is checked
    if s.write_all(request).is_ok() && after == AfterSend::ShutWrite {
        let _ = s.shutdown(Shutdown::Write);
    }
    let mut answer = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            // the bridge reset the connection after answering early: what arrived is the answer
            Err(e) if e.kind() == ErrorKind::ConnectionReset => break,
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(e) => panic!("reading the answer failed: {e}"),
        }
        assert!(
            started.elapsed() < ANSWER_LIMIT,
            "the bridge did not close the connection within {ANSWER_LIMIT:?}\n request: {:?}\n answer so far: {:?}",
            String::from_utf8_lossy(request),
            String::from_utf8_lossy(&answer)
        );
    }
    answer
}

/// The first answer's status line: `HTTP/1.1 NNN ` (hyper answers an HTTP/1.0 request in
/// HTTP/1.0, so `HTTP/1.0 NNN ` is allowed too), and never a 5xx other than 503 (there is no
/// task store to fail, and draining never starts).
fn check_status_line(answer: &[u8], request: &[u8]) {
    let shown = || {
        format!(
            "\n request: {:?}\n answer: {:?}",
            String::from_utf8_lossy(request),
            String::from_utf8_lossy(answer)
        )
    };
    let rest = answer
        .strip_prefix(b"HTTP/1.1 ")
        .or_else(|| answer.strip_prefix(b"HTTP/1.0 "))
        .unwrap_or_else(|| panic!("an answer that is not HTTP/1.1{}", shown()));
    let code = rest
        .get(..4)
        .and_then(|c| std::str::from_utf8(c).ok())
        .and_then(|c| c.strip_suffix(' '))
        .and_then(|c| c.parse::<u16>().ok())
        .unwrap_or_else(|| panic!("a status line without a status code{}", shown()));
    assert!(
        (100..500).contains(&code) || code == 503,
        "answered {code}{}",
        shown()
    );
}

fn check_health(addr: SocketAddr) {
    let answer = exchange(
        addr,
        b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
        AfterSend::Wait,
    );
    assert!(
        answer.starts_with(b"HTTP/1.1 200 "),
        "the bridge no longer answers GET /health with 200: {:?}",
        String::from_utf8_lossy(&answer)
    );
}

fuzz_target!(|data: &[u8]| {
    let h = &*HARNESS;
    let answer = exchange(h.addr, data, AfterSend::ShutWrite);
    if !answer.is_empty() {
        check_status_line(&answer, data);
    }
    if INPUTS
        .fetch_add(1, Ordering::Relaxed)
        .is_multiple_of(HEALTH_EVERY)
    {
        check_health(h.addr);
    }
});
