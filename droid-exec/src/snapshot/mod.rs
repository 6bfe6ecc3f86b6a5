//! Ground truth of the repository, provider-blind: a record of the working tree taken before an
//! agent runs and again after it, and the files that differ between the two records
//! ([`Snapshot`], [`Changes`]). What the agent says it changed is never read here; this is what
//! the result reports. It knows no run, no provider and no task; git runs through the engine's
//! spawn (`crate::process`).
//!
//! Files: `take.rs` chooses the strategy and diffs two snapshots of a run; the three strategies
//! are the in-process record (`in_process.rs`, on [`git_dir`], [`git_index`], [`ignore_rules`],
//! [`stat_scan`], [`scan_diff`] and [`line_diff`]), git processes (`git_tree.rs`, their diff
//! parsed by `diff_tree.rs`) and the walk (`walk.rs`); `git.rs` runs git safely for all of them
//! and for worktree tasks.
//!
//!
//! In a git work tree a snapshot is, where the layout allows, an in-process record
//! ([`stat_scan`]: metadata of every path, the index read in-process, `.gitignore`
//! applied, content kept only for what the index cannot give back), compared by
//! [`scan_diff`]: no git process, no object written, at the cost of one `git status`
//! a record (issue 17; `cargo xtask bench snapshot`). The rest of this section describes the
//! git-process path, taken where [`git_dir`] or [`git_index`] cannot read
//! the repository with certainty (`GIT_DIR` set, a split or sparse index, configuration
//! `include`s, another object format):
//!
//! a snapshot is a git tree object built from the working tree below `root`:
//! the repository's index is copied into the run's scratch directory (the copy keeps git's stat
//! cache, so unchanged files are not hashed again), then `git add -A -- .` and `git write-tree`
//! run with `GIT_INDEX_FILE` pointing at the copy and `GIT_OBJECT_DIRECTORY` at
//! `scratch/objects` (the repository's own object directory is only an alternate, read-only).
//! Key choice: nothing is ever written to the user's repository, not its index, not its object
//! store, and HEAD is irrelevant: we diff working trees, so droid committing during the run hides
//! nothing. Both snapshots of one run share `scratch/objects`, so one `git diff-tree --raw
//! --numstat` sees both trees and gives renames and line counts at once. No code the repository
//! controls runs: hooks, fsmonitor, filter drivers, textconv and external diffs are all off
//! (`git.rs`'s `GIT_CONFIG`).
//!
//! Cost, in the ratio of `git status` (`cargo xtask bench snapshot`): the second snapshot of a
//! run starts from the first one's scratch index, so only what changed during the run is
//! hashed, and reuses its location (no second `git rev-parse`; the filter names are read again,
//! since droid may configure one mid-run). Objects are stored uncompressed. Untracked files of
//! `BIG_FILE` bytes or more (listed by `git ls-files -o` beside the first `rev-parse`) are
//! left out of both trees and compared by size, times, inode and mode: hashing and storing a
//! 1 GiB file took most of a minute, and a change is still seen (reported without line counts,
//! with a warning naming the file; a mere `touch` then counts as modified).
//!
//! Files that `.gitignore` excludes are not staged and so never reported: build output and caches
//! are not "files changed" (a file that is already tracked is reported even when ignored, as git
//! does). Changes inside an embedded repository show only as a change of its checked-out commit.
//!
//! Outside a git work tree (or when git cannot be used) the fallback walks `root` with std::fs,
//! bounded by [`SnapshotLimits`] (time and file count; past either, [`Changes::incomplete`] says
//! so and the result carries an `env_issue`), recording size, modification time, executable bit
//! and a 64-bit FNV-1a hash per regular file (while a byte budget lasts, then size and mtime), and
//! the target of each symlink; line counts are then `None`.
//! Once a run's first snapshot walked, the second walks too (a marker file in `scratch`), so a
//! droid that runs `git init` does not make the two snapshots incomparable; `.git` entries are
//! skipped by the walk for the same reason.

mod diff_tree;
mod git;
pub(crate) mod git_dir;
pub(crate) mod git_index;
mod git_tree;
pub(crate) mod ignore_rules;
mod in_process;
pub(crate) mod line_diff;
mod path_map;
pub(crate) mod scan_diff;
pub(crate) mod stat_scan;
mod take;
mod walk;

#[cfg(test)]
mod tests;

pub(crate) use diff_tree::parse_diff_tree;
pub(crate) use git::GIT_MIN;
pub(crate) use git::{GitRun, filter_names, git, git_version, neutral_filters, with_vars};
pub(crate) use take::{Changes, IndexFlags, Snapshot};
pub(crate) use walk::SnapshotLimits;
