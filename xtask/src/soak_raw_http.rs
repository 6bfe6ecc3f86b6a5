//! HTTP/1.1 written by hand, for what the bridge's own client cannot send: a body declared as
//! something other than JSON, a body announced over the limit, and a client that leaves in the
//! middle of a run.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// `head` (request line and headers, each ending `\r\n`, without `Host`) and `body` sent to
/// `addr` on a connection of their own (`Connection: close`): the answer's status and JSON
/// body (null when it is not JSON).
pub(crate) async fn exchange(
    addr: SocketAddr,
    head: &str,
    body: &[u8],
    limit: Duration,
) -> Result<(u16, Value), String> {
    let mut request = format!("{head}Host: {addr}\r\nConnection: close\r\n\r\n").into_bytes();
    request.extend_from_slice(body);
    let exchange = async {
        let mut s = TcpStream::connect(addr).await?;
        s.write_all(&request).await?;
        let mut answer = Vec::new();
        s.read_to_end(&mut answer).await?;
        std::io::Result::Ok(answer)
    };
    let answer = tokio::time::timeout(limit, exchange)
        .await
        .map_err(|_| format!("no answer within {limit:?}"))?
        .map_err(|e| format!("exchange: {e}"))?;
    let text = String::from_utf8_lossy(&answer);
    let status = text
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| format!("not an HTTP answer: {text}"))?;
    let json = text
        .split_once("\r\n\r\n")
        .and_then(|(_, b)| serde_json::from_str(b).ok())
        .unwrap_or(Value::Null);
    Ok((status, json))
}

/// `POST path` of the JSON `body` to `addr`, and leave (close the connection) as soon as
/// `started` exists, within `limit`; the bridge must not answer, nor close, before. How long
/// that took.
pub(crate) async fn leave_once_started(
    addr: SocketAddr,
    path: &str,
    body: &str,
    started: &Path,
    limit: Duration,
) -> Result<Duration, String> {
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut s = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    s.write_all(request.as_bytes())
        .await
        .map_err(|e| format!("write: {e}"))?;
    let t = Instant::now();
    let mut byte = [0_u8; 1];
    while !started.exists() {
        if t.elapsed() > limit {
            return Err(format!("droid did not start within {limit:?}"));
        }
        // the run hangs: anything the bridge sends (or a close) before we leave is wrong
        match tokio::time::timeout(Duration::from_millis(10), s.read(&mut byte)).await {
            Err(_) => {}
            Ok(Ok(0)) => return Err("the bridge closed the connection of a running run".into()),
            Ok(Ok(_)) => return Err("the bridge answered a run that hangs".into()),
            Ok(Err(e)) => return Err(format!("read: {e}")),
        }
    }
    Ok(t.elapsed())
}
