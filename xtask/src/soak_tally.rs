//! What one front-end's soak traffic counted: operations by kind with their durations, every
//! single request's round trip (an HTTP exchange, an MCP request to its response, a line
//! written), and the errors: every answer is checked, and a wrong or missing one is an error
//! with a description.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::figures::percentile;

/// How many error descriptions are kept (the count goes on).
const KEPT_ERRORS: usize = 20;

#[derive(Default)]
struct Counts {
    ops: BTreeMap<&'static str, Vec<Duration>>,
    requests: Vec<Duration>,
    errors: usize,
    first_errors: Vec<String>,
}

/// Counters shared by one front-end's clients.
#[derive(Default)]
pub(crate) struct Tally(Mutex<Counts>);

/// Figures of one kind of operation, or of all requests.
pub(crate) struct Figures {
    /// How many.
    pub(crate) count: usize,
    /// Median duration.
    pub(crate) p50: Duration,
    /// 99th percentile duration.
    pub(crate) p99: Duration,
}

impl Figures {
    fn of(mut v: Vec<Duration>) -> Self {
        v.sort();
        let at = |p| {
            if v.is_empty() {
                Duration::ZERO
            } else {
                percentile(&v, p)
            }
        };
        Self {
            count: v.len(),
            p50: at(50.0),
            p99: at(99.0),
        }
    }
}

impl Tally {
    fn lock(&self) -> MutexGuard<'_, Counts> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One operation of `kind` ended after `took`; `Err` is what was wrong with its answers.
    pub(crate) fn op(&self, kind: &'static str, took: Duration, outcome: Result<(), String>) {
        let mut c = self.lock();
        c.ops.entry(kind).or_default().push(took);
        if let Err(e) = outcome {
            drop(c);
            self.error(kind, &e);
        }
    }

    /// One request took `took` from sending to its full answer.
    pub(crate) fn request(&self, took: Duration) {
        self.lock().requests.push(took);
    }

    /// An error found outside an operation (a stray message, a counter that does not add up).
    pub(crate) fn error(&self, what: &str, e: &str) {
        let mut c = self.lock();
        c.errors += 1;
        if c.first_errors.len() < KEPT_ERRORS {
            c.first_errors.push(format!("{what}: {e}"));
        }
    }

    /// Each kind of operation with its figures, in name order.
    pub(crate) fn ops(&self) -> Vec<(&'static str, Figures)> {
        self.lock()
            .ops
            .iter()
            .map(|(k, v)| (*k, Figures::of(v.clone())))
            .collect()
    }

    /// How many operations of `kind` ran.
    pub(crate) fn count(&self, kind: &str) -> usize {
        self.lock().ops.get(kind).map_or(0, Vec::len)
    }

    /// Every request's figures.
    pub(crate) fn requests(&self) -> Figures {
        Figures::of(self.lock().requests.clone())
    }

    /// How many errors, and the first few.
    pub(crate) fn errors(&self) -> (usize, Vec<String>) {
        let c = self.lock();
        (c.errors, c.first_errors.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_operations_requests_and_errors() {
        let t = Tally::default();
        t.op("ping", Duration::from_millis(2), Ok(()));
        t.op("ping", Duration::from_millis(4), Err("no answer".into()));
        t.request(Duration::from_millis(1));
        t.error("stray", "a response to nobody");
        let ops = t.ops();
        assert_eq!(ops.len(), 1);
        assert_eq!((ops[0].0, ops[0].1.count), ("ping", 2));
        assert_eq!(ops[0].1.p99, Duration::from_millis(4));
        assert_eq!(t.count("ping"), 2);
        assert_eq!(t.count("other"), 0);
        assert_eq!(t.requests().count, 1);
        assert_eq!(
            t.errors(),
            (
                2,
                vec![
                    "ping: no answer".to_owned(),
                    "stray: a response to nobody".to_owned()
                ]
            )
        );
        assert_eq!(Tally::default().requests().p50, Duration::ZERO);
    }
}
