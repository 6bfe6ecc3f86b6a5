//! A background task's `events.ndjson`: every event of its run, one line each
//! (`{"seq": n, "at": "<RFC 3339>", "type": …, …}`), secrets redacted, written at the moment the
//! engine publishes the event (not when some consumer gets round to it). So the times are true:
//! a run's `completed` line is on disk before its run slot is released, and two runs that share a
//! repository have event intervals that never overlap.
//!
//! The first event past the queue also marks the task started (`queued` -> `running`).

use std::fs::File;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::Mutex;

use serde_json::Value;

use crate::error::EngineError;
use crate::run::event::{EventSink, Phase, RunEvent};
use crate::task_key::TaskKey;
use crate::tasks::store::Store;

/// The event log of one task.
#[derive(Debug)]
pub(crate) struct EventLog {
    store: Store,
    key: TaskKey,
    state: Mutex<LogState>,
}

#[derive(Debug)]
struct LogState {
    file: Option<File>,
    seq: u64,
    started: bool,
}

impl EventLog {
    /// Open (append, 0600) the log of task `key`.
    pub(crate) fn open(store: &Store, key: &TaskKey) -> Result<Self, EngineError> {
        let path = store.events_path(key);
        let file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&path)
            .map_err(|source| EngineError::Io {
                action: "open",
                path,
                source,
            })?;
        Ok(Self {
            store: store.clone(),
            key: key.clone(),
            state: Mutex::new(LogState {
                file: Some(file),
                seq: 0,
                started: false,
            }),
        })
    }

    /// Append `ev` now. A failing disk is logged once and recording stops; the run goes on.
    pub(crate) fn record(&self, ev: &RunEvent) {
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        let past_queue = !matches!(
            ev,
            RunEvent::Progress {
                phase: Phase::Queued,
                ..
            } | RunEvent::Completed { .. }
        );
        if past_queue && !st.started {
            st.started = true;
            if let Err(e) = self.store.mark_started(&self.key) {
                tracing::warn!("cannot mark the task started: {e}");
            }
        }
        st.seq += 1;
        // already masked: the engine's publisher redacts every event before it is recorded
        let Ok(body) = serde_json::to_value(ev) else {
            return;
        };
        let mut line = serde_json::json!({"seq": st.seq, "at": crate::timestamp::now()});
        if let (Value::Object(head), Value::Object(body)) = (&mut line, body) {
            head.extend(body);
        }
        let mut bytes = line.to_string().into_bytes();
        bytes.push(b'\n');
        if let Some(f) = st.file.as_mut()
            // one write per line (O_APPEND): a reader never sees two lines interleaved
            && let Err(e) = f.write_all(&bytes)
        {
            tracing::warn!(task = %self.key, "cannot record events any more: {e}");
            st.file = None;
        }
    }
}

impl EventSink for EventLog {
    fn record(&self, ev: &RunEvent) {
        EventLog::record(self, ev);
    }
}
