//! Fuzz target `jsonrpc_framing`: the MCP server as `droid-executor mcp` runs it,
//! `mcp_stdio::serve` over an in-memory stdin holding the fuzz bytes (then EOF) and a stdout that
//! collects everything written, in front of an engine that can start nothing
//! (`droid_executor_fuzz::engine`).
//!
//! Invariants: `serve` returns after EOF (bounded by [`SERVE_LIMIT`]: a hang is a crash); the
//! output is whole lines, each one JSON-RPC 2.0 message (an object with `"jsonrpc":"2.0"`) or a
//! batch answer (a non-empty array of such objects); every error carries an integer code and a
//! message.
#![no_main]

use std::io;
use std::pin::Pin;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use droid_executor_fuzz::{WorkDir, engine};
use libfuzzer_sys::fuzz_target;
use mcp_stdio::Server;
use serde_json::Value;
use tokio::io::AsyncWrite;
use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;

/// Longest `serve` may take for one input. Its own budgets are 0.9 s to drain running calls at
/// EOF plus 0.2 s for the writer; anything near this limit is a hang.
const SERVE_LIMIT: Duration = Duration::from_secs(30);

/// Built once per process: one runtime and one server for every input, as one `droid-executor
/// mcp` process serves one client after another.
struct Harness {
    rt: Runtime,
    server: Arc<Server>,
}

static HARNESS: LazyLock<Harness> = LazyLock::new(|| {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("cannot build a tokio runtime: {e}"));
    let dir = WorkDir::new("jsonrpc_framing");
    // an empty environment: droid_ping finds no config, no droid on PATH and no store
    let server = Server::new(engine(&dir), Default::default(), None);
    Harness { rt, server }
});

/// A stdout that keeps everything written to it.
#[derive(Debug, Clone, Default)]
struct Collect(Arc<Mutex<Vec<u8>>>);

impl AsyncWrite for Collect {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// One message as the server must write it.
fn check_message(m: &Value, line: &str) {
    let Value::Object(o) = m else {
        panic!("an output message is not a JSON object: {line}");
    };
    assert_eq!(
        o.get("jsonrpc"),
        Some(&Value::String("2.0".into())),
        "an output message lacks \"jsonrpc\":\"2.0\": {line}"
    );
    if let Some(err) = o.get("error") {
        assert!(
            err.get("code").is_some_and(Value::is_i64),
            "an error without an integer code: {line}"
        );
        assert!(
            err.get("message")
                .and_then(Value::as_str)
                .is_some_and(|s| !s.trim().is_empty()),
            "an error without a message: {line}"
        );
    }
}

fn check_output(out: &[u8], input: &[u8]) {
    let Some(body) = out.strip_suffix(b"\n").or(out.is_empty().then_some(out)) else {
        panic!(
            "the output does not end with a newline (a cut message)\n input: {:?}\n output: {:?}",
            String::from_utf8_lossy(input),
            String::from_utf8_lossy(out)
        );
    };
    if body.is_empty() {
        return;
    }
    for raw in body.split(|b| *b == b'\n') {
        let line = std::str::from_utf8(raw)
            .unwrap_or_else(|e| panic!("an output line is not UTF-8 ({e}): {raw:?}"));
        let msg: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("an output line is not JSON ({e}): {line:?}"));
        match &msg {
            Value::Array(batch) => {
                assert!(!batch.is_empty(), "an empty batch answer");
                for m in batch {
                    check_message(m, line);
                }
            }
            single => check_message(single, line),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let h = &*HARNESS;
    let out = Collect::default();
    let served = h.rt.block_on(async {
        // built inside the runtime: a timer needs its context
        tokio::time::timeout(
            SERVE_LIMIT,
            mcp_stdio::serve(
                data,
                out.clone(),
                Arc::clone(&h.server),
                CancellationToken::new(),
            ),
        )
        .await
    });
    assert!(
        served.is_ok(),
        "serve did not return within {SERVE_LIMIT:?} after EOF\n input: {:?}",
        String::from_utf8_lossy(data)
    );
    let written = std::mem::take(&mut *out.0.lock().unwrap_or_else(PoisonError::into_inner));
    check_output(&written, data);
});
