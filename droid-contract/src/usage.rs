//! Token usage as the agent reports it, and what a token budget counts of it.

use serde::{Deserialize, Serialize};

/// Token usage as droid reports it (cumulative over a resumed session).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Usage {
    /// Prompt tokens.
    #[serde(default)]
    pub input_tokens: u64,
    /// Completion tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// Tokens read from the prompt cache.
    #[serde(default)]
    pub cache_read_input_tokens: u64,
    /// Tokens written to the prompt cache.
    #[serde(default)]
    pub cache_creation_input_tokens: u64,
    /// Factory credits spent.
    #[serde(default)]
    pub factory_credits: u64,
    /// Average time to first token, when any model call succeeded.
    #[serde(default)]
    pub ttft_ms: Option<f64>,
}

impl Usage {
    /// What a token budget (`max_tokens`) counts: input plus output tokens. Cache reads and
    /// writes are counted apart and not charged (each provider reports them beside its input;
    /// docs/protocol.md#token-budget).
    pub fn budget_tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }

    /// This usage plus `other` (the total of two attempts): counts add up, `ttft_ms` is the
    /// mean of those known.
    #[must_use]
    pub fn plus(&self, other: &Self) -> Self {
        Self {
            input_tokens: self.input_tokens.saturating_add(other.input_tokens),
            output_tokens: self.output_tokens.saturating_add(other.output_tokens),
            cache_read_input_tokens: self
                .cache_read_input_tokens
                .saturating_add(other.cache_read_input_tokens),
            cache_creation_input_tokens: self
                .cache_creation_input_tokens
                .saturating_add(other.cache_creation_input_tokens),
            factory_credits: self.factory_credits.saturating_add(other.factory_credits),
            ttft_ms: match (self.ttft_ms, other.ttft_ms) {
                (Some(a), Some(b)) => Some(f64::midpoint(a, b)),
                (a, b) => a.or(b),
            },
        }
    }
}
