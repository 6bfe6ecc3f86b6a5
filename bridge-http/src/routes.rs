//! The routes: which handler a method and path reach, 404 for an unknown path and 405 (with
//! `Allow`) for a known path with another method.

use http::header::{ALLOW, HeaderValue};
use http::{Method, Response, StatusCode};

use crate::reply::{Body, error};

/// A request's destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    /// `POST /execute`
    Execute,
    /// `POST /tasks`
    Submit,
    /// `GET /tasks`
    List,
    /// `GET /tasks/{id}`
    Show(String),
    /// `DELETE /tasks/{id}`
    Cancel(String),
    /// `GET /tasks/{id}/events`
    Events(String),
    /// `POST /tasks/{id}/apply` (`?check=true`: say what would happen)
    Apply(String),
    /// `POST /tasks/{id}/discard`
    Discard(String),
    /// `GET /health`
    Health,
    /// `GET /metrics`
    Metrics,
    /// `GET /openapi.json`
    OpenApi,
    /// `POST /mcp`: an MCP message (Streamable HTTP)
    McpPost,
    /// `GET /mcp`: an MCP session's own event stream
    McpListen,
    /// `DELETE /mcp`: end an MCP session
    McpDelete,
}

/// Every path with the methods it takes, for 405's `Allow` (and the OpenAPI document's tests).
pub(crate) const PATHS: &[(&str, &[&str])] = &[
    ("/execute", &["POST"]),
    ("/tasks", &["GET", "POST"]),
    ("/tasks/{id}", &["GET", "DELETE"]),
    ("/tasks/{id}/events", &["GET"]),
    ("/tasks/{id}/apply", &["POST"]),
    ("/tasks/{id}/discard", &["POST"]),
    ("/health", &["GET"]),
    ("/metrics", &["GET"]),
    ("/openapi.json", &["GET"]),
    ("/mcp", &["GET", "POST", "DELETE"]),
];

impl Route {
    /// Where `method path` goes, or the 404/405 answer.
    pub(crate) fn find(method: &Method, path: &str) -> Result<Self, Response<Body>> {
        // HEAD is GET without the body (RFC 9110 §9.3.2; hyper sends no body for HEAD)
        let method = if method == Method::HEAD {
            &Method::GET
        } else {
            method
        };
        let segs: Vec<&str> = path.strip_prefix('/').unwrap_or(path).split('/').collect();
        let (template, route) = match segs.as_slice() {
            ["execute"] => (
                "/execute",
                (method == Method::POST).then_some(Route::Execute),
            ),
            ["tasks"] => (
                "/tasks",
                match *method {
                    Method::GET => Some(Route::List),
                    Method::POST => Some(Route::Submit),
                    _ => None,
                },
            ),
            ["tasks", id] if !id.is_empty() => (
                "/tasks/{id}",
                match *method {
                    Method::GET => Some(Route::Show((*id).to_owned())),
                    Method::DELETE => Some(Route::Cancel((*id).to_owned())),
                    _ => None,
                },
            ),
            ["tasks", id, "events"] if !id.is_empty() => (
                "/tasks/{id}/events",
                (method == Method::GET).then(|| Route::Events((*id).to_owned())),
            ),
            ["tasks", id, "apply"] if !id.is_empty() => (
                "/tasks/{id}/apply",
                (method == Method::POST).then(|| Route::Apply((*id).to_owned())),
            ),
            ["tasks", id, "discard"] if !id.is_empty() => (
                "/tasks/{id}/discard",
                (method == Method::POST).then(|| Route::Discard((*id).to_owned())),
            ),
            ["health"] => ("/health", (method == Method::GET).then_some(Route::Health)),
            ["metrics"] => (
                "/metrics",
                (method == Method::GET).then_some(Route::Metrics),
            ),
            ["openapi.json"] => (
                "/openapi.json",
                (method == Method::GET).then_some(Route::OpenApi),
            ),
            ["mcp"] => (
                "/mcp",
                match *method {
                    Method::POST => Some(Route::McpPost),
                    Method::GET => Some(Route::McpListen),
                    Method::DELETE => Some(Route::McpDelete),
                    _ => None,
                },
            ),
            _ => {
                return Err(error(
                    StatusCode::NOT_FOUND,
                    "not_found",
                    format!(
                        "no route {path}; the routes are POST /execute, POST|GET /tasks, \
                         GET|DELETE /tasks/{{id}}, GET /tasks/{{id}}/events, \
                         POST /tasks/{{id}}/apply, POST /tasks/{{id}}/discard, GET /health, \
                         GET /metrics, GET /openapi.json, POST|GET|DELETE /mcp"
                    ),
                ));
            }
        };
        route.ok_or_else(|| {
            let allow = PATHS
                .iter()
                .find(|(p, _)| *p == template)
                .map(|(_, m)| {
                    let mut all: Vec<&str> = m.to_vec();
                    if all.contains(&"GET") {
                        all.insert(
                            all.iter().position(|x| *x == "GET").unwrap_or(0) + 1,
                            "HEAD",
                        );
                    }
                    all.join(", ")
                })
                .unwrap_or_default();
            let mut res = error(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                format!("{method} is not allowed on {template}; use {allow}"),
            );
            if let Ok(v) = HeaderValue::from_str(&allow) {
                res.headers_mut().insert(ALLOW, v);
            }
            res
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_routes() {
        let ok = |m: Method, p: &str| Route::find(&m, p).unwrap();
        let st = |m: Method, p: &str| Route::find(&m, p).unwrap_err().status().as_u16();
        assert_eq!(ok(Method::POST, "/execute"), Route::Execute);
        assert_eq!(ok(Method::GET, "/tasks"), Route::List);
        assert_eq!(ok(Method::POST, "/tasks"), Route::Submit);
        assert_eq!(
            ok(Method::GET, "/tasks/droid-1-abcd"),
            Route::Show("droid-1-abcd".into())
        );
        assert_eq!(
            ok(Method::DELETE, "/tasks/droid-1-abcd"),
            Route::Cancel("droid-1-abcd".into())
        );
        assert_eq!(
            ok(Method::GET, "/tasks/x/events"),
            Route::Events("x".into())
        );
        assert_eq!(st(Method::GET, "/execute"), 405);
        assert_eq!(
            ok(Method::POST, "/tasks/droid-1-abcd/apply"),
            Route::Apply("droid-1-abcd".into())
        );
        assert_eq!(
            ok(Method::POST, "/tasks/droid-1-abcd/discard"),
            Route::Discard("droid-1-abcd".into())
        );
        assert_eq!(st(Method::GET, "/tasks/droid-1-abcd/apply"), 405);
        assert_eq!(st(Method::PUT, "/tasks/x"), 405);
        assert_eq!(st(Method::GET, "/nope"), 404);
        assert_eq!(st(Method::GET, "/tasks/"), 404);
        assert_eq!(st(Method::GET, "/execute/extra"), 404);
        let r = Route::find(&Method::GET, "/execute").unwrap_err();
        assert_eq!(r.headers()["allow"], "POST");
        let r = Route::find(&Method::PATCH, "/tasks").unwrap_err();
        assert_eq!(r.headers()["allow"], "GET, HEAD, POST");
        assert_eq!(ok(Method::HEAD, "/health"), Route::Health);
        assert_eq!(ok(Method::POST, "/mcp"), Route::McpPost);
        assert_eq!(ok(Method::GET, "/mcp"), Route::McpListen);
        assert_eq!(ok(Method::DELETE, "/mcp"), Route::McpDelete);
        let r = Route::find(&Method::PUT, "/mcp").unwrap_err();
        assert_eq!(r.headers()["allow"], "GET, HEAD, POST, DELETE");
        assert_eq!(st(Method::POST, "/mcp/"), 404);
    }
}
