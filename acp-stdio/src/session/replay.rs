//! A loaded session's conversation, replayed to the client as updates (`session/load`).

use std::collections::HashMap;

use droid_exec::session::tools;
use serde_json::Value;

use super::Session;
use super::turn::{NOTE_PREFIX, result_text};
use crate::connection::Agent;
use crate::updates;

impl Session {
    /// Replay a loaded session's stored messages as updates: the user's and droid's text, and
    /// each tool call once, as it ended (its final status, its input and its result: a command
    /// that failed, a tool the user rejected and one a cancelled turn stopped come back
    /// `failed`, each said in our words; a tool without a recorded result `failed` too).
    pub(super) async fn replay(&self, agent: &Agent, history: &[Value]) {
        // droid's results, by tool-use id (droid's answer to `droid.load_session` spells them
        // `toolUseId`/`isError`; its session file `tool_use_id`/`is_error`)
        let mut results: HashMap<&str, (String, bool)> = HashMap::new();
        for m in history {
            for c in m
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if c.get("type").and_then(Value::as_str) != Some("tool_result") {
                    continue;
                }
                let Some(id) = c
                    .get("toolUseId")
                    .or_else(|| c.get("tool_use_id"))
                    .and_then(Value::as_str)
                else {
                    continue;
                };
                let output = match c.get("content") {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Array(parts)) => parts
                        .iter()
                        .filter_map(|p| p.get("text").and_then(Value::as_str))
                        .collect::<Vec<_>>()
                        .join("\n"),
                    _ => String::new(),
                };
                let failed = c
                    .get("isError")
                    .or_else(|| c.get("is_error"))
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                results.insert(id, (output, failed));
            }
        }
        for m in history {
            if m.get("visibility").and_then(Value::as_str) == Some("llm_only") {
                continue;
            }
            let role = m.get("role").and_then(Value::as_str).unwrap_or("");
            let Some(content) = m.get("content").and_then(Value::as_array) else {
                continue;
            };
            for c in content {
                match (role, c.get("type").and_then(Value::as_str)) {
                    ("user", Some("text")) => {
                        let t = c.get("text").and_then(Value::as_str).unwrap_or("");
                        if !t.is_empty() && !t.starts_with(NOTE_PREFIX) {
                            agent.update(&self.id, updates::user_chunk(t)).await;
                        }
                    }
                    ("assistant", Some("text")) => {
                        let t = c.get("text").and_then(Value::as_str).unwrap_or("");
                        if !t.is_empty() {
                            agent.update(&self.id, updates::message_chunk(t)).await;
                        }
                    }
                    (_, Some("tool_use")) => {
                        let id = c.get("id").and_then(Value::as_str).unwrap_or("");
                        let name = c.get("name").and_then(Value::as_str).unwrap_or("");
                        let input = c.get("input").cloned().unwrap_or(Value::Null);
                        let view = tools::view(name, &input, &self.root);
                        let output = results.get(id).map(|(out, failed)| {
                            // a rejection and a cancel read alike in droid's record
                            let text = result_text(out, *failed, self.was_rejected(id), true);
                            (text, *failed)
                        });
                        agent
                            .update(
                                &self.id,
                                updates::replayed_tool_call(
                                    id,
                                    &view,
                                    &input,
                                    output.as_ref().map(|(t, f)| (t.as_str(), *f)),
                                ),
                            )
                            .await;
                    }
                    _ => {}
                }
            }
        }
    }
}
