//! `droid-executor worker <id> --store <dir>`: the supervisor of one background task, started
//! detached by `run --background` (and by the bridge and MCP server later). It reads the request
//! and the engine configuration from stdin and hands everything to the engine; SIGTERM, SIGINT
//! and SIGHUP cancel the task (droid is stopped, the result says `cancelled`). Its stdout and
//! stderr go to the task's `worker.log`.

use std::io::Read as _;
use std::path::Path;
use std::process::ExitCode;

use droid_exec::tasks::worker::{PAYLOAD_LIMIT, SupervisorEnd, supervise_task};
use tokio_util::sync::CancellationToken;

pub(crate) async fn worker(id: &str, store: &Path) -> ExitCode {
    let cancel = CancellationToken::new();
    let signals = match crate::signals::cancel_on_signals(
        cancel.clone(),
        "cancelling the task (stopping droid)…",
    ) {
        Ok(task) => task,
        Err(e) => {
            note(&format!(
                "droid-executor worker: cannot watch for signals: {e}"
            ));
            return ExitCode::from(2);
        }
    };
    let mut payload = Vec::new();
    let limit = u64::try_from(PAYLOAD_LIMIT).unwrap_or(u64::MAX);
    if let Err(e) = std::io::stdin().take(limit).read_to_end(&mut payload) {
        // an unreadable payload becomes the task's `error` result below
        note(&format!("droid-executor worker: reading the payload: {e}"));
        payload.clear();
    }
    let end = supervise_task(store, id, &payload, cancel).await;
    signals.abort();
    match end {
        Ok(SupervisorEnd::Finished(status)) => {
            note(&format!(
                "droid-executor worker: task {id} finished: {}",
                status.as_str()
            ));
            ExitCode::SUCCESS
        }
        Ok(SupervisorEnd::AlreadyFinished) => ExitCode::SUCCESS,
        Ok(SupervisorEnd::Owned) => {
            note(&format!(
                "droid-executor worker: task {id} has another supervisor"
            ));
            ExitCode::from(2)
        }
        Err(e) => {
            note(&format!("droid-executor worker: task {id}: {e}"));
            ExitCode::from(2)
        }
    }
}

/// One line on stderr (`worker.log`); a failed write (a full disk) is ignored.
fn note(text: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}
