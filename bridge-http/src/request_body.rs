//! Reading a request body: refused from `Content-Length` alone when it announces more than the
//! limit (413 before a byte of it is read), cut off at the limit when it comes chunked, and
//! bounded in time so a stalled client cannot hold a connection (408).

use std::time::Duration;

use bytes::Bytes;
use http::header::CONTENT_LENGTH;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};

use crate::reply::{Body, error};

fn too_large(limit: usize) -> Response<Body> {
    error(
        StatusCode::PAYLOAD_TOO_LARGE,
        "body_too_large",
        format!(
            "the body is larger than the limit of {limit} bytes (body_limit); send the context \
             as file paths, not file contents"
        ),
    )
}

/// The whole body of `req`, or the answer to send instead.
pub(crate) async fn read<B>(
    req: Request<B>,
    limit: usize,
    timeout: Duration,
) -> Result<Bytes, Response<Body>>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let announced = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if announced.is_some_and(|n| n > limit as u64) {
        return Err(too_large(limit));
    }
    let body = Limited::new(req.into_body(), limit);
    match tokio::time::timeout(timeout, body.collect()).await {
        Err(_) => Err(error(
            StatusCode::REQUEST_TIMEOUT,
            "body_timeout",
            format!("the body did not arrive within {} s", timeout.as_secs_f64()),
        )),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(too_large(limit)),
        Ok(Err(e)) => Err(error(
            StatusCode::BAD_REQUEST,
            "body_unreadable",
            format!("the body could not be read: {e}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::Full;

    fn req(body: &'static [u8], len: Option<&str>) -> Request<Full<Bytes>> {
        let mut b = Request::builder().method("POST").uri("/execute");
        if let Some(l) = len {
            b = b.header("content-length", l);
        }
        b.body(Full::new(Bytes::from_static(body))).unwrap()
    }

    #[tokio::test]
    async fn limits() {
        let t = Duration::from_secs(1);
        assert_eq!(read(req(b"{}", None), 10, t).await.unwrap(), "{}");
        let r = read(req(b"0123456789ab", None), 10, t).await.unwrap_err();
        assert_eq!(r.status(), 413);
        // refused from the header alone, whatever the body
        let r = read(req(b"{}", Some("11")), 10, t).await.unwrap_err();
        assert_eq!(r.status(), 413);
    }
}
