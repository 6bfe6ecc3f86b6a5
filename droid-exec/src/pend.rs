//! Which task a pend (or a cancel) means when its caller names one (seed 002's pend,
//! docs/architecture.md#origin): the one answer for `droid-executor pend` and `cancel` and the
//! MCP tools `pend`, `pend_<p>` and `cancel`, `cancel_<p>`. A named id must be a task id of the
//! store's shape ([`TaskKey::parse`]), and when the caller also names a provider, one of that
//! provider's tasks: asking codex's pend for a claude task is a mistake worth a clear answer, not
//! a silent answer about another agent. Without an id each front-end takes its own latest task
//! (the CLI: the provider's latest in the repository; MCP: the session's own); that differs by
//! design and stays with them.

use droid_contract::ProviderId;

use crate::error::EngineError;
use crate::task_key::TaskKey;

/// Why a named id is not a task the pend can mean.
#[derive(Debug)]
pub enum NotPendable {
    /// Not a task id at all: the store's own answer for it ([`EngineError::NoSuchTask`]).
    Malformed(EngineError),
    /// A task of another provider than the one named; the front-end says which tool or command
    /// reaches it.
    OtherProvider {
        /// The provider whose task it is.
        owner: ProviderId,
        /// The provider the caller named.
        asked: ProviderId,
    },
}

/// The task `id` names, for a pend of `provider` (`None`: any provider's task).
///
/// # Errors
/// [`NotPendable`]: not a task id, or a task of another provider than `provider`.
pub fn named_task(id: &str, provider: Option<ProviderId>) -> Result<TaskKey, NotPendable> {
    let key = TaskKey::parse(id).map_err(NotPendable::Malformed)?;
    match provider {
        Some(asked) if key.provider() != asked => Err(NotPendable::OtherProvider {
            owner: key.provider(),
            asked,
        }),
        _ => Ok(key),
    }
}

/// The provider whose task `id` is, when `id` is a task id.
pub fn provider_of(id: &str) -> Option<ProviderId> {
    TaskKey::parse(id).ok().map(|k| k.provider())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_task_must_be_a_task_of_the_named_provider() {
        let id = "codex-1795349045-3fa2";
        assert_eq!(
            named_task(id, Some(ProviderId::Codex))
                .map(|k| k.as_str().to_owned())
                .ok(),
            Some(id.to_owned())
        );
        assert!(named_task(id, None).is_ok());
        assert!(matches!(
            named_task(id, Some(ProviderId::Claude)),
            Err(NotPendable::OtherProvider {
                owner: ProviderId::Codex,
                asked: ProviderId::Claude
            })
        ));
        assert!(matches!(
            named_task("codex-1", None),
            Err(NotPendable::Malformed(EngineError::NoSuchTask { .. }))
        ));
        assert_eq!(provider_of(id), Some(ProviderId::Codex));
        assert_eq!(provider_of("gpt-1795349045-3fa2"), None);
    }
}
