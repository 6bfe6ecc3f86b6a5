//! The task store on disk: one directory per background task, readable by every front-end and by
//! the CLI while no server runs.
//!
//! ```text
//! <store>/tasks/<id>/          0700
//!   task.json       id, created_at (wall and boot clock), submission number, repo_root
//!                                                                    (written once, atomically)
//!   request.json    the request, secrets redacted                    (written once, atomically)
//!   reserve         64 KiB set aside for the result until it is committed (see below)
//!   lock            held (flock) by the task's supervisor for its whole life
//!   owner.json      the supervisor's pid and marker, written once it holds `lock`
//!   started         exists once the run got its slot (queued -> running)
//!   events.ndjson   one line per event, appended as they happen, secrets redacted
//!   cancel          exists once anyone asked for a cancel
//!   result.json     the ExecutionResult, committed exactly once (see below)
//!   worker.log      the supervisor's stderr
//! <store>/locks/, <store>/queue/   run slots (see `crate::run_slots`)
//! ```
//!
//! Files are 0600. Whole files are written atomically: a temp file in the same directory, fsync,
//! rename, fsync of the directory. `result.json` is committed with `link(2)` instead of `rename`, so
//! the first writer wins and a second (a supervisor finishing just as someone declares it dead)
//! cannot replace it: every task ends with exactly one result.
//!
//! What a submission answers for is durable before the id is given: the task directory's files
//! and the directory are fsynced, and then `tasks/`, which holds the directory's own entry.
//!
//! Every read of a store file is [`read_regular`](crate::state_file::read_regular): opened without following a link and without
//! blocking on a FIFO, checked to be a regular file on the opened descriptor, and bounded by the
//! file's limit. An entry of `tasks/` that is not a task directory is reported
//! ([`Store::entries`]), never followed.
//!
//! A full disk must not lose a result either: a task is created only if its `reserve` can be
//! written, and a commit that meets a full disk gives the reserve back and tries again (then once
//! more with the logs and command excerpts dropped). A cancel request on a full disk is an empty
//! file, which needs no data blocks.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use droid_contract::{ExecutionResult, Issue, IssueType, ProviderId};
use nix::errno::Errno;
use serde::{Deserialize, Serialize};

use crate::error::EngineError;
use crate::state_file::{
    ReadError, create_atomic, file_kind, read_regular, sync_dir, write_atomic, write_unsynced,
};
use crate::task_key::TaskKey;

/// Bytes set aside in a task's directory for its result (a result is a few KiB; a larger one
/// is committed without its logs, see [`Store::commit_result`]).
const RESERVE_BYTES: usize = 64 * 1024;
/// The file holding them.
const RESERVE: &str = "reserve";

/// What `task.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Meta {
    pub task_id: String,
    pub created_at: String,
    pub created_unix_ms: u64,
    /// The boot the task was created in (`None` in records of older versions).
    #[serde(default)]
    pub boot_id: Option<String>,
    /// Milliseconds since that boot at creation: a clock no wall-clock step moves.
    #[serde(default)]
    pub created_boot_ms: Option<u64>,
    /// Submission number: the order in which tasks get run slots.
    pub seq: u64,
    pub repo_root: PathBuf,
}

/// What `owner.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Owner {
    pub pid: u32,
    /// The value of every process's `DROID_EXECUTOR_RUN_ID` in this task's run.
    pub marker: String,
    pub since: String,
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> EngineError {
    EngineError::io(action, path)
}

/// Is `e` a full disk (or a full quota)?
fn is_full(e: &EngineError) -> bool {
    matches!(e, EngineError::Io { source, .. }
        if matches!(source.raw_os_error(), Some(c) if c == Errno::ENOSPC as i32 || c == Errno::EDQUOT as i32))
}

/// `r` made small enough to fit where the whole did not: its logs and command excerpts dropped,
/// and a log line saying so. Status, summary, files, commands and issues are kept.
fn shrunk(r: &ExecutionResult) -> ExecutionResult {
    let mut s = r.clone();
    s.logs = vec![format!(
        "the disk holding the task store is full: {} log line(s) and the command output \
         excerpts were dropped to store this result",
        r.logs.len()
    )];
    for c in &mut s.commands_run {
        c.stdout_excerpt.clear();
        c.stderr_excerpt.clear();
        c.truncated = true;
    }
    s
}

/// How soon a new task is on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Promise {
    /// Before the caller is told of it: what a 202 or a `droid_submit` answer promises (a
    /// background task).
    Durable,
    /// With its result: a run the caller waits for, kept as a task (for its worktree); a crash
    /// of the machine before its result ends the run anyway, and then may forget the task.
    AtResult,
}

/// Make the entries of `dir` durable, as a promise made to a caller needs: a failing fsync is an
/// error, except on a file system that does not sync directories at all (`EINVAL`), where there
/// is nothing more to do.
fn sync_dir_strict(dir: &Path) -> Result<(), EngineError> {
    let d = File::open(dir).map_err(io("open directory", dir))?;
    match d.sync_all() {
        Err(e) if e.raw_os_error() != Some(Errno::EINVAL as i32) => Err(io("fsync", dir)(e)),
        _ => Ok(()),
    }
}

/// Largest `task.json`, `owner.json` or `started` the store reads (they hold a few hundred bytes).
pub(crate) const RECORD_LIMIT: u64 = 64 * 1024;
/// Largest `request.json` the store reads: what a supervisor accepts as its payload, which holds
/// the whole request and more.
pub(crate) const REQUEST_LIMIT: u64 = 16 * 1024 * 1024;
/// Largest `result.json` the store reads (a result's excerpts and logs are bounded; a few hundred
/// KiB at most).
pub(crate) const RESULT_LIMIT: u64 = 16 * 1024 * 1024;

/// An entry of the store's `tasks/` directory that is not a readable task: what it is, and why
/// it was skipped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DamagedEntry {
    /// The entry's name in `tasks/` (a task id when it has that shape).
    pub entry: String,
    /// What is wrong with it.
    pub problem: String,
}

/// A task id with the second in it ([`TaskKey::secs`]).
pub(crate) type Dated = (u64, TaskKey);

/// The store at a root directory.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    root: PathBuf,
}

impl Store {
    pub(crate) fn new(root: &Path) -> Self {
        Self {
            root: root.to_path_buf(),
        }
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    pub(crate) fn tasks_dir(&self) -> PathBuf {
        self.root.join("tasks")
    }

    pub(crate) fn dir(&self, key: &TaskKey) -> PathBuf {
        self.tasks_dir().join(key.as_str())
    }

    /// Make the store's directories (0700).
    pub(crate) fn ensure(&self) -> Result<(), EngineError> {
        let dir = self.tasks_dir();
        if dir.is_dir() {
            return Ok(());
        }
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(io("create directory", &dir))?;
        // the new `tasks/` entry itself must survive a crash, or every task in it is lost
        sync_dir_strict(&self.root)
    }

    /// A new task directory holding `task.json` and `request.json` (already redacted), on disk
    /// as `promise` says.
    pub(crate) fn create(
        &self,
        seq: u64,
        provider: ProviderId,
        repo_root: &Path,
        request: &serde_json::Value,
        promise: Promise,
    ) -> Result<TaskKey, EngineError> {
        self.ensure()?;
        let mut attempts = 0;
        let key = loop {
            let key = TaskKey::generate(provider);
            let dir = self.dir(&key);
            match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => break key,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempts < 1000 => {
                    attempts += 1;
                }
                Err(e) => return Err(io("create directory", &dir)(e)),
            }
        };
        let now = SystemTime::now();
        let boot = crate::timestamp::boot_clock();
        let meta = Meta {
            task_id: key.as_str().to_owned(),
            created_at: crate::timestamp::rfc3339(now),
            created_unix_ms: now
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            created_boot_ms: boot.as_ref().map(|b| b.1),
            boot_id: boot.map(|b| b.0),
            seq,
            repo_root: repo_root.to_path_buf(),
        };
        let dir = self.dir(&key);
        // the reserve first: a task that could not store its result is not started
        // What a 202 (or a `droid_submit` answer) promises is on disk before it is given: the
        // files are fsynced and so is the task directory after each rename (`write_atomic`),
        // and then `tasks/`, which holds the new directory's own entry (`mkdir` alone is not
        // durable: a crash could forget the directory and everything in it).
        let written = match promise {
            Promise::Durable => write_reserve(&dir.join(RESERVE), true)
                .and_then(|()| write_atomic(&dir.join("request.json"), &to_json(request)?))
                .and_then(|()| write_atomic(&dir.join("task.json"), &to_json(&meta)?))
                .and_then(|()| sync_dir_strict(&dir))
                .and_then(|()| sync_dir_strict(&self.tasks_dir())),
            // made durable with its result (`commit_result` syncs `tasks/` too)
            Promise::AtResult => write_reserve(&dir.join(RESERVE), false)
                .and_then(|()| write_unsynced(&dir.join("request.json"), &to_json(request)?))
                .and_then(|()| write_unsynced(&dir.join("task.json"), &to_json(&meta)?)),
        };
        if let Err(e) = written {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(e);
        }
        Ok(key)
    }

    /// Ids of every task directory, in no particular order (entries that are not task
    /// directories are left out: see [`Store::entries`]).
    pub(crate) fn keys(&self) -> Result<Vec<TaskKey>, EngineError> {
        Ok(self.entries()?.0)
    }

    /// Ids of every task directory, in no particular order, and every other entry of `tasks/`
    /// with what is wrong with it: a name that is no task id, a file, a FIFO or a symbolic link
    /// where a task directory belongs. Only the directory listing is read (no entry is opened or
    /// followed).
    pub(crate) fn entries(&self) -> Result<(Vec<TaskKey>, Vec<DamagedEntry>), EngineError> {
        let dir = self.tasks_dir();
        let listing = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok((Vec::new(), Vec::new()));
            }
            Err(e) => return Err(io("read directory", &dir)(e)),
        };
        let (mut keys, mut damaged) = (Vec::new(), Vec::new());
        for entry in listing {
            let entry = entry.map_err(io("read directory", &dir))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let key = TaskKey::parse(&name);
            // the entry's own type (lstat), never what a symbolic link points at
            let kind = entry.file_type();
            match (key, kind) {
                (Ok(key), Ok(t)) if t.is_dir() => keys.push(key),
                (Ok(_), Ok(t)) => damaged.push(DamagedEntry {
                    entry: name,
                    problem: format!("a {} where a task directory belongs", file_kind(&t)),
                }),
                (_, Err(e)) => damaged.push(DamagedEntry {
                    entry: name,
                    problem: format!("cannot be examined: {e}"),
                }),
                (Err(_), Ok(t)) => damaged.push(DamagedEntry {
                    entry: name,
                    problem: format!(
                        "a {} whose name is not a task id (task ids look like \
                         droid-1795349045-3fa2)",
                        file_kind(&t)
                    ),
                }),
            }
        }
        Ok((keys, damaged))
    }

    /// Task directories newest first by the second in their ids (ties in name order; the
    /// submission number in `task.json` has the last word: [`crate::Tasks::survey`]), and every
    /// other entry of `tasks/` as [`Store::entries`] reports it. Only the directory listing is
    /// read.
    /// Each with its second, parsed once.
    pub(crate) fn newest_first(&self) -> Result<(Vec<Dated>, Vec<DamagedEntry>), EngineError> {
        let (keys, damaged) = self.entries()?;
        let mut keyed: Vec<(u64, TaskKey)> = keys.into_iter().map(|k| (k.secs(), k)).collect();
        keyed.sort_unstable_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        Ok((keyed, damaged))
    }

    /// Whether the task's `task.json` is there, whatever state it is in (one `lstat`, nothing
    /// read). Anything but "it does not exist" counts as there: a clean keeps what it cannot
    /// examine.
    pub(crate) fn has_record(&self, key: &TaskKey) -> bool {
        match std::fs::symlink_metadata(self.dir(key).join("task.json")) {
            Ok(_) => true,
            Err(e) => e.kind() != std::io::ErrorKind::NotFound,
        }
    }

    /// The damage of a task directory whose records cannot be read, as an entry to report.
    pub(crate) fn damaged(key: &TaskKey, e: &EngineError) -> DamagedEntry {
        DamagedEntry {
            entry: key.as_str().to_owned(),
            problem: e.to_string(),
        }
    }

    /// The task's `task.json`; a missing directory or file is "no such task".
    pub(crate) fn meta(&self, key: &TaskKey) -> Result<Meta, EngineError> {
        let path = self.dir(key).join("task.json");
        let text = match read_regular(&path, RECORD_LIMIT) {
            Ok(t) => t,
            Err(ReadError::Missing) => {
                return Err(EngineError::NoSuchTask {
                    id: key.as_str().to_owned(),
                    hint: "it never existed, or its result expired and was removed".into(),
                });
            }
            Err(ReadError::Unreadable(message)) => {
                return Err(EngineError::Corrupt { path, message });
            }
            Err(ReadError::Io(e)) => return Err(io("read", &path)(e)),
        };
        serde_json::from_slice(&text).map_err(|e| EngineError::Corrupt {
            path,
            message: e.to_string(),
        })
    }

    /// The stored (redacted) request.
    pub(crate) fn request(&self, key: &TaskKey) -> Result<serde_json::Value, EngineError> {
        let path = self.dir(key).join("request.json");
        let text = match read_regular(&path, REQUEST_LIMIT) {
            Ok(t) => t,
            Err(ReadError::Missing) => {
                return Err(io("read", &path)(std::io::ErrorKind::NotFound.into()));
            }
            Err(ReadError::Unreadable(message)) => {
                return Err(EngineError::Corrupt { path, message });
            }
            Err(ReadError::Io(e)) => return Err(io("read", &path)(e)),
        };
        serde_json::from_slice(&text).map_err(|e| EngineError::Corrupt {
            path,
            message: e.to_string(),
        })
    }

    /// The committed result. A result file that cannot be parsed gives an `error` result that
    /// says so (the file is left for inspection).
    pub(crate) fn result(&self, key: &TaskKey) -> Result<Option<ExecutionResult>, EngineError> {
        let path = self.dir(key).join("result.json");
        let parsed = match read_regular(&path, RESULT_LIMIT) {
            Ok(t) => serde_json::from_slice(&t).map_err(|e| e.to_string()),
            Err(ReadError::Missing) => return Ok(None),
            Err(ReadError::Unreadable(message)) => Err(message),
            Err(ReadError::Io(e)) => return Err(io("read", &path)(e)),
        };
        Ok(Some(parsed.unwrap_or_else(|e| {
            ExecutionResult::error(
                Some(key.as_str().to_owned()),
                format!("the task's stored result is unreadable: {e}"),
                vec![Issue::new(
                    IssueType::BridgeFailure,
                    format!("{} is corrupt: {e}", path.display()),
                    "run the task again; check the disk holding the task store",
                )],
            )
        })))
    }

    /// Commit the result unless one exists; `Ok(false)` when another writer came first.
    ///
    /// On a full disk the task's reserve is given back and the commit tried again, then once
    /// more with the result [`shrunk`]. The reserve goes once a result exists.
    pub(crate) fn commit_result(
        &self,
        key: &TaskKey,
        result: &ExecutionResult,
    ) -> Result<bool, EngineError> {
        let path = self.dir(key).join("result.json");
        let reserve = self.dir(key).join(RESERVE);
        let bytes = to_json(result)?;
        // a task made [`Promise::AtResult`] wrote these unsynced: on disk before its result is
        // (a clean file's sync costs next to nothing)
        for record in ["request.json", "task.json"] {
            if let Ok(f) = File::open(self.dir(key).join(record)) {
                let _ = f.sync_data();
            }
        }
        let committed = match create_atomic(&path, &bytes) {
            Err(e) if is_full(&e) => {
                let _ = std::fs::remove_file(&reserve);
                match create_atomic(&path, &bytes) {
                    Err(e) if is_full(&e) => create_atomic(&path, &to_json(&shrunk(result))?),
                    other => other,
                }
            }
            other => other,
        }?;
        let _ = std::fs::remove_file(&reserve);
        // the task directory's own entry: a task made [`Promise::AtResult`] is durable from here
        sync_dir(&self.tasks_dir());
        Ok(committed)
    }

    /// Whether the task has a result (without reading it).
    pub(crate) fn has_result(&self, key: &TaskKey) -> bool {
        self.dir(key).join("result.json").exists()
    }

    /// When the result was committed.
    pub(crate) fn result_time(&self, key: &TaskKey) -> Option<SystemTime> {
        std::fs::metadata(self.dir(key).join("result.json"))
            .and_then(|m| m.modified())
            .ok()
    }

    pub(crate) fn lock_path(&self, key: &TaskKey) -> PathBuf {
        self.dir(key).join("lock")
    }

    pub(crate) fn owner(&self, key: &TaskKey) -> Option<Owner> {
        let text = read_regular(&self.dir(key).join("owner.json"), RECORD_LIMIT).ok()?;
        serde_json::from_slice(&text).ok()
    }

    /// Who runs the task now. Not synced: an owner is a live process, which a crash of the
    /// machine ends anyway (the boot id tells a record from before a reboot).
    pub(crate) fn write_owner(&self, key: &TaskKey, owner: &Owner) -> Result<(), EngineError> {
        write_unsynced(&self.dir(key).join("owner.json"), &to_json(owner)?)
    }

    /// Mark the task running (idempotent).
    pub(crate) fn mark_started(&self, key: &TaskKey) -> Result<(), EngineError> {
        create_atomic(
            &self.dir(key).join("started"),
            crate::timestamp::now().as_bytes(),
        )
        .map(|_| ())
    }

    pub(crate) fn is_started(&self, key: &TaskKey) -> bool {
        self.dir(key).join("started").exists()
    }

    /// Ask the task's supervisor to cancel (idempotent). On a full disk the request is an empty
    /// file: nobody may be kept from stopping the task that filled it.
    pub(crate) fn request_cancel(&self, key: &TaskKey) -> Result<(), EngineError> {
        let path = self.dir(key).join("cancel");
        match create_atomic(&path, crate::timestamp::now().as_bytes()) {
            Ok(_) => Ok(()),
            Err(e) if is_full(&e) => OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(&path)
                .map(|_| ())
                .map_err(|_| e),
            Err(e) => Err(e),
        }
    }

    pub(crate) fn cancel_requested(&self, key: &TaskKey) -> bool {
        self.dir(key).join("cancel").exists()
    }

    pub(crate) fn events_path(&self, key: &TaskKey) -> PathBuf {
        self.dir(key).join("events.ndjson")
    }

    /// When the task last changed: the newest modification time of its records (not of
    /// `worker.log`, which a supervisor may still write to after the result, nor of `lock`).
    pub(crate) fn updated(&self, key: &TaskKey) -> Option<SystemTime> {
        std::fs::read_dir(self.dir(key))
            .ok()?
            .flatten()
            .filter(|e| {
                !matches!(
                    e.file_name().to_str(),
                    Some("worker.log" | "lock" | RESERVE)
                )
            })
            .filter_map(|e| e.metadata().ok()?.modified().ok())
            .max()
    }

    /// Remove the task's directory.
    pub(crate) fn remove(&self, key: &TaskKey) -> Result<(), EngineError> {
        let dir = self.dir(key);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io("remove", &dir)(e)),
        }
    }
}

/// Write [`RESERVE_BYTES`] of real (not sparse) data to a new private file at `path`, synced
/// when `sync` (the blocks are allocated by the write itself: a full disk fails it either way).
fn write_reserve(path: &Path, sync: bool) -> Result<(), EngineError> {
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(io("reserve space in", path))?;
    f.write_all(&vec![0u8; RESERVE_BYTES])
        .and_then(|()| if sync { f.sync_all() } else { Ok(()) })
        .map_err(io("reserve space in", path))
}

fn to_json<T: Serialize>(v: &T) -> Result<Vec<u8>, EngineError> {
    let mut bytes = serde_json::to_vec_pretty(v).map_err(|e| EngineError::Io {
        action: "encode",
        path: PathBuf::new(),
        source: std::io::Error::other(e),
    })?;
    bytes.push(b'\n');
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_task_is_private_and_its_result_is_committed_once() {
        let root = std::env::temp_dir().join(format!("dx-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let store = Store::new(&root);
        let key = store
            .create(
                7,
                ProviderId::Droid,
                Path::new("/r"),
                &serde_json::json!({"objective": "x"}),
                Promise::Durable,
            )
            .unwrap();
        let dir = store.dir(&key);
        assert_eq!(mode(&store.tasks_dir()), 0o700);
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join("request.json")), 0o600);
        assert_eq!(mode(&dir.join("task.json")), 0o600);
        let meta = store.meta(&key).unwrap();
        assert_eq!((meta.seq, meta.task_id.as_str()), (7, key.as_str()));
        assert_eq!(store.keys().unwrap(), vec![key.clone()]);
        assert_eq!(store.result(&key).unwrap(), None);
        let first = ExecutionResult::error(None, "first", Vec::new());
        let second = ExecutionResult::error(None, "second", Vec::new());
        assert!(store.commit_result(&key, &first).unwrap());
        assert!(!store.commit_result(&key, &second).unwrap());
        assert_eq!(store.result(&key).unwrap(), Some(first));
        assert_eq!(mode(&dir.join("result.json")), 0o600);
        let leftovers: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        std::fs::write(dir.join("result.json"), "{trunc").unwrap();
        let corrupt = store.result(&key).unwrap().unwrap();
        assert_eq!(corrupt.issues[0].kind, IssueType::BridgeFailure);
        store.remove(&key).unwrap();
        assert!(matches!(
            store.meta(&key),
            Err(EngineError::NoSuchTask { .. })
        ));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn space_for_the_result_is_set_aside_until_it_is_committed() {
        let root = std::env::temp_dir().join(format!("dx-store-reserve-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let store = Store::new(&root);
        let key = store
            .create(
                1,
                ProviderId::Droid,
                Path::new("/r"),
                &serde_json::json!({"objective": "x"}),
                Promise::Durable,
            )
            .unwrap();
        let reserve = store.dir(&key).join(RESERVE);
        let meta = std::fs::metadata(&reserve).unwrap();
        assert_eq!(meta.len(), RESERVE_BYTES as u64);
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert!(store.meta(&key).unwrap().boot_id.is_some());
        store.request_cancel(&key).unwrap();
        store.request_cancel(&key).unwrap();
        assert!(store.cancel_requested(&key));
        let result = ExecutionResult::error(None, "done", Vec::new());
        assert!(store.commit_result(&key, &result).unwrap());
        assert!(!reserve.exists(), "the reserve goes with the result");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_full_disk_is_told_apart_and_a_shrunk_result_keeps_what_matters() {
        let full = EngineError::Io {
            action: "write",
            path: PathBuf::from("/x"),
            source: std::io::Error::from_raw_os_error(Errno::ENOSPC as i32),
        };
        let read_only = EngineError::Io {
            action: "write",
            path: PathBuf::from("/x"),
            source: std::io::Error::from_raw_os_error(Errno::EROFS as i32),
        };
        assert!(is_full(&full));
        assert!(!is_full(&read_only));
        let mut r = ExecutionResult::error(
            Some("t".into()),
            "summary",
            vec![Issue::new(IssueType::Timeout, "d", "a")],
        );
        r.logs = vec!["x".repeat(1 << 20); 3];
        let s = shrunk(&r);
        assert_eq!(
            (&s.status, &s.summary, &s.issues, &s.task_id),
            (&r.status, &r.summary, &r.issues, &r.task_id)
        );
        assert_eq!(s.logs.len(), 1);
        assert!(s.logs[0].contains("3 log line(s)"), "{:?}", s.logs);
    }
}
