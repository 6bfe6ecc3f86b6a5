//! Expired task results, removed when a front-end starts (`run`, `tasks list`, `serve`).

/// Remove expired task results (every front-end does this at start-up, at most once a minute
/// per store: see [`droid_exec::Tasks::clean_if_due`]); a store that cannot be read is reported
/// once and does not stop the command.
pub(crate) async fn clean_expired(tasks: &droid_exec::Tasks) {
    if let Err(e) = tasks.clean_if_due().await {
        eprintln!("droid-executor: warning: cleaning expired tasks: {e}");
    }
}
