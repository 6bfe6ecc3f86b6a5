//! What a session's front-end keeps of it across restarts, keyed by droid's session id: the
//! options the client chose (the mode, which droid never sees since it runs at `off` and the
//! front-end decides; the model and the reasoning effort, which droid keeps too, put back when
//! droid's stored ones differ) and the tool calls the user rejected (droid records a rejected
//! tool as "cancelled by user", the same words as a tool stopped by a cancelled turn, so only
//! this record lets a replay say which it was).
//!
//! One small JSON file per session, `<store_dir>/acp-sessions/<session id>.json`, under the
//! task store's directory: outside what a session's droid may write (its confinement allows the
//! repository, `~/.factory`, the temporary directories and `sandbox_writable`), so the agent
//! cannot raise its own mode for the next start. Read without following a symbolic link and
//! bounded ([`MAX_FILE_BYTES`]); written atomically (temporary file and rename, which replaces
//! a link rather than writing through it). A file that cannot be read or parsed counts as none,
//! and is said in the logs.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::state_file::{ReadError, read_regular, write_atomic};

/// The largest options file read.
pub const MAX_FILE_BYTES: u64 = 64 * 1024;
/// Rejected tool calls remembered per session (the oldest are forgotten first).
pub const MAX_REJECTED: usize = 256;
/// The longest session id kept (droid's are UUIDs).
const MAX_ID_BYTES: usize = 128;

/// A session's options, as kept.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SavedOptions {
    /// The mode's id (the front-end's own modes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// droid's model id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// droid's reasoning effort.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// droid's tool-use ids the user rejected, oldest first (at most [`MAX_REJECTED`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejected: Vec<String>,
}

impl SavedOptions {
    /// Remember that the user rejected tool call `id`.
    pub fn reject(&mut self, id: &str) {
        if self.rejected.iter().any(|r| r == id) {
            return;
        }
        self.rejected.push(id.to_owned());
        if self.rejected.len() > MAX_REJECTED {
            let extra = self.rejected.len() - MAX_REJECTED;
            self.rejected.drain(..extra);
        }
    }
}

/// Where the sessions' options are kept.
#[derive(Debug, Clone)]
pub struct OptionsStore {
    dir: PathBuf,
}

/// Why options could not be kept.
#[derive(Debug, thiserror::Error)]
pub enum OptionsError {
    /// The session id cannot name a file.
    #[error("session id {0:?} cannot name an options file")]
    BadId(String),
    /// Writing failed.
    #[error("{0}")]
    Write(String),
}

impl OptionsStore {
    /// The store under the task store's directory `store_dir`.
    pub fn new(store_dir: &Path) -> Self {
        Self {
            dir: store_dir.join("acp-sessions"),
        }
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn file(&self, session_id: &str) -> Option<PathBuf> {
        let ok = !session_id.is_empty()
            && session_id.len() <= MAX_ID_BYTES
            && session_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        ok.then(|| self.dir.join(format!("{session_id}.json")))
    }

    /// The options kept for `session_id` (none kept, or unreadable: the defaults).
    pub fn load(&self, session_id: &str) -> SavedOptions {
        let Some(path) = self.file(session_id) else {
            return SavedOptions::default();
        };
        match read_regular(&path, MAX_FILE_BYTES) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                tracing::warn!("{}: not session options ({e}); ignored", path.display());
                SavedOptions::default()
            }),
            Err(ReadError::Missing) => SavedOptions::default(),
            Err(ReadError::Unreadable(why)) => {
                tracing::warn!("{}: {why}; ignored", path.display());
                SavedOptions::default()
            }
            Err(ReadError::Io(e)) => {
                tracing::warn!("{}: {e}; ignored", path.display());
                SavedOptions::default()
            }
        }
    }

    /// Keep `options` for `session_id`, replacing what was kept.
    ///
    /// # Errors
    /// When the id cannot name a file, or the directory or the file cannot be written.
    pub fn save(&self, session_id: &str, options: &SavedOptions) -> Result<(), OptionsError> {
        use std::os::unix::fs::DirBuilderExt as _;
        let path = self
            .file(session_id)
            .ok_or_else(|| OptionsError::BadId(session_id.to_owned()))?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(|e| OptionsError::Write(format!("{}: {e}", self.dir.display())))?;
        let bytes = serde_json::to_vec(options)
            .map_err(|e| OptionsError::Write(format!("{}: {e}", path.display())))?;
        write_atomic(&path, &bytes).map_err(|e| OptionsError::Write(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn temp_store(name: &str) -> (PathBuf, OptionsStore) {
        let dir = std::env::temp_dir().join(format!(
            "droid-options-{name}-{}-{}",
            std::process::id(),
            crate::process::scratch::unique_id()
        ));
        let store = OptionsStore::new(&dir);
        (dir, store)
    }

    #[test]
    fn options_are_kept_per_session_and_bad_ids_name_no_file() {
        let (dir, store) = temp_store("kept");
        assert_eq!(store.load("s-1"), SavedOptions::default());
        let mut o = SavedOptions {
            mode: Some("low".into()),
            model: Some("custom:Mock-0".into()),
            reasoning_effort: None,
            rejected: Vec::new(),
        };
        o.reject("call_0_0");
        o.reject("call_0_0");
        store.save("s-1", &o).unwrap();
        assert_eq!(store.load("s-1"), o);
        assert_eq!(store.load("s-2"), SavedOptions::default());
        for bad in ["", "../s-1", "s/1", ".hidden", "a b"] {
            assert!(store.save(bad, &o).is_err(), "{bad:?}");
            assert_eq!(store.load(bad), SavedOptions::default(), "{bad:?}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_link_or_a_bad_file_counts_as_none_and_the_rejected_are_bounded() {
        let (dir, store) = temp_store("links");
        std::fs::create_dir_all(store.dir()).unwrap();
        let elsewhere = dir.join("elsewhere.json");
        std::fs::write(&elsewhere, r#"{"mode":"high"}"#).unwrap();
        std::os::unix::fs::symlink(&elsewhere, store.dir().join("linked.json")).unwrap();
        assert_eq!(store.load("linked"), SavedOptions::default());
        std::fs::write(store.dir().join("bad.json"), "not json").unwrap();
        assert_eq!(store.load("bad"), SavedOptions::default());
        // saving replaces the link, never writes through it
        store
            .save(
                "linked",
                &SavedOptions {
                    mode: Some("read_only".into()),
                    ..SavedOptions::default()
                },
            )
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(&elsewhere).unwrap(),
            r#"{"mode":"high"}"#
        );
        let mut o = SavedOptions::default();
        for i in 0..MAX_REJECTED + 10 {
            o.reject(&format!("call_{i}"));
        }
        assert_eq!(o.rejected.len(), MAX_REJECTED);
        assert_eq!(o.rejected[0], "call_10");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
