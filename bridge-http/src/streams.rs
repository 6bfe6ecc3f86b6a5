//! How many event streams are open, in all and by task ([`Streams`]): the bound
//! `max_streams` and `max_streams_per_task` put on `GET /tasks/{id}/events`
//! ([`crate::events`]). A place is held as long as its stream is open.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::config::BridgeConfig;

/// The event streams open, in all and by task.
#[derive(Debug)]
pub(crate) struct Streams {
    by_task: Mutex<HashMap<String, usize>>,
    max: usize,
    per_task: usize,
}

/// Why a stream was refused: the limit reached, for the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TooMany {
    /// `max_streams` are open.
    Total(usize),
    /// `max_streams_per_task` of this task are open.
    Task(usize),
}

impl Streams {
    pub(crate) fn new(cfg: &BridgeConfig) -> Arc<Self> {
        Arc::new(Self {
            by_task: Mutex::new(HashMap::new()),
            max: cfg.max_streams.max(1),
            per_task: cfg.max_streams_per_task.max(1),
        })
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, usize>> {
        // each change is one step: the counts stay consistent whatever a panicking holder did
        self.by_task.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Streams open now.
    pub(crate) fn open_count(&self) -> usize {
        self.lock().values().sum()
    }

    /// A place for one more stream of `task`.
    pub(crate) fn open(self: &Arc<Self>, task: &str) -> Result<StreamPlace, TooMany> {
        let mut by_task = self.lock();
        let total: usize = by_task.values().sum();
        if total >= self.max {
            return Err(TooMany::Total(self.max));
        }
        let n = by_task.entry(task.to_owned()).or_insert(0);
        if *n >= self.per_task {
            return Err(TooMany::Task(self.per_task));
        }
        *n += 1;
        Ok(StreamPlace {
            streams: Arc::clone(self),
            task: task.to_owned(),
        })
    }
}

/// One open stream; dropping it frees its place.
#[derive(Debug)]
pub(crate) struct StreamPlace {
    streams: Arc<Streams>,
    task: String,
}

impl Drop for StreamPlace {
    fn drop(&mut self) {
        let mut by_task = self.streams.lock();
        if let Some(n) = by_task.get_mut(&self.task) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                by_task.remove(&self.task);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_bounded_in_all_and_per_task() {
        let s = Streams::new(&BridgeConfig {
            max_streams: 3,
            max_streams_per_task: 2,
            ..BridgeConfig::default()
        });
        let a1 = s.open("a").unwrap();
        let a2 = s.open("a").unwrap();
        assert_eq!(s.open("a").unwrap_err(), TooMany::Task(2));
        let b1 = s.open("b").unwrap();
        assert_eq!(s.open("c").unwrap_err(), TooMany::Total(3));
        drop(a1);
        let a3 = s.open("a").unwrap();
        drop((a2, a3, b1));
        assert!(s.lock().is_empty());
    }
}
