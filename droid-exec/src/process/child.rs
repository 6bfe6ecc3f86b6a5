//! A child the engine supervises, whichever way it was started: by tokio's spawn
//! ([`crate::process::spawn`]), or straight into a cgroup leaf ([`crate::process::spawn::leaf`]).

use std::process::ExitStatus;

use tokio::io::AsyncRead;

use crate::process::spawn::leaf::LeafChild;

/// A child's output stream, whichever kind of child it is.
pub(crate) type Output = Box<dyn AsyncRead + Send + Unpin>;

/// A supervised child.
#[derive(Debug)]
pub(crate) enum RunChild {
    /// Started by tokio (killed when dropped unwaited).
    Tokio(tokio::process::Child),
    /// Started in a cgroup leaf (killed when dropped unwaited).
    Leaf(LeafChild),
}

impl RunChild {
    /// Its pid, until it has been waited for.
    pub(crate) fn id(&self) -> Option<u32> {
        match self {
            Self::Tokio(c) => c.id(),
            Self::Leaf(c) => c.id(),
        }
    }

    /// Wait for it to exit, and reap it.
    ///
    /// # Errors
    /// When waiting fails.
    pub(crate) async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        match self {
            Self::Tokio(c) => c.wait().await,
            Self::Leaf(c) => c.wait().await,
        }
    }

    /// Its exit status, if it has exited.
    ///
    /// # Errors
    /// When waiting fails.
    pub(crate) fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        match self {
            Self::Tokio(c) => c.try_wait(),
            Self::Leaf(c) => c.try_wait(),
        }
    }

    /// Its stdout, once.
    pub(crate) fn take_stdout(&mut self) -> Option<Output> {
        match self {
            Self::Tokio(c) => c.stdout.take().map(|o| Box::new(o) as Output),
            Self::Leaf(c) => c.stdout.take().map(|o| Box::new(o) as Output),
        }
    }

    /// Its stderr, once.
    pub(crate) fn take_stderr(&mut self) -> Option<Output> {
        match self {
            Self::Tokio(c) => c.stderr.take().map(|o| Box::new(o) as Output),
            Self::Leaf(c) => c.stderr.take().map(|o| Box::new(o) as Output),
        }
    }
}
