//! Run slots across processes: at most `max_concurrent` runs at once and one run at a time per
//! repository, for every process sharing a store (background supervisors, the CLI's sync `run`,
//! the bridge, the MCP server), with waiting runs starting in submission order.
//!
//! Everything is a file under `<store>/locks` and `<store>/queue`, guarded by `flock(2)`:
//! - `slot-<i>.lock` (i < max_concurrent): a running run holds one;
//! - `repo-<hash>.lock`: a running run holds its repository's (the hash is FNV-1a of the
//!   canonical repo_root, stable across builds and Rust versions): exclusively for a run that
//!   writes in place, shared by the runs at `read_only` that the kernel keeps from writing
//!   ([`RepoUse::Shared`]: any number of them at once, none beside a writer); a worktree run
//!   holds its worktree's, so worktree runs of one repository run at once;
//! - `queue/<seq>-<hash>` (`<seq>-<hash>-s` for a shared use): a waiting run's ticket (a run
//!   that can start at once writes none), locked by its owner for as long as it waits, so a
//!   ticket whose owner died (its lock is free) is recognised and removed;
//! - `sched.lock`: every decision (create a ticket, start a run) happens under it, so the view of
//!   tickets and locks cannot change underneath one, except for releases, which only free things;
//! - `seq`: the submission counter.
//!
//! A waiting run looks at the tickets ahead of it in `seq` order and simulates them: an earlier
//! ticket whose repository is free takes a free slot, and an earlier ticket claims its repository
//! either way. The run starts only when a slot is still free after that, and its repository is
//! neither running nor claimed. Shared uses only exclude writers: a shared ticket is free when no
//! writer holds or claims the repository, and claims it against later writers only (so a writer
//! is not starved by a stream of readers, nor a reader queued behind a reader). So a run never jumps ahead of an earlier one that could start, yet
//! a run for repository B does not wait behind a run for repository A that is blocked by A's lock.
//!
//! Waiting is polling ([`POLL`]), woken early in-process when a permit is dropped. A process that
//! uses a different `max_concurrent` than another sees only its own number of slot files; the
//! limit is a per-configuration promise.

use std::collections::HashSet;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::error::EngineError;
use crate::lock::{self, Held};

/// How often a waiting run looks again when nothing in this process woke it.
const POLL: Duration = Duration::from_millis(100);

/// Hands out run slots for one store.
#[derive(Debug, Clone)]
pub struct Scheduler {
    root: PathBuf,
    max_concurrent: usize,
    released: Arc<Notify>,
    /// `locks/` and `queue/` were made (or found) once: later decisions skip the two `mkdir`s
    /// and make them again only when a lock file cannot be opened for want of its directory.
    dirs_made: Arc<AtomicBool>,
}

/// A run's right to run: a slot and its repository. Dropping it frees both.
#[derive(Debug)]
pub struct Permit {
    _slot: Held,
    _repo: Held,
    released: Arc<Notify>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        // the locks are released after this body runs; waiters poll again right after, and find
        // them free, because they first need sched.lock, which this process does not hold here
        self.released.notify_waiters();
    }
}

/// How a run uses its repository's lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RepoUse {
    /// It writes there (in place), or it is a worktree's: one such run at a time.
    Exclusive,
    /// It only reads, and the kernel keeps it from writing (`read_only` under Landlock): any
    /// number at once, never beside a writer.
    Shared,
}

/// A run's place in line: its number, repository and use of it, and, once it has to wait, the
/// ticket file at `path`, locked by its owner.
#[derive(Debug)]
struct Ticket {
    seq: u64,
    repo: String,
    shared: bool,
    path: PathBuf,
    held: Option<Held>,
}

/// The suffix of a shared ticket's name.
const SHARED_SUFFIX: &str = "-s";

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> EngineError {
    EngineError::io(action, path)
}

/// FNV-1a (64 bit) of `bytes`, as 16 hex digits: a stable name for a repository's lock.
pub(crate) fn repo_key(repo: &Path) -> String {
    let real = crate::real_path::canonical(repo).unwrap_or_else(|_| repo.to_path_buf());
    crate::fnv::hex(real.as_os_str().as_encoded_bytes())
}

impl Scheduler {
    /// The scheduler of the store at `root` (directories are made on first use).
    pub fn new(root: &Path, max_concurrent: usize) -> Self {
        Self {
            root: root.to_path_buf(),
            max_concurrent: max_concurrent.max(1),
            released: Arc::new(Notify::new()),
            dirs_made: Arc::new(AtomicBool::new(false)),
        }
    }

    fn locks(&self) -> PathBuf {
        self.root.join("locks")
    }

    fn queue(&self) -> PathBuf {
        self.root.join("queue")
    }

    fn ensure_dirs(&self) -> Result<(), EngineError> {
        for dir in [self.locks(), self.queue()] {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)
                .map_err(io("create directory", &dir))?;
        }
        Ok(())
    }

    fn sched_lock(&self) -> Result<Held, EngineError> {
        let path = self.locks().join("sched.lock");
        if self.dirs_made.load(Ordering::Relaxed) {
            match lock::exclusive(&path) {
                Err(EngineError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound => {}
                held => return held,
            }
        }
        // first use, or the store's directories were removed underneath us
        self.ensure_dirs()?;
        self.dirs_made.store(true, Ordering::Relaxed);
        lock::exclusive(&path)
    }

    /// The next submission number (blocking; takes `sched.lock`).
    ///
    /// # Errors
    /// [`EngineError::Io`] when the store cannot be written.
    pub fn next_seq(&self) -> Result<u64, EngineError> {
        let _sched = self.sched_lock()?;
        self.bump_seq()
    }

    /// The counter is rewritten in place under `sched.lock`, unsynced: every run bumps it, and
    /// two `fsync`s a run (temp file and directory) cost more than the counter is worth. A
    /// crash can at worst leave it torn, which reads as corrupt and restarts it above anything
    /// handed out (below).
    fn bump_seq(&self) -> Result<u64, EngineError> {
        use std::io::{Read as _, Seek as _, Write as _};
        use std::os::unix::fs::OpenOptionsExt as _;
        let path = self.locks().join("seq");
        let open = |create: bool| {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(create)
                .mode(0o600)
                .open(&path)
        };
        // a counter that does not exist yet starts at 1; one that exists but is empty was torn
        let (mut file, fresh) = match open(false) {
            Ok(f) => (f, false),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                (open(true).map_err(io("create", &path))?, true)
            }
            Err(e) => return Err(io("open", &path)(e)),
        };
        let mut bytes = Vec::new();
        (&mut file)
            .take(64)
            .read_to_end(&mut bytes)
            .map_err(io("read", &path))?;
        // bytes, not a string: a counter that is not even UTF-8 is as corrupt as any other
        let last = if fresh {
            Some(0)
        } else {
            std::str::from_utf8(&bytes)
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
        };
        // a corrupt counter restarts above anything it can have handed out: microseconds since
        // the epoch exceed any count this store can reach
        let next = last.map_or_else(
            || {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX / 2))
            },
            |n| n + 1,
        );
        let text = format!("{next}\n");
        file.rewind()
            .and_then(|()| file.write_all(text.as_bytes()))
            .and_then(|()| file.set_len(u64::try_from(text.len()).unwrap_or(u64::MAX)))
            .map_err(io("write", &path))?;
        Ok(next)
    }

    /// Wait for a slot and for `repo` to be free, in submission order (`seq`, or a fresh number
    /// now). `on_wait` is called once if the run has to wait. `Ok(None)` when `cancel` fired
    /// first.
    ///
    /// # Errors
    /// [`EngineError::Io`] when the store's lock files cannot be used.
    pub async fn acquire(
        &self,
        seq: Option<u64>,
        repo: &Path,
        cancel: &CancellationToken,
        on_wait: impl FnOnce(),
    ) -> Result<Option<Permit>, EngineError> {
        self.acquire_as(seq, repo, RepoUse::Exclusive, cancel, on_wait)
            .await
    }

    /// [`Scheduler::acquire`] with the repository used as `usage` says.
    ///
    /// # Errors
    /// As [`Scheduler::acquire`].
    pub async fn acquire_as(
        &self,
        seq: Option<u64>,
        repo: &Path,
        usage: RepoUse,
        cancel: &CancellationToken,
        on_wait: impl FnOnce(),
    ) -> Result<Option<Permit>, EngineError> {
        let me = self.clone();
        let repo = repo_key(repo);
        let shared = usage == RepoUse::Shared;
        let (ticket, permit) = blocking(move || {
            let _sched = me.sched_lock()?;
            let seq = match seq {
                Some(s) => s,
                None => me.bump_seq()?,
            };
            let suffix = if shared { SHARED_SUFFIX } else { "" };
            let path = me.queue().join(format!("{seq:020}-{repo}{suffix}"));
            let taken = || EngineError::Io {
                action: "queue",
                path: path.clone(),
                source: std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "another run holds this ticket",
                ),
            };
            if lock::is_held(&path)? {
                return Err(taken());
            }
            // A run that can start at once never writes a ticket: under sched.lock its place in
            // line is its number alone, and creating and removing a file per run is what a
            // decision would cost most (a new inode on ext4 searches the inode table).
            let mut ticket = Ticket {
                seq,
                repo,
                shared,
                path: path.clone(),
                held: None,
            };
            if let Some(permit) = me.try_start(&ticket)? {
                return Ok((ticket, Some(permit)));
            }
            let held = match lock::try_exclusive(&path) {
                // the queue directory was removed underneath a store whose locks remain
                Err(EngineError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound =>
                {
                    me.ensure_dirs()?;
                    lock::try_exclusive(&path)
                }
                other => other,
            }?
            .ok_or_else(taken)?;
            ticket.held = Some(held);
            Ok((ticket, None))
        })
        .await?;
        if let Some(p) = permit {
            return Ok(Some(p));
        }
        on_wait();
        let ticket = Arc::new(ticket);
        loop {
            let woken = self.released.notified();
            tokio::select! {
                () = cancel.cancelled() => {
                    let me = self.clone();
                    let t = Arc::clone(&ticket);
                    blocking(move || {
                        let _sched = me.sched_lock()?;
                        let _ = std::fs::remove_file(&t.path);
                        Ok(())
                    })
                    .await?;
                    return Ok(None);
                }
                () = woken => {}
                () = tokio::time::sleep(POLL) => {}
            }
            let me = self.clone();
            let t = Arc::clone(&ticket);
            if let Some(p) = blocking(move || {
                let _sched = me.sched_lock()?;
                me.try_start(&t)
            })
            .await?
            {
                return Ok(Some(p));
            }
        }
    }

    /// Under `sched.lock`: may `mine` start now? On yes, take its slot and repository and remove
    /// its ticket.
    fn try_start(&self, mine: &Ticket) -> Result<Option<Permit>, EngineError> {
        let queue = self.queue();
        let mut tickets: Vec<(u64, String, bool, PathBuf)> = std::fs::read_dir(&queue)
            .map_err(io("read directory", &queue))?
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let (seq, repo) = name.split_once('-')?;
                let (repo, shared) = match repo.strip_suffix(SHARED_SUFFIX) {
                    Some(r) => (r, true),
                    None => (repo, false),
                };
                Some((seq.parse().ok()?, repo.to_owned(), shared, e.path()))
            })
            .filter(|(seq, _, _, _)| *seq < mine.seq)
            .collect();
        tickets.sort_by_key(|(seq, _, _, _)| *seq);
        // Free slots are taken lazily, lowest first: one per earlier ticket that would start
        // now, then one for `mine`; so a decision costs a lock attempt per running run, not one
        // per configured slot. Under sched.lock nothing can take a slot between two attempts.
        let mut slots =
            (0..self.max_concurrent).map(|i| self.locks().join(format!("slot-{i}.lock")));
        let mut next_free = || -> Result<Option<Held>, EngineError> {
            for path in slots.by_ref() {
                if let Some(held) = lock::try_exclusive(&path)? {
                    return Ok(Some(held));
                }
            }
            Ok(None)
        };
        let mut kept_for_earlier: Vec<Held> = Vec::new();
        // repositories an earlier ticket claims: for every later run (a writer's), or only
        // against later writers (a reader's)
        let mut claimed: HashSet<String> = HashSet::new();
        let mut read_claimed: HashSet<String> = HashSet::new();
        for (_, repo, shared, path) in tickets {
            if !lock::is_held(&path)? {
                // its owner died while waiting
                let _ = std::fs::remove_file(&path);
                continue;
            }
            if claimed.contains(&repo) || (!shared && read_claimed.contains(&repo)) {
                if !shared {
                    claimed.insert(repo);
                }
                continue;
            }
            let free = if shared {
                !lock::is_held(&self.repo_lock(&repo))?
            } else {
                !lock::is_used(&self.repo_lock(&repo))?
            };
            if shared {
                read_claimed.insert(repo);
            } else {
                claimed.insert(repo);
            }
            if free {
                // it would start now: keep a slot for it (none left: none for `mine` either)
                match next_free()? {
                    Some(held) => kept_for_earlier.push(held),
                    None => return Ok(None),
                }
            }
        }
        if claimed.contains(&mine.repo) || (!mine.shared && read_claimed.contains(&mine.repo)) {
            return Ok(None);
        }
        let Some(slot) = next_free()? else {
            return Ok(None);
        };
        let taken = if mine.shared {
            lock::try_shared(&self.repo_lock(&mine.repo))?
        } else {
            lock::try_exclusive(&self.repo_lock(&mine.repo))?
        };
        let Some(repo) = taken else {
            return Ok(None);
        };
        if mine.held.is_some() {
            let _ = std::fs::remove_file(&mine.path);
        }
        Ok(Some(Permit {
            _slot: slot,
            _repo: repo,
            released: Arc::clone(&self.released),
        }))
    }

    /// The lock file of the repository (or worktree) at `repo`, as [`Scheduler::acquire`]
    /// names it: held while a run uses it (see [`lock::is_used`]).
    pub(crate) fn repo_lock_of(&self, repo: &Path) -> PathBuf {
        self.repo_lock(&repo_key(repo))
    }

    fn repo_lock(&self, repo: &str) -> PathBuf {
        self.locks().join(format!("repo-{repo}.lock"))
    }
}

/// Run blocking file-lock work off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, EngineError> + Send + 'static,
) -> Result<T, EngineError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| EngineError::Io {
            action: "schedule",
            path: PathBuf::new(),
            source: std::io::Error::other(e.to_string()),
        })?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("dx-queue-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    async fn now(s: &Scheduler, seq: Option<u64>, repo: &Path) -> Option<Permit> {
        let cancel = CancellationToken::new();
        let waited = std::sync::atomic::AtomicBool::new(false);
        let fut = s.acquire(seq, repo, &cancel, || {
            waited.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        tokio::select! {
            r = fut => Some(r.unwrap().unwrap()),
            () = tokio::time::sleep(Duration::from_millis(300)) => None,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn slots_and_repositories_limit_runs() {
        let root = temp("limits");
        let s = Scheduler::new(&root, 2);
        let (a, b, c) = (root.join("a"), root.join("b"), root.join("c"));
        let pa = now(&s, None, &a).await.expect("a starts");
        assert!(now(&s, None, &a).await.is_none(), "a second run on a waits");
        let pb = now(&s, None, &b).await.expect("b starts");
        assert!(now(&s, None, &c).await.is_none(), "c waits for a slot");
        drop(pa);
        let pc = now(&s, None, &c)
            .await
            .expect("c starts once a slot is free");
        drop((pb, pc));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn waiting_runs_start_in_submission_order_and_cancel_leaves_no_ticket() {
        let root = temp("order");
        let s = Scheduler::new(&root, 1);
        let r = root.join("r");
        let first = now(&s, None, &r).await.expect("first starts");
        let (tx, mut rx) = tokio::sync::mpsc::channel(8);
        let mut waiters = Vec::new();
        for n in 0..3_u32 {
            let seq = s.next_seq().unwrap();
            let (s, r, tx) = (s.clone(), r.clone(), tx.clone());
            waiters.push(tokio::spawn(async move {
                let cancel = CancellationToken::new();
                // later submissions reach the scheduler first
                tokio::time::sleep(Duration::from_millis(u64::from(3 - n) * 30)).await;
                let p = s.acquire(Some(seq), &r, &cancel, || {}).await.unwrap();
                tx.send(n).await.unwrap();
                tokio::time::sleep(Duration::from_millis(20)).await;
                drop(p);
            }));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        drop(first);
        let mut order = Vec::new();
        for _ in 0..3 {
            order.push(
                tokio::time::timeout(Duration::from_secs(10), rx.recv())
                    .await
                    .unwrap()
                    .unwrap(),
            );
        }
        assert_eq!(order, [0, 1, 2]);
        for w in waiters {
            w.await.unwrap();
        }
        let blocker = now(&s, None, &r).await.unwrap();
        let cancel = CancellationToken::new();
        let c2 = cancel.clone();
        let s2 = s.clone();
        let r2 = r.clone();
        let waiting = tokio::spawn(async move { s2.acquire(None, &r2, &c2, || {}).await });
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert_eq!(std::fs::read_dir(root.join("queue")).unwrap().count(), 1);
        cancel.cancel();
        assert!(waiting.await.unwrap().unwrap().is_none());
        assert_eq!(std::fs::read_dir(root.join("queue")).unwrap().count(), 0);
        drop(blocker);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn readers_share_a_repository_and_a_writer_waits_for_them_in_turn() {
        let root = temp("shared");
        let s = Scheduler::new(&root, 4);
        let r = root.join("r");
        let shared = |seq| {
            let (s, r) = (s.clone(), r.clone());
            async move {
                let cancel = CancellationToken::new();
                tokio::select! {
                    p = s.acquire_as(seq, &r, RepoUse::Shared, &cancel, || {}) => p.unwrap(),
                    () = tokio::time::sleep(Duration::from_millis(300)) => None,
                }
            }
        };
        let one = shared(None).await.expect("a reader starts");
        let two = shared(None)
            .await
            .expect("a second reader starts beside it");
        assert!(
            now(&s, None, &r).await.is_none(),
            "a writer waits for readers"
        );
        // a writer waiting in line holds back later readers (no writer starves)
        let writer_seq = s.next_seq().unwrap();
        let (s2, r2) = (s.clone(), r.clone());
        let writer = tokio::spawn(async move {
            let cancel = CancellationToken::new();
            s2.acquire(Some(writer_seq), &r2, &cancel, || {}).await
        });
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert!(
            shared(None).await.is_none(),
            "a later reader waits behind the writer"
        );
        drop((one, two));
        let w = tokio::time::timeout(Duration::from_secs(10), writer)
            .await
            .unwrap()
            .unwrap()
            .unwrap()
            .expect("the writer starts once the readers are gone");
        assert!(shared(None).await.is_none(), "no reader beside a writer");
        drop(w);
        assert!(shared(None).await.is_some());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_corrupt_counter_restarts_above_anything_handed_out() {
        let root = temp("seq");
        let s = Scheduler::new(&root, 1);
        assert_eq!(s.next_seq().unwrap(), 1);
        assert_eq!(s.next_seq().unwrap(), 2);
        let floor = u64::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_micros(),
        )
        .unwrap();
        for garbage in [&b"\xff\xfe not utf-8"[..], b"twelve", b""] {
            std::fs::write(root.join("locks/seq"), garbage).unwrap();
            let next = s.next_seq().unwrap();
            assert!(next >= floor, "{garbage:?}: {next}");
            assert_eq!(s.next_seq().unwrap(), next + 1);
        }
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn repo_keys_are_stable() {
        assert_eq!(
            repo_key(Path::new("/nonexistent/x")),
            repo_key(Path::new("/nonexistent/x"))
        );
        assert_ne!(
            repo_key(Path::new("/nonexistent/x")),
            repo_key(Path::new("/nonexistent/y"))
        );
        assert_eq!(repo_key(Path::new("")).len(), 16);
    }
}
