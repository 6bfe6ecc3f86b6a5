//! What the bridge is configured with, beyond the engine's configuration, and the rule on which
//! addresses it may bind.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use crate::error::BridgeError;
use crate::token::Token;

/// Time sync runs get to finish at shutdown before they are cancelled, unless configured
/// (`serve --drain-grace`). What a supervisor must wait before SIGKILL is longer: see
/// [`crate::worst_case_drain`].
pub const DRAIN_GRACE: Duration = Duration::from_secs(30);

/// The bridge's own settings (the engine's are in [`droid_exec::EngineConfig`]).
#[derive(Debug, Clone)]
pub struct BridgeConfig {
    /// Largest request body in bytes (`body_limit`, default 1 MiB).
    pub body_limit: usize,
    /// Sync requests that may wait for a run slot; one more is answered 429 (`max_queue`,
    /// default 64).
    pub max_queue: usize,
    /// Time a client gets to send a request's head (default 10 s).
    pub header_timeout: Duration,
    /// Time a client gets to send a request's body once its head arrived (default 30 s).
    pub body_timeout: Duration,
    /// Time sync runs get to finish at shutdown before they are cancelled ([`DRAIN_GRACE`] by
    /// default).
    pub drain_grace: Duration,
    /// The bearer token every request must carry, when configured.
    pub token: Option<Token>,
    /// Host names accepted in the `Host` header besides the loopback names.
    pub allowed_hosts: Vec<String>,
    /// Browser origins allowed to call (exact `scheme://host[:port]`); none by default.
    pub allowed_origins: Vec<String>,
    /// Seconds told to a client refused with 429 or 503 (`Retry-After`).
    pub retry_after: u64,
    /// Most connections held at once (`--max-connections`, default 1024). A connection beyond
    /// it closes the oldest idle one (waiting for a request head, or between requests); when
    /// none is idle it is answered 503 `connection_limit` and closed.
    pub max_connections: usize,
    /// Most connections one remote address may hold (`--max-connections-per-client`, default
    /// 128): beyond it that client's own oldest idle connection is closed, or the new one gets
    /// 503. Loopback clients are exempt: every local process shares 127.0.0.1 (a per-port count
    /// would be per connection), so the total, the idle shedding and the reserve guard them.
    pub max_connections_per_client: usize,
    /// Connections long requests (event streams, `POST /execute`) may never take
    /// (`--reserved-connections`, default 64): at most `max_connections` minus this many long
    /// requests go at once, so `/health`, `/metrics` and other short requests always find a
    /// connection; one more long request is answered 503 `connections_reserved`.
    pub reserved_connections: usize,
    /// Most event streams open at once (`--max-streams`, default 256); one more is answered
    /// 429 `too_many_streams`.
    pub max_streams: usize,
    /// Most event streams of one task (`--max-streams-per-task`, default 16); one more is
    /// answered 429 `too_many_streams`.
    pub max_streams_per_task: usize,
    /// Quiet time after which an event stream sends a `: keep-alive` comment
    /// (`--stream-keep-alive`, default 15 s).
    pub stream_keep_alive: Duration,
    /// Longest life of one event stream (`--stream-max-life`, default 1 h): it then ends with
    /// `event: resume` naming the last event sent, and the client reconnects with
    /// `Last-Event-ID` (which EventSource does by itself).
    pub stream_max_life: Duration,
}

impl Default for BridgeConfig {
    fn default() -> Self {
        Self {
            body_limit: 1024 * 1024,
            max_queue: 64,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            drain_grace: DRAIN_GRACE,
            token: None,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            retry_after: 5,
            max_connections: 1024,
            max_connections_per_client: 128,
            reserved_connections: 64,
            max_streams: 256,
            max_streams_per_task: 16,
            stream_keep_alive: Duration::from_secs(15),
            stream_max_life: Duration::from_secs(3600),
        }
    }
}

/// Whether `ip` only reaches this machine.
pub(crate) fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// A non-loopback bind needs a token: anyone who can reach the port could otherwise make droid
/// run commands on this machine.
///
/// # Errors
/// [`BridgeError::UnsafeBind`] for a non-loopback address without a token.
pub fn check_bind(addr: SocketAddr, token: Option<&Token>) -> Result<(), BridgeError> {
    if is_loopback(addr.ip()) || token.is_some() {
        Ok(())
    } else {
        Err(BridgeError::UnsafeBind(addr))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_loopback_needs_a_token() {
        let lo: SocketAddr = "127.0.0.1:53002".parse().unwrap();
        let lo6: SocketAddr = "[::1]:53002".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:53002".parse().unwrap();
        let lan: SocketAddr = "192.168.1.5:53002".parse().unwrap();
        assert!(check_bind(lo, None).is_ok());
        assert!(check_bind(lo6, None).is_ok());
        assert!(check_bind(any, None).is_err());
        assert!(check_bind(lan, None).is_err());
        let t = Token::new("s3cret-token-value").unwrap();
        assert!(check_bind(any, Some(&t)).is_ok());
        let msg = check_bind(lan, None).unwrap_err().to_string();
        assert!(msg.contains("192.168.1.5:53002"), "{msg}");
        assert!(msg.contains("token"), "{msg}");
    }
}
