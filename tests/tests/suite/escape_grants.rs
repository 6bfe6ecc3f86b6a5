//! Issue 29, item 4: the default grants hold nothing any program later executes or loads as
//! code, and a run cannot write another repository, wherever the repository lies. Before, the
//! agent replaced the default toolchain's `cargo` under `~/.rustup/toolchains/…/bin` (the user's
//! own `cargo --version` later ran it) and wrote `~/.cargo/registry/src/*/build.rs`,
//! `~/.npm/_npx` and `~/.cache`. Now the run writes the data-only caches and its own private
//! `TMPDIR`, and nothing else of those. As root and as a non-root user whose HOME is outside
//! /tmp. (`/tmp` itself stays writable for now: see docs/operations.md.)

use serde_json::json;
use tests::non_root::Who;

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
