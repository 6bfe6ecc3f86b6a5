//! SKELETON, replaced by the gemini provider's implementation (issue 13).

use std::ffi::OsString;

use droid_contract::ProviderId;

use crate::providers::{
    AgentEvent, EnvNames, EventParser, Invocation, PromptInput, Provider, Unsupported, lossy,
};
use crate::run::classify::Findings;

/// The gemini CLI.
#[derive(Debug, Default, Clone, Copy)]
pub struct Gemini;

impl Provider for Gemini {
    fn id(&self) -> ProviderId {
        ProviderId::Gemini
    }

    fn package(&self) -> (&'static str, &'static str) {
        ("@google/gemini-cli", "0.61.0")
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
        f.stderr_fallback("gemini", stderr, completed);
        f
    }
}

struct Lines;

impl EventParser for Lines {
    fn line(&mut self, line: &[u8], out: &mut Vec<AgentEvent>) {
        out.push(AgentEvent::Unknown(lossy(line)));
    }
}
