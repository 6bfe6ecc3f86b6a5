//! The counters behind `GET /metrics`, rendered as Prometheus text (exposition format 0.0.4).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use droid_contract::{Status, TaskState};

/// Upper bounds (seconds) of the run-duration histogram buckets: runs take seconds to an hour.
const BUCKETS: [f64; 10] = [
    1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
];

const STATUSES: [Status; 6] = [
    Status::Success,
    Status::Partial,
    Status::Failed,
    Status::Timeout,
    Status::Cancelled,
    Status::Error,
];

/// Counters since the bridge started.
#[derive(Debug, Default)]
pub struct Metrics {
    responses: Mutex<BTreeMap<u16, u64>>,
    runs: [AtomicU64; 6],
    buckets: [AtomicU64; 10],
    duration_ms_sum: AtomicU64,
    duration_count: AtomicU64,
    submitted: AtomicU64,
}

/// Gauges read when the metrics are asked for.
#[derive(Debug, Default)]
pub(crate) struct Gauges {
    pub(crate) sync_in_flight: usize,
    pub(crate) sync_waiting: usize,
    pub(crate) tasks: Vec<(TaskState, usize)>,
}

fn index(status: Status) -> usize {
    STATUSES.iter().position(|s| *s == status).unwrap_or(5)
}

impl Metrics {
    /// One answer sent with `code`.
    pub fn response(&self, code: u16) {
        let mut m = self
            .responses
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *m.entry(code).or_default() += 1;
    }

    /// One sync run finished with `status` after `took`.
    pub fn run(&self, status: Status, took: Duration) {
        self.runs[index(status)].fetch_add(1, Ordering::Relaxed);
        let secs = took.as_secs_f64();
        for (i, le) in BUCKETS.iter().enumerate() {
            if secs <= *le {
                self.buckets[i].fetch_add(1, Ordering::Relaxed);
            }
        }
        let ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
        self.duration_ms_sum.fetch_add(ms, Ordering::Relaxed);
        self.duration_count.fetch_add(1, Ordering::Relaxed);
    }

    /// One background task submitted.
    pub fn submitted(&self) {
        self.submitted.fetch_add(1, Ordering::Relaxed);
    }

    /// The Prometheus text.
    pub(crate) fn render(&self, g: &Gauges) -> String {
        let mut out = String::new();
        let w = &mut out;
        let _ = writeln!(
            w,
            "# HELP droid_executor_http_responses_total HTTP answers sent, by status code.\n\
             # TYPE droid_executor_http_responses_total counter"
        );
        let responses = self
            .responses
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        for (code, n) in responses {
            let _ = writeln!(
                w,
                "droid_executor_http_responses_total{{code=\"{code}\"}} {n}"
            );
        }
        let _ = writeln!(
            w,
            "# HELP droid_executor_runs_total Sync runs finished by this bridge, by status.\n\
             # TYPE droid_executor_runs_total counter"
        );
        for (i, s) in STATUSES.iter().enumerate() {
            let n = self.runs[i].load(Ordering::Relaxed);
            let _ = writeln!(
                w,
                "droid_executor_runs_total{{status=\"{}\"}} {n}",
                s.as_str()
            );
        }
        let _ = writeln!(
            w,
            "# HELP droid_executor_run_duration_seconds Wall time of sync runs.\n\
             # TYPE droid_executor_run_duration_seconds histogram"
        );
        for (i, le) in BUCKETS.iter().enumerate() {
            let n = self.buckets[i].load(Ordering::Relaxed);
            let _ = writeln!(
                w,
                "droid_executor_run_duration_seconds_bucket{{le=\"{le}\"}} {n}"
            );
        }
        let count = self.duration_count.load(Ordering::Relaxed);
        let sum = self.duration_ms_sum.load(Ordering::Relaxed) as f64 / 1000.0;
        let _ = writeln!(
            w,
            "droid_executor_run_duration_seconds_bucket{{le=\"+Inf\"}} {count}\n\
             droid_executor_run_duration_seconds_sum {sum}\n\
             droid_executor_run_duration_seconds_count {count}"
        );
        let _ = writeln!(
            w,
            "# HELP droid_executor_tasks_submitted_total Background tasks submitted through this bridge.\n\
             # TYPE droid_executor_tasks_submitted_total counter\n\
             droid_executor_tasks_submitted_total {}",
            self.submitted.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            w,
            "# HELP droid_executor_sync_in_flight Sync requests being run or waiting.\n\
             # TYPE droid_executor_sync_in_flight gauge\n\
             droid_executor_sync_in_flight {}\n\
             # HELP droid_executor_queue_depth Sync requests waiting for a run slot.\n\
             # TYPE droid_executor_queue_depth gauge\n\
             droid_executor_queue_depth {}",
            g.sync_in_flight, g.sync_waiting
        );
        let _ = writeln!(
            w,
            "# HELP droid_executor_tasks Background tasks in the store, by state.\n\
             # TYPE droid_executor_tasks gauge"
        );
        for (state, n) in &g.tasks {
            let _ = writeln!(
                w,
                "droid_executor_tasks{{state=\"{}\"}} {n}",
                state.as_str()
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_histogram() {
        let m = Metrics::default();
        m.response(200);
        m.response(200);
        m.response(429);
        m.run(Status::Success, Duration::from_millis(1500));
        m.run(Status::Timeout, Duration::from_secs(700));
        let text = m.render(&Gauges {
            sync_in_flight: 3,
            sync_waiting: 1,
            tasks: vec![(TaskState::Running, 2)],
        });
        for line in [
            "droid_executor_http_responses_total{code=\"200\"} 2",
            "droid_executor_http_responses_total{code=\"429\"} 1",
            "droid_executor_runs_total{status=\"success\"} 1",
            "droid_executor_runs_total{status=\"timeout\"} 1",
            "droid_executor_runs_total{status=\"error\"} 0",
            "droid_executor_run_duration_seconds_bucket{le=\"1\"} 0",
            "droid_executor_run_duration_seconds_bucket{le=\"5\"} 1",
            "droid_executor_run_duration_seconds_bucket{le=\"1800\"} 2",
            "droid_executor_run_duration_seconds_bucket{le=\"+Inf\"} 2",
            "droid_executor_run_duration_seconds_sum 701.5",
            "droid_executor_run_duration_seconds_count 2",
            "droid_executor_sync_in_flight 3",
            "droid_executor_queue_depth 1",
            "droid_executor_tasks{state=\"running\"} 2",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
    }
}
