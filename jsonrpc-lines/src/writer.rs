//! Writing messages: one compact JSON value per line (serde_json escapes newlines inside
//! strings, so a message is always one line), flushed at once.

use serde_json::Value;
use tokio::io::{AsyncWrite, AsyncWriteExt};

/// Write `msg` as one line to `out` and flush it.
///
/// # Errors
///
/// The write's or the flush's error: the peer is gone (EPIPE) or the output failed; the caller
/// stops writing.
pub async fn write_message<W: AsyncWrite + Unpin>(out: &mut W, msg: &Value) -> std::io::Result<()> {
    let mut line = msg.to_string().into_bytes();
    line.push(b'\n');
    out.write_all(&line).await?;
    out.flush().await
}
