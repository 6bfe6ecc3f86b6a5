//! `droid-executor setup …` on a machine without the client it sets up: it says what to install,
//! with the pinned line `doctor` gives (the version this release is tested with), instead of a
//! bare "not found". `setup mcp --client droid` registers through `droid mcp add`, so without
//! droid it does nothing (exit 2) but say so; its `--dry-run` still shows what it would do (exit
//! 0). Claude Code and Codex read the files `setup` writes: those are written, with a note on
//! stderr; so are the skills in a client's own root, and Zed's entry.

use std::ffi::OsString;
use std::path::Path;

use droid_contract::ProviderId;
use pretty_assertions::assert_eq;
use tests::droid_bin::droid_executor_bin;
use tests::temp_dir::TempDir;

use super::binary::{NO_DROID_PATH, droid_executor};

/// HOME, a PATH with no agent CLI, an npm prefix with nothing installed in it, no
/// `DROID_CLI_CMD`: no client is installed.
fn bare(home: &Path) -> Vec<(OsString, OsString)> {
    vec![
        ("HOME".into(), home.into()),
        ("PATH".into(), NO_DROID_PATH.into()),
        ("NPM_CONFIG_PREFIX".into(), home.join("npm-global").into()),
    ]
}

/// The line `doctor` gives to install `id`'s CLI at the version this release is tested with.
fn install_line(id: ProviderId) -> String {
    let provider = droid_exec::providers::provider(id);
    let line = provider.install_hint();
    let (_, version) = provider.package();
    assert!(
        line.starts_with("npm install -g ") && line.ends_with(&format!("@{version}")),
        "not a pinned install line: {line}"
    );
    line
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_mcp_for_droid_without_droid_says_what_to_install() {
    let home = TempDir::new("setup-no-droid").unwrap();
    let env = bare(home.path());
    let droid = install_line(ProviderId::Droid);

    let out = droid_executor(&["setup", "mcp", "--client", "droid"], &env, home.path()).await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    assert_eq!(out.stdout, "", "nothing was done, nothing is claimed");
    assert!(
        out.stderr
            .starts_with("droid-executor: droid is not installed here (looked for: "),
        "{out:#?}"
    );
    assert!(
        out.stderr.ends_with(&format!(
            "); install it with: {droid}, then run `droid-executor setup mcp --client droid` \
             again (it registers through `droid mcp add`)\n"
        )),
        "{out:#?}"
    );
    assert!(!out.stderr.contains("invalid value"), "{out:#?}");
    assert!(!home.path().join(".factory").exists());

    let dry = droid_executor(
        &["setup", "mcp", "--client", "droid", "--dry-run"],
        &env,
        home.path(),
    )
    .await;
    assert_eq!(dry.code, Some(0), "{dry:#?}");
    // the command, then droid's settings and what each tool needs
    let lines: Vec<&str> = dry.stdout.lines().collect();
    assert_eq!(
        lines[0],
        format!(
            "would run: droid mcp add droid-executor --env DROID_EXECUTOR_CLIENT=droid -- {} mcp",
            droid_executor_bin().display()
        )
    );
    assert!(
        lines[1].starts_with(&format!(
            "would write {}: blockOnMcpLoad = true",
            home.path().join(".factory/settings.json").display()
        )),
        "{dry:#?}"
    );
    assert!(
        lines[2].starts_with("note: at its default autonomy droid calls "),
        "{dry:#?}"
    );
    assert!(
        dry.stderr
            .starts_with("droid-executor: note: droid is not installed here")
            && dry.stderr.ends_with(&format!(
                "; install it with: {droid}: `droid mcp add` needs it, so install it before \
                 running this without --dry-run\n"
            )),
        "{dry:#?}"
    );
    assert!(
        !home.path().join(".factory").exists(),
        "a dry run changes nothing"
    );
}

/// Claude Code and Codex read what `setup` writes: written, and a note says what to install.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_mcp_for_claude_or_codex_without_it_writes_and_says_what_to_install() {
    for (client, id, file) in [
        ("claude", ProviderId::Claude, ".claude.json"),
        ("codex", ProviderId::Codex, ".codex/config.toml"),
    ] {
        let home = TempDir::new("setup-no-client").unwrap();
        let env = bare(home.path());
        let note = format!(
            "droid-executor: note: {} ({client}) is not installed here (looked for: {client} on \
             PATH (not found)); install it with: {}; it reads this registration once installed\n",
            id.display_name(),
            install_line(id)
        );
        let dry = droid_executor(
            &["setup", "mcp", "--client", client, "--dry-run"],
            &env,
            home.path(),
        )
        .await;
        assert_eq!(dry.code, Some(0), "{dry:#?}");
        assert_eq!(dry.stderr, note, "{dry:#?}");
        assert!(dry.stdout.starts_with("would write "), "{dry:#?}");
        assert!(
            !home.path().join(file).exists(),
            "a dry run changes nothing"
        );
        let out = droid_executor(&["setup", "mcp", "--client", client], &env, home.path()).await;
        assert_eq!(out.code, Some(0), "{out:#?}");
        assert_eq!(out.stderr, note, "{out:#?}");
        assert!(home.path().join(file).is_file(), "{client}: {out:#?}");
    }
}

/// The skills in a client's own root, and Zed's entry, are written too, with the note.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_skill_and_acp_without_the_client_write_and_say_what_to_install() {
    let home = TempDir::new("setup-no-skill-client").unwrap();
    let env = bare(home.path());
    let out = droid_executor(&["setup", "skill", "--client", "droid"], &env, home.path()).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert!(
        out.stderr
            .starts_with("droid-executor: note: droid is not installed here")
            && out.stderr.ends_with(&format!(
                "; install it with: {}; it reads these skills once installed\n",
                install_line(ProviderId::Droid)
            )),
        "{out:#?}"
    );
    assert!(
        home.path()
            .join(".factory/skills/droid-executor/SKILL.md")
            .is_file()
    );

    let out = droid_executor(&["setup", "acp", "--client", "zed"], &env, home.path()).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    // neither droid (the entry cannot name it) nor Zed
    let notes: Vec<&str> = out.stderr.lines().collect();
    assert!(
        notes[0].starts_with("droid-executor: note: droid is not installed here")
            && notes[0].ends_with(&format!(
                "; install it with: {}; the entry names no droid, so the agent looks for it on \
                 Zed's PATH: run `droid-executor setup acp --client zed` again once it is installed",
                install_line(ProviderId::Droid)
            )),
        "{out:#?}"
    );
    assert_eq!(
        notes[1..],
        [format!(
            "droid-executor: note: Zed is not installed here (no zed or zeditor on PATH, no {}); \
             it reads this entry once installed: https://zed.dev/download",
            home.path().join(".config/zed").display()
        )],
        "{out:#?}"
    );
    assert!(home.path().join(".config/zed/settings.json").is_file());
}
