//! The processes of an interactive droid session: droid started so that the session owns all it
//! starts, the end of what each turn started, and the end of everything when the session closes.
//!
//! As for a one-shot run ([`crate::process::guard`], [`crate::process::cgroup`]): where the front-end may
//! make cgroups, the session's droid is born in a cgroup leaf of its own (one per session), so
//! everything its tools start (`setsid`, double forks, `env -i`) is in that leaf and cannot leave
//! it (the cgroup file system is outside the write confinement); elsewhere droid runs under a
//! supervisor (`droid-executor guard`), a child subreaper, so every process of droid's tree that
//! loses its parent is re-parented to it and found from its `/proc/<pid>/task/*/children`. Only
//! without a supervisor program (the engine used as a library) is droid our plain child, with the
//! marker sweep as its only net (it misses what dropped the marker).
//!
//! droid lives across turns; what a turn starts is what droid's tools start, and droid 0.225.2
//! runs each command in a session of its own. So at the end of a turn every process of the tree
//! outside droid's own process group is killed (no process can join droid's group from another
//! session), again until none is left, and only then is the repository measured. droid and
//! what it keeps in its own group (an MCP server) stay for the next turn.
//!
//! droid reads our requests on its stdin, and neither a leaf's spawn nor the supervisor hands a
//! pipe down; so droid's stdin is a FIFO in the session's private directory, which we hold open
//! for reading and writing while droid (or its supervisor) opens it, and write through a second,
//! write-only descriptor. Once droid has answered a request (it read it there), the first
//! descriptor is closed and the FIFO unlinked ([`Fifo`]): from then on it is an ordinary pipe,
//! without a name, whose reader's end gives us `EPIPE`.

use std::collections::HashSet;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::AsyncWrite;

use crate::error::EngineError;
use crate::process::cgroup::END_BUDGET;
use crate::process::child::RunChild;
use crate::process::guard::{self, TreeControl};
use crate::process::sandbox::Confinement;
use crate::process::spawn::leaf::{IntoError, spawn_into};
use crate::process::spawn::{SpawnSpec, resolve_program, spawn_confined};
use crate::run::Engine;

/// What we write droid's requests to.
pub(crate) struct Input(pub(crate) Box<dyn AsyncWrite + Send + Unpin>);

impl std::fmt::Debug for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Input")
    }
}

/// droid started: the child (droid, or its supervisor), our hold on its whole tree (`None`:
/// droid is our plain child), its stdin, and the FIFO behind that stdin until droid has read it.
#[derive(Debug)]
pub(crate) struct Started {
    pub(crate) child: RunChild,
    pub(crate) tree: Option<TreeControl>,
    pub(crate) input: Option<Input>,
    pub(crate) fifo: Option<Fifo>,
}

/// droid's stdin while droid may not have opened it yet: the FIFO's name and a descriptor that
/// holds it open both ways. Dropped (closed and unlinked) once droid has answered a request.
#[derive(Debug)]
pub(crate) struct Fifo {
    path: PathBuf,
    _both: std::fs::File,
}

impl Fifo {
    /// A FIFO at `path` (mode 0600), held open both ways, and a write-only end of it.
    fn make(path: PathBuf) -> std::io::Result<(Self, Input)> {
        nix::unistd::mkfifo(
            &path,
            nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR,
        )?;
        let fifo = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(nix::libc::O_CLOEXEC)
            .open(&path)
            .map(|both| Self {
                path: path.clone(),
                _both: both,
            })
            .inspect_err(|_| {
                let _ = std::fs::remove_file(&path);
            })?;
        // a reader exists (our descriptor above): the write-only open does not fail
        let input = tokio::net::unix::pipe::OpenOptions::new().open_sender(&fifo.path)?;
        Ok((fifo, Input(Box::new(input))))
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Fifo {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Start `spec` (droid) for a session marked `marker`, confined by `confine`: born in a cgroup
/// leaf where the engine has a host, else under a supervisor where there is a supervisor program
/// and droid is a path, else as our plain child. `dir` is the session's private directory (the
/// FIFO's place).
///
/// # Errors
/// [`EngineError::Spawn`] when droid cannot be started.
pub(crate) fn start(
    engine: &Engine,
    spec: &SpawnSpec,
    confine: Option<&Confinement>,
    marker: &str,
    dir: &Path,
) -> Result<Started, EngineError> {
    let fifo_spec = |fifo: &Fifo| SpawnSpec {
        stdin_piped: false,
        stdin_file: Some(fifo.path().to_path_buf()),
        ..spec.clone()
    };
    let stdin_failed = |source| EngineError::Spawn {
        program: spec.program.display().to_string(),
        source,
    };
    if let Some(leaf) = engine.leaf() {
        let (fifo, input) = Fifo::make(dir.join("stdin")).map_err(stdin_failed)?;
        match spawn_into(&fifo_spec(&fifo), confine, leaf.dir()) {
            Ok(child) => {
                let group = child.id();
                return Ok(Started {
                    child: RunChild::Leaf(child),
                    tree: Some(TreeControl::Cgroup { leaf, group }),
                    input: Some(input),
                    fifo: Some(fifo),
                });
            }
            Err(IntoError::Spawn(e)) => return Err(e),
            Err(IntoError::Refused(why)) => {
                tracing::info!("this session uses a supervisor process, not a cgroup: {why}");
            }
        }
    }
    let supervisor = engine
        .config()
        .supervisor
        .as_deref()
        .filter(|_| resolve_program(&spec.program, None).is_some());
    if let Some(supervisor) = supervisor {
        let (fifo, input) = Fifo::make(dir.join("stdin")).map_err(stdin_failed)?;
        match guard::start_supervised(supervisor, marker, &fifo_spec(&fifo), confine) {
            Ok((child, tree)) => {
                return Ok(Started {
                    child: RunChild::Tokio(child),
                    tree: Some(tree),
                    input: Some(input),
                    fifo: Some(fifo),
                });
            }
            Err(e) => tracing::warn!("this session's droid runs without a supervisor: {e}"),
        }
    }
    let plain = SpawnSpec {
        stdin_piped: true,
        stdin_file: None,
        ..spec.clone()
    };
    let mut child = spawn_confined(&plain, confine)?;
    let input = child.stdin.take().map(|s| Input(Box::new(s)));
    Ok(Started {
        child: RunChild::Tokio(child),
        tree: None,
        input,
        fifo: None,
    })
}

/// What ending a turn's processes did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TurnEnded {
    /// Processes killed (what the turn started and left running).
    pub killed: usize,
    /// Processes still there when the budget ran out (none once proven).
    pub left: usize,
}

/// A process as `/proc/<pid>/stat` says: state, process group, start time.
#[derive(Debug, Clone, Copy)]
struct Stat {
    zombie: bool,
    group: i32,
    start: u64,
}

fn stat(pid: i32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // the command name (field 2) may hold spaces and parentheses: fields follow the last `)`
    let rest: Vec<&str> = text[text.rfind(')')? + 1..].split_whitespace().collect();
    // fields 3 (state), 5 (pgrp) and 22 (starttime), counted from 1
    Some(Stat {
        zombie: matches!(*rest.first()?, "Z" | "X"),
        group: rest.get(2)?.parse().ok()?,
        start: rest.get(19)?.parse().ok()?,
    })
}

/// The process group of `pid`.
pub(crate) fn process_group(pid: i32) -> Option<i32> {
    stat(pid).map(|s| s.group)
}

/// The live processes of the tree now, and droid's process group (whose members stay). `child`
/// is droid in a leaf, or droid's supervisor. `None` when the tree cannot be read.
fn members(tree: &TreeControl, child: u32) -> Option<(Vec<i32>, Option<i32>)> {
    match tree {
        TreeControl::Cgroup { leaf, group } => {
            let group = group.and_then(|g| i32::try_from(g).ok());
            leaf.pids().ok().map(|pids| (pids, group))
        }
        TreeControl::Supervisor(_) => {
            // droid is the supervisor's first child: everything else in its tree came later
            let direct = guard::children_of(child);
            let droid = direct
                .iter()
                .filter_map(|p| stat(*p).filter(|s| !s.zombie).map(|s| (s.start, *p)))
                .min()
                .map(|(_, p)| p);
            let mut all = direct;
            let mut i = 0;
            while i < all.len() {
                if let Ok(pid) = u32::try_from(all[i]) {
                    all.extend(guard::children_of(pid));
                }
                i += 1;
            }
            Some((all, droid))
        }
    }
}

/// End every process of `tree` outside droid's process group (droid itself and its group
/// stay), again until none is left or [`END_BUDGET`] passes. `child` is droid in a leaf, or
/// droid's supervisor.
pub(crate) async fn end_turn(tree: &TreeControl, child: u32) -> TurnEnded {
    let until = tokio::time::Instant::now() + END_BUDGET;
    let mut killed: HashSet<i32> = HashSet::new();
    let mut polls = 0_u32;
    loop {
        let Some((pids, droid)) = members(tree, child) else {
            return TurnEnded {
                killed: killed.len(),
                left: 1,
            };
        };
        let turn: Vec<i32> = pids
            .into_iter()
            .filter(|p| Some(*p) != droid)
            .filter(|p| match stat(*p) {
                // gone, or dead and waiting to be reaped
                None => false,
                Some(s) if s.zombie => false,
                Some(s) => Some(s.group) != droid,
            })
            .collect();
        if turn.is_empty() {
            return TurnEnded {
                killed: killed.len(),
                left: 0,
            };
        }
        if tokio::time::Instant::now() >= until {
            return TurnEnded {
                killed: killed.len(),
                left: turn.len(),
            };
        }
        for p in turn {
            let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
            killed.insert(p);
        }
        // SIGKILL takes effect when each process next runs: give them the CPU first
        if polls < 8 {
            tokio::task::yield_now().await;
        } else {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        polls += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_stat_reads() {
        let me = i32::try_from(std::process::id()).unwrap();
        let s = stat(me).unwrap();
        assert!(!s.zombie);
        assert_eq!(s.group, nix::unistd::getpgrp().as_raw());
        assert!(stat(i32::MAX).is_none());
    }

    #[tokio::test]
    async fn a_fifo_is_a_pipe_once_let_go() {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let dir = std::env::temp_dir().join(format!("de-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (fifo, mut input) = Fifo::make(dir.join("stdin")).unwrap();
        // the reader opens it by name (as droid or its supervisor does)
        let mut reader = tokio::fs::File::open(fifo.path()).await.unwrap();
        drop(fifo);
        assert!(!dir.join("stdin").exists(), "unlinked once let go");
        input.0.write_all(b"hello\n").await.unwrap();
        let mut buf = [0u8; 6];
        reader.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"hello\n");
        // the reader gone: the writer learns it
        drop(reader);
        let err = input.0.write_all(b"more\n").await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::BrokenPipe);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
