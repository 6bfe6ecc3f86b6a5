//! A worktree task's change: `POST /tasks/{id}/apply` (`?check=true` says what would happen
//! and changes nothing) and `POST /tasks/{id}/discard`. The engine decides (`Tasks::apply`,
//! `Tasks::discard`); the answer is a WorktreeAnswer: 200 when done (or, with `check`, when it
//! would apply cleanly), 409 on a conflict or a refusal (already applied, a run working there),
//! 404 for an unknown task. No body is read.

use droid_contract::{WorktreeAnswer, WorktreeOutcome};
use http::{Response, StatusCode};

use crate::reply::{Body, error, json};
use crate::state::Bridge;
use crate::task_routes::{engine_error, store};

/// The status an answer is sent with.
fn status(a: &WorktreeAnswer) -> StatusCode {
    match a.outcome {
        WorktreeOutcome::Applied | WorktreeOutcome::Clean | WorktreeOutcome::Discarded => {
            StatusCode::OK
        }
        WorktreeOutcome::Conflict | WorktreeOutcome::Refused => StatusCode::CONFLICT,
    }
}

/// `check` from the query: absent, `check=true` or `check=false`; anything else is refused.
fn check(query: Option<&str>) -> Result<bool, String> {
    let mut check = false;
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=').unwrap_or((pair, "")) {
            ("check", "true" | "1" | "") => check = true,
            ("check", "false" | "0") => check = false,
            ("check", other) => return Err(format!("check={other}: expected true or false")),
            (other, _) => {
                return Err(format!(
                    "unknown query parameter {other:?}; POST /tasks/{{id}}/apply takes only check"
                ));
            }
        }
    }
    Ok(check)
}

pub(crate) async fn apply(bridge: &Bridge, id: &str, query: Option<&str>) -> Response<Body> {
    let tasks = match store(bridge) {
        Ok(t) => t,
        Err(r) => return r,
    };
    let check = match check(query) {
        Ok(c) => c,
        Err(why) => return error(StatusCode::BAD_REQUEST, "bad_query", why),
    };
    match tasks.apply(id, check).await {
        Ok(a) => json(status(&a), &a),
        Err(e) => engine_error(&e),
    }
}

pub(crate) async fn discard(bridge: &Bridge, id: &str) -> Response<Body> {
    let tasks = match store(bridge) {
        Ok(t) => t,
        Err(r) => return r,
    };
    match tasks.discard(id).await {
        Ok(a) => json(status(&a), &a),
        Err(e) => engine_error(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_says_check_or_nothing() {
        assert_eq!(check(None), Ok(false));
        assert_eq!(check(Some("check=true")), Ok(true));
        assert_eq!(check(Some("check")), Ok(true));
        assert_eq!(check(Some("check=false")), Ok(false));
        assert!(check(Some("check=maybe")).is_err());
        assert!(check(Some("force=1")).unwrap_err().contains("force"));
    }
}
