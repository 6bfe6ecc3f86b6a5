//! SKELETON, replaced by the claude provider's implementation (issue 13).

use std::ffi::OsString;

use droid_contract::ProviderId;

use crate::providers::{
    AgentEvent, EnvNames, EventParser, Invocation, PromptInput, Provider, Unsupported, lossy,
};
use crate::run::classify::Findings;

/// The claude CLI.
#[derive(Debug, Default, Clone, Copy)]
pub struct Claude;

impl Provider for Claude {
    fn id(&self) -> ProviderId {
        ProviderId::Claude
    }

    fn package(&self) -> (&'static str, &'static str) {
        ("@anthropic-ai/claude-code", "2.1.330")
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
        f.stderr_fallback("claude", stderr, completed);
        f
    }
}

struct Lines;

impl EventParser for Lines {
    fn line(&mut self, line: &[u8], out: &mut Vec<AgentEvent>) {
        out.push(AgentEvent::Unknown(lossy(line)));
    }
}
