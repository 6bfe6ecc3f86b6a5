//! The connections the bridge holds, and who gets one when they run out.
//!
//! A connection is *idle* while no request of it is being answered: waiting for a request head
//! (a new connection, a keep-alive one between requests, a client sending its head slowly) — or
//! *busy* from the moment its request head is read until its answer's body has been sent (an
//! event stream is busy for its whole life). Rules, applied when a connection arrives:
//! - at most `max_connections` are held: a new one closes the oldest idle connection (the one
//!   idle the longest) to make room, so idle and slow clients cannot lock the others out (the
//!   10 s head timeout alone freed a slot only after 10 s; 1,300 idle connections kept
//!   `/health` from answering at all); when every held connection is busy, the new one is
//!   answered 503 `connection_limit` and closed;
//! - a remote address holds at most `max_connections_per_client`, the same way (its own oldest
//!   idle connection is closed first). Loopback clients are exempt: all local processes share
//!   127.0.0.1, and the peer's port differs per connection, so no per-client count exists there;
//! - long requests (event streams and sync runs) take at most `max_connections -
//!   reserved_connections` connections ([`Conns::long`]): the reserve is left to short requests
//!   (`/health`, `/metrics`, task status, submissions), which are busy only briefly, so with the
//!   idle shedding a short request always finds a connection.
//!
//! The costs are bounded by the settings: each arrival looks at the held connections once.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::{BridgeConfig, is_loopback};

/// Why a connection was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Full {
    /// Every held connection is busy.
    Total,
    /// Every connection of this remote client is busy.
    Client,
}

/// One held connection.
#[derive(Debug)]
struct Conn {
    ip: IpAddr,
    /// Requests being answered on it (HTTP/1.1: 0 or 1).
    busy: usize,
    /// When it last became idle (or arrived).
    idle_since: Instant,
    /// Cancelled to close it (shed while idle).
    shed: CancellationToken,
}

#[derive(Debug, Default)]
struct Inner {
    next_id: u64,
    held: HashMap<u64, Conn>,
    /// Long requests going.
    long: usize,
    /// Idle connections closed to make room, since start.
    shed_total: u64,
}

/// The held connections and the counts behind the rules above.
#[derive(Debug)]
pub(crate) struct Conns {
    inner: Mutex<Inner>,
    max: usize,
    per_client: usize,
    long_cap: usize,
}

impl Conns {
    pub(crate) fn new(cfg: &BridgeConfig) -> Arc<Self> {
        let max = cfg.max_connections.max(1);
        Arc::new(Self {
            inner: Mutex::new(Inner::default()),
            max,
            per_client: cfg.max_connections_per_client.max(1),
            long_cap: max.saturating_sub(cfg.reserved_connections).max(1),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // the counts stay consistent whatever a panicking holder did: each change is one step
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Hold a new connection from `ip`, closing the oldest idle one when a limit is reached.
    pub(crate) fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Held, Full> {
        let mut inner = self.lock();
        if !is_loopback(ip) {
            let of_client = inner.held.values().filter(|c| c.ip == ip).count();
            if of_client >= self.per_client && !shed_oldest_idle(&mut inner, Some(ip)) {
                return Err(Full::Client);
            }
        }
        if inner.held.len() >= self.max && !shed_oldest_idle(&mut inner, None) {
            return Err(Full::Total);
        }
        let id = inner.next_id;
        inner.next_id += 1;
        let shed = CancellationToken::new();
        inner.held.insert(
            id,
            Conn {
                ip,
                busy: 0,
                idle_since: Instant::now(),
                shed: shed.clone(),
            },
        );
        Ok(Held {
            conns: Arc::clone(self),
            id,
            shed,
            answered: AtomicBool::new(false),
        })
    }

    /// Connections held now.
    pub(crate) fn held(&self) -> usize {
        self.lock().held.len()
    }

    /// Idle connections closed to make room since start.
    pub(crate) fn shed_total(&self) -> u64 {
        self.lock().shed_total
    }

    /// A place for one long request (an event stream, a sync run), or `None` when the
    /// connections left are the reserve of short requests.
    pub(crate) fn long(self: &Arc<Self>) -> Option<Long> {
        let mut inner = self.lock();
        if inner.long >= self.long_cap {
            return None;
        }
        inner.long += 1;
        Some(Long {
            conns: Arc::clone(self),
        })
    }

    /// How many long requests may go at once.
    pub(crate) fn long_cap(&self) -> usize {
        self.long_cap
    }
}

/// Close the idle connection idle the longest (of `ip` only, when given); whether one was.
fn shed_oldest_idle(inner: &mut Inner, ip: Option<IpAddr>) -> bool {
    let oldest = inner
        .held
        .iter()
        .filter(|(_, c)| c.busy == 0 && ip.is_none_or(|ip| c.ip == ip))
        .min_by_key(|(id, c)| (c.idle_since, **id))
        .map(|(id, _)| *id);
    match oldest.and_then(|id| inner.held.remove(&id)) {
        Some(c) => {
            c.shed.cancel();
            inner.shed_total += 1;
            true
        }
        None => false,
    }
}

/// A held connection; dropping it gives its place back.
#[derive(Debug)]
pub(crate) struct Held {
    conns: Arc<Conns>,
    id: u64,
    shed: CancellationToken,
    /// Whether a request of it was ever answered (the end of an answer may then still be on
    /// its way out when it is shed).
    answered: AtomicBool,
}

impl Held {
    /// Cancelled when the connection is shed to make room: close it.
    pub(crate) fn shed(&self) -> &CancellationToken {
        &self.shed
    }

    /// Whether a request of this connection was ever answered.
    pub(crate) fn answered(&self) -> bool {
        self.answered.load(Ordering::SeqCst)
    }

    /// A request of this connection is being answered until the returned guard is dropped.
    pub(crate) fn busy(&self) -> Busy {
        self.answered.store(true, Ordering::SeqCst);
        if let Some(c) = self.conns.lock().held.get_mut(&self.id) {
            c.busy += 1;
        }
        Busy {
            conns: Arc::clone(&self.conns),
            id: self.id,
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.conns.lock().held.remove(&self.id);
    }
}

/// One request being answered; its connection is idle again once every such guard is dropped.
#[derive(Debug)]
pub(crate) struct Busy {
    conns: Arc<Conns>,
    id: u64,
}

impl Drop for Busy {
    fn drop(&mut self) {
        if let Some(c) = self.conns.lock().held.get_mut(&self.id) {
            c.busy = c.busy.saturating_sub(1);
            if c.busy == 0 {
                c.idle_since = Instant::now();
            }
        }
    }
}

/// One long request going; dropping it frees its place.
#[derive(Debug)]
pub(crate) struct Long {
    conns: Arc<Conns>,
}

impl Drop for Long {
    fn drop(&mut self) {
        let mut inner = self.conns.lock();
        inner.long = inner.long.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conns(max: usize, per_client: usize, reserved: usize) -> Arc<Conns> {
        Conns::new(&BridgeConfig {
            max_connections: max,
            max_connections_per_client: per_client,
            reserved_connections: reserved,
            ..BridgeConfig::default()
        })
    }

    const LO: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    fn remote(last: u8) -> IpAddr {
        IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, last))
    }

    #[test]
    fn a_new_connection_sheds_the_oldest_idle_one() {
        let c = conns(3, 128, 1);
        let a = c.admit(LO).unwrap();
        let b = c.admit(LO).unwrap();
        let d = c.admit(LO).unwrap();
        let busy_a = a.busy();
        // a is busy, b idles the longest
        let e = c.admit(LO).unwrap();
        assert!(!a.shed().is_cancelled());
        assert!(b.shed().is_cancelled());
        assert!(!d.shed().is_cancelled());
        assert_eq!((c.held(), c.shed_total()), (3, 1));
        drop(b);
        assert_eq!(c.held(), 3);
        let busy_d = d.busy();
        let busy_e = e.busy();
        assert_eq!(c.admit(LO).unwrap_err(), Full::Total);
        drop(busy_e);
        assert!(c.admit(LO).is_ok());
        assert!(e.shed().is_cancelled());
        drop((busy_a, busy_d));
    }

    #[test]
    fn a_remote_client_sheds_its_own_idle_connections_first() {
        let c = conns(10, 2, 1);
        let x1 = c.admit(remote(1)).unwrap();
        let y = c.admit(remote(2)).unwrap();
        let x2 = c.admit(remote(1)).unwrap();
        let x3 = c.admit(remote(1)).unwrap();
        assert!(x1.shed().is_cancelled());
        assert!(!y.shed().is_cancelled());
        let busy = (x2.busy(), x3.busy());
        assert_eq!(c.admit(remote(1)).unwrap_err(), Full::Client);
        drop(busy);
        // loopback has no per-client cap
        let local: Vec<Held> = (0..5).map(|_| c.admit(LO).unwrap()).collect();
        assert_eq!(local.len(), 5);
    }

    #[test]
    fn long_requests_leave_the_reserve() {
        let c = conns(4, 128, 1);
        assert_eq!(c.long_cap(), 3);
        let held: Vec<Long> = (0..3).map(|_| c.long().unwrap()).collect();
        assert!(c.long().is_none());
        drop(held);
        assert!(c.long().is_some());
    }
}
