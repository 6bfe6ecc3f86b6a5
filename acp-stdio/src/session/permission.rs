//! droid's permission requests, decided: the session's mode and what the user allowed
//! "always" approve a tool, or the client is asked (`session/request_permission`); a question
//! left unanswered past the turn's budget, or a cancelled turn, rejects it.

use std::collections::{HashMap, HashSet};

use droid_contract::Autonomy;
use droid_exec::session::event::PermissionRequest;
use droid_exec::session::tools::{self, ToolView};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::Session;
use super::turn::Call;
use crate::connection::Agent;
use crate::modes::Mode;
use crate::updates;

/// The permission options offered (ACP option kinds as ids).
fn permission_options() -> Value {
    json!([
        {"optionId": "allow_once", "name": "Allow", "kind": "allow_once"},
        {"optionId": "allow_always", "name": "Always allow this kind of action in this session", "kind": "allow_always"},
        {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
    ])
}

impl Session {
    /// Decide droid's permission request: droid's option value to answer with.
    pub(super) async fn decide(
        &self,
        agent: &Agent,
        calls: &mut HashMap<String, Call>,
        req: &PermissionRequest,
        token: &CancellationToken,
        deadline: tokio::time::Instant,
    ) -> &'static str {
        let (mode, always) = self
            .settings
            .lock()
            .map(|s| (s.mode, s.always.clone()))
            .unwrap_or((Mode(Autonomy::ReadOnly), HashSet::new()));
        let mut ask: Vec<(String, ToolView, Value)> = Vec::new();
        for t in &req.tools {
            let mut input = t.input.clone();
            if let (Some(obj), Some(impact)) = (input.as_object_mut(), &t.impact) {
                obj.entry("riskLevel").or_insert_with(|| json!(impact));
            }
            let view = tools::view(&t.name, &input, &self.root);
            let call = calls.entry(t.id.clone()).or_insert_with(|| Call {
                input: t.input.clone(),
                view: view.clone(),
                announced: false,
            });
            if !call.announced {
                call.announced = true;
                call.input = t.input.clone();
                call.view = view.clone();
                agent
                    .update(
                        &self.id,
                        updates::tool_call(&t.id, &view, &t.input, "pending"),
                    )
                    .await;
            }
            let auto = mode.auto_approves(view.class, view.risk)
                || always.contains(&(view.class.as_str(), view.risk));
            if !auto {
                ask.push((t.id.clone(), view, t.input.clone()));
            }
        }
        let Some((id, view, input)) = ask.first() else {
            return "proceed_once";
        };
        let params = json!({
            "sessionId": self.id,
            "toolCall": {
                "toolCallId": id,
                "title": view.title,
                "kind": view.class.as_str(),
                "status": "pending",
                "rawInput": input,
                "content": updates::tool_call(id, view, input, "pending")["content"],
                "locations": updates::tool_call(id, view, input, "pending")["locations"],
            },
            "options": permission_options(),
            "_meta": {"droidExecutor": {"risk": view.risk.as_str(), "reason": view.risk_reason}},
        });
        let answer = tokio::select! {
            a = agent.ask("session/request_permission", params) => a,
            () = token.cancelled() => return "cancel",
            // a question never answered does not hold the turn past its budget
            () = tokio::time::sleep_until(deadline) => return "cancel",
        };
        let chosen = answer
            .ok()
            .filter(|a| a.pointer("/outcome/outcome").and_then(Value::as_str) == Some("selected"))
            .and_then(|a| {
                a.pointer("/outcome/optionId")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            });
        match chosen.as_deref() {
            Some("allow_once") => "proceed_once",
            Some("allow_always") => {
                if let Ok(mut s) = self.settings.lock() {
                    for (_, v, _) in &ask {
                        s.always.insert((v.class.as_str(), v.risk));
                    }
                }
                "proceed_once"
            }
            _ => "cancel",
        }
    }
}
