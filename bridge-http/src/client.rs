//! A small HTTP/1.1 client for the bridge, used by `droid-executor run --via bridge` and
//! `bridge start|status`: one connection per request, the token when configured, JSON in and
//! out.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use droid_contract::ExecutionResult;
pub use http::Method;
use http::Request;
use http::header::{AUTHORIZATION, CONTENT_TYPE, HOST};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpStream;

use crate::error::BridgeError;
use crate::token::Token;

/// Time to connect: the bridge is local.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Whether something accepts connections on `addr` (seed 000's socket check,
/// docs/architecture.md#origin).
pub async fn probe(addr: SocketAddr) -> bool {
    matches!(
        tokio::time::timeout(Duration::from_secs(1), TcpStream::connect(addr)).await,
        Ok(Ok(_))
    )
}

/// A client of the bridge at one address.
#[derive(Debug, Clone)]
pub struct Client {
    addr: SocketAddr,
    token: Option<Token>,
}

impl Client {
    /// A client of the bridge at `addr`, sending `token` when given.
    pub fn new(addr: SocketAddr, token: Option<Token>) -> Self {
        Self { addr, token }
    }

    fn fail(&self, message: impl Into<String>) -> BridgeError {
        BridgeError::Connect {
            addr: self.addr,
            message: message.into(),
        }
    }

    /// Send `method path` with an optional JSON body; the status and the whole answer body.
    /// `timeout` bounds the whole exchange.
    ///
    /// # Errors
    /// [`BridgeError::Connect`] when the bridge cannot be reached, the connection breaks or
    /// the time is up.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        timeout: Duration,
    ) -> Result<(u16, Bytes), BridgeError> {
        let exchange = async {
            let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(self.addr))
                .await
                .map_err(|_| self.fail("connection timed out"))?
                .map_err(|e| self.fail(format!("cannot connect: {e}")))?;
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .map_err(|e| self.fail(format!("handshake: {e}")))?;
            let driver = tokio::spawn(conn);
            let mut req = Request::builder()
                .method(method)
                .uri(path)
                .header(HOST, self.addr.to_string());
            if let Some(t) = &self.token {
                req = req.header(AUTHORIZATION, format!("Bearer {}", t.expose()));
            }
            let bytes = match body {
                Some(v) => {
                    req = req.header(CONTENT_TYPE, "application/json");
                    Bytes::from(serde_json::to_vec(v).map_err(|e| self.fail(e.to_string()))?)
                }
                None => Bytes::new(),
            };
            let req = req
                .body(Full::new(bytes))
                .map_err(|e| self.fail(e.to_string()))?;
            let res = sender
                .send_request(req)
                .await
                .map_err(|e| self.fail(format!("no answer: {e}")))?;
            let status = res.status().as_u16();
            let body = res
                .into_body()
                .collect()
                .await
                .map_err(|e| self.fail(format!("answer cut off: {e}")))?
                .to_bytes();
            driver.abort();
            Ok((status, body))
        };
        tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| self.fail(format!("no answer within {} s", timeout.as_secs())))?
    }

    /// `GET /health`, parsed.
    ///
    /// # Errors
    /// As [`Client::send`], and [`BridgeError::Answer`] for anything but 200 with JSON.
    pub async fn health(&self) -> Result<Value, BridgeError> {
        let (status, body) = self
            .send(Method::GET, "/health", None, Duration::from_secs(10))
            .await?;
        let v: Value = serde_json::from_slice(&body).map_err(|e| self.answer(status, e))?;
        if status == 200 {
            Ok(v)
        } else {
            Err(self.refused(status, &v))
        }
    }

    /// `POST /execute`: the result (for 200 and for 400, whose body is an `error` result).
    /// `timeout` should exceed the run's own budget.
    ///
    /// # Errors
    /// As [`Client::send`], and [`BridgeError::Answer`] for any other status (429, 401, …)
    /// with the bridge's message.
    pub async fn execute(
        &self,
        request: &Value,
        timeout: Duration,
    ) -> Result<ExecutionResult, BridgeError> {
        let (status, body) = self
            .send(Method::POST, "/execute", Some(request), timeout)
            .await?;
        if status == 200 || status == 400 {
            return serde_json::from_slice(&body).map_err(|e| self.answer(status, e));
        }
        let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        Err(self.refused(status, &v))
    }

    /// `POST /tasks`: `Ok(task id)` when started, `Err(result)` for an invalid request (the
    /// 400 body is an `error` result).
    ///
    /// # Errors
    /// As [`Client::send`], and [`BridgeError::Answer`] for any other status with the bridge's
    /// message.
    pub async fn submit(
        &self,
        request: &Value,
    ) -> Result<Result<String, ExecutionResult>, BridgeError> {
        let (status, body) = self
            .send(
                Method::POST,
                "/tasks",
                Some(request),
                Duration::from_secs(30),
            )
            .await?;
        match status {
            202 => {
                let v: Value = serde_json::from_slice(&body).map_err(|e| self.answer(status, e))?;
                v["task_id"]
                    .as_str()
                    .map(|id| Ok(id.to_owned()))
                    .ok_or_else(|| BridgeError::Answer {
                        addr: self.addr,
                        status,
                        message: format!("no task_id in {v}"),
                    })
            }
            400 => serde_json::from_slice(&body)
                .map(Err)
                .map_err(|e| self.answer(status, e)),
            _ => {
                let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                Err(self.refused(status, &v))
            }
        }
    }

    fn answer(&self, status: u16, e: serde_json::Error) -> BridgeError {
        BridgeError::Answer {
            addr: self.addr,
            status,
            message: format!("the answer is not the expected JSON: {e}"),
        }
    }

    fn refused(&self, status: u16, v: &Value) -> BridgeError {
        let message = v["error"]["message"]
            .as_str()
            .map_or_else(|| v.to_string(), str::to_owned);
        BridgeError::Answer {
            addr: self.addr,
            status,
            message,
        }
    }
}
