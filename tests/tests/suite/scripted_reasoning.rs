//! The scripted model's `reasoning` key against the real droid: a chat-completions turn that
//! streams `delta.reasoning_content` (or, with `reasoning_field`, `delta.reasoning`) word by word
//! before its text. droid's interactive mode (`--input-format stream-jsonrpc --output-format
//! stream-jsonrpc`, the ACP agent's backend) reports it as `thinking_text_delta` notifications
//! (`{messageId, blockIndex: 0, textDelta}`), one per chunk as it arrives, then
//! `thinking_text_complete`, before the `assistant_text_delta`s of block 1; the assistant message
//! it stores holds a `thinking` block. These are what an ACP `agent_thought_chunk` is made from.

use std::process::Stdio;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::droid_bin::real_droid;
use tests::droid_home::DroidHome;
use tests::scripted_model::ScriptedModel;
use tests::temp_dir::TempDir;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};

/// Generous: droid starts in about a second, the turn streams a dozen chunks.
const TURN_LIMIT: Duration = Duration::from_secs(120);

/// One envelope of droid's JSON-RPC dialect.
fn request(id: &str, method: &str, params: Value) -> String {
    let v = json!({"jsonrpc": "2.0", "type": "request", "factoryApiVersion": "1.0.0",
        "id": id, "method": method, "params": params});
    format!("{v}\n")
}

/// The notifications of one turn answered from `turn`, as `(type, textDelta or null)` for the
/// thinking and assistant deltas and completions, in order; and the stored assistant message.
async fn one_turn(turn: Value) -> (Vec<(String, Value)>, Value) {
    let model = ScriptedModel::start(json!([turn])).await.unwrap();
    let home = DroidHome::new(&[("Reasoner", &model.base_url())]).unwrap();
    let cwd = TempDir::new("reasoning-cwd").unwrap();
    #[allow(clippy::disallowed_methods)] // the real droid, in the mode the ACP agent drives
    let mut child = tokio::process::Command::new(real_droid())
        .args([
            "exec",
            "--input-format",
            "stream-jsonrpc",
            "--output-format",
            "stream-jsonrpc",
        ])
        .env_clear()
        .envs(home.env())
        .current_dir(cwd.path())
        .process_group(0)
        .kill_on_drop(true)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let init = request(
        "init-1",
        "droid.initialize_session",
        json!({"machineId": "test", "cwd": cwd.path(), "modelId": home.model_id("Reasoner"),
            "autonomyLevel": "low", "interactionMode": "auto"}),
    );
    stdin.write_all(init.as_bytes()).await.unwrap();
    let mut seen = Vec::new();
    let mut stored = Value::Null;
    let read = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == "init-1" {
                assert!(v.get("error").is_none(), "{v}");
                let msg = request(
                    "msg-1",
                    "droid.add_user_message",
                    json!({"text": "think, then say hello"}),
                );
                stdin.write_all(msg.as_bytes()).await.unwrap();
            }
            let n = &v["params"]["notification"];
            let kind = n["type"].as_str().unwrap_or_default();
            match kind {
                "thinking_text_delta" | "assistant_text_delta" => {
                    seen.push((
                        format!("{kind} {}", n["blockIndex"]),
                        n["textDelta"].clone(),
                    ));
                }
                "thinking_text_complete" | "assistant_text_complete" => {
                    seen.push((format!("{kind} {}", n["blockIndex"]), Value::Null));
                }
                "create_message" if n["message"]["role"] == "assistant" => {
                    stored = n["message"]["content"].clone();
                }
                "agent_turn_completed" => {
                    assert_eq!(n["reason"], "completed", "{v}");
                    return;
                }
                _ => {}
            }
        }
        panic!("droid's stdout ended before the turn completed");
    };
    tokio::time::timeout(TURN_LIMIT, read)
        .await
        .expect("the turn completes");
    drop(stdin);
    let status = tokio::time::timeout(TURN_LIMIT, child.wait())
        .await
        .expect("droid exits when its stdin closes")
        .unwrap();
    assert!(status.success(), "{status}");
    (seen, stored)
}

fn deltas(kind: &str, words: &[&str]) -> Vec<(String, Value)> {
    words
        .iter()
        .map(|w| (kind.to_owned(), json!(w)))
        .chain([(kind.replace("delta", "complete"), Value::Null)])
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_content_streams_as_thinking_deltas() {
    let (seen, stored) = one_turn(json!({
        "reasoning": "Let me think first", "text": "Hello there", "split_text": true,
        "chunk_sleep": 0.02,
    }))
    .await;
    let mut expected = deltas("thinking_text_delta 0", &["Let ", "me ", "think ", "first"]);
    expected.extend(deltas("assistant_text_delta 1", &["Hello ", "there"]));
    assert_eq!(seen, expected);
    assert_eq!(stored[0]["type"], "thinking", "{stored:#}");
    assert_eq!(stored[0]["thinking"], "Let me think first");
    assert_eq!(stored[1], json!({"type": "text", "text": "Hello there"}));
}

/// droid reads the other name OpenAI-compatible servers use, `delta.reasoning`, the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reasoning_field_is_read_too() {
    let (seen, _) = one_turn(json!({
        "reasoning": "Pondering", "reasoning_field": "reasoning", "text": "Hi",
    }))
    .await;
    let mut expected = deltas("thinking_text_delta 0", &["Pondering"]);
    expected.extend(deltas("assistant_text_delta 1", &["Hi"]));
    assert_eq!(seen, expected);
}
