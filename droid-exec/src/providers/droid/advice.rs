//! What a failed droid run needs, from how it was set up: a Factory key in its environment,
//! airgap mode, the custom models of its HOME and the model it was given. Measured with droid
//! 0.225.2, no Factory key, no network beyond loopback:
//! - custom models and no model given, airgap off: droid's built-in default needs a Factory
//!   account; `Error: Authentication failed. Please log in using /login or set a valid
//!   FACTORY_API_KEY environment variable.` at 0.7 s, exit 1 at 6.8 s. With
//!   `--model custom:<displayName>-<n>` the same run succeeds (airgap off), and with
//!   `FACTORY_AIRGAP_ENABLED=1` and no model droid uses the first custom model;
//! - airgap on and no custom model: `Model "gpt-5.6-sol" routes through Factory's LLM proxy
//!   and cannot be used`;
//! - a model droid does not know: `Invalid model: X`, with the ids it knows.

use std::path::Path;

use droid_contract::{Issue, IssueType};

use crate::providers::RunFacts;
use crate::providers::droid::custom_models::{self, CustomModels, airgap};

/// droid's text for a Factory model refused under airgap mode.
const AIRGAP_REFUSAL: &str = "routes through Factory's LLM proxy";
/// droid's text for a model it does not know.
const INVALID_MODEL: &str = "Invalid model";

/// Replace the generic suggested actions of droid's authentication and model failures with
/// what this run's setup needs.
pub(crate) fn advise(run: &RunFacts<'_>, issues: &mut [Issue]) {
    let concerned = |i: &Issue| match i.kind {
        IssueType::AuthFailure => true,
        IssueType::ModelError => {
            i.description.contains(AIRGAP_REFUSAL) || i.description.contains(INVALID_MODEL)
        }
        _ => false,
    };
    if !issues.iter().any(concerned) {
        return;
    }
    let models = run
        .var("HOME")
        .map(|h| custom_models::read(Path::new(h)))
        .unwrap_or_default();
    let setup = Setup {
        models: &models,
        key: run.var("FACTORY_API_KEY").is_some(),
        airgap: airgap(run.var("FACTORY_AIRGAP_ENABLED")),
        model: run.model,
    };
    for issue in issues.iter_mut().filter(|i| concerned(i)) {
        issue.suggested_action = if issue.kind == IssueType::AuthFailure {
            setup.auth()
        } else if issue.description.contains(AIRGAP_REFUSAL) {
            setup.airgap_refusal()
        } else {
            setup.invalid_model()
        };
    }
}

/// How the run was set up.
struct Setup<'a> {
    models: &'a CustomModels,
    key: bool,
    airgap: bool,
    model: Option<&'a str>,
}

impl Setup<'_> {
    /// The ids, as a list for a sentence.
    fn ids(&self) -> String {
        self.models.ids().join(", ")
    }

    /// Why the custom models of the settings are not there, when droid skipped or refused some.
    fn notes(&self) -> String {
        if self.models.notes.is_empty() {
            String::new()
        } else {
            format!(" (note: {})", self.models.notes.join("; "))
        }
    }

    fn auth(&self) -> String {
        let first = self.models.ids().first().map(|f| (*f).to_owned());
        match (first, self.model, self.key) {
            (Some(first), None, _) => format!(
                "pass one of your custom models as the model ({}: the request's model, `run \
                 --model {first}`, or model = \"{first}\" in the config): given no model, droid \
                 uses its built-in default, which needs a Factory account; {}or export \
                 FACTORY_API_KEY=fk-…",
                self.ids(),
                if self.airgap {
                    String::new()
                } else {
                    format!(
                        "or set FACTORY_AIRGAP_ENABLED=1 for droid-executor, and droid uses the \
                         first custom model ({first}); "
                    )
                }
            ),
            (Some(_), Some(m), _) => format!(
                "{m} is one of Factory's models, which need a Factory account: pass one of your \
                 custom models instead ({}), or export FACTORY_API_KEY=fk-…",
                self.ids()
            ),
            (None, _, true) => format!(
                "check FACTORY_API_KEY: Factory refused it; or add a custom model to \
                 ~/.factory/settings.json and pass its id as the model (droid-executor doctor \
                 lists the ids){}",
                self.notes()
            ),
            (None, _, false) => format!(
                "export FACTORY_API_KEY=fk-… (or log in: run droid, then /login); or add a \
                 custom model to ~/.factory/settings.json and pass its id as the model \
                 (droid-executor doctor lists the ids){}",
                self.notes()
            ),
        }
    }

    fn airgap_refusal(&self) -> String {
        match self.models.ids().first() {
            Some(first) => format!(
                "pass one of your custom models as the model ({}; given none, droid uses \
                 {first})",
                self.ids()
            ),
            None => format!(
                "FACTORY_AIRGAP_ENABLED keeps droid off Factory's models: add a custom model to \
                 ~/.factory/settings.json (droid-executor doctor then lists its id){}; or unset \
                 FACTORY_AIRGAP_ENABLED and export FACTORY_API_KEY=fk-…",
                self.notes()
            ),
        }
    }

    fn invalid_model(&self) -> String {
        let what = self
            .model
            .map_or_else(|| "the model".to_owned(), |m| format!("{m:?}"));
        if self.models.models.is_empty() {
            format!(
                "{what} is not a model droid knows: pass one it does (custom models are \
                 custom:<displayName>-<n>, listed by droid-executor doctor){}",
                self.notes()
            )
        } else {
            format!(
                "{what} is not a model droid knows: your custom models are {} (case-sensitive, \
                 with the -<n> suffix){}",
                self.ids(),
                self.notes()
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use pretty_assertions::assert_eq;

    use super::*;

    fn setup_home(models: &[&str]) -> std::path::PathBuf {
        let home = std::env::temp_dir().join(format!(
            "droid-advice-{}-{}",
            std::process::id(),
            models.len()
        ));
        std::fs::create_dir_all(home.join(".factory")).unwrap();
        let list: Vec<serde_json::Value> = models
            .iter()
            .map(|n| {
                serde_json::json!({"model": "m", "displayName": n, "baseUrl": "http://x/v1",
                                   "provider": "openai"})
            })
            .collect();
        std::fs::write(
            home.join(".factory/settings.json"),
            serde_json::json!({ "customModels": list }).to_string(),
        )
        .unwrap();
        home
    }

    fn advised(home: &Path, extra: &[(&str, &str)], model: Option<&str>, issue: Issue) -> String {
        let mut env: Vec<(OsString, OsString)> = vec![("HOME".into(), home.into())];
        env.extend(extra.iter().map(|(k, v)| ((*k).into(), (*v).into())));
        let run = RunFacts {
            cwd: Path::new("/w"),
            model,
            reported_model: None,
            session_id: None,
            env: &env,
        };
        let mut issues = [issue];
        advise(&run, &mut issues);
        let [issue] = issues;
        issue.suggested_action
    }

    fn auth() -> Issue {
        Issue::new(
            IssueType::AuthFailure,
            "droid could not authenticate: Error: Authentication failed.",
            "generic",
        )
    }

    #[test]
    fn an_authentication_failure_names_the_custom_model_to_pass() {
        let home = setup_home(&["Mine", "Other"]);
        assert_eq!(
            advised(&home, &[], None, auth()),
            "pass one of your custom models as the model (custom:Mine-0, custom:Other-0: the \
             request's model, `run --model custom:Mine-0`, or model = \"custom:Mine-0\" in the \
             config): given no model, droid uses its built-in default, which needs a Factory \
             account; or set FACTORY_AIRGAP_ENABLED=1 for droid-executor, and droid uses the \
             first custom model (custom:Mine-0); or export FACTORY_API_KEY=fk-…"
        );
        assert!(
            advised(&home, &[], Some("gpt-5.6-sol"), auth())
                .starts_with("gpt-5.6-sol is one of Factory's models")
        );
        let model_error = Issue::new(
            IssueType::ModelError,
            "droid said on stderr: Invalid model: custom:Mine",
            "generic",
        );
        assert_eq!(
            advised(&home, &[], Some("custom:Mine"), model_error),
            "\"custom:Mine\" is not a model droid knows: your custom models are custom:Mine-0, \
             custom:Other-0 (case-sensitive, with the -<n> suffix)"
        );
        let other = Issue::new(IssueType::ModelError, "the model request failed: 500", "x");
        assert_eq!(advised(&home, &[], None, other), "x");
        std::fs::remove_dir_all(&home).unwrap();
    }

    #[test]
    fn without_custom_models_the_key_or_a_model_is_what_is_missing() {
        let home = setup_home(&[]);
        assert!(
            advised(&home, &[], None, auth()).starts_with("export FACTORY_API_KEY=fk-… (or log in")
        );
        assert!(
            advised(&home, &[("FACTORY_API_KEY", "fk-x")], None, auth())
                .starts_with("check FACTORY_API_KEY: Factory refused it")
        );
        let refused = Issue::new(
            IssueType::ModelError,
            "the model request failed: Airgap Mode is enabled. Model \"gpt-5.6-sol\" routes \
             through Factory's LLM proxy and cannot be used.",
            "generic",
        );
        assert!(
            advised(&home, &[("FACTORY_AIRGAP_ENABLED", "1")], None, refused)
                .starts_with("FACTORY_AIRGAP_ENABLED keeps droid off Factory's models")
        );
        std::fs::remove_dir_all(&home).unwrap();
    }
}
