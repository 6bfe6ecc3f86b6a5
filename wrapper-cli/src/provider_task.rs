//! Which task a provider's command means (`pend`, `cancel`): the id given, checked against the
//! provider ([`droid_exec::pend::named_task`]), or that provider's latest task in the
//! repository the directory lies in, never another repository's.

use std::path::{Path, PathBuf};

use droid_contract::ProviderId;
use droid_exec::Tasks;
use droid_exec::pend::NotPendable;
use droid_exec::tasks::repository_of;

/// The directory whose repository a command without a task id is about: `repo`, else the
/// current directory.
pub(crate) fn repository_dir(repo: Option<&Path>) -> Result<PathBuf, String> {
    match repo {
        Some(dir) => Ok(std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf())),
        None => std::env::current_dir().map_err(|e| {
            format!("cannot tell the current directory ({e}); pass --repo or the task id")
        }),
    }
}

/// The task `args` names: its id checked against the provider, or the provider's latest task in
/// the repository `dir` lies in (`pend` and `cancel` alike).
pub(crate) async fn resolve(
    tasks: &Tasks,
    provider: ProviderId,
    id: Option<&str>,
    dir: &Path,
) -> Result<String, String> {
    match id {
        Some(id) => match droid_exec::pend::named_task(id, Some(provider)) {
            Ok(key) => Ok(key.as_str().to_owned()),
            Err(NotPendable::Malformed(e)) => Err(e.to_string()),
            Err(NotPendable::OtherProvider { owner, .. }) => Err(format!(
                "task {id} is a {owner} task, not a {provider} one; fetch it with: \
                 droid-executor pend {owner} {id}"
            )),
        },
        None => match tasks.latest_in_repository(provider, dir).await {
            Ok(Some(rec)) => Ok(rec.task_id),
            Ok(None) => Err(format!(
                "no {provider} tasks yet in the repository {}; start one there with: \
                 droid-executor ask {provider} \"MESSAGE\" --background (a task of another \
                 repository: droid-executor pend {provider} TASK_ID)",
                repository_of(dir).display()
            )),
            Err(e) => Err(e.to_string()),
        },
    }
}
