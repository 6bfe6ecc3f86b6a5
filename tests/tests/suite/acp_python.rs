//! `droid-executor acp` driven by the official Python ACP SDK (PyPI `agent-client-protocol`
//! 0.12.1 in the venv `target/interop/py-acp`, `tests/interop/acp_py_client.py`): the same
//! scenario flows as `acp_node` (see there), through the real droid 0.225.2 on the scripted
//! model, every transcript validated against the v1 schema and no process left.
//!
//! Python's SDK is the stricter one: it refuses native droid's `{}` answer to
//! `session/set_config_option` (see `acp_node`'s baseline test).
//!
//! Also the validator itself (`tests/interop/acp_validate.py`), on two transcripts of droid's
//! native ACP mode from the ACP research recordings (`tests/fixtures/acp-droid-native/`): it
//! must find exactly droid's recorded violation in each, `session/set_config_option` answered
//! with `{}` where the schema requires `configOptions`, and pass everything else.

use pretty_assertions::assert_eq;
use serde_json::json;
use tests::acp_world::{Sdk, validation_report};
use tests::droid_bin::workspace_root;

use super::acp_node::{
    allow_always, cancel_mid_stream, cancel_mid_turn, create_and_edit, droid_missing, load,
    mode_medium, model_error, native_baseline, reject, two_sessions, verify_fails,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_creates_and_edits_files_with_streamed_chunks_diffs_and_measured_changes() {
    create_and_edit(Sdk::Python).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_rejects_a_write_which_fails_and_the_turn_ends() {
    reject(Sdk::Python).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_allows_always_and_is_not_asked_again() {
    allow_always(Sdk::Python).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_cancels_mid_turn_leaving_no_process_of_the_turn() {
    cancel_mid_turn(Sdk::Python).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_cancels_mid_stream_and_prompts_again() {
    cancel_mid_stream(Sdk::Python).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_runs_two_sessions_at_once() {
    two_sessions(Sdk::Python).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_gets_the_model_error_as_a_json_rpc_error() {
    model_error(Sdk::Python).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_gets_droid_missing_as_32001_with_the_install_hint() {
    droid_missing(Sdk::Python).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_sees_a_failed_verification_in_the_measured_changes() {
    verify_fails(Sdk::Python).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_in_mode_medium_is_not_asked_for_writes() {
    mode_medium(Sdk::Python).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_lists_and_loads_a_session_on_a_new_connection() {
    load(Sdk::Python).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_sees_native_droid_break_the_schema_and_not_stream_where_ours_does() {
    native_baseline(Sdk::Python).await;
}

#[test]
fn validator_finds_droid_natives_set_config_option_violation_and_nothing_else() {
    let dir = workspace_root().join("tests/fixtures/acp-droid-native");
    let logs = [dir.join("tools-allow.log"), dir.join("slow-cancel.log")];
    let (report, code) = validation_report(&[&logs[0], &logs[1]]);
    let violation = json!([{
        "line": 7,
        "dir": "a2c",
        "method": "session/set_config_option",
        "def": "SetSessionConfigOptionResponse",
        "errors": ["(root): 'configOptions' is a required property"],
    }]);
    assert_eq!(
        report,
        json!({"files": [
            {"path": logs[0], "passed": 28, "failed": 1, "violations": violation},
            {"path": logs[1], "passed": 19, "failed": 1, "violations": violation},
        ]})
    );
    assert_eq!(code, Some(1), "a violation must fail the validator");
}
