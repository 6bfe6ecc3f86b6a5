//! Just enough HTTP/1.1 for the scripted model server: read one request (head plus a
//! `content-length` or chunked body) from a stream, and format a response head. Keep-alive is the
//! caller's business; requests left in the buffer (pipelining) are kept for the next call.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// A request head larger than this is refused (droid's are under 1 KiB).
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// A body larger than this is refused (droid's carry the whole conversation: tens of KiB, and a
/// 200 KB prompt makes a ~250 KB body).
const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;
/// How much one read asks for.
const READ_CHUNK: usize = 16 * 1024;

/// One parsed request.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) version: String,
    /// Header names lowercased, in arrival order.
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Request {
    /// The first header with this (lowercase) name.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether the client asked for the connection to end after this exchange.
    pub(crate) fn wants_close(&self) -> bool {
        let connection = self.header("connection").map(str::to_ascii_lowercase);
        match connection.as_deref() {
            Some(c) if c.contains("close") => true,
            Some(c) if c.contains("keep-alive") => false,
            _ => self.version == "HTTP/1.0",
        }
    }
}

fn invalid(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// Reads more bytes into `buf`; an error at end of stream.
async fn fill<S: AsyncRead + Unpin>(io: &mut S, buf: &mut Vec<u8>) -> io::Result<()> {
    let mut chunk = [0u8; READ_CHUNK];
    let n = io.read(&mut chunk).await?;
    if n == 0 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    buf.extend_from_slice(&chunk[..n]);
    Ok(())
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Reads the next request from `io`; `buf` holds bytes read but not yet used and must be kept
/// between calls on one connection. `Ok(None)` when the peer closed cleanly between requests.
/// Answers `Expect: 100-continue` itself.
pub(crate) async fn read_request<S>(io: &mut S, buf: &mut Vec<u8>) -> io::Result<Option<Request>>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let head_end = loop {
        if let Some(i) = find(buf, b"\r\n\r\n") {
            break i;
        }
        if buf.len() > MAX_HEAD_BYTES {
            return Err(invalid("request head too large"));
        }
        match fill(io, buf).await {
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof && buf.is_empty() => {
                return Ok(None);
            }
            other => other?,
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    buf.drain(..head_end + 4);

    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (Some(method), Some(path), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(invalid(format!("bad request line: {request_line:?}")));
    };
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut request = Request {
        method: method.to_owned(),
        path: path.to_owned(),
        version: version.to_owned(),
        headers,
        body: Vec::new(),
    };

    let chunked = request
        .header("transfer-encoding")
        .is_some_and(|te| te.to_ascii_lowercase().contains("chunked"));
    let length = match request.header("content-length") {
        Some(v) => v
            .parse::<usize>()
            .map_err(|_| invalid(format!("bad content-length: {v:?}")))?,
        None => 0,
    };
    if (chunked || length > 0)
        && request
            .header("expect")
            .is_some_and(|e| e.eq_ignore_ascii_case("100-continue"))
    {
        io.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
        io.flush().await?;
    }
    request.body = if chunked {
        read_chunked(io, buf).await?
    } else {
        if length > MAX_BODY_BYTES {
            return Err(invalid("request body too large"));
        }
        while buf.len() < length {
            fill(io, buf).await?;
        }
        buf.drain(..length).collect()
    };
    Ok(Some(request))
}

/// Reads one CRLF-terminated line (without the CRLF) from `buf`, filling it as needed.
async fn read_line<S: AsyncRead + Unpin>(io: &mut S, buf: &mut Vec<u8>) -> io::Result<String> {
    loop {
        if let Some(i) = find(buf, b"\r\n") {
            let line = String::from_utf8_lossy(&buf[..i]).into_owned();
            buf.drain(..i + 2);
            return Ok(line);
        }
        if buf.len() > MAX_HEAD_BYTES {
            return Err(invalid("chunk header too large"));
        }
        fill(io, buf).await?;
    }
}

async fn read_chunked<S: AsyncRead + Unpin>(io: &mut S, buf: &mut Vec<u8>) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line = read_line(io, buf).await?;
        let size_text = line.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| invalid(format!("bad chunk size: {line:?}")))?;
        if size == 0 {
            // Trailer fields, then the empty line.
            while !read_line(io, buf).await?.is_empty() {}
            return Ok(body);
        }
        if body.len() + size > MAX_BODY_BYTES {
            return Err(invalid("request body too large"));
        }
        while buf.len() < size + 2 {
            fill(io, buf).await?;
        }
        body.extend(buf.drain(..size));
        buf.drain(..2);
    }
}

/// The reason phrase Python's `http.server` sends for the statuses a script is likely to use.
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        413 => "Request Entity Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Site Overloaded",
        _ => "Unknown",
    }
}

/// A response head: status line, the headers in order, the blank line.
pub(crate) fn response_head(status: u16, headers: &[(&str, String)]) -> Vec<u8> {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for (name, value) in headers {
        head.push_str(name);
        head.push_str(": ");
        head.push_str(value);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    head.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn parse(bytes: &[u8]) -> (Option<Request>, Vec<u8>) {
        let (mut client, mut server) = tokio::io::duplex(1024 * 1024);
        client.write_all(bytes).await.unwrap();
        drop(client);
        let mut buf = Vec::new();
        let request = read_request(&mut server, &mut buf).await.unwrap();
        (request, buf)
    }

    #[tokio::test]
    async fn reads_content_length_body_and_keeps_the_rest() {
        let (request, rest) = parse(
            b"POST /v1/x HTTP/1.1\r\nContent-Length: 2\r\nX-A: b\r\n\r\n{}GET / HTTP/1.1\r\n\r\n",
        )
        .await;
        let request = request.unwrap();
        assert_eq!(request.method, "POST");
        assert_eq!(request.path, "/v1/x");
        assert_eq!(request.header("x-a"), Some("b"));
        assert_eq!(request.body, b"{}");
        assert!(!request.wants_close());
        assert_eq!(rest, b"GET / HTTP/1.1\r\n\r\n");
    }

    #[tokio::test]
    async fn reads_chunked_body() {
        let (request, _) = parse(
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n",
        )
        .await;
        let request = request.unwrap();
        assert_eq!(request.body, b"abcde");
        assert!(request.wants_close());
    }

    #[tokio::test]
    async fn clean_eof_between_requests_is_none() {
        let (request, _) = parse(b"").await;
        assert!(request.is_none());
    }
}
