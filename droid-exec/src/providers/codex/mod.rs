//! SKELETON, replaced by the codex provider's implementation (issue 13).

use std::ffi::OsString;

use droid_contract::ProviderId;

use crate::providers::{
    AgentEvent, EnvNames, EventParser, Invocation, PromptInput, Provider, Unsupported, lossy,
};
use crate::run::classify::Findings;

/// The codex CLI.
#[derive(Debug, Default, Clone, Copy)]
pub struct Codex;

impl Provider for Codex {
    fn id(&self) -> ProviderId {
        ProviderId::Codex
    }

    fn package(&self) -> (&'static str, &'static str) {
        ("@openai/codex", "0.169.0")
    }

    fn prompt_input(&self) -> PromptInput {
        PromptInput::Stdin
    }

    fn args(&self, _inv: &Invocation<'_>) -> Result<Vec<OsString>, Unsupported> {
        Err(Unsupported {
            field: "provider",
            message: "not implemented yet".into(),
        })
    }

    fn env_names(&self) -> EnvNames {
        EnvNames::default()
    }

    fn parser(&self) -> Box<dyn EventParser> {
        Box::new(Lines)
    }

    fn findings(&self, _events: &[AgentEvent], stderr: &str, completed: bool) -> Findings {
        let mut f = Findings::default();
        f.stderr_fallback("codex", stderr, completed);
        f
    }
}

struct Lines;

impl EventParser for Lines {
    fn line(&mut self, line: &[u8], out: &mut Vec<AgentEvent>) {
        out.push(AgentEvent::Unknown(lossy(line)));
    }
}
