//! Slash commands: what this agent lists in `available_commands_update` (some clients hold an
//! agent with an empty list back), each one a setting a client can also change through its
//! config option: `/mode`, `/model`, `/effort`. A prompt whose first line is one of them is
//! answered here, without droid: the setting changes (the client is told with
//! `current_mode_update` and `config_option_update`) and a message says what it is now.
//!
//! droid 0.225.2 has no "clear"; its `droid.compact_session` goes on in a new droid session
//! (another id, which the client's session id would not load again), so neither is offered.
//! droid's own commands are not listed: its `droid.list_commands` answers an empty list in its
//! interactive mode (measured).

use serde_json::{Value, json};

/// A slash command of a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `/mode [id]`.
    Mode(Option<String>),
    /// `/model [id]`.
    Model(Option<String>),
    /// `/effort [value]`.
    Effort(Option<String>),
}

/// The command a prompt's first text block starts with, if it is one of ours (`/name`, then
/// nothing or whitespace and one argument).
pub fn parse(first_text: &str) -> Option<Command> {
    let line = first_text.trim_start().lines().next().unwrap_or("").trim();
    let rest = line.strip_prefix('/')?;
    let (name, arg) = match rest.split_once(char::is_whitespace) {
        Some((name, arg)) => (name, Some(arg.trim().to_owned()).filter(|a| !a.is_empty())),
        None => (rest, None),
    };
    match name {
        "mode" => Some(Command::Mode(arg)),
        "model" => Some(Command::Model(arg)),
        "effort" => Some(Command::Effort(arg)),
        _ => None,
    }
}

/// The `available_commands_update` for a session offering `modes` and `models` (ids).
pub fn available(modes: &[&str], models: &[String], efforts: &[&str]) -> Value {
    /// Model ids named in the hint; the model option lists them all.
    const HINT_MODELS: usize = 8;
    let mut model_hint = models
        .iter()
        .take(HINT_MODELS)
        .cloned()
        .collect::<Vec<_>>()
        .join(" | ");
    if models.len() > HINT_MODELS {
        model_hint.push_str(" | …");
    }
    json!({
        "sessionUpdate": "available_commands_update",
        "availableCommands": [
            {
                "name": "mode",
                "description": "Set what runs without asking (the Mode option); without a value, say which it is",
                "input": {"hint": modes.join(" | ")},
            },
            {
                "name": "model",
                "description": "Switch droid's model for this session; without a value, list the models",
                "input": {"hint": model_hint},
            },
            {
                "name": "effort",
                "description": "Set how much the model reasons before answering",
                "input": {"hint": efforts.join(" | ")},
            },
        ],
    })
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn our_commands_are_parsed_and_others_are_prompts() {
        assert_eq!(parse("/mode low"), Some(Command::Mode(Some("low".into()))));
        assert_eq!(parse("  /mode\n"), Some(Command::Mode(None)));
        assert_eq!(
            parse("/model custom:Mock-0"),
            Some(Command::Model(Some("custom:Mock-0".into())))
        );
        assert_eq!(
            parse("/effort   high  "),
            Some(Command::Effort(Some("high".into())))
        );
        assert_eq!(parse("/review this"), None);
        assert_eq!(parse("set /mode low"), None);
        assert_eq!(parse("/modes"), None);
        let u = available(
            &["read_only", "low"],
            &["custom:A-0".into()],
            &["none", "low"],
        );
        assert_eq!(
            u["availableCommands"][0]["input"]["hint"],
            "read_only | low"
        );
        assert_eq!(u["availableCommands"][1]["input"]["hint"], "custom:A-0");
    }
}
