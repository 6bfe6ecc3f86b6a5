//! Turning a POST body into an admitted request, or the answer that says why not: 415 for a
//! body that is not declared JSON, 413/408 from the body reader, and 400 with an `error`
//! ExecutionResult listing every violation for bad JSON or a contract violation.

use bytes::Bytes;
use droid_contract::{ExecutionRequest, ExecutionResult, Violation, Violations};
use http::{Request, Response, StatusCode};
use serde_json::Value;

use crate::guard::require_json;
use crate::reply::{Body, json};
use crate::request_body;
use crate::state::Bridge;

/// The request in `req`'s body, admitted by the engine (every contract and host rule).
pub(crate) async fn admit<B>(
    bridge: &Bridge,
    req: Request<B>,
) -> Result<ExecutionRequest, Response<Body>>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    if let Some(refusal) = require_json(req.headers()) {
        return Err(refusal);
    }
    let cfg = bridge.config();
    let bytes = request_body::read(req, cfg.body_limit, cfg.body_timeout).await?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
        let v = Violations(vec![Violation::new(
            "$",
            format!("the body is not valid JSON: {e}"),
        )]);
        json(
            StatusCode::BAD_REQUEST,
            &ExecutionResult::invalid_request(None, &v),
        )
    })?;
    bridge.engine().admit(&value).map_err(|v| {
        let task_id = value
            .get("task_id")
            .and_then(Value::as_str)
            .map(str::to_owned);
        json(
            StatusCode::BAD_REQUEST,
            &ExecutionResult::invalid_request(task_id, &v),
        )
    })
}
