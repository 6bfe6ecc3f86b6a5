//! Building answers: JSON bodies, the error object every refusal carries, and the body type
//! shared by whole answers and event streams.

use std::convert::Infallible;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderValue};
use http::{Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use serde::Serialize;
use serde_json::json;

/// Every answer's body: a whole buffer, or a stream (server-sent events).
pub(crate) type Body = BoxBody<Bytes, Infallible>;

/// A whole body.
pub(crate) fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed()
}

/// `value` as a JSON answer with `status`.
pub(crate) fn json<T: Serialize>(status: StatusCode, value: &T) -> Response<Body> {
    let mut text = serde_json::to_vec(value).unwrap_or_else(|e| {
        // a contract type always serializes; say so rather than panic if one day it does not
        json!({"error": {"status": 500, "code": "internal", "message": e.to_string()}})
            .to_string()
            .into_bytes()
    });
    text.push(b'\n');
    let mut res = Response::new(full(text));
    *res.status_mut() = status;
    res.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    res
}

/// A refusal: `{"error": {"status", "code", "message"}}` with `status`. `code` is a stable
/// machine name (`not_found`, `body_too_large`, …); `message` says what to do.
pub(crate) fn error(status: StatusCode, code: &str, message: impl Into<String>) -> Response<Body> {
    json(
        status,
        &json!({"error": {"status": status.as_u16(), "code": code, "message": message.into()}}),
    )
}

/// [`error`] with a `Retry-After` of `seconds` (429 and 503).
pub(crate) fn retry_later(
    status: StatusCode,
    code: &str,
    message: impl Into<String>,
    seconds: u64,
) -> Response<Body> {
    let mut res = error(status, code, message);
    if let Ok(v) = HeaderValue::from_str(&seconds.to_string()) {
        res.headers_mut().insert(http::header::RETRY_AFTER, v);
    }
    res
}

/// 503 while the bridge shuts down.
pub(crate) fn shutting_down(retry_after: u64) -> Response<Body> {
    retry_later(
        StatusCode::SERVICE_UNAVAILABLE,
        "shutting_down",
        "the bridge is shutting down; retry once it is back",
        retry_after,
    )
}

/// 503 for a long request (an event stream, a sync run) when the connections left are the
/// reserve of short requests.
pub(crate) fn connections_reserved(long_cap: usize, retry_after: u64) -> Response<Body> {
    retry_later(
        StatusCode::SERVICE_UNAVAILABLE,
        "connections_reserved",
        format!(
            "{long_cap} long requests (event streams and sync runs) are going, as many as this \
             bridge takes: the connections left are kept for short requests (/health, /metrics, \
             task status); retry later"
        ),
        retry_after,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn error_bodies_name_the_problem() {
        let res = retry_later(StatusCode::TOO_MANY_REQUESTS, "queue_full", "later", 7);
        assert_eq!(res.status(), 429);
        assert_eq!(res.headers()["retry-after"], "7");
        assert_eq!(res.headers()["content-type"], "application/json");
        let body = res.into_body().collect().await.unwrap().to_bytes();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            v,
            json!({"error": {"status": 429, "code": "queue_full", "message": "later"}})
        );
    }
}
