//! The user's own models (BYOK custom models) through the real droid 0.225.2 and scripted model
//! servers: `doctor` lists each with the id droid answers to (`custom:<displayName>-<n>`, checked
//! by running droid with every id it printed and seeing which server answered); given no model
//! under airgap mode, the result names the custom model that answered, not the built-in default
//! droid's `init` event names; and without airgap, droid's authentication failure says what
//! droid needs, each way it names then checked to work.

use std::ffi::OsString;
use std::path::Path;

use droid_contract::Status;
use pretty_assertions::assert_eq;
use serde_json::json;
use tests::droid_bin::{DROID_VERSION, real_droid};
use tests::droid_home::DroidHome;
use tests::scripted_model::ScriptedModel;
use tests::temp_dir::TempDir;

use super::binary::{droid_executor, git_repo_at};
use super::common::{engine, git_repo, request, run};
use super::doctor::{check_lines, fix, line};

/// A scripted model that answers every request with `text`.
async fn answering(text: &str) -> ScriptedModel {
    ScriptedModel::start(json!([{ "text": text }]))
        .await
        .unwrap()
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// droid-executor's environment for `home`: droid's (HOME, PATH, LANG, and airgap mode when
/// `airgap`), and the real droid as `DROID_CLI_CMD`.
fn dx_env(home: &DroidHome, airgap: bool) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = home
        .env()
        .into_iter()
        .filter(|(k, _)| airgap || k != "FACTORY_AIRGAP_ENABLED")
        .collect();
    env.push(("DROID_CLI_CMD".into(), real_droid().into()));
    env
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_names_each_custom_model_by_the_id_droid_answers_to() {
    let (a, b, c) = (
        answering("answer from A").await,
        answering("answer from B").await,
        answering("answer from C").await,
    );
    // two entries share a name; one name has a space
    let home = DroidHome::new(&[
        ("Dup", &a.base_url()),
        ("Dup", &b.base_url()),
        ("Solo Model", &c.base_url()),
    ])
    .unwrap();
    let repo = home.path().join("repo");
    git_repo_at(&repo, &[("a.txt", "a\n")]);

    let out = droid_executor(&["doctor"], &dx_env(&home, false), &repo).await;
    let indent = |t: &str| format!("{:19}{t}", "");
    assert_eq!(
        check_lines(&out, "auth"),
        [
            line(
                "WARN",
                "auth",
                "no FACTORY_API_KEY; custom models in ~/.factory/settings.json, each passed as \
                 the model by its id:"
            ),
            indent("custom:Dup-0  (model scripted)"),
            indent("custom:Dup-1  (model scripted)"),
            indent("custom:Solo-Model-0  (model scripted)"),
            indent("a run given no model fails: droid's built-in default needs a Factory account"),
            fix(
                "pass one as the model (run --model custom:Dup-0, the request's model), or set \
                 model = \"custom:Dup-0\" in the config (DROID_EXECUTOR_MODEL); or set \
                 FACTORY_AIRGAP_ENABLED=1, and droid uses custom:Dup-0 when given no model"
            ),
        ],
        "{out:#?}"
    );

    // each id doctor printed, passed as the model, is answered by its own server
    let ids: Vec<String> = check_lines(&out, "auth")[1..4]
        .iter()
        .map(|l| l.split_whitespace().next().unwrap().to_owned())
        .collect();
    for (id, answer) in ids
        .iter()
        .zip(["answer from A", "answer from B", "answer from C"])
    {
        let ran = droid_executor(
            &[
                "run",
                "--json",
                "--repo",
                &s(&repo),
                "--model",
                id,
                "Say hi",
            ],
            &dx_env(&home, true),
            &repo,
        )
        .await;
        assert_eq!(ran.code, Some(0), "{id}: {ran:#?}");
        let result = ran.result();
        assert_eq!(result.summary, answer, "{id}");
        assert_eq!(result.agent.unwrap().model.as_deref(), Some(id.as_str()));
    }
    assert_eq!(
        [a.requests().len(), b.requests().len(), c.requests().len()],
        [1, 1, 1]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_no_model_under_airgap_the_result_names_the_custom_model_that_answered() {
    let first = answering("answer from First").await;
    let second = answering("answer from Second").await;
    let home =
        DroidHome::new(&[("First", &first.base_url()), ("Second", &second.base_url())]).unwrap();
    let repo = home.path().join("repo");
    git_repo_at(&repo, &[("a.txt", "a\n")]);
    let env = dx_env(&home, true);

    // the report a person reads
    let ran = droid_executor(&["run", "--repo", &s(&repo), "Say hi"], &env, &repo).await;
    assert_eq!(ran.code, Some(0), "{ran:#?}");
    let agent: Vec<&str> = ran
        .stdout
        .lines()
        .filter(|l| l.starts_with("agent: "))
        .collect();
    assert_eq!(
        agent,
        [format!(
            "agent: droid (droid {DROID_VERSION}, model custom:First-0)"
        )],
        "{ran:#?}"
    );

    // the result, with where the model came from in its logs
    let ran = droid_executor(
        &["run", "--json", "--repo", &s(&repo), "Say hi"],
        &env,
        &repo,
    )
    .await;
    let result = ran.result();
    assert_eq!(result.summary, "answer from First");
    assert_eq!(
        result.agent.unwrap().model.as_deref(),
        Some("custom:First-0")
    );
    let said: Vec<&String> = result
        .logs
        .iter()
        .filter(|l| l.starts_with("droid's init event named "))
        .collect();
    assert_eq!(
        said,
        [
            "droid's init event named gpt-5.6-sol, but its session ran with custom:First-0 \
             (droid's record of the session; with no model given, airgap mode uses the first \
             custom model)"
        ],
        "{:#?}",
        result.logs
    );
    assert_eq!((first.requests().len(), second.requests().len()), (2, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_airgap_the_authentication_failure_names_what_droid_needs() {
    let model = answering("Done.").await;
    let home = DroidHome::new(&[("Mock", &model.base_url())]).unwrap();
    let repo = git_repo(&[("a.txt", "x\n")]);
    let scratch = TempDir::new("e2e-scratch").unwrap();
    let without_airgap: Vec<(OsString, OsString)> = home
        .env()
        .into_iter()
        .filter(|(k, _)| k != "FACTORY_AIRGAP_ENABLED")
        .collect();

    // no key, no airgap, no model: droid's built-in default needs a Factory account
    let engine_plain = engine(real_droid(), without_airgap.clone(), scratch.path());
    let ran = run(
        &engine_plain,
        &request(repo.path(), "Say something", json!({})),
    )
    .await;
    assert_eq!(ran.result.status, Status::Failed, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), vec!["auth_failure"]);
    assert_eq!(
        ran.result.issues[0].suggested_action,
        "pass one of your custom models as the model (custom:Mock-0: the request's model, `run \
         --model custom:Mock-0`, or model = \"custom:Mock-0\" in the config): given no model, \
         droid uses its built-in default, which needs a Factory account; or set \
         FACTORY_AIRGAP_ENABLED=1 for droid-executor, and droid uses the first custom model \
         (custom:Mock-0); or export FACTORY_API_KEY=fk-…"
    );
    assert!(model.requests().is_empty());

    // the first way: the model passed, still without airgap or key
    let ran = run(
        &engine_plain,
        &request(
            repo.path(),
            "Say something",
            json!({"model": "custom:Mock-0"}),
        ),
    )
    .await;
    assert_eq!(ran.result.status, Status::Success, "{:#?}", ran.result);
    assert_eq!(
        ran.result.agent.as_ref().unwrap().model.as_deref(),
        Some("custom:Mock-0")
    );

    // the second: airgap mode, no model
    let engine_airgap = engine(real_droid(), home.env(), scratch.path());
    let ran = run(
        &engine_airgap,
        &request(repo.path(), "Say something", json!({})),
    )
    .await;
    assert_eq!(ran.result.status, Status::Success, "{:#?}", ran.result);
    assert_eq!(
        ran.result.agent.as_ref().unwrap().model.as_deref(),
        Some("custom:Mock-0")
    );
    assert_eq!(model.requests().len(), 2);
}
