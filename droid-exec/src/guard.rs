//! A run's guardian: a small process that outlives the front-end running the run, and ends
//! whatever the run left behind once that front-end is gone, however it went (SIGKILL included).
//!
//! droid gets a parent-death signal ([`crate::spawn`]), but the commands it runs under `setsid`
//! do not, and a front-end killed with SIGKILL sweeps nothing. So before droid starts, the engine
//! starts `<supervisor program> guard <marker>` ([`EngineConfig::supervisor`], the front-end's
//! own executable) in a session of its own, with an empty environment (no secrets, and no marker
//! of its own) and its stdin a pipe whose only writer is the engine. The guardian reads that pipe
//! until end-of-file, which comes when the run ends normally (the engine lets go of it, and the
//! sweep finds nothing) or when the front-end dies (the kernel closes the writer), and then kills
//! every process carrying the run's marker ([`crate::sweep`]), verification commands included.
//!
//! Key choice: a guardian per run rather than a registry of runs in the task store swept by the
//! next front-end or a janitor: cleanup is prompt (users expect a killed `droid-executor run` to
//! take its work with it, not the next command to), and it needs no store. It is the first step
//! towards a per-run supervisor owning the whole tree (a child subreaper or a cgroup leaf), which
//! would replace the marker sweep. Without a supervisor program configured (the engine used as a
//! library) there is no guardian; the run's own sweeps still end everything when the caller
//! lives.
//!
//! [`EngineConfig::supervisor`]: crate::config::EngineConfig::supervisor

use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, ChildStdin};

use crate::error::EngineError;
use crate::spawn::{SpawnSpec, spawn};
use crate::sweep;

/// How long a guardian keeps killing what carries its marker.
const SWEEP_BUDGET: Duration = Duration::from_secs(10);

/// The subcommand of the supervisor program that runs a guardian.
pub const GUARD_COMMAND: &str = "guard";

/// A started guardian. Dropping it (the run ended, or its future was dropped) closes the pipe:
/// the guardian sweeps the marker and exits.
#[derive(Debug)]
pub(crate) struct Guardian {
    /// The writer of the guardian's stdin: held, never written.
    _pipe: ChildStdin,
    /// Detached: not killed on drop; tokio reaps it once it exits.
    _child: Child,
}

/// Start the guardian of the run marked `marker` with `program` (`<program> guard <marker>`).
///
/// # Errors
/// [`EngineError::Spawn`] when the program cannot be started.
pub(crate) fn start(program: &Path, marker: &str) -> Result<Guardian, EngineError> {
    let spec = SpawnSpec {
        program: program.to_path_buf(),
        args: vec![GUARD_COMMAND.into(), marker.into()],
        // holds no directory of the run busy
        cwd: "/".into(),
        env: Vec::new(),
        stdin_piped: true,
        detach_log: Some("/dev/null".into()),
    };
    let mut child = spawn(&spec)?;
    let pipe = child.stdin.take().ok_or_else(|| EngineError::Spawn {
        program: program.display().to_string(),
        source: std::io::Error::other("the guardian's stdin was not piped"),
    })?;
    Ok(Guardian {
        _pipe: pipe,
        _child: child,
    })
}

/// The guardian's body (`droid-executor guard <marker>`): wait for end-of-file on `owner` (the
/// owner's pipe; anything written is discarded), then kill every process marked `marker`.
/// Returns how many were still alive at the end (0 on success).
///
/// # Errors
/// [`EngineError::InvalidMarker`] for an empty marker or one holding `=` or a NUL (it would
/// match other runs' processes).
pub async fn guard<R: AsyncRead + Unpin>(marker: &str, mut owner: R) -> Result<usize, EngineError> {
    if marker.is_empty() || marker.contains(['=', '\0']) {
        return Err(EngineError::InvalidMarker(marker.to_owned()));
    }
    let mut buf = [0u8; 512];
    loop {
        match owner.read(&mut buf).await {
            // end-of-file, or the pipe broke: the owner is gone either way
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    Ok(sweep::sweep(marker, SWEEP_BUDGET).await.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_marker_that_would_match_other_runs_is_refused() {
        for marker in ["", "a=b", "a\0b"] {
            let err = guard(marker, tokio::io::empty()).await.unwrap_err();
            assert!(matches!(err, EngineError::InvalidMarker(_)), "{marker:?}");
        }
    }

    #[tokio::test]
    async fn the_owner_s_end_of_file_sweeps_the_marker() {
        let marker = format!("guard-test-{}", std::process::id());
        let spec = SpawnSpec {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), "setsid sleep 300 & wait".into()],
            cwd: std::env::temp_dir(),
            env: vec![
                (sweep::MARKER_VAR.into(), marker.clone().into()),
                ("PATH".into(), "/usr/bin:/bin".into()),
            ],
            stdin_piped: false,
            detach_log: None,
        };
        let _sh = spawn(&spec).unwrap();
        let until = std::time::Instant::now() + Duration::from_secs(10);
        while sweep::marked_pids(&marker).len() < 2 {
            assert!(
                std::time::Instant::now() < until,
                "sh and sleep never came up"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let (writer, reader) = tokio::io::duplex(64);
        let guarding = tokio::spawn({
            let marker = marker.clone();
            async move { guard(&marker, reader).await }
        });
        drop(writer);
        let left = tokio::time::timeout(Duration::from_secs(20), guarding)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(left, 0);
        assert_eq!(sweep::marked_pids(&marker), Vec::<i32>::new());
    }
}
