//! droid's record of a session's settings,
//! `$HOME/.factory/sessions/<cwd, "/" as "-">/<session id>.settings.json`, written when the
//! session starts: its `model` is the model the session ran with. Where droid's `init` event
//! names its built-in default (`gpt-5.6-sol`) while airgap mode routed the run to the first
//! custom model, this file names the custom model (measured with 0.225.2: `"model":
//! "custom:Dup-0"`).
//!
//! droid rewrites the file after every model call with the session's `tokenUsage` so far
//! (`inputTokens` without the cache reads, `outputTokens`, `cacheReadTokens`,
//! `cacheCreationTokens`, `factoryCredits`; measured with 0.225.2), which its stream-json says
//! only in `completion`: [`usage`] reads it while droid runs, for a token budget
//! (docs/providers.md#token-usage).
//!
//! The file is in droid's state directory, which the run may write: it is read after the run
//! with every component below `$HOME` opened without following a symlink, a FIFO not waited
//! on, at most [`SETTINGS_MAX`] bytes, and only a short model id is taken from it.

use std::ffi::OsStr;
use std::path::Path;

use droid_contract::Usage;
use serde_json::Value;

use crate::no_follow;
use crate::providers::droid::custom_models::airgap;
use crate::providers::{ModelUsed, RunFacts};

/// Bytes of the file read, at most.
const SETTINGS_MAX: u64 = 256 * 1024;
/// Characters of a model id taken from it, at most.
const MODEL_MAX: usize = 200;

/// The model that answered a droid run. Given a model, droid's `init` event names it. Given none,
/// droid's record of the session says which model it ran with (its `init` event names its
/// built-in default even where airgap mode used the first custom model); without that record,
/// under airgap the model is unknown, else the `init` event's is taken.
pub(crate) fn model_used(run: &RunFacts<'_>) -> ModelUsed {
    let reported = run.reported_model.or(run.model).map(str::to_owned);
    if run.model.is_some() {
        return ModelUsed {
            model: reported,
            note: None,
        };
    }
    let recorded = run
        .var("HOME")
        .zip(run.session_id)
        .and_then(|(home, id)| model(Path::new(home), run.cwd, id));
    let said = reported.as_deref().unwrap_or("no model");
    match recorded {
        Some(m) => ModelUsed {
            note: (reported.as_deref() != Some(m.as_str())).then(|| {
                format!(
                    "droid's init event named {said}, but its session ran with {m} (droid's \
                     record of the session; with no model given, airgap mode uses the first \
                     custom model)"
                )
            }),
            model: Some(m),
        },
        None if airgap(run.var("FACTORY_AIRGAP_ENABLED")) => ModelUsed {
            model: None,
            note: Some(format!(
                "the model that answered is unknown: droid's init event named {said}, but with no \
                 model given, airgap mode uses the first custom model, and droid's record of the \
                 session could not be read; pass the model (custom:<displayName>-<n>) to know it"
            )),
        },
        None => ModelUsed {
            model: reported,
            note: None,
        },
    }
}

/// The name of the directory under `~/.factory/sessions` droid keeps `cwd`'s sessions in: the
/// path with every `/` replaced by `-` (`/w/repo` is `-w-repo`).
pub(crate) fn dir_name(cwd: &Path) -> String {
    cwd.display().to_string().replace('/', "-")
}

/// The model droid's session `session_id`, run in `cwd` with `home` as `HOME`, ran with.
pub(crate) fn model(home: &Path, cwd: &Path, session_id: &str) -> Option<String> {
    let v = settings(home, cwd, session_id)?;
    let m = v.get("model")?.as_str()?.trim();
    (!m.is_empty() && m.chars().count() <= MODEL_MAX && !m.chars().any(char::is_control))
        .then(|| m.to_owned())
}

/// The token usage of droid's session `session_id` so far (its `tokenUsage`), run in `cwd`
/// with `home` as `HOME`; `None` before droid wrote it.
pub(crate) fn usage(home: &Path, cwd: &Path, session_id: &str) -> Option<Usage> {
    let v = settings(home, cwd, session_id)?;
    let t = v.get("tokenUsage").filter(|t| t.is_object())?;
    let n = |k: &str| t.get(k).and_then(Value::as_u64).unwrap_or(0);
    Some(Usage {
        input_tokens: n("inputTokens"),
        output_tokens: n("outputTokens"),
        cache_read_input_tokens: n("cacheReadTokens"),
        cache_creation_input_tokens: n("cacheCreationTokens"),
        factory_credits: n("factoryCredits"),
        ttft_ms: None,
    })
}

/// droid's record of the session `session_id` run in `cwd` with `home` as `HOME`, parsed.
fn settings(home: &Path, cwd: &Path, session_id: &str) -> Option<Value> {
    if session_id.is_empty()
        || session_id.contains('/')
        || session_id.contains('\0')
        || session_id.starts_with('.')
    {
        return None;
    }
    let dir_name = dir_name(cwd);
    let home = nix::fcntl::open(
        home,
        nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .ok()?;
    let factory = no_follow::open_dir(&home, OsStr::new(".factory")).ok()?;
    let sessions = no_follow::open_dir(&factory, OsStr::new("sessions")).ok()?;
    let dir = no_follow::open_dir(&sessions, OsStr::new(&dir_name)).ok()?;
    let name = format!("{session_id}.settings.json");
    let (bytes, _) = no_follow::read_at(&dir, OsStr::new(&name), SETTINGS_MAX).ok()??;
    serde_json::from_slice(&bytes).ok()
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn the_model_is_read_from_the_sessions_own_file_and_nowhere_else() {
        let home = std::env::temp_dir().join(format!("droid-session-model-{}", std::process::id()));
        let cwd = Path::new("/w/repo");
        let dir = home.join(".factory/sessions").join(dir_name(cwd));
        assert!(dir.ends_with(".factory/sessions/-w-repo"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("s1.settings.json"),
            r#"{"model": "custom:Dup-0", "reasoningEffort": "none"}"#,
        )
        .unwrap();
        assert_eq!(model(&home, cwd, "s1").as_deref(), Some("custom:Dup-0"));
        assert_eq!(model(&home, cwd, "s2"), None);
        assert_eq!(model(&home, cwd, "../s1"), None);
        // a symlink put in its place is not followed
        std::os::unix::fs::symlink(dir.join("s1.settings.json"), dir.join("s3.settings.json"))
            .unwrap();
        assert_eq!(model(&home, cwd, "s3"), None);
        std::fs::write(dir.join("s4.settings.json"), r#"{"model": "bad\nid"}"#).unwrap();
        assert_eq!(model(&home, cwd, "s4"), None);

        let env = |airgap: &str| -> Vec<(OsString, OsString)> {
            vec![
                ("HOME".into(), home.clone().into_os_string()),
                ("FACTORY_AIRGAP_ENABLED".into(), airgap.into()),
            ]
        };
        let (on, off) = (env("1"), env(""));
        fn facts<'a>(
            session: &'a str,
            model: Option<&'a str>,
            env: &'a [(OsString, OsString)],
        ) -> RunFacts<'a> {
            RunFacts {
                cwd: Path::new("/w/repo"),
                model,
                reported_model: Some(model.unwrap_or("gpt-5.6-sol")),
                session_id: Some(session),
                env,
            }
        }
        let got = model_used(&facts("s1", None, &on));
        assert_eq!(got.model.as_deref(), Some("custom:Dup-0"));
        assert!(
            got.note
                .unwrap()
                .starts_with("droid's init event named gpt-5.6-sol, but")
        );
        let got = model_used(&facts("s2", None, &on));
        assert_eq!(got.model, None);
        assert!(
            got.note
                .unwrap()
                .starts_with("the model that answered is unknown")
        );
        assert_eq!(
            model_used(&facts("s2", None, &off)),
            ModelUsed {
                model: Some("gpt-5.6-sol".into()),
                note: None
            }
        );
        assert_eq!(
            model_used(&facts("s2", Some("custom:B-0"), &on)),
            ModelUsed {
                model: Some("custom:B-0".into()),
                note: None
            }
        );
        std::fs::remove_dir_all(&home).unwrap();
    }

    /// droid's record of a session recorded against the scripted model (three calls of
    /// 100/20, 200/40 and 300/60 uncached tokens, 50, 60 and 70 read from the cache).
    #[test]
    fn the_usage_so_far_is_read_from_the_record_droid_rewrites_after_each_call() {
        let home = std::env::temp_dir().join(format!("droid-session-usage-{}", std::process::id()));
        let cwd = Path::new("/w/repo");
        let dir = home.join(".factory/sessions").join(dir_name(cwd));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(usage(&home, cwd, "s1"), None);
        std::fs::write(
            dir.join("s1.settings.json"),
            include_str!("../../../../tests/fixtures/droid/usage-cache-session.settings.json"),
        )
        .unwrap();
        assert_eq!(
            usage(&home, cwd, "s1"),
            Some(Usage {
                input_tokens: 600,
                output_tokens: 120,
                cache_read_input_tokens: 180,
                ..Usage::default()
            })
        );
        std::fs::remove_dir_all(&home).unwrap();
    }
}
