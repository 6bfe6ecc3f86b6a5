//! Fault matrix, the model server's faults, played by a scripted model server to the REAL droid
//! 0.225.2: HTTP 500 and 429 on every request (429 with and without `retry-after`), a model that
//! never answers (before or after its response headers), an event stream that is not JSON, a
//! connection dropped mid-stream, and a 400, which droid does not retry. Each case goes through
//! every front-end (CLI, HTTP bridge, MCP server) with a fresh model server and droid HOME, and
//! each asserts the exact status and issue types, one result, no process left, bounded memory,
//! that the real droid ran, and how many requests reached the model.
//!
//! droid retries the 500s, 429s, garbage and hangs silently for minutes (about 4 min of 500s,
//! 90 s of 429s or garbage, 30 min of a hang, with nothing on stdout meanwhile), so those
//! requests carry a small `max_runtime_seconds` and the deadline must win: `timeout`, stopped
//! after the budget and before the budget plus the kill grace. What droid prints when it does
//! give up is checked too, replayed by the fake droid from recordings of the real one, since
//! waiting for it would take minutes per front-end.

use droid_contract::Status;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::droid_bin::DROID_VERSION;
use tests::scripted_model::ScriptedModel;

use super::fault_matrix::{Driven, FaultHome, Front, Observed, drive, issue_kinds, record};

/// The memory bound of issue 7.
const RSS_LIMIT_MIB: f64 = 64.0;
/// The budget of the requests droid would retry for minutes: droid takes about a second to send
/// its first model request, so the fault is played well before the deadline.
const BUDGET_S: u64 = 4;
/// The engine's grace between SIGTERM and SIGKILL (`EngineConfig::kill_grace`).
const KILL_GRACE_S: u64 = 5;

/// One front-end's run: what it gave, and how many chat requests reached the model server.
struct Run {
    d: Driven,
    model_requests: usize,
}

impl Run {
    fn ctx(&self) -> String {
        format!(
            "{:?}: {:#?}\nmodel requests: {}\nstderr:\n{}",
            self.d.front, self.d.result, self.model_requests, self.d.stderr
        )
    }
}

/// Drives one request (the HOME's model plus `extra` fields) through every front-end, each with a
/// fresh model server playing `script` and a fresh droid HOME; checks each run with `check` and
/// returns the rows (noted with `note`) to [`record`].
async fn every_front_end(
    script: &Value,
    extra: &Value,
    check: impl Fn(&Run),
    note: impl Fn(&Run) -> String,
) -> Vec<Observed> {
    let mut rows = Vec::new();
    for front in Front::ALL {
        let model = ScriptedModel::start(script.clone())
            .await
            .expect("starting the scripted model server");
        let fh = FaultHome::real("fault-model", &model.base_url());
        let request = fh.request(extra.clone());
        let d = drive(front, &fh, &request).await;
        // chat-completion records carry the turn; GETs and other paths do not
        let model_requests = model
            .requests()
            .iter()
            .filter(|r| r.get("turn").is_some())
            .count();
        let run = Run { d, model_requests };
        check(&run);
        rows.push(Observed::of(&run.d, "real", note(&run)));
    }
    rows
}

/// What every case must hold: the status, exactly these issue types, one result, nothing left
/// running, memory measured and under the bound, and droid `droid` (its version) having run.
fn assert_outcome(d: &Driven, status: Status, issues: &[&str], droid: &str) {
    let ctx = || format!("{:?}: {:#?}\nstderr:\n{}", d.front, d.result, d.stderr);
    assert_eq!(d.result.status, status, "{}", ctx());
    assert_eq!(issue_kinds(&d.result), issues, "{}", ctx());
    assert_eq!(d.results, 1, "{}", ctx());
    assert_eq!(d.left, Vec::<i32>::new(), "processes left: {}", ctx());
    assert!(
        d.peak_rss_mib > 0.0 && d.peak_rss_mib < RSS_LIMIT_MIB,
        "peak RSS {} MiB: {}",
        d.peak_rss_mib,
        ctx()
    );
    assert_eq!(
        d.result.droid.as_ref().and_then(|v| v.version.as_deref()),
        Some(droid),
        "{}",
        ctx()
    );
}

/// A request droid would retry for minutes: the deadline won. `timeout` and nothing else, the
/// run stopped after the budget and before the kill grace ran out, and droid had reached the
/// model (so the fault was played, not merely the clock run out on a slow start).
fn assert_deadline_won(run: &Run) {
    let d = &run.d;
    assert_outcome(d, Status::Timeout, &["timeout"], DROID_VERSION);
    assert_eq!(
        d.result.issues[0].description,
        format!("droid did not finish within {BUDGET_S} s and was stopped"),
        "{}",
        run.ctx()
    );
    let budget_ms = BUDGET_S * 1000;
    assert!(
        (budget_ms..(BUDGET_S + KILL_GRACE_S) * 1000).contains(&d.result.duration_ms),
        "ran {} ms, budget {BUDGET_S} s + kill grace {KILL_GRACE_S} s: {}",
        d.result.duration_ms,
        run.ctx()
    );
    assert!(
        run.model_requests >= 1,
        "droid never reached the model within {BUDGET_S} s, so the fault was not played: {}",
        run.ctx()
    );
}

fn deadline_note(run: &Run) -> String {
    #[allow(clippy::cast_precision_loss)]
    let s = run.d.result.duration_ms as f64 / 1000.0;
    format!(
        "stopped at {s:.1} s ({BUDGET_S} s budget); {} model request(s) by then",
        run.model_requests
    )
}

/// The small budget that makes our deadline win.
fn budget() -> Value {
    json!({"max_runtime_seconds": BUDGET_S})
}

/// The model answers `500` to every request: droid retries silently (10 attempts over about
/// 4 min), our deadline wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_500_on_every_request_is_timeout_at_our_deadline() {
    let rows = every_front_end(
        &json!([{"status": 500}]),
        &budget(),
        assert_deadline_won,
        deadline_note,
    )
    .await;
    record(rows);
}

/// The model answers `429` to every request: droid retries silently (5 attempts over about
/// 90 s), our deadline wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_429_on_every_request_is_timeout_at_our_deadline() {
    let rows = every_front_end(
        &json!([{"status": 429, "error_message": "Rate limit exceeded"}]),
        &budget(),
        assert_deadline_won,
        deadline_note,
    )
    .await;
    record(rows);
}

/// The model answers `429` with `retry-after: 1` to every request: droid ignores the header and
/// retries on its own schedule, our deadline wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_429_with_retry_after_is_timeout_at_our_deadline() {
    let script = json!([{
        "status": 429,
        "error_message": "Rate limit exceeded",
        "headers": {"retry-after": "1"},
    }]);
    let rows = every_front_end(&script, &budget(), assert_deadline_won, deadline_note).await;
    record(rows);
}

/// The model accepts the request and never answers, not even headers: droid waits 360 s per
/// attempt, our deadline wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_hanging_before_its_headers_is_timeout_at_our_deadline() {
    let rows = every_front_end(
        &json!([{"hang": true}]),
        &budget(),
        assert_deadline_won,
        deadline_note,
    )
    .await;
    record(rows);
}

/// The model sends `200` and the event-stream headers, then nothing: the same wait, our
/// deadline wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_hanging_after_its_headers_is_timeout_at_our_deadline() {
    let rows = every_front_end(
        &json!([{"hang_after_headers": true}]),
        &budget(),
        assert_deadline_won,
        deadline_note,
    )
    .await;
    record(rows);
}

/// The model's event stream is garbage (`data: {this is not json`, a line without `data:`):
/// droid retries it as a network error (5 attempts over about 97 s), our deadline wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_garbage_stream_is_timeout_at_our_deadline() {
    let rows = every_front_end(
        &json!([{"malformed": true}]),
        &budget(),
        assert_deadline_won,
        deadline_note,
    )
    .await;
    record(rows);
}

/// The connection drops after one chunk of the answer: droid reports success with zero token
/// usage; we flag the answer as truncated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_connection_dropped_mid_stream_is_partial_model_error() {
    let rows = every_front_end(
        &json!([{"close_mid": true}]),
        &json!({}),
        |run| {
            let d = &run.d;
            assert_outcome(d, Status::Partial, &["model_error"], DROID_VERSION);
            assert_eq!(d.result.summary, "partial answer", "{}", run.ctx());
            assert_eq!(
                d.result.issues[0].description,
                "the model's answer may be truncated (droid reported zero token usage)",
                "{}",
                run.ctx()
            );
            assert_eq!(run.model_requests, 1, "{}", run.ctx());
        },
        |run| format!("{} model request(s)", run.model_requests),
    )
    .await;
    record(rows);
}

/// The model answers `400`: droid does not retry it and reports the model's message at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_400_is_failed_model_error_at_once() {
    let rows = every_front_end(
        &json!([{"status": 400, "error_message": "Bad request: invalid parameter"}]),
        &json!({}),
        |run| {
            let d = &run.d;
            assert_outcome(d, Status::Failed, &["model_error"], DROID_VERSION);
            assert_eq!(
                d.result.summary,
                "droid failed: 400 Bad request: invalid parameter",
                "{}",
                run.ctx()
            );
            assert_eq!(run.model_requests, 1, "droid retried a 400: {}", run.ctx());
        },
        |run| format!("{} model request(s), no retry", run.model_requests),
    )
    .await;
    record(rows);
}

/// How droid 0.225.2 ends a run once it gives up on the model (recorded with a model server
/// answering 500, 429 and garbage on every request, after 245 s, 90 s and 97 s): its own
/// `agent_loop` error with the model's failure, then `Exec failed`, exit 1.
const GIVING_UP: [(&str, &str); 2] = [
    ("http500-stream-json", "500 mock error 500"),
    (
        "malformed-sse-stream-json",
        "Your request to the LLM failed due to network issues. Please try again later.",
    ),
];

/// droid's last words after its retries of a model answering 429 (its recording).
const GIVING_UP_RATE_LIMITED: (&str, &str) = ("http429-stream-json", "429 Rate limit exceeded");

/// The fake droid's steps: droid's init, the prompt, its model error `message` and its exit.
fn giving_up(message: &str) -> Value {
    let session = "d4ce0b03-43d7-45e5-8836-a19560371f5f";
    json!([
        {"emit": {"type": "system", "subtype": "init", "session_id": session,
                  "model": "custom:Mock-0"}},
        {"emit": {"type": "message", "role": "user", "id": "m-1", "text": "say hi",
                  "timestamp": 1_795_320_901_652_u64, "session_id": session}},
        {"emit": {"type": "error", "source": "agent_loop", "message": message,
                  "timestamp": 1_795_321_145_714_u64, "session_id": session}},
        {"emit": {"type": "error", "source": "cli", "message": "Exec failed",
                  "timestamp": 1_795_321_145_738_u64, "session_id": session}},
        {"exit": 1},
    ])
}

/// When droid does give up on the model (given a budget longer than its minutes of retries), its
/// report is a model error; the fake droid replays the recorded endings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn droid_giving_up_on_the_model_is_failed_model_error() {
    let mut rows = Vec::new();
    for (recording, message) in GIVING_UP {
        let steps = giving_up(message);
        for front in Front::ALL {
            let fh = FaultHome::new("fault-model-gave-up", &steps, "");
            let d = drive(front, &fh, &fh.request(json!({}))).await;
            assert_outcome(&d, Status::Failed, &["model_error"], DROID_VERSION);
            let ctx = || format!("{recording} via {:?}: {:#?}", d.front, d.result);
            assert_eq!(
                d.result.summary,
                format!("droid failed: {message}"),
                "{}",
                ctx()
            );
            assert_eq!(
                d.result.issues[0].description,
                format!("the model request failed: {message}"),
                "{}",
                ctx()
            );
            rows.push(Observed::of(
                &d,
                "fake",
                format!("replays the ending of {recording}"),
            ));
        }
    }
    record(rows);
}

/// When droid gives up on a model that keeps answering 429 (after its own 5 tries over ~90 s),
/// its report is `rate_limited`: another agent (`fallback`) may get through where a plain model
/// error would not; the fake droid replays the recorded ending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn droid_giving_up_on_a_rate_limit_is_failed_rate_limited() {
    let (recording, message) = GIVING_UP_RATE_LIMITED;
    let mut rows = Vec::new();
    for front in Front::ALL {
        let fh = FaultHome::new("fault-model-rate-limited", &giving_up(message), "");
        let d = drive(front, &fh, &fh.request(json!({}))).await;
        assert_outcome(&d, Status::Failed, &["rate_limited"], DROID_VERSION);
        let ctx = || format!("{recording} via {:?}: {:#?}", d.front, d.result);
        assert_eq!(
            d.result.summary,
            format!("droid failed: {message}"),
            "{}",
            ctx()
        );
        assert_eq!(
            d.result.issues[0].description,
            format!(
                "droid's model provider refused for a rate limit, a spent quota or overload: \
                 {message}"
            ),
            "{}",
            ctx()
        );
        rows.push(Observed::of(
            &d,
            "fake",
            format!("replays the ending of {recording}"),
        ));
    }
    record(rows);
}
