//! Issue 29, item 4: the default grants hold nothing any program later executes or loads as
//! code, and a run cannot write another repository, wherever the repository lies. Before, the
//! agent replaced the default toolchain's `cargo` under `~/.rustup/toolchains/…/bin` (the user's
//! own `cargo --version` later ran it) and wrote `~/.cargo/registry/src/*/build.rs`,
//! `~/.npm/_npx` and `~/.cache`. Now the run writes the data-only caches and its own private
//! `TMPDIR`, and nothing else of those. As root and as a non-root user whose HOME is outside
//! /tmp. `/tmp` and `/var/tmp` are not writable to a run either: a repository cloned under
//! `/tmp` is as confined as one under HOME (docs/operations.md#write-confinement-landlock).

use std::process::Stdio;

use droid_contract::ExecutionResult;
use serde_json::json;
use tests::non_root::Who;
use tests::temp_dir::TempDir;

use super::common::git;

use super::escape_git::Hostile;

/// Where the agent tries to write (relative to HOME unless absolute), and whether it may.
const TARGETS: &[(&str, bool)] = &[
    (
        ".rustup/toolchains/stable-x86_64-unknown-linux-gnu/bin/cargo",
        false,
    ),
    (
        ".cargo/registry/src/index.crates.io-x/evil-1.0.0/build.rs",
        false,
    ),
    (".cargo/git/checkouts/evil/build.rs", false),
    (".npm/_npx/evil/index.js", false),
    (".cache/go-build/evil", false),
    (
        ".cargo/registry/cache/index.crates.io-x/ok-1.0.0.crate",
        true,
    ),
    (".npm/_cacache/ok", true),
];

async fn only_data_caches_and_the_private_tmpdir_are_writable(who: Who) {
    let mut script = String::new();
    for (rel, _) in TARGETS {
        script.push_str(&format!("echo planted > \"$HOME/{rel}\" 2>/dev/null; "));
    }
    script.push_str("echo ok > \"$TMPDIR/ok\" && cp \"$TMPDIR/ok\" tmpdir-ok");
    let steps = json!([{"sh": script}, {"completion": "Done."}]);
    let h = Hostile::new("escape-grants", who, &steps);
    // the directories exist before the run, as on a machine that built and installed before
    for (rel, _) in TARGETS {
        let parent = h.home().join(rel);
        std::fs::create_dir_all(parent.parent().unwrap()).unwrap();
    }
    h.world.give_all(&h.home()).unwrap();
    let res = h.run().await;
    for (rel, allowed) in TARGETS {
        assert_eq!(
            h.home().join(rel).exists(),
            *allowed,
            "~/{rel}: expected {}; sandbox: {:#?}",
            if *allowed { "written" } else { "refused" },
            res.sandbox
        );
    }
    assert!(
        h.repo().join("tmpdir-ok").exists(),
        "the private TMPDIR was not writable: {res:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_data_caches_and_the_private_tmpdir_are_writable_as_root() {
    only_data_caches_and_the_private_tmpdir_are_writable(Who::Me).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_data_caches_and_the_private_tmpdir_are_writable_as_non_root() {
    only_data_caches_and_the_private_tmpdir_are_writable(Who::NonRoot).await;
}

/// A repository cloned under `/tmp`, as a new user does: the run writes it and its own `TMPDIR`,
/// never a sibling repository beside it, nor `/tmp` or `/var/tmp` themselves.
async fn a_repository_under_tmp_cannot_write_its_siblings(who: Who) {
    let tmp = TempDir::new_in(std::path::Path::new("/tmp"), "escape-tmp").unwrap();
    let repo = tmp.path().join("repo");
    let sibling = tmp.path().join("sibling");
    for (dir, file) in [(&repo, "a.txt"), (&sibling, "b.txt")] {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(file), "x\n").unwrap();
        git(dir, &["init", "-q"]);
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-qm", "initial"]);
    }
    let planted = format!("planted-{}", std::process::id());
    let script = format!(
        "echo evil > {s}/b.txt; echo evil > ../sibling/new.txt; \
         echo evil > /tmp/{planted}; echo evil > /var/tmp/{planted}; \
         echo ok > \"$TMPDIR/ok\" && cp \"$TMPDIR/ok\" tmpdir-ok; echo mine > mine.txt",
        s = sibling.display()
    );
    let h = Hostile::new(
        "escape-tmp-home",
        who,
        &json!([{"sh": script}, {"completion": "Done."}]),
    );
    // the clone under /tmp is where the user allowed runs, as they would
    h.write(
        ".config/droid-executor/config.toml",
        &format!(
            "env_passthrough = [\"{}\", \"DROID_CLI_CMD\"]\nallowed_roots = [\"{}\"]\n",
            tests::fake_droid::SCENARIO_ENV,
            tmp.path().display()
        ),
    );
    h.world.give_all(tmp.path()).unwrap();
    let child = h
        .command(&[
            "run",
            "--json",
            "--autonomy",
            "high",
            "--repo",
            &repo.display().to_string(),
            "Do the task",
        ])
        .current_dir(&repo)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.wait_with_output().await.unwrap();
    let res: ExecutionResult = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not a result ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let tmp_planted = std::path::Path::new("/tmp").join(&planted);
    let var_planted = std::path::Path::new("/var/tmp").join(&planted);
    let leaked = [tmp_planted.exists(), var_planted.exists()];
    let _ = std::fs::remove_file(&tmp_planted);
    let _ = std::fs::remove_file(&var_planted);
    assert_eq!(
        std::fs::read_to_string(sibling.join("b.txt")).unwrap(),
        "x\n",
        "{res:#?}"
    );
    assert!(!sibling.join("new.txt").exists(), "{res:#?}");
    assert_eq!(leaked, [false, false], "/tmp or /var/tmp written: {res:#?}");
    assert!(
        repo.join("mine.txt").exists(),
        "the repository itself: {res:#?}"
    );
    assert!(
        repo.join("tmpdir-ok").exists(),
        "its private TMPDIR: {res:#?}"
    );
    let sandbox = res.sandbox.as_ref().unwrap();
    assert!(
        !sandbox
            .writable
            .iter()
            .any(|p| p == "/tmp" || p == "/var/tmp"),
        "{sandbox:#?}"
    );
    let denied: String = res.issues.iter().map(|i| i.description.clone()).collect();
    assert!(
        denied.contains("sibling/b.txt"),
        "the refusal is reported: {denied}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repository_under_tmp_cannot_write_its_siblings_as_root() {
    a_repository_under_tmp_cannot_write_its_siblings(Who::Me).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repository_under_tmp_cannot_write_its_siblings_as_non_root() {
    a_repository_under_tmp_cannot_write_its_siblings(Who::NonRoot).await;
}
