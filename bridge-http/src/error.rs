//! What can stop the bridge from serving (outcomes of requests are HTTP answers, never errors).

use std::net::SocketAddr;
use std::path::PathBuf;

/// Why the bridge cannot start, or why the client got no answer.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// A non-loopback bind without a token.
    #[error(
        "refusing to listen on {0}: it is reachable from other machines and no token is \
         configured; bind 127.0.0.1, or set a token with --token-file FILE or \
         DROID_EXECUTOR_TOKEN (clients then send 'Authorization: Bearer <token>')"
    )]
    UnsafeBind(SocketAddr),
    /// The token is unusable.
    #[error("invalid token: {0}")]
    BadToken(String),
    /// The token file cannot be read.
    #[error("cannot read the token file {path}: {reason}")]
    TokenFile {
        /// The file.
        path: PathBuf,
        /// Why (in the message; not chained, so it is said once).
        reason: std::io::Error,
    },
    /// Binding or accepting failed.
    #[error("cannot listen on {addr}: {reason}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why (in the message; not chained, so it is said once).
        reason: std::io::Error,
    },
    /// The client could not reach the bridge or lost the connection.
    #[error("bridge at {addr}: {message}")]
    Connect {
        /// The address.
        addr: SocketAddr,
        /// What went wrong.
        message: String,
    },
    /// The bridge answered something the client cannot use.
    #[error("bridge at {addr} answered {status}: {message}")]
    Answer {
        /// The address.
        addr: SocketAddr,
        /// The HTTP status.
        status: u16,
        /// The bridge's message, or what was wrong with the answer.
        message: String,
    },
}
