//! The MCP sessions `/mcp` holds, by id: one per `initialize` of a legacy client (revisions
//! 2024-11-05 … 2025-11-25), until its DELETE, the bridge's shutdown, or its eviction.
//!
//! Bounds: at most [`MAX_SESSIONS`] are held. When a client initializes one more, the sessions
//! idle for [`IDLE_EXPIRY`] (no exchange going, none for that long) are closed first, then, if
//! the table is still full, the one idle the longest; when every session is busy, the new one
//! is refused (503). Most clients never send DELETE (a CLI killed with its terminal), so
//! without this the table would only grow. A closed session's running requests are cancelled.
//!
//! A session's own messages (those of no open request: a 2025-11-25 task's status once its
//! `CreateTaskResult` was sent) are pumped to its GET stream when one is open, and dropped when
//! none is, as the transport allows ("the server MAY send"): nothing waits on a client that does
//! not listen.
//!
//! Session ids are 128 random bits from the kernel, in hex: visible ASCII, as the transport
//! requires. They name a session; the bearer token, when one is configured, is what admits a
//! client, as on every route.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::mcp::{McpServer, McpSession};

/// Sessions held at most.
pub(crate) const MAX_SESSIONS: usize = 256;
/// A session with no exchange for this long is closed when room is needed.
pub(crate) const IDLE_EXPIRY: Duration = Duration::from_secs(3600);
/// Messages waiting for a slow GET stream; beyond, the session's own messages are dropped.
pub(crate) const LISTEN_CAPACITY: usize = 64;

/// Why no session was made.
#[derive(Debug)]
pub(crate) enum Refused {
    /// Every held session is busy.
    Full,
    /// No random bytes for its id.
    NoId(std::io::Error),
}

/// One held session.
pub(crate) struct Held {
    pub(crate) session: Arc<dyn McpSession>,
    /// Exchanges going now (a POST being answered, a stream open): never evicted while any is.
    busy: AtomicUsize,
    last: Mutex<Instant>,
    /// The open GET stream, where the session's own messages go.
    listener: Mutex<Option<mpsc::Sender<Value>>>,
    /// Cancelled when the session ends: its pump and its GET stream stop.
    gone: CancellationToken,
}

impl Held {
    fn new(session: Arc<dyn McpSession>) -> Arc<Self> {
        let held = Arc::new(Self {
            session,
            busy: AtomicUsize::new(0),
            last: Mutex::new(Instant::now()),
            listener: Mutex::new(None),
            gone: CancellationToken::new(),
        });
        if let Some(mut own) = held.session.messages() {
            let h = Arc::clone(&held);
            tokio::spawn(async move {
                loop {
                    let msg = tokio::select! {
                        m = own.next() => m,
                        () = h.gone.cancelled() => None,
                    };
                    let Some(msg) = msg else { return };
                    let tx = h.listener().clone();
                    if let Some(tx) = tx
                        && tx.try_send(msg).is_err()
                    {
                        tracing::debug!(
                            "an MCP session's GET stream is not reading: a message dropped"
                        );
                    }
                }
            });
        }
        held
    }

    fn listener(&self) -> MutexGuard<'_, Option<mpsc::Sender<Value>>> {
        self.listener.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Mark one exchange going until the guard is dropped.
    pub(crate) fn busy(self: &Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Ordering::SeqCst);
        Busy(Arc::clone(self))
    }

    fn idle_since(&self) -> Option<Instant> {
        (self.busy.load(Ordering::SeqCst) == 0)
            .then(|| *self.last.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Make `tx` the session's GET stream; `false` when one is open already.
    pub(crate) fn listen(&self, tx: mpsc::Sender<Value>) -> bool {
        let mut l = self.listener();
        if l.as_ref().is_some_and(|open| !open.is_closed()) {
            return false;
        }
        *l = Some(tx);
        true
    }

    /// The GET stream fed by `tx` is over.
    pub(crate) fn unlisten(&self, tx: &mpsc::Sender<Value>) {
        let mut l = self.listener();
        if l.as_ref().is_some_and(|open| open.same_channel(tx)) {
            *l = None;
        }
    }

    /// Cancelled once the session is closed.
    pub(crate) fn gone(&self) -> &CancellationToken {
        &self.gone
    }

    /// Close the session (its running requests cancelled, its streams ended).
    pub(crate) async fn close(&self) {
        self.gone.cancel();
        self.session.close().await;
    }
}

/// One exchange of a held session going.
pub(crate) struct Busy(Arc<Held>);

impl Drop for Busy {
    fn drop(&mut self) {
        *self.0.last.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();
        self.0.busy.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The MCP server and its held sessions.
pub(crate) struct McpSessions {
    server: Option<Arc<dyn McpServer>>,
    table: Mutex<HashMap<String, Arc<Held>>>,
    /// POSTs being answered (their streams included), of every session, stateless ones too.
    exchanges: Arc<AtomicUsize>,
}

impl std::fmt::Debug for McpSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpSessions")
            .field("server", &self.server)
            .field("held", &self.table().len())
            .field("exchanges", &self.in_flight())
            .finish()
    }
}

/// One POST being answered; counted until dropped.
pub(crate) struct InFlight(Arc<AtomicUsize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl McpSessions {
    pub(crate) fn new(server: Option<Arc<dyn McpServer>>) -> Self {
        Self {
            server,
            table: Mutex::new(HashMap::new()),
            exchanges: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn table(&self) -> MutexGuard<'_, HashMap<String, Arc<Held>>> {
        // each change is one step: the table stays consistent whatever a panicking holder did
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The MCP server, when the bridge serves one.
    pub(crate) fn server(&self) -> Option<&Arc<dyn McpServer>> {
        self.server.as_ref()
    }

    /// Count one POST being answered.
    pub(crate) fn exchange(&self) -> InFlight {
        self.exchanges.fetch_add(1, Ordering::SeqCst);
        InFlight(Arc::clone(&self.exchanges))
    }

    /// POSTs being answered now.
    pub(crate) fn in_flight(&self) -> usize {
        self.exchanges.load(Ordering::SeqCst)
    }

    /// A new session of `server` and its id; the sessions closed to make room are closed in the
    /// background.
    pub(crate) fn create(&self, server: &dyn McpServer) -> Result<(String, Arc<Held>), Refused> {
        let id = session_id().map_err(Refused::NoId)?;
        let mut evicted = Vec::new();
        {
            let mut table = self.table();
            let now = Instant::now();
            let stale: Vec<String> = table
                .iter()
                .filter(|(_, h)| h.idle_since().is_some_and(|t| now - t >= IDLE_EXPIRY))
                .map(|(k, _)| k.clone())
                .collect();
            evicted.extend(stale.iter().filter_map(|k| table.remove(k)));
            if table.len() >= MAX_SESSIONS {
                let oldest = table
                    .iter()
                    .filter_map(|(k, h)| h.idle_since().map(|t| (t, k.clone())))
                    .min();
                match oldest {
                    Some((_, k)) => evicted.extend(table.remove(&k)),
                    None => return Err(Refused::Full),
                }
            }
        }
        for h in evicted {
            tokio::spawn(async move { h.close().await });
        }
        let held = Held::new(Arc::from(server.open()));
        self.table().insert(id.clone(), Arc::clone(&held));
        Ok((id, held))
    }

    /// The session `id`, if it is held.
    pub(crate) fn get(&self, id: &str) -> Option<Arc<Held>> {
        self.table().get(id).cloned()
    }

    /// Take session `id` out of the table (the caller closes it).
    pub(crate) fn remove(&self, id: &str) -> Option<Arc<Held>> {
        self.table().remove(id)
    }

    /// Close every session (shutdown): their running requests are cancelled.
    pub(crate) async fn close_all(&self) {
        let all: Vec<Arc<Held>> = self.table().drain().map(|(_, h)| h).collect();
        let mut closing = tokio::task::JoinSet::new();
        for h in all {
            closing.spawn(async move { h.close().await });
        }
        while closing.join_next().await.is_some() {}
    }
}

/// 128 random bits from the kernel, in hex.
fn session_id() -> std::io::Result<String> {
    use std::io::Read as _;
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use super::*;
    use crate::mcp::{McpFuture, McpMessages, McpPosted};

    /// A server whose sessions only say whether they were closed.
    #[derive(Debug, Default)]
    struct Fake {
        closed: Mutex<Vec<Arc<AtomicBool>>>,
    }

    struct FakeSession(Arc<AtomicBool>);

    impl McpServer for Fake {
        fn open(&self) -> Box<dyn McpSession> {
            let closed = Arc::new(AtomicBool::new(false));
            self.closed.lock().unwrap().push(Arc::clone(&closed));
            Box::new(FakeSession(closed))
        }
        fn legacy_revisions(&self) -> &'static [&'static str] {
            &["2025-11-25"]
        }
        fn modern_revisions(&self) -> &'static [&'static str] {
            &["2026-07-28"]
        }
    }

    impl McpSession for FakeSession {
        fn post(&self, _: Value) -> McpFuture<'_, McpPosted> {
            Box::pin(async { McpPosted::Nothing })
        }
        fn messages(&self) -> Option<Box<dyn McpMessages>> {
            None
        }
        fn cancel(&self, _: &Value) {}
        fn negotiated(&self) -> Option<&'static str> {
            None
        }
        fn close(&self) -> McpFuture<'_, ()> {
            self.0.store(true, Ordering::SeqCst);
            Box::pin(async {})
        }
    }

    #[tokio::test]
    async fn a_full_table_closes_the_session_idle_longest_and_refuses_when_all_are_busy() {
        let server = Fake::default();
        let sessions = McpSessions::new(None);
        let mut ids = Vec::new();
        let mut busy = Vec::new();
        for _ in 0..MAX_SESSIONS {
            let (id, held) = sessions.create(&server).unwrap();
            busy.push(held.busy());
            ids.push(id);
        }
        assert!(matches!(sessions.create(&server), Err(Refused::Full)));
        // the first two go idle, the first one first: it is the one closed for room
        let first = busy.remove(0);
        drop(first);
        tokio::time::sleep(Duration::from_millis(5)).await;
        let second = busy.remove(0);
        drop(second);
        let (_, _new) = sessions.create(&server).unwrap();
        assert!(sessions.get(&ids[0]).is_none());
        assert!(sessions.get(&ids[1]).is_some());
        assert_eq!(sessions.table().len(), MAX_SESSIONS);
        let closed = Arc::clone(&server.closed.lock().unwrap()[0]);
        for _ in 0..100 {
            if closed.load(Ordering::SeqCst) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(
            closed.load(Ordering::SeqCst),
            "the evicted session was not closed"
        );
        sessions.close_all().await;
        assert!(sessions.table().is_empty());
        assert!(
            server
                .closed
                .lock()
                .unwrap()
                .iter()
                .all(|c| c.load(Ordering::SeqCst))
        );
    }

    #[test]
    fn session_ids_are_visible_ascii_and_distinct() {
        let a = session_id().unwrap();
        let b = session_id().unwrap();
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()), "{a}");
        assert_ne!(a, b);
    }
}
