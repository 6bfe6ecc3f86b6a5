//! A session's modes and config options: the autonomy levels as modes (capped by
//! `max_autonomy`), and the model and reasoning effort as select options, kept in sync (the
//! `mode` config option and the mode are one setting).
//!
//! What a mode auto-approves (everything else is asked, see [`Mode::auto_approves`]):
//!
//! | mode | auto-approved |
//! |---|---|
//! | `read_only` | reads and searches (low risk) |
//! | `low` | those, and file edits inside the repository |
//! | `medium` | everything of medium risk: edits, commands inside the repository, `git commit` |
//! | `high` | everything, high risk too (`git push`, deletes, outside the repository) |

use droid_contract::Autonomy;
use droid_exec::session::tools::{Risk, ToolClass};
use serde_json::{Value, json};

/// A session mode: one of the contract's autonomy levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Mode(pub Autonomy);

impl Mode {
    /// Every mode, lowest first.
    pub const ALL: [Mode; 4] = [
        Mode(Autonomy::ReadOnly),
        Mode(Autonomy::Low),
        Mode(Autonomy::Medium),
        Mode(Autonomy::High),
    ];

    /// The mode id (the autonomy level's wire name).
    pub fn id(self) -> &'static str {
        self.0.as_str()
    }

    /// The mode with id `id`.
    pub fn from_id(id: &str) -> Option<Mode> {
        Self::ALL.into_iter().find(|m| m.id() == id)
    }

    /// Its name for people.
    pub fn name(self) -> &'static str {
        match self.0 {
            Autonomy::ReadOnly => "Ask",
            Autonomy::Low => "Auto edit",
            Autonomy::Medium => "Auto (medium)",
            Autonomy::High => "Auto (high)",
        }
    }

    /// What runs without asking in it. droid itself runs the commands of its allowlist
    /// without asking anyone, at every autonomy level (`commandAllowlist` in
    /// `~/.factory/settings.json`; by default `ls`, `pwd`, `dir` and the read-only git commands
    /// `status`, `diff`, `log`, `show`, `blame`, `ls-files`: measured, droid 0.225.2), so the
    /// descriptions say so rather than "every command is asked".
    pub fn description(self) -> &'static str {
        match self.0 {
            Autonomy::ReadOnly => {
                "Reads, searches and droid's allowlisted read-only commands (ls, pwd, git status, git diff, git log, …) run; every edit and other command is asked"
            }
            Autonomy::Low => {
                "Reads, edits inside the repository and droid's allowlisted read-only commands run; other commands are asked"
            }
            Autonomy::Medium => {
                "Edits and commands inside the repository run; git push, deletes and anything outside it are asked"
            }
            Autonomy::High => "Everything runs without asking",
        }
    }

    /// Whether a tool of `class` at `risk` runs without asking in this mode.
    pub fn auto_approves(self, class: ToolClass, risk: Risk) -> bool {
        match self.0 {
            Autonomy::ReadOnly => risk == Risk::Low,
            Autonomy::Low => {
                risk == Risk::Low
                    || (risk == Risk::Medium && matches!(class, ToolClass::Edit | ToolClass::Think))
            }
            Autonomy::Medium => risk <= Risk::Medium,
            Autonomy::High => true,
        }
    }
}

/// The reasoning-effort values droid takes.
pub const EFFORTS: [&str; 4] = ["none", "low", "medium", "high"];

/// The modes offered under `cap`.
pub fn modes_under(cap: Autonomy) -> Vec<Mode> {
    Mode::ALL.into_iter().filter(|m| m.0 <= cap).collect()
}

/// The session's `modes` object.
pub fn modes_json(current: Mode, cap: Autonomy) -> Value {
    json!({
        "currentModeId": current.id(),
        "availableModes": modes_under(cap).into_iter().map(|m| json!({
            "id": m.id(),
            "name": m.name(),
            "description": m.description(),
        })).collect::<Vec<_>>(),
    })
}

/// The session's complete `configOptions` list.
pub fn config_options(
    current: Mode,
    cap: Autonomy,
    model: &str,
    models: &[(String, String)],
    effort: &str,
) -> Value {
    let mut model_options: Vec<Value> = models
        .iter()
        .map(|(id, name)| json!({"value": id, "name": name}))
        .collect();
    if !models.iter().any(|(id, _)| id == model) && !model.is_empty() {
        model_options.insert(0, json!({"value": model, "name": model}));
    }
    let mut list = vec![json!({
        "id": "mode",
        "name": "Mode",
        "description": "What runs without asking (capped by the max_autonomy setting)",
        "category": "mode",
        "type": "select",
        "currentValue": current.id(),
        "options": modes_under(cap).into_iter().map(|m| json!({
            "value": m.id(), "name": m.name(), "description": m.description(),
        })).collect::<Vec<_>>(),
    })];
    if !model_options.is_empty() {
        list.push(json!({
            "id": "model",
            "name": "Model",
            "description": "The model droid uses for this session",
            "category": "model",
            "type": "select",
            "currentValue": model,
            "options": model_options,
        }));
    }
    list.push(json!({
        "id": "reasoning_effort",
        "name": "Reasoning effort",
        "description": "How much the model reasons before answering (where the model supports it)",
        "category": "thought_level",
        "type": "select",
        "currentValue": effort,
        "options": EFFORTS.iter().map(|e| json!({"value": e, "name": e})).collect::<Vec<_>>(),
    }));
    Value::Array(list)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn modes_are_capped_and_decide_what_is_asked() {
        assert_eq!(
            modes_under(Autonomy::Low)
                .into_iter()
                .map(Mode::id)
                .collect::<Vec<_>>(),
            vec!["read_only", "low"]
        );
        let ro = Mode(Autonomy::ReadOnly);
        assert!(ro.auto_approves(ToolClass::Read, Risk::Low));
        assert!(!ro.auto_approves(ToolClass::Edit, Risk::Medium));
        let low = Mode(Autonomy::Low);
        assert!(low.auto_approves(ToolClass::Edit, Risk::Medium));
        assert!(!low.auto_approves(ToolClass::Execute, Risk::Medium));
        assert!(!low.auto_approves(ToolClass::Edit, Risk::High));
        let med = Mode(Autonomy::Medium);
        assert!(med.auto_approves(ToolClass::Execute, Risk::Medium));
        assert!(!med.auto_approves(ToolClass::Execute, Risk::High));
        assert!(Mode(Autonomy::High).auto_approves(ToolClass::Delete, Risk::High));
    }

    #[test]
    fn config_options_list_every_setting_with_its_value() {
        let models = vec![("custom:Mock-0".to_owned(), "Mock".to_owned())];
        let list = config_options(
            Mode(Autonomy::ReadOnly),
            Autonomy::High,
            "custom:Mock-0",
            &models,
            "none",
        );
        let ids: Vec<&str> = list
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, vec!["mode", "model", "reasoning_effort"]);
        assert_eq!(list[0]["options"].as_array().unwrap().len(), 4);
        assert_eq!(list[1]["currentValue"], "custom:Mock-0");
    }
}
