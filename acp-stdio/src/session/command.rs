//! A slash command typed as a prompt (`/mode`, `/model`, `/effort`; [`crate::commands`]),
//! run on the session instead of a turn.

use droid_contract::Autonomy;
use serde_json::{Value, json};

use super::Session;
use crate::commands::Command;
use crate::connection::Agent;
use crate::jsonrpc::RpcError;
use crate::modes::{self, EFFORTS, Mode};
use crate::updates;

impl Session {
    /// A slash command ([`crate::commands`]): the setting changed (and the client told), and a
    /// message saying what it is now; or, without a value, what it is and what it can be.
    pub(super) async fn run_command(
        &self,
        agent: &Agent,
        command: Command,
    ) -> Result<Value, RpcError> {
        let is_model = matches!(command, Command::Model(_));
        let (text, changed) = match command {
            Command::Mode(None) => {
                let mode = self
                    .settings
                    .lock()
                    .map_or(Mode(Autonomy::ReadOnly), |s| s.mode);
                let all: Vec<String> = modes::modes_under(self.cap)
                    .into_iter()
                    .map(|m| format!("{} ({})", m.id(), m.name()))
                    .collect();
                (
                    format!(
                        "Mode: {} (`{}`): {}. The modes: {}.",
                        mode.name(),
                        mode.id(),
                        mode.description(),
                        all.join(", ")
                    ),
                    false,
                )
            }
            Command::Mode(Some(id)) => match self.mode_to(&id) {
                Ok(()) => {
                    let mode = Mode::from_id(&id).unwrap_or(Mode(Autonomy::ReadOnly));
                    (
                        format!(
                            "Mode: {} (`{}`): {}.",
                            mode.name(),
                            mode.id(),
                            mode.description()
                        ),
                        true,
                    )
                }
                Err(e) => (format!("The mode did not change: {}.", e.message), false),
            },
            Command::Model(None) | Command::Effort(None) => {
                let (model, models, effort) = self
                    .settings
                    .lock()
                    .map(|s| (s.model.clone(), s.models.clone(), s.effort.clone()))
                    .unwrap_or_default();
                let text = if is_model {
                    let all: Vec<String> = models
                        .iter()
                        .map(|(id, name)| format!("{id} ({name})"))
                        .collect();
                    format!("Model: `{model}`. The models: {}.", all.join(", "))
                } else {
                    format!(
                        "Reasoning effort: `{effort}`. The values: {}.",
                        EFFORTS.join(", ")
                    )
                };
                (text, false)
            }
            Command::Model(Some(value)) | Command::Effort(Some(value)) => {
                let (config, name) = if is_model {
                    ("model", "Model")
                } else {
                    ("reasoning_effort", "Reasoning effort")
                };
                let params = json!({"configId": config, "value": value});
                match self.set_config_option(&params).await {
                    Ok(_) => (format!("{name}: `{value}`."), true),
                    Err(e) => (
                        format!("The {config} did not change: {}.", e.message),
                        false,
                    ),
                }
            }
        };
        if changed {
            let mode = self
                .settings
                .lock()
                .map_or(Mode(Autonomy::ReadOnly), |s| s.mode);
            agent
                .update(&self.id, updates::current_mode(mode.id()))
                .await;
            agent
                .update(&self.id, updates::config_options(self.config_options()))
                .await;
        }
        agent.update(&self.id, updates::message_chunk(&text)).await;
        Ok(json!({"stopReason": "end_turn"}))
    }
}
