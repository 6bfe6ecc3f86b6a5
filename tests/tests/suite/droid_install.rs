//! droid installed as npm installs it, with the real binary: the platform package
//! `@factory/cli-linux-x64` under an npm global prefix (on its own, and nested in the launcher's
//! dependencies), which npm links nowhere onto `PATH`, found by the locator from
//! `NPM_CONFIG_PREFIX`, the user's `.npmrc` and `PATH`, and a task run through it; the real
//! `@factory/cli` 0.225.1 launcher without its platform package (what an unpinned install gave
//! a new user), for which `doctor` and `ping` give the platform package's pinned line rather than
//! the step that just failed, and which, once that package is beside it, is run as the binary it
//! would start. And every install line of droid in the repository is that pinned line.
//!
//! Each prefix is a temp dir; the binary is hard-linked into it (copied across file systems).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;
use serde_json::json;
use tests::droid_bin::{DROID_VERSION, LAUNCHER_VERSION, droid_launcher, real_droid};
use tests::droid_home::DroidHome;
use tests::scripted_model::ScriptedModel;

use super::binary::{NO_DROID_PATH, Out, droid_executor, git_repo_at};
use super::doctor::{check_lines, fix, line};

/// The package that holds droid's binary.
const PLATFORM_PACKAGE: &str = "@factory/cli-linux-x64";

/// The pinned install line users are given.
fn install_line() -> String {
    format!("npm install -g {PLATFORM_PACKAGE}@{DROID_VERSION}")
}

/// The real droid's platform package laid out under `dir` (`dir/package.json`, `dir/bin/droid`),
/// as npm unpacks it; the binary's path.
fn platform_package(dir: &Path) -> PathBuf {
    let real = real_droid();
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    let manifest = real
        .parent()
        .and_then(Path::parent)
        .map(|p| p.join("package.json"));
    match manifest.filter(|m| m.is_file()) {
        Some(m) => std::fs::copy(m, dir.join("package.json"))
            .map(drop)
            .unwrap(),
        None => std::fs::write(
            dir.join("package.json"),
            json!({"name": PLATFORM_PACKAGE, "version": DROID_VERSION}).to_string(),
        )
        .unwrap(),
    }
    let bin = dir.join("bin/droid");
    if std::fs::hard_link(&real, &bin).is_err() {
        std::fs::copy(&real, &bin).unwrap();
    }
    bin
}

/// The directory of `node` on this test's `PATH` (the launcher is a Node script).
fn node_dir() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .find(|d| d.join("node").is_file())
        .unwrap_or_else(|| {
            panic!("node is needed to run the @factory/cli launcher: install Node.js 20 or later")
        })
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// A HOME (a droid HOME with one custom model when `model` is given) and `extra`.
fn env(home: &Path, path: &str, extra: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = vec![
        ("HOME".into(), home.into()),
        ("PATH".into(), path.into()),
        ("LANG".into(), "C.UTF-8".into()),
    ];
    env.extend(extra.iter().map(|(k, v)| ((*k).into(), (*v).into())));
    env
}

async fn doctor(env: &[(OsString, OsString)], cwd: &Path) -> Out {
    droid_executor(&["doctor"], env, cwd).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_platform_package_under_an_npm_prefix_is_found_and_runs_a_task() {
    let model = ScriptedModel::start(json!([{"text": "Hello from the pinned droid."}]))
        .await
        .unwrap();
    let home = DroidHome::new(&[("Mock", &model.base_url())]).unwrap();
    let h = home.path();
    let repo = h.join("repo");
    git_repo_at(&repo, &[("a.txt", "a\n")]);
    let prefix = h.join("npm-global");
    let bin = platform_package(&prefix.join("lib/node_modules/@factory/cli-linux-x64"));
    let p = s(&prefix);
    let droid_line = line(
        "OK",
        "droid",
        &format!(
            "{} (from npm global prefix {p}), version {DROID_VERSION}",
            bin.display()
        ),
    );

    // npm's prefix from the variable npm reads
    let by_var = env(h, NO_DROID_PATH, &[("NPM_CONFIG_PREFIX", &p)]);
    let out = doctor(&by_var, &repo).await;
    assert_eq!(
        check_lines(&out, "droid"),
        [droid_line.as_str()],
        "{out:#?}"
    );

    // from the user's npm configuration, as `npm config set prefix ~/npm-global` writes it
    std::fs::write(h.join(".npmrc"), "prefix=~/npm-global\n").unwrap();
    let out = doctor(&env(h, NO_DROID_PATH, &[]), &repo).await;
    assert_eq!(
        check_lines(&out, "droid"),
        [droid_line.as_str()],
        "{out:#?}"
    );
    std::fs::remove_file(h.join(".npmrc")).unwrap();

    // from PATH: the prefix's bin directory, where npm links programs, is on it
    std::fs::create_dir_all(prefix.join("bin")).unwrap();
    let path = format!("{p}/bin:{NO_DROID_PATH}");
    let out = doctor(&env(h, &path, &[]), &repo).await;
    assert_eq!(check_lines(&out, "droid"), [droid_line], "{out:#?}");

    // and a task runs through it
    let mut run_env = by_var.clone();
    run_env.push(("FACTORY_AIRGAP_ENABLED".into(), "1".into()));
    let ran = droid_executor(
        &[
            "run",
            "--json",
            "--repo",
            &s(&repo),
            "--model",
            &home.model_id("Mock"),
            "Say hello",
        ],
        &run_env,
        &repo,
    )
    .await;
    assert_eq!(ran.code, Some(0), "{ran:#?}");
    let result = ran.result();
    assert_eq!(result.summary, "Hello from the pinned droid.");
    let agent = result.agent.unwrap();
    assert_eq!(agent.version.as_deref(), Some(DROID_VERSION));
    assert_eq!(agent.model, Some(home.model_id("Mock")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_platform_package_nested_in_the_launchers_dependencies_is_found() {
    let home = DroidHome::new(&[]).unwrap();
    let h = home.path();
    let prefix = h.join("global");
    let bin = platform_package(
        &prefix.join("lib/node_modules/@factory/cli/node_modules/@factory/cli-linux-x64"),
    );
    let p = s(&prefix);
    let out = doctor(&env(h, NO_DROID_PATH, &[("npm_config_prefix", &p)]), h).await;
    assert_eq!(
        check_lines(&out, "droid"),
        [line(
            "OK",
            "droid",
            &format!(
                "{} (from npm global prefix {p}), version {DROID_VERSION}",
                bin.display()
            )
        )],
        "{out:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launcher_without_its_binary_gets_the_platform_package_line_and_then_runs_it() {
    let home = DroidHome::new(&[]).unwrap();
    let h = home.path();
    let prefix = h.join("global");
    let modules = prefix.join("lib/node_modules");
    let launcher = modules.join("@factory/cli");
    // what the unpinned install of the launcher (0.225.1) left: the launcher, linked onto PATH,
    // without the platform package the registry did not have
    copy_dir(&droid_launcher(), &launcher);
    std::fs::create_dir_all(prefix.join("bin")).unwrap();
    std::os::unix::fs::symlink(
        "../lib/node_modules/@factory/cli/bin/droid",
        prefix.join("bin/droid"),
    )
    .unwrap();
    let on_path = prefix.join("bin/droid");
    let path = format!(
        "{}:{}:{NO_DROID_PATH}",
        s(&prefix.join("bin")),
        s(&node_dir())
    );
    let env = env(h, &path, &[]);
    let head = format!(
        "{} (from PATH) is the @factory/cli launcher {LAUNCHER_VERSION}, without the package \
         that holds droid itself (@factory/cli-linux-x64)",
        on_path.display()
    );
    let the_fix = fix(&format!(
        "install that package, pinned: {} (reinstalling @factory/cli does not bring it)",
        install_line()
    ));

    let out = doctor(&env, h).await;
    assert_eq!(out.code, Some(1), "{out:#?}");
    let lines = check_lines(&out, "droid");
    // doctor ran it: droid's own words follow
    assert!(
        lines[0].starts_with(&line(
            "FAIL",
            "droid",
            &format!("{head}; found but does not run: ")
        )),
        "{out:#?}"
    );
    assert!(
        lines[0].contains("Could not find the droid binary for linux-x64"),
        "{out:#?}"
    );
    assert_eq!(lines[1..], [the_fix.as_str()], "{out:#?}");

    // `ping` does not start droid: it says so from the layout
    let pinged = droid_executor(&["ping", "droid"], &env, h).await;
    assert_eq!(pinged.code, Some(1), "{pinged:#?}");
    assert_eq!(
        check_lines(&pinged, "droid"),
        [line("FAIL", "droid", &head), the_fix],
        "{pinged:#?}"
    );

    // a task through it fails with the same fix
    let repo = h.join("repo");
    git_repo_at(&repo, &[("a.txt", "a\n")]);
    let ran = droid_executor(
        &["run", "--json", "--repo", &s(&repo), "Say hi"],
        &env,
        &repo,
    )
    .await;
    let result = ran.result();
    assert_eq!(result.status, droid_contract::Status::Failed, "{ran:#?}");
    assert_eq!(ran.issue_kinds(), ["droid_not_found"], "{ran:#?}");
    assert_eq!(
        result.issues[0].suggested_action,
        format!(
            "install the binary itself, pinned: {} (reinstalling @factory/cli does not bring it); \
             droid-executor finds it under npm's global prefix (droid-executor doctor checks it)",
            install_line()
        )
    );

    // the pinned line installs the platform package beside it: the launcher's binary is run
    let bin = platform_package(&modules.join("@factory/cli-linux-x64"));
    let out = doctor(&env, h).await;
    let real_bin = std::fs::canonicalize(&bin).unwrap();
    assert_eq!(
        check_lines(&out, "droid"),
        [line(
            "OK",
            "droid",
            &format!(
                "{} (from PATH, through the @factory/cli launcher {}), version {DROID_VERSION}",
                real_bin.display(),
                on_path.display()
            )
        )],
        "{out:#?}"
    );
}

/// Copy the directory `from` (regular files only) to `to`, keeping modes.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let kind = e.file_type().unwrap();
        if kind.is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else if kind.is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// The repository's files, tracked or not yet (not ignored), relative to `root`.
fn repository_files(root: &Path) -> Vec<String> {
    #[allow(clippy::disallowed_methods)] // lists the checkout's files
    let out = std::process::Command::new("git")
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .current_dir(root)
        .output()
        .unwrap_or_else(|e| panic!("git is needed to list the repository's files: {e}"));
    assert!(
        out.status.success(),
        "git ls-files in {} failed (this check needs a git checkout): {}",
        root.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .split('\0')
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_droid_install_line_is_the_pinned_platform_package() {
    // what droid-executor itself says
    assert_eq!(droid_exec::health::TESTED_DROID, DROID_VERSION);
    assert_eq!(
        droid_exec::providers::provider(droid_contract::ProviderId::Droid).install_hint(),
        install_line()
    );
    // and every file of the repository: the launcher alone may come without its binary
    let root = tests::droid_bin::workspace_root();
    let needle = ["npm install -g ", "@factory/cli"].concat();
    let pinned = install_line();
    let mut unpinned = Vec::new();
    for file in repository_files(&root) {
        let Ok(text) = std::fs::read_to_string(root.join(&file)) else {
            continue;
        };
        for (n, l) in text.lines().enumerate() {
            let mut rest = l;
            while let Some(at) = rest.find(&needle) {
                if !rest[at..].starts_with(&pinned) {
                    unpinned.push(format!("{file}:{}: {}", n + 1, l.trim()));
                }
                rest = &rest[at + needle.len()..];
            }
        }
    }
    assert_eq!(
        unpinned,
        Vec::<String>::new(),
        "droid's install line is `{pinned}` (the launcher @factory/cli alone installed 0.225.1 \
         without its binary)"
    );
}
