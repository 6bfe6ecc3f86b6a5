//! What an interactive droid session reports, typed: the notifications of droid's
//! `stream-jsonrpc` mode that a front-end shows, and droid's permission requests.
//!
//! Only what is recorded is parsed; everything else becomes [`SessionEvent::Ignored`]
//! (droid sends about 20 kinds, most of them bookkeeping: working states, message records,
//! MCP status, token usage per call).

use serde_json::Value;

/// One thing droid said, in the order it said it.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionEvent {
    /// A piece of the assistant's answer, as the model streamed it (`assistant_text_delta`).
    TextDelta {
        /// The assistant message it belongs to.
        message_id: String,
        /// The new text.
        text: String,
    },
    /// A piece of the model's reasoning (`thinking_text_delta` and its siblings).
    ThinkingDelta {
        /// The new text.
        text: String,
    },
    /// A tool call: first while the model streams it (`input` may be `{}`), then complete.
    ToolUse {
        /// droid's tool-use id (`call_0_0`), unique in the session.
        id: String,
        /// The tool (`Execute`, `Create`, `Edit`, `Read`, `TodoWrite`, …).
        name: String,
        /// Its arguments.
        input: Value,
    },
    /// droid started executing a tool (`tool_execution_phase_changed` `executing`).
    ToolExecuting {
        /// The tool-use id.
        id: String,
    },
    /// A tool's result (`tool_result`).
    ToolResult {
        /// The tool-use id.
        id: String,
        /// Its text (droid's framing included, e.g. `[Process exited with code 0]`).
        content: String,
        /// Whether droid counts it as a failure.
        is_error: bool,
    },
    /// droid asks before running tools (`droid.request_permission`); answer with
    /// [`crate::session::DroidSession::answer_permission`].
    Permission(PermissionRequest),
    /// The turn ended (`agent_turn_completed`).
    TurnCompleted {
        /// `completed`, `cancelled`, `model_request_rejected`, `model_provider_unavailable`,
        /// `model_authentication_failed`, `process_exit`, …
        reason: String,
        /// Tokens of this turn: (input, output), when droid said.
        tokens: Option<(u64, u64)>,
    },
    /// droid reported an error (`error`), or wrote a system message explaining one.
    Error {
        /// Its message.
        message: String,
    },
    /// droid retries the model (`llm_retry`).
    Retry {
        /// Attempt number.
        attempt: u64,
        /// Why (`overloaded`, `timeout`).
        reason: String,
    },
    /// The session's settings changed (`settings_updated`): model, autonomy, reasoning effort.
    Settings(Value),
    /// droid titled the session (`session_title_updated`).
    Title(String),
    /// The session's tokens so far (`session_token_usage_changed`, after each call to the
    /// model).
    Usage(TokenUsage),
    /// droid's stdout ended: the process is gone (or going).
    Exited,
    /// A notification we do not show (its `type`).
    Ignored(String),
}

/// Tokens (and Factory credits) counted by droid.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TokenUsage {
    /// Input tokens.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Input tokens read from the provider's cache.
    pub cache_read: u64,
    /// Input tokens written to the provider's cache.
    pub cache_creation: u64,
    /// Reasoning tokens.
    pub thinking: u64,
    /// Factory credits spent (0 with a custom model).
    pub factory_credits: f64,
}

impl TokenUsage {
    /// droid's `tokenUsage` object (`inputTokens`, `outputTokens`, `cacheReadTokens`,
    /// `cacheCreationTokens`, `thinkingTokens`, `factoryCredits`); absent counts are 0.
    pub fn of(v: &Value) -> Self {
        let n = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
        Self {
            input: n("inputTokens"),
            output: n("outputTokens"),
            cache_read: n("cacheReadTokens"),
            cache_creation: n("cacheCreationTokens"),
            thinking: n("thinkingTokens"),
            factory_credits: v
                .get("factoryCredits")
                .and_then(Value::as_f64)
                .filter(|c| c.is_finite() && *c >= 0.0)
                .unwrap_or(0.0),
        }
    }
}

/// One permission request of droid's: which tool uses, and the option values it offers.
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionRequest {
    /// droid's request id, echoed in the answer.
    pub request_id: Value,
    /// The tool uses it asks about.
    pub tools: Vec<PermissionTool>,
    /// The option values droid accepts (`proceed_once`, `proceed_always`, `cancel`).
    pub options: Vec<String>,
}

/// One tool use in a permission request.
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionTool {
    /// The tool-use id.
    pub id: String,
    /// The tool.
    pub name: String,
    /// Its arguments.
    pub input: Value,
    /// droid's `details.impactLevel` / the input's `riskLevel` (`low`, `medium`, `high`).
    pub impact: Option<String>,
}

fn text(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or("").to_owned()
}

/// Type a `droid.session_notification`'s inner `notification`.
pub fn from_notification(n: &Value) -> SessionEvent {
    let kind = n.get("type").and_then(Value::as_str).unwrap_or("");
    match kind {
        "assistant_text_delta" => SessionEvent::TextDelta {
            message_id: text(n, "messageId"),
            text: text(n, "textDelta"),
        },
        k if k.contains("thinking") && k.ends_with("delta")
            || k.contains("reasoning") && k.ends_with("delta") =>
        {
            let t = [
                "textDelta",
                "thinkingDelta",
                "reasoningDelta",
                "delta",
                "text",
            ]
            .iter()
            .find_map(|key| n.get(*key).and_then(Value::as_str))
            .unwrap_or("");
            SessionEvent::ThinkingDelta { text: t.to_owned() }
        }
        "tool_call" => {
            let t = n.get("toolUse").unwrap_or(&Value::Null);
            SessionEvent::ToolUse {
                id: text(t, "id"),
                name: text(t, "name"),
                input: t.get("input").cloned().unwrap_or(Value::Null),
            }
        }
        "tool_execution_phase_changed" if text(n, "phase") == "executing" => {
            SessionEvent::ToolExecuting {
                id: text(n, "toolUseId"),
            }
        }
        "tool_result" => SessionEvent::ToolResult {
            id: text(n, "toolUseId"),
            content: match n.get("content") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            },
            is_error: n.get("isError").and_then(Value::as_bool).unwrap_or(false),
        },
        "agent_turn_completed" => SessionEvent::TurnCompleted {
            reason: text(n, "reason"),
            tokens: n.get("tokenUsage").and_then(|u| {
                Some((
                    u.get("inputTokens")?.as_u64()?,
                    u.get("outputTokens")?.as_u64()?,
                ))
            }),
        },
        "error" => SessionEvent::Error {
            message: n
                .get("message")
                .and_then(Value::as_str)
                .or_else(|| n.pointer("/error/message").and_then(Value::as_str))
                .unwrap_or("droid reported an error")
                .to_owned(),
        },
        "llm_retry" => SessionEvent::Retry {
            attempt: n.get("attempt").and_then(Value::as_u64).unwrap_or(0),
            reason: text(n, "reason"),
        },
        "settings_updated" => {
            SessionEvent::Settings(n.get("settings").cloned().unwrap_or(Value::Null))
        }
        "session_title_updated" => SessionEvent::Title(text(n, "title")),
        "session_token_usage_changed" => match n.get("tokenUsage") {
            Some(u) => SessionEvent::Usage(TokenUsage::of(u)),
            None => SessionEvent::Ignored(kind.to_owned()),
        },
        // droid explains some failures only in a system message shown to the user (airgap
        // without a custom model, BYOK errors); those kept for the model alone are bookkeeping
        "create_message"
            if n.pointer("/message/role").and_then(Value::as_str) == Some("system")
                && n.pointer("/message/visibility").and_then(Value::as_str) != Some("llm_only") =>
        {
            let said: Vec<&str> = n
                .pointer("/message/content")
                .and_then(Value::as_array)
                .map(|c| {
                    c.iter()
                        .filter_map(|b| b.get("text").and_then(Value::as_str))
                        .collect()
                })
                .unwrap_or_default();
            if said.is_empty() {
                SessionEvent::Ignored(kind.to_owned())
            } else {
                SessionEvent::Error {
                    message: said.join("\n"),
                }
            }
        }
        other => SessionEvent::Ignored(other.to_owned()),
    }
}

/// Type droid's `droid.request_permission` params.
pub fn permission(request_id: Value, params: &Value) -> PermissionRequest {
    let tools = params
        .get("toolUses")
        .and_then(Value::as_array)
        .map(|uses| {
            uses.iter()
                .map(|u| {
                    let t = u.get("toolUse").unwrap_or(&Value::Null);
                    let input = t.get("input").cloned().unwrap_or(Value::Null);
                    let impact = u
                        .pointer("/details/impactLevel")
                        .and_then(Value::as_str)
                        .or_else(|| input.get("riskLevel").and_then(Value::as_str))
                        .map(str::to_owned);
                    PermissionTool {
                        id: text(t, "id"),
                        name: text(t, "name"),
                        input,
                        impact,
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let options = params
        .get("options")
        .and_then(Value::as_array)
        .map(|o| {
            o.iter()
                .filter_map(|x| x.get("value").and_then(Value::as_str).map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    PermissionRequest {
        request_id,
        tools,
        options,
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    #[test]
    fn recorded_notifications_are_typed() {
        // lines of the droid recording input-stream-jsonrpc-permission-request
        let delta = json!({"type":"assistant_text_delta","messageId":"b04","blockIndex":0,"textDelta":"Touching."});
        assert_eq!(
            from_notification(&delta),
            SessionEvent::TextDelta {
                message_id: "b04".into(),
                text: "Touching.".into()
            }
        );
        let result = json!({"type":"tool_result","toolUseId":"call_0_0","messageId":"32f","content":"Command completed successfully\n\n[Process exited with code 0]","isError":false});
        assert_eq!(
            from_notification(&result),
            SessionEvent::ToolResult {
                id: "call_0_0".into(),
                content: "Command completed successfully\n\n[Process exited with code 0]".into(),
                is_error: false
            }
        );
        let done = json!({"type":"agent_turn_completed","reason":"cancelled","turnId":"t","tokenUsage":{"inputTokens":3,"outputTokens":4}});
        assert_eq!(
            from_notification(&done),
            SessionEvent::TurnCompleted {
                reason: "cancelled".into(),
                tokens: Some((3, 4))
            }
        );
        assert_eq!(
            from_notification(&json!({"type":"droid_working_state_changed","newState":"idle"})),
            SessionEvent::Ignored("droid_working_state_changed".into())
        );
        // the droid recording of an airgapped prompt without a custom model (system message)
        let airgap = json!({"type":"create_message","message":{"id":"07","role":"system","content":[{"type":"text","text":"Airgap Mode is enabled."}]}});
        assert_eq!(
            from_notification(&airgap),
            SessionEvent::Error {
                message: "Airgap Mode is enabled.".into()
            }
        );
        let for_the_model = json!({"type":"create_message","message":{"role":"system","visibility":"llm_only","content":[{"type":"text","text":"Request cancelled by user"}]}});
        assert_eq!(
            from_notification(&for_the_model),
            SessionEvent::Ignored("create_message".into())
        );
        assert_eq!(
            from_notification(&json!({"nothing": 1})),
            SessionEvent::Ignored(String::new())
        );
        // the droid recording input-stream-jsonrpc-multiturn
        let usage = json!({"type":"session_token_usage_changed","sessionId":"9f6","tokenUsage":{"inputTokens":20,"outputTokens":10,"cacheCreationTokens":0,"cacheReadTokens":3,"thinkingTokens":0,"factoryCredits":0.5},"lastCallTokenUsage":{"inputTokens":10,"outputTokens":5,"cacheReadTokens":0}});
        assert_eq!(
            from_notification(&usage),
            SessionEvent::Usage(TokenUsage {
                input: 20,
                output: 10,
                cache_read: 3,
                cache_creation: 0,
                thinking: 0,
                factory_credits: 0.5,
            })
        );
    }

    #[test]
    fn a_recorded_permission_request_is_typed() {
        let params = json!({"toolUses":[{"toolUse":{"type":"tool_use","id":"call_0_0","name":"Execute","input":{"command":"touch /tmp/rw/rpc-perm.txt","riskLevel":"medium"}},"confirmationType":"exec","details":{"type":"exec","impactLevel":"medium"}}],"options":[{"label":"Yes, allow","value":"proceed_once"},{"label":"Yes, and always allow","value":"proceed_always"},{"label":"No, cancel","value":"cancel"}]});
        let p = permission(json!("16a7"), &params);
        assert_eq!(p.options, vec!["proceed_once", "proceed_always", "cancel"]);
        assert_eq!(p.tools.len(), 1);
        assert_eq!(p.tools[0].name, "Execute");
        assert_eq!(p.tools[0].impact.as_deref(), Some("medium"));
        let empty = permission(json!(1), &json!(null));
        assert!(empty.tools.is_empty() && empty.options.is_empty());
    }
}
