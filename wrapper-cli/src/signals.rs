//! Signals for the commands that run something: SIGINT, SIGTERM and SIGHUP cancel it (`run`,
//! `ask`, a background task's `worker`) or stop the server (`mcp`, `acp`, `serve`); a second one
//! exits at once.

use tokio_util::sync::CancellationToken;

/// Cancel the run on SIGINT (Ctrl-C), SIGTERM or SIGHUP; a second one exits at once. droid runs in its own process group, so
/// the terminal's signals never reach it: only a cancel stops it and whatever it started. The
/// handlers are installed before the run starts, so there is no window where a signal kills us
/// and leaves droid behind.
pub(crate) fn cancel_on_signals(
    cancel: CancellationToken,
    then: &'static str,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut hup = signal(SignalKind::hangup())?;
    Ok(tokio::spawn(async move {
        let name = tokio::select! {
            _ = int.recv() => "interrupted",
            _ = term.recv() => "terminated",
            _ = hup.recv() => "hung up",
        };
        eprintln!("\ndroid-executor: {name}; {then} (a second signal exits at once)");
        cancel.cancel();
        // a second signal: the user will not wait for the clean stop. droid dies with us (its
        // parent-death signal); what it started in a session of its own may survive.
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
            _ = hup.recv() => {}
        }
        eprintln!("droid-executor: second signal; exiting now");
        std::process::exit(130);
    }))
}
