//! `droid-executor acp` driven by acpx 0.19.1 itself (npm, a headless ACP client nobody on this
//! project wrote, on the Node 22 `cargo xtask fetch-interop` installs) through the REAL droid
//! 0.225.2 on the scripted model: the scenarios issue 33 found wrong in acpx, as a user types
//! them (harness: `tests/src/acpx_world.rs`).
//!
//! - edit, then a question, then another: only the edit reports measured changes (before: each
//!   question reported the edited file again, as added, whole), and the edit's result shows its
//!   diff, not droid's internal JSON;
//! - `set-mode low`, the agent gone, then an edit: it runs without a permission prompt (before:
//!   the restarted agent answered `read_only`, acpx's background process could not show the
//!   prompt, the edit was denied, exit 5);
//! - a session with a failed command, a cancelled one and a rejected Create, loaded: each comes
//!   back `failed`, as it ended (before: all `completed`), in our words;
//! - a model error: its cause is in acpx's output, as message text.

use pretty_assertions::assert_eq;
use serde_json::json;
use tests::acpx_world::{AcpxRun, AcpxWorld};

/// The tool lines acpx printed (`[tool] TITLE (STATUS)`), in order.
fn tool_lines(run: &AcpxRun) -> Vec<&str> {
    run.stdout
        .lines()
        .filter(|l| l.starts_with("[tool] "))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acpx_edit_then_two_questions_only_the_edit_reports_changes() {
    let w = AcpxWorld::new().await;
    let repo = w.repo("phantom", &[("README.md", "one\ntwo\nthree\n")]);
    let readme = repo.join("README.md");
    // one script for the session: the model's turn counts droid's assistant messages
    w.model.set_script(json!([
        {"text": "Editing.", "tool": [{"name": "Edit", "args": {"file_path": readme, "old_str": "one", "new_str": "uno"}}]},
        {"text": "Edited."},
        {"text": "Answer one."},
        {"text": "Answer two."}
    ]));
    w.new_session(&repo).await;
    let edit = w.run(&repo, &["--approve-all", "edit the readme"]).await;
    edit.assert_ok();
    assert_eq!(
        std::fs::read_to_string(&readme).unwrap(),
        "uno\ntwo\nthree\n"
    );
    assert_eq!(
        edit.lines_starting("[tool] Measured changes"),
        1,
        "{}",
        edit.dump()
    );
    assert!(
        edit.stdout
            .contains("[tool] Measured changes: 1 file (+1 −1) (completed)")
            && edit
                .stdout
                .contains("1 file changed (+1 −1): README.md modified (+1 −1)"),
        "{}",
        edit.dump()
    );
    // the edit's result is its diff, not droid's internal JSON; no data printed as JSON
    for noise in ["\"success\"", "diffLines", "filesChanged"] {
        assert!(!edit.stdout.contains(noise), "{noise}: {}", edit.dump());
    }
    for (question, answer) in [
        ("question one", "Answer one."),
        ("question two", "Answer two."),
    ] {
        let run = w.run(&repo, &["--approve-all", question]).await;
        run.assert_ok();
        assert!(run.stdout.contains(answer), "{}", run.dump());
        assert_eq!(tool_lines(&run), Vec::<&str>::new(), "{}", run.dump());
    }
    w.none_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acpx_set_mode_low_survives_a_restart_and_the_edit_is_not_asked() {
    let w = AcpxWorld::new().await;
    let repo = w.repo("mode", &[("a.txt", "a\n")]);
    w.model.set_script(json!([
        {"text": "Creating.", "tool": [{"name": "Create", "args": {"file_path": repo.join("new.txt"), "content": "new\n"}}]},
        {"text": "Created."}
    ]));
    w.new_session(&repo).await;
    let set = w.run(&repo, &["set-mode", "low"]).await;
    set.assert_ok();
    assert_eq!(set.stdout.trim(), "mode set: low", "{}", set.dump());
    // the agent that took the mode is gone: the prompt starts another one
    w.none_left().await;
    // no permission flag: acpx's background process cannot show a prompt, and denies
    let run = w.run(&repo, &["create new.txt"]).await;
    run.assert_ok();
    assert!(
        !run.stdout.contains("session/request_permission"),
        "the edit was asked: {}",
        run.dump()
    );
    assert!(
        run.stdout.contains("[tool] Create new.txt (completed)"),
        "{}",
        run.dump()
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("new.txt")).unwrap(),
        "new\n"
    );
    w.none_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acpx_load_replays_a_failed_a_cancelled_and_a_rejected_tool_as_they_ended() {
    let w = AcpxWorld::new().await;
    let repo = w.repo("replay", &[("a.txt", "a\n")]);
    w.model.set_script(json!([
        {"text": "Failing.", "tool": [{"name": "Execute", "args": {"command": "echo out; exit 3", "riskLevel": "low", "riskLevelReason": "prints"}}]},
        {"text": "It failed."},
        {"text": "Sleeping.", "tool": [{"name": "Execute", "args": {"command": "sleep 45", "riskLevel": "low", "riskLevelReason": "waits"}}]},
        // the cancelled turn leaves one assistant message: the next prompt gets this
        {"text": "Creating.", "tool": [{"name": "Create", "args": {"file_path": repo.join("c.txt"), "content": "c\n"}}]},
        {"text": "Not created."}
    ]));
    let id = w.new_session(&repo).await;
    let failed = w.run(&repo, &["--approve-all", "fail"]).await;
    failed.assert_ok();
    assert!(
        failed.stdout.contains("[tool] `echo out; exit 3` (failed)"),
        "{}",
        failed.dump()
    );
    let sleeping = w.start(&repo, &["--approve-all", "sleep"]);
    w.wait_for("sleep\u{0}45").await;
    w.run(&repo, &["cancel"]).await.assert_ok();
    let cancelled = AcpxWorld::finish(sleeping).await;
    assert!(
        cancelled.stdout.contains("[done] cancelled"),
        "{}",
        cancelled.dump()
    );
    let rejected = w.run(&repo, &["--deny-all", "create"]).await;
    rejected.assert_ok();
    assert!(!repo.join("c.txt").exists(), "{}", rejected.dump());
    assert!(
        rejected
            .stdout
            .contains("Rejected by the user: droid did not run it."),
        "{}",
        rejected.dump()
    );
    w.none_left().await;

    let replay = w.load(&repo, &id).await;
    replay.assert_ok();
    assert_eq!(
        tool_lines(&replay),
        vec![
            "[tool] `echo out; exit 3` (failed)",
            "[tool] `sleep 45` (failed)",
            "[tool] Create c.txt (failed)",
        ],
        "{}",
        replay.dump()
    );
    for said in [
        "[Process exited with code 3]",
        "Cancelled: the turn was stopped before this finished.",
        "Rejected by the user: droid did not run it.",
    ] {
        assert!(replay.stdout.contains(said), "{said}: {}", replay.dump());
    }
    w.none_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acpx_shows_why_a_turn_failed() {
    let w = AcpxWorld::new().await;
    let repo = w.repo("failure", &[("a.txt", "a\n")]);
    w.model.set_script(json!([
        {"status": 400, "error_message": "Bad request: invalid parameter"}
    ]));
    w.new_session(&repo).await;
    let run = w.run(&repo, &["--approve-all", "fail please"]).await;
    assert_ne!(run.code, Some(0), "{}", run.dump());
    // the cause, as the agent's message (acpx prints message text on stdout)
    assert!(
        run.stdout.contains(
            "This turn failed: the model refused droid's request (400 Bad request: invalid \
             parameter)."
        ),
        "{}",
        run.dump()
    );
    w.none_left().await;
}
