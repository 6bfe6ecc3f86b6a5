//! The counters behind `GET /metrics`, rendered as Prometheus text (exposition format 0.0.4).
//!
//! Two kinds of run are counted apart, each by status and with a duration histogram:
//! - sync runs (`POST /execute`): counted by the bridge when it answers, timed by its own
//!   clock (`droid_executor_runs_total`, `droid_executor_run_duration_seconds`);
//! - background tasks (`POST /tasks`, and those the CLI or the MCP server put in the same store):
//!   each run by its own supervisor process, so the bridge learns of an end from the store. A
//!   scrape lists the store (one `stat` per task, as the gauges already do) and reads the result
//!   of each task whose result is new since the last look, once; it is then remembered as
//!   counted (`droid_executor_tasks_finished_total`, `droid_executor_task_duration_seconds`,
//!   timed by the result's `duration_ms`). Tasks finished before the bridge started are not
//!   counted: when the bridge restarts the counters start again at 0 (Prometheus' `rate()`
//!   handles such a reset), tasks still running then are counted when they end, and tasks that
//!   ended while no bridge ran are counted by none.
//!
//! Both kinds are also counted per agent run ([`droid_exec::agent_runs`]: each attempt of a
//! `fallback`, a `best_of` candidate as its own task): runs by provider, failures (any status
//! but `success`) by provider and reason (the deciding issue's type, `none` without one), and
//! the tokens they reported by provider and kind (`input` without cache reads, `output`,
//! `cache_read`, `cache_write`). Labels are bounded: five providers times the issue types.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use droid_contract::{ExecutionResult, Status, TaskState};

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

fn index(status: Status) -> usize {
    STATUSES.iter().position(|s| *s == status).unwrap_or(5)
}

/// Runs of one kind by status, and their durations.
#[derive(Debug, Default)]
struct Outcomes {
    by_status: [AtomicU64; 6],
    buckets: [AtomicU64; 10],
    duration_ms_sum: AtomicU64,
    duration_count: AtomicU64,
}

/// The names and help texts of one [`Outcomes`]' series.
struct Series {
    counter: &'static str,
    counter_help: &'static str,
    histogram: &'static str,
    histogram_help: &'static str,
}

impl Outcomes {
    fn record(&self, status: Status, took: Duration) {
        self.by_status[index(status)].fetch_add(1, Ordering::Relaxed);
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

    fn render(&self, w: &mut String, s: &Series) {
        let _ = writeln!(
            w,
            "# HELP {} {}\n# TYPE {} counter",
            s.counter, s.counter_help, s.counter
        );
        for (i, status) in STATUSES.iter().enumerate() {
            let n = self.by_status[i].load(Ordering::Relaxed);
            let _ = writeln!(w, "{}{{status=\"{}\"}} {n}", s.counter, status.as_str());
        }
        let h = s.histogram;
        let _ = writeln!(w, "# HELP {h} {}\n# TYPE {h} histogram", s.histogram_help);
        for (i, le) in BUCKETS.iter().enumerate() {
            let n = self.buckets[i].load(Ordering::Relaxed);
            let _ = writeln!(w, "{h}_bucket{{le=\"{le}\"}} {n}");
        }
        let count = self.duration_count.load(Ordering::Relaxed);
        let sum = self.duration_ms_sum.load(Ordering::Relaxed) as f64 / 1000.0;
        let _ = writeln!(
            w,
            "{h}_bucket{{le=\"+Inf\"}} {count}\n{h}_sum {sum}\n{h}_count {count}"
        );
    }
}

const SYNC: Series = Series {
    counter: "droid_executor_runs_total",
    counter_help: "Sync runs (POST /execute) this bridge finished since it started, by status. \
                   Background tasks are counted in droid_executor_tasks_finished_total.",
    histogram: "droid_executor_run_duration_seconds",
    histogram_help: "Wall time of the sync runs (POST /execute) counted in \
                     droid_executor_runs_total, by the bridge's clock.",
};

const BACKGROUND: Series = Series {
    counter: "droid_executor_tasks_finished_total",
    counter_help: "Background tasks of the task store (submitted through this bridge, the CLI \
                   or the MCP server) that finished while this bridge ran, by status; counted \
                   once each, at the first scrape that finds the result. Tasks finished before \
                   the bridge started are not counted.",
    histogram: "droid_executor_task_duration_seconds",
    histogram_help: "Run time (the result's duration_ms) of the background tasks counted in \
                     droid_executor_tasks_finished_total.",
};

/// Add `n` to the counter `key` of `map`.
fn bump<K: Ord>(map: &Mutex<BTreeMap<K, u64>>, key: K, n: u64) {
    // a counter map stays consistent whatever panicked while holding it
    let mut m = map
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let c = m.entry(key).or_default();
    *c = c.saturating_add(n);
}

/// Counters since the bridge started.
#[derive(Debug, Default)]
pub struct Metrics {
    responses: Mutex<BTreeMap<u16, u64>>,
    runs: Outcomes,
    tasks: Outcomes,
    submitted: AtomicU64,
    /// Agent runs by provider.
    agent_runs: Mutex<BTreeMap<&'static str, u64>>,
    /// Agent runs that did not succeed, by provider and reason.
    agent_failures: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    /// Tokens agents reported, by provider and kind.
    agent_tokens: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    /// Ids of the stored tasks whose end is accounted for: finished when the bridge first
    /// looked, or counted since. `None` until that first look. Pruned to the ids still in the
    /// store at every look, so it holds no more than the store does.
    task_ends: Mutex<Option<HashSet<String>>>,
}

/// Gauges read when the metrics are asked for.
#[derive(Debug, Default)]
pub(crate) struct Gauges {
    pub(crate) sync_in_flight: usize,
    pub(crate) sync_waiting: usize,
    pub(crate) tasks: Vec<(TaskState, usize)>,
    /// Connections held now.
    pub(crate) connections: usize,
    /// Idle connections closed to make room since start.
    pub(crate) connections_shed: u64,
    /// Event streams open now.
    pub(crate) streams: usize,
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
        self.runs.record(status, took);
    }

    /// The agent runs of one finished result (a sync run's or a background task's): runs,
    /// failures and tokens by provider.
    pub fn agents(&self, result: &ExecutionResult) {
        for run in droid_exec::agent_runs(result) {
            let provider = run.provider.as_str();
            bump(&self.agent_runs, provider, 1);
            if run.status != Status::Success {
                let reason = run.reason.map_or("none", |r| r.as_str());
                bump(&self.agent_failures, (provider, reason), 1);
            }
            if let Some(u) = &run.usage {
                for (kind, n) in [
                    ("input", u.input_tokens),
                    ("output", u.output_tokens),
                    ("cache_read", u.cache_read_input_tokens),
                    ("cache_write", u.cache_creation_input_tokens),
                ] {
                    bump(&self.agent_tokens, (provider, kind), n);
                }
            }
        }
    }

    /// One background task submitted.
    pub fn submitted(&self) {
        self.submitted.fetch_add(1, Ordering::Relaxed);
    }

    /// One background task found finished with `status` after running `took`.
    pub(crate) fn task_finished(&self, status: Status, took: Duration) {
        self.tasks.record(status, took);
    }

    /// The first look at the store (`(task id, finished)` of each task): its finished tasks
    /// are history. Nothing happens when a look was taken already.
    pub(crate) fn task_ends_baseline(&self, scan: &[(String, bool)]) {
        let mut ends = self
            .task_ends
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if ends.is_none() {
            *ends = Some(
                scan.iter()
                    .filter(|(_, finished)| *finished)
                    .map(|(id, _)| id.clone())
                    .collect(),
            );
        }
    }

    /// The tasks of `scan` found finished for the first time: each id is returned by one call
    /// only, for the caller to read its result and count it. The first look (when the bridge
    /// could not take one at start-up) only sets the baseline.
    pub(crate) fn newly_finished(&self, scan: &[(String, bool)]) -> Vec<String> {
        let mut ends = self
            .task_ends
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(seen) = ends.as_mut() else {
            drop(ends);
            self.task_ends_baseline(scan);
            return Vec::new();
        };
        let mut new = Vec::new();
        for (id, finished) in scan {
            if *finished && seen.insert(id.clone()) {
                new.push(id.clone());
            }
        }
        // expired tasks leave the store: forget them too
        if seen.len() > scan.len() {
            let present: HashSet<&str> = scan.iter().map(|(id, _)| id.as_str()).collect();
            seen.retain(|id| present.contains(id.as_str()));
        }
        new
    }

    /// The per-agent series (see the module doc).
    fn render_agents(&self, w: &mut String) {
        let copy = |m: &Mutex<BTreeMap<(&'static str, &'static str), u64>>| {
            m.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone()
        };
        let _ = writeln!(
            w,
            "# HELP droid_executor_agent_runs_total Agent runs (each attempt of a fallback; sync \
             runs and background tasks) finished while this bridge ran, by provider.\n\
             # TYPE droid_executor_agent_runs_total counter"
        );
        let runs = self
            .agent_runs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        for (provider, n) in runs {
            let _ = writeln!(
                w,
                "droid_executor_agent_runs_total{{provider=\"{provider}\"}} {n}"
            );
        }
        let _ = writeln!(
            w,
            "# HELP droid_executor_agent_failures_total Agent runs that did not succeed, by \
             provider and reason (the issue type that decided the run; none without one).\n\
             # TYPE droid_executor_agent_failures_total counter"
        );
        for ((provider, reason), n) in copy(&self.agent_failures) {
            let _ = writeln!(
                w,
                "droid_executor_agent_failures_total{{provider=\"{provider}\",reason=\"{reason}\"}} {n}"
            );
        }
        let _ = writeln!(
            w,
            "# HELP droid_executor_agent_tokens_total Tokens agent runs reported, by provider \
             and kind (input without cache reads, output, cache_read, cache_write).\n\
             # TYPE droid_executor_agent_tokens_total counter"
        );
        for ((provider, kind), n) in copy(&self.agent_tokens) {
            let _ = writeln!(
                w,
                "droid_executor_agent_tokens_total{{provider=\"{provider}\",kind=\"{kind}\"}} {n}"
            );
        }
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
        self.runs.render(w, &SYNC);
        self.tasks.render(w, &BACKGROUND);
        self.render_agents(w);
        let _ = writeln!(
            w,
            "# HELP droid_executor_tasks_submitted_total Background tasks submitted through this \
             bridge (POST /tasks) since it started.\n\
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
            "# HELP droid_executor_connections Connections held.\n\
             # TYPE droid_executor_connections gauge\n\
             droid_executor_connections {}\n\
             # HELP droid_executor_connections_shed_total Idle connections closed to make room \
             for new ones.\n\
             # TYPE droid_executor_connections_shed_total counter\n\
             droid_executor_connections_shed_total {}\n\
             # HELP droid_executor_event_streams Event streams open.\n\
             # TYPE droid_executor_event_streams gauge\n\
             droid_executor_event_streams {}",
            g.connections, g.connections_shed, g.streams
        );
        let _ = writeln!(
            w,
            "# HELP droid_executor_tasks Background tasks of the task store not finished yet, by \
             state.\n\
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
        m.task_finished(Status::Cancelled, Duration::from_secs(20));
        let text = m.render(&Gauges {
            sync_in_flight: 3,
            sync_waiting: 1,
            tasks: vec![(TaskState::Running, 2)],
            connections: 7,
            connections_shed: 4,
            streams: 2,
        });
        for line in [
            "droid_executor_connections 7",
            "droid_executor_connections_shed_total 4",
            "droid_executor_event_streams 2",
            "droid_executor_http_responses_total{code=\"200\"} 2",
            "droid_executor_http_responses_total{code=\"429\"} 1",
            "droid_executor_runs_total{status=\"success\"} 1",
            "droid_executor_runs_total{status=\"timeout\"} 1",
            "droid_executor_runs_total{status=\"error\"} 0",
            "droid_executor_runs_total{status=\"cancelled\"} 0",
            "droid_executor_run_duration_seconds_bucket{le=\"1\"} 0",
            "droid_executor_run_duration_seconds_bucket{le=\"5\"} 1",
            "droid_executor_run_duration_seconds_bucket{le=\"1800\"} 2",
            "droid_executor_run_duration_seconds_bucket{le=\"+Inf\"} 2",
            "droid_executor_run_duration_seconds_sum 701.5",
            "droid_executor_run_duration_seconds_count 2",
            "droid_executor_tasks_finished_total{status=\"cancelled\"} 1",
            "droid_executor_tasks_finished_total{status=\"success\"} 0",
            "droid_executor_task_duration_seconds_bucket{le=\"15\"} 0",
            "droid_executor_task_duration_seconds_bucket{le=\"30\"} 1",
            "droid_executor_task_duration_seconds_sum 20",
            "droid_executor_task_duration_seconds_count 1",
            "droid_executor_sync_in_flight 3",
            "droid_executor_queue_depth 1",
            "droid_executor_tasks{state=\"running\"} 2",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        // every series has its HELP and TYPE
        for name in [
            "droid_executor_runs_total",
            "droid_executor_run_duration_seconds",
            "droid_executor_tasks_finished_total",
            "droid_executor_task_duration_seconds",
        ] {
            assert!(text.contains(&format!("# HELP {name} ")), "{name}");
            assert!(text.contains(&format!("# TYPE {name} ")), "{name}");
        }
    }

    #[test]
    fn agent_runs_failures_and_tokens_by_provider_and_reason() {
        use droid_contract::{AgentInfo, Issue, IssueType, ProviderId, Usage};
        let result = |provider, status, kinds: &[IssueType], input, output, cached| {
            let mut r = ExecutionResult::error(None, "r", Vec::new());
            r.status = status;
            r.issues = kinds.iter().map(|k| Issue::new(*k, "why", "act")).collect();
            r.agent = Some(AgentInfo {
                provider,
                usage: Some(Usage {
                    input_tokens: input,
                    output_tokens: output,
                    cache_read_input_tokens: cached,
                    ..Usage::default()
                }),
                ..AgentInfo::default()
            });
            r
        };
        let m = Metrics::default();
        m.agents(&result(
            ProviderId::Claude,
            Status::Partial,
            &[IssueType::TestFailure, IssueType::BudgetExceeded],
            2000,
            5,
            1500,
        ));
        m.agents(&result(
            ProviderId::Claude,
            Status::Success,
            &[],
            100,
            20,
            0,
        ));
        m.agents(&result(ProviderId::Codex, Status::Failed, &[], 0, 0, 0));
        // nothing ran: no agent run
        m.agents(&ExecutionResult::error(None, "refused", Vec::new()));
        let text = m.render(&Gauges::default());
        let agent_lines: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("droid_executor_agent_"))
            .collect();
        assert_eq!(
            agent_lines,
            [
                "droid_executor_agent_runs_total{provider=\"claude\"} 2",
                "droid_executor_agent_runs_total{provider=\"codex\"} 1",
                "droid_executor_agent_failures_total{provider=\"claude\",reason=\"budget_exceeded\"} 1",
                "droid_executor_agent_failures_total{provider=\"codex\",reason=\"none\"} 1",
                "droid_executor_agent_tokens_total{provider=\"claude\",kind=\"cache_read\"} 1500",
                "droid_executor_agent_tokens_total{provider=\"claude\",kind=\"cache_write\"} 0",
                "droid_executor_agent_tokens_total{provider=\"claude\",kind=\"input\"} 2100",
                "droid_executor_agent_tokens_total{provider=\"claude\",kind=\"output\"} 25",
                "droid_executor_agent_tokens_total{provider=\"codex\",kind=\"cache_read\"} 0",
                "droid_executor_agent_tokens_total{provider=\"codex\",kind=\"cache_write\"} 0",
                "droid_executor_agent_tokens_total{provider=\"codex\",kind=\"input\"} 0",
                "droid_executor_agent_tokens_total{provider=\"codex\",kind=\"output\"} 0",
            ]
        );
    }

    fn scan(items: &[(&str, bool)]) -> Vec<(String, bool)> {
        items.iter().map(|(i, f)| ((*i).to_owned(), *f)).collect()
    }

    #[test]
    fn each_task_end_is_reported_once_and_history_never() {
        let m = Metrics::default();
        // finished before the bridge started: history; running then: counted when it ends
        m.task_ends_baseline(&scan(&[("old", true), ("long", false)]));
        m.task_ends_baseline(&scan(&[("old", false)]));
        assert_eq!(
            m.newly_finished(&scan(&[("old", true), ("long", false)])),
            Vec::<String>::new()
        );
        // a task that started and ended between two looks is counted too
        let mut new = m.newly_finished(&scan(&[("old", true), ("long", true), ("quick", true)]));
        new.sort();
        assert_eq!(new, ["long", "quick"]);
        assert_eq!(
            m.newly_finished(&scan(&[("old", true), ("long", true), ("quick", true)])),
            Vec::<String>::new()
        );
        // expired ones are forgotten; the others stay counted
        assert_eq!(
            m.newly_finished(&scan(&[("quick", true)])),
            Vec::<String>::new()
        );
        let ends = m.task_ends.lock().unwrap();
        assert_eq!(
            ends.as_ref().unwrap().iter().collect::<Vec<_>>(),
            [&"quick".to_owned()]
        );
    }

    #[test]
    fn without_a_look_at_start_the_first_scrape_is_the_baseline() {
        let m = Metrics::default();
        assert_eq!(
            m.newly_finished(&scan(&[("a", true), ("b", false)])),
            Vec::<String>::new()
        );
        assert_eq!(m.newly_finished(&scan(&[("a", true), ("b", true)])), ["b"]);
    }
}
