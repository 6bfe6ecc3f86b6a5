//! Removing a worktree: its checkout, its git directory in the repository
//! (`<common>/worktrees/<name>`) and, unless the change must be kept, its branch.
//!
//! The checkout was the agent's: it is removed one entry at a time relative to directories
//! opened without following a symlink ([`crate::no_follow`]), never through `git worktree
//! remove`, which would read the gitfile and index the agent could have rewritten. The git
//! directory is removed only when its `gitdir` file (written by git, outside the agent's reach)
//! names this checkout; `git worktree prune` is never run, since it would also prune the user's
//! own worktrees whose directories are missing (on a drive not mounted). The branch goes with
//! `git branch -D`, which refuses a branch the user has checked out somewhere.

use std::ffi::{OsStr, OsString};
use std::path::Path;

use crate::error::EngineError;
use crate::no_follow as nf;
use crate::task_key::TaskKey;
use crate::worktree::git::Git;
use crate::worktree::layout::Layout;
use crate::worktree::record::Record;

/// Most entries removed with one checkout (a checkout with its build output).
const REMOVE_BUDGET: usize = 20_000_000;
/// The longest `gitdir` file read.
const GITDIR_LIMIT: u64 = 64 * 1024;

/// Remove the checkout and the git directory of `record`'s worktree, and its branch unless
/// `keep_branch`. Returns what could not be removed (each with why); an empty list means all
/// of it is gone.
pub(crate) async fn remove(
    layout: &Layout,
    record: &Record,
    env: &[(OsString, OsString)],
    keep_branch: bool,
) -> Vec<String> {
    let mut left = Vec::new();
    let Ok(id) = record.key() else {
        return vec![format!("{:?} is not a worktree id", record.id)];
    };
    if let Err(e) = remove_checkout(layout, &id, &record.checkout) {
        left.push(format!("the checkout {}: {e}", record.checkout.display()));
    }
    if let Err(e) = remove_admin(record) {
        left.push(format!(
            "its git directory {}: {e}",
            record.admin_dir.display()
        ));
    }
    if !keep_branch && let Err(e) = delete_branch(record, env).await {
        left.push(format!("the branch {}: {e}", record.branch));
    }
    left
}

/// Remove the checkout, which must be an entry of the worktree's own directory.
fn remove_checkout(layout: &Layout, id: &TaskKey, checkout: &Path) -> std::io::Result<()> {
    let dir = layout.dir(id);
    let (Some(parent), Some(name)) = (checkout.parent(), checkout.file_name()) else {
        return Err(std::io::Error::other("not a checkout path"));
    };
    if parent != dir {
        return Err(std::io::Error::other(format!(
            "not in the worktree's directory {}",
            dir.display()
        )));
    }
    let fd = match open_dir(&dir) {
        Ok(fd) => fd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let mut budget = REMOVE_BUDGET;
    nf::remove_at(&fd, name, &mut budget)
}

/// Remove the worktree's git directory when git's `gitdir` there names our checkout.
fn remove_admin(record: &Record) -> std::io::Result<()> {
    let admin = &record.admin_dir;
    if admin.as_os_str().is_empty() {
        // never made (git worktree add failed): nothing of ours there
        return Ok(());
    }
    let parent = record.common_dir.join("worktrees");
    let (Some(dir), Some(name)) = (admin.parent(), admin.file_name()) else {
        return Err(std::io::Error::other("not a worktree git directory"));
    };
    if dir != parent {
        return Err(std::io::Error::other(format!(
            "not under {}",
            parent.display()
        )));
    }
    let parent_fd = match open_dir(&parent) {
        Ok(fd) => fd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let admin_fd = match nf::open_dir(&parent_fd, name) {
        Ok(fd) => fd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let gitdir = nf::read_at(&admin_fd, OsStr::new("gitdir"), GITDIR_LIMIT)?
        .map(|(bytes, _)| String::from_utf8_lossy(&bytes).trim().to_owned());
    // git writes the checkout's real path; the record has it as the store was named
    let ours = record.checkout.join(".git");
    let ours_real = record
        .checkout
        .parent()
        .and_then(|p| crate::real_path::canonical(p).ok())
        .zip(record.checkout.file_name())
        .map(|(p, n)| p.join(n).join(".git"));
    let names_ours = |g: &str| Path::new(g) == ours || ours_real.as_deref() == Some(Path::new(g));
    if gitdir.as_deref().is_some_and(|g| !names_ours(g)) {
        return Err(std::io::Error::other(format!(
            "its gitdir names {}, not this worktree: left for git",
            gitdir.unwrap_or_default()
        )));
    }
    let mut budget = REMOVE_BUDGET;
    nf::remove_at(&parent_fd, name, &mut budget)?;
    // `worktrees/` itself goes once empty, as git leaves it
    let _ = std::fs::remove_dir(&parent);
    Ok(())
}

/// `git branch -D <branch>` in the repository; a branch already gone is fine.
async fn delete_branch(record: &Record, env: &[(OsString, OsString)]) -> Result<(), EngineError> {
    let git = Git::for_refs(env).with(&[("GIT_DIR", &record.common_dir)]);
    let run = git
        .run(
            &record.common_dir,
            &["branch", "-D", "--quiet", &record.branch],
            None,
        )
        .await?;
    if run.success || run.message.contains("not found") {
        return Ok(());
    }
    Err(run.into_error())
}

fn open_dir(path: &Path) -> std::io::Result<std::os::fd::OwnedFd> {
    nix::fcntl::open(
        path,
        nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(std::io::Error::from)
}
