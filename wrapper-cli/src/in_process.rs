//! A request run in this process (`run`, `ask`): its result printed, with progress on a
//! terminal and signals cancelling it; or, with `--background`, submitted as a task of the store
//! and its id printed.

use std::io::IsTerminal;
use std::process::ExitCode;

use droid_contract::ExecutionResult;
use droid_exec::{EVENT_CHANNEL_CAPACITY, Engine, RunEvent, Tasks};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::expired::clean_expired;
use crate::output::{print_result, print_submitted};
use crate::render;
use crate::signals::cancel_on_signals;

/// Run `request` in this process and print its result, or with `background` (which tells how to
/// follow a task, given its id) submit it and print its id: `run` and `ask` alike.
pub(crate) async fn in_process(
    cfg: droid_exec::EngineConfig,
    request: &Value,
    json: bool,
    background: Option<&dyn Fn(&str) -> String>,
) -> ExitCode {
    if let Ok(tasks) = Tasks::open(&cfg) {
        clean_expired(&tasks).await;
    }
    let engine = Engine::new(cfg);
    if let Some(follow) = background {
        return submit(&engine, request, json, follow).await;
    }
    let cancel = CancellationToken::new();
    let signals = match cancel_on_signals(cancel.clone(), "cancelling (stopping droid)…") {
        Ok(task) => task,
        Err(e) => {
            eprintln!("droid-executor: cannot watch for signals: {e}");
            return ExitCode::from(2);
        }
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<RunEvent>(EVENT_CHANNEL_CAPACITY);
    let progress = std::io::stderr()
        .is_terminal()
        .then(|| tokio::spawn(render::progress(rx)));
    let result = engine.execute(request, cancel, Some(tx)).await;
    signals.abort();
    if let Some(p) = progress {
        let _ = p.await;
    }
    let code = print_result(&result, json);
    // the result is out, and our caller waits for our exit: droid, stopped at its completion
    // event, is killed and its tree ended now rather than at the end of its SIGTERM grace
    engine.settle_now().await;
    code
}

/// `run --background`: admit the request (an invalid one is answered like a sync run's), submit
/// it, print the task id.
async fn submit(
    engine: &Engine,
    request: &Value,
    json: bool,
    follow: &dyn Fn(&str) -> String,
) -> ExitCode {
    let req = match engine.admit(request) {
        Ok(r) => r,
        Err(v) => {
            let task_id = request
                .get("task_id")
                .and_then(Value::as_str)
                .map(str::to_owned);
            let result = ExecutionResult::invalid_request(task_id, &v);
            return print_result(&result, json);
        }
    };
    let submitted = match Tasks::open(engine.config()) {
        Ok(tasks) => tasks.submit(&req).await,
        Err(e) => Err(e),
    };
    match submitted {
        Ok(key) => print_submitted(key.as_str(), json, follow),
        Err(e) => {
            let task_id = req.task_id.as_ref().map(|t| t.as_str().to_owned());
            let result = submit_failure(task_id, &e);
            print_result(&result, json)
        }
    }
}

/// The `error` result of a submission that failed, so `--json` callers get a result as for any
/// other failure: the supervisor could not be started (`bridge_failure`), or the task store is
/// missing, full or read-only (`env_issue`, as a sync run says when it cannot take a run slot).
fn submit_failure(task_id: Option<String>, e: &droid_exec::EngineError) -> ExecutionResult {
    use droid_contract::{Issue, IssueType};
    let (kind, action) = match e {
        droid_exec::EngineError::Spawn { .. } => (
            IssueType::BridgeFailure,
            "check that this droid-executor binary can still be run; or run the task without \
             --background",
        ),
        _ => (
            IssueType::EnvIssue,
            "check that the task store (store_dir) is writable and has free space; \
             droid-executor doctor checks it",
        ),
    };
    ExecutionResult::error(
        task_id,
        format!("could not submit the task: {e}"),
        vec![Issue::new(kind, e.to_string(), action)],
    )
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use droid_contract::{IssueType, Status};
    use droid_exec::EngineError;

    use super::*;

    #[test]
    fn a_failed_submission_is_an_error_result_naming_its_cause() {
        let full = EngineError::Io {
            action: "write",
            path: PathBuf::from("/store/locks/seq"),
            source: std::io::Error::from_raw_os_error(28),
        };
        let r = submit_failure(Some("t-1".into()), &full);
        assert_eq!(r.status, Status::Error);
        assert_eq!(r.task_id.as_deref(), Some("t-1"));
        assert_eq!(r.issues[0].kind, IssueType::EnvIssue);
        assert!(
            r.summary
                .starts_with("could not submit the task: write /store/locks/seq: No space left"),
            "{}",
            r.summary
        );
        let spawn = EngineError::Spawn {
            program: "droid-executor".into(),
            source: std::io::Error::from_raw_os_error(2),
        };
        assert_eq!(
            submit_failure(None, &spawn).issues[0].kind,
            IssueType::BridgeFailure
        );
    }
}
