//! A short-lived command run to completion ([`capture`]): its exit code and the tails of its
//! output, killed at a deadline with everything it started (its group, its cgroup leaf, or its
//! marker).

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use crate::error::EngineError;
use crate::excerpt::Tail;
use crate::process::cgroup::Leaf;
use crate::process::child::RunChild;
use crate::process::sandbox::Confinement;
use crate::process::spawn::leaf::{IntoError, spawn_into};
use crate::process::spawn::{signal_group, spawn_confined, terminate_group};
use crate::process::spawn_spec::SpawnSpec;
use crate::process::sweep;

/// How long the output pipes of a finished command may stay open once its process group is
/// killed before the holder is looked for by its marker (closing takes well under a millisecond).
const PIPES_SETTLE: Duration = Duration::from_millis(100);

/// A finished short-lived command: exit code, output tails, timing.
#[derive(Debug)]
pub struct Captured {
    /// Exit code; `None` when it was killed (deadline) or died from a signal.
    pub code: Option<i32>,
    /// The deadline passed and the command was killed.
    pub timed_out: bool,
    /// The last bytes of stdout.
    pub stdout: Tail,
    /// The last bytes of stderr.
    pub stderr: Tail,
    /// How long it ran.
    pub duration: Duration,
}

/// Run `spec` to completion with `input` on stdin, keeping the last `keep` bytes of each output
/// stream, killing it (and everything marked with `marker`) when `timeout` passes.
///
/// Once the command exits its process group is killed; when its output pipes are still held
/// after that (by a child that left the group with `setsid`), everything marked with `marker` is
/// killed before they are drained. A caller that must leave nothing behind even when nothing
/// holds the pipes sweeps `marker` itself afterwards ([`crate::run::verify`] does).
///
/// # Errors
/// [`EngineError::Spawn`] when the program cannot be started.
pub async fn capture(
    spec: &SpawnSpec,
    input: Option<&[u8]>,
    timeout: Duration,
    keep: usize,
    marker: &str,
) -> Result<Captured, EngineError> {
    capture_confined(spec, input, timeout, keep, marker, None, None).await
}

/// [`capture`], the command confined by `confine` ([`spawn_confined`]). With `leaf` the command
/// runs in that cgroup (born there: [`crate::process::spawn::leaf`]) and, once it exited or was stopped, everything in the leaf
/// is killed before the pipes are drained (`setsid` children included, marked or not); the
/// marker is swept only if the leaf could not be emptied.
///
/// # Errors
/// [`EngineError::Spawn`] when the program cannot be started or confined.
pub(crate) async fn capture_confined(
    spec: &SpawnSpec,
    input: Option<&[u8]>,
    timeout: Duration,
    keep: usize,
    marker: &str,
    confine: Option<&Confinement>,
    leaf: Option<&Leaf>,
) -> Result<Captured, EngineError> {
    let started = Instant::now();
    let mut spec = spec.clone();
    spec.stdin_piped = input.is_some();
    let mut child = match leaf {
        // no input for a command in a leaf (verification has none)
        Some(leaf) => match spawn_into(&spec, confine, leaf.dir()) {
            Ok(c) => RunChild::Leaf(c),
            Err(IntoError::Spawn(e)) => return Err(e),
            Err(IntoError::Refused(source)) => {
                return Err(EngineError::Spawn {
                    program: spec.program.display().to_string(),
                    source,
                });
            }
        },
        None => RunChild::Tokio(spawn_confined(&spec, confine)?),
    };
    let mut stdin = match &mut child {
        RunChild::Tokio(c) => c.stdin.take(),
        RunChild::Leaf(_) => None,
    };
    let input = input.map(<[u8]>::to_vec);
    let feed = async move {
        if let (Some(mut w), Some(bytes)) = (stdin.take(), input) {
            // a child that exits without reading its input is not an error here
            let _ = w.write_all(&bytes).await;
            let _ = w.shutdown().await;
        }
    };
    let out = read_tail(child.take_stdout(), keep);
    let err = read_tail(child.take_stderr(), keep);
    let mut readers = tokio::spawn(async move { tokio::join!(out, err) });
    let pid = child.id();
    let (status, timed_out) = tokio::select! {
        (status, ()) = async { tokio::join!(child.wait(), feed) } => (status.ok(), false),
        () = tokio::time::sleep(timeout) => (terminate_group(&mut child, Duration::from_secs(2)).await, true),
    };
    // the command is gone; what it left (`server &`, a `setsid` child) goes with it, before the
    // pipes are drained, so a background child holding them costs nothing
    let ended = match leaf {
        Some(leaf) => leaf.end(crate::process::cgroup::END_BUDGET).await,
        None => {
            if let Some(pid) = pid {
                signal_group(pid, Signal::SIGKILL);
            }
            false
        }
    };
    if timed_out && !ended {
        sweep::sweep(marker, Duration::from_secs(3)).await;
    }
    let (stdout, stderr) = match tokio::time::timeout(PIPES_SETTLE, &mut readers).await {
        Ok(Ok(pair)) => pair,
        Ok(Err(_)) => (Tail::new(keep), Tail::new(keep)),
        Err(_) => {
            // still open: held by something outside the group (a `setsid` child); end it too
            sweep::sweep(marker, Duration::from_secs(3)).await;
            // whatever still holds the pipes then (no marker left) must not hold us forever
            match tokio::time::timeout(Duration::from_secs(2), readers).await {
                Ok(Ok(pair)) => pair,
                _ => (Tail::new(keep), Tail::new(keep)),
            }
        }
    };
    Ok(Captured {
        code: if timed_out {
            None
        } else {
            status.and_then(|s| s.code())
        },
        timed_out,
        stdout,
        stderr,
        duration: started.elapsed(),
    })
}

/// Read a stream to its end, keeping its last `keep` bytes.
pub(crate) async fn read_tail<R: AsyncRead + Unpin>(stream: Option<R>, keep: usize) -> Tail {
    let mut tail = Tail::new(keep);
    let Some(mut r) = stream else { return tail };
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => tail.push(&buf[..n]),
        }
    }
    tail
}
