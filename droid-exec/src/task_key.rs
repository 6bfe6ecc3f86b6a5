//! A background task's id, parsed: the one name by which the task store, a worktree task's
//! branch and checkout, and a run that belongs to a task know the task. Below all of them.

use std::fs::File;
use std::time::SystemTime;

use droid_contract::ProviderId;

use crate::error::EngineError;

/// A background task's id: `droid-<unix seconds>-<4 hex digits>` (seed 002,
/// docs/architecture.md#origin). Only ids of this
/// shape name a directory, so an id can never point outside the store.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskKey(String);

impl TaskKey {
    /// Parse an id given by a caller.
    ///
    /// # Errors
    /// [`EngineError::NoSuchTask`] for anything that is not an id of the store's shape.
    pub fn parse(id: &str) -> Result<Self, EngineError> {
        let ok = Self::after_provider(id).is_some_and(|rest| {
            rest.split_once('-').is_some_and(|(secs, hex)| {
                (1..=20).contains(&secs.len())
                    && secs.bytes().all(|b| b.is_ascii_digit())
                    && hex.len() == 4
                    && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
            })
        });
        if ok {
            Ok(Self(id.to_owned()))
        } else {
            Err(EngineError::NoSuchTask {
                id: id.to_owned(),
                hint: "task ids look like droid-1795349045-3fa2 or codex-1795349045-3fa2".into(),
            })
        }
    }

    /// What follows the provider prefix (`droid-`, `codex-`, …) of `id`.
    fn after_provider(id: &str) -> Option<&str> {
        let (provider, rest) = id.split_once('-')?;
        ProviderId::parse(provider).map(|_| rest)
    }

    /// The provider the id names.
    pub fn provider(&self) -> ProviderId {
        self.0
            .split_once('-')
            .and_then(|(p, _)| ProviderId::parse(p))
            .unwrap_or_default()
    }

    /// `{provider}-{unix seconds}-{4 hex digits}` (seed 002's shape, docs/architecture.md#origin).
    pub(crate) fn generate(provider: ProviderId) -> Self {
        Self(format!(
            "{provider}-{}-{:04x}",
            crate::timestamp::unix_seconds(),
            random_u16()
        ))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The second of its creation, as its id says (wall clock): a listing finds the newest
    /// tasks from the names alone (`Store::newest_first`).
    pub(crate) fn secs(&self) -> u64 {
        Self::after_provider(&self.0)
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(secs, _)| secs.parse().ok())
            // twenty digits can exceed u64: such an id sorts as the newest, harmlessly
            .unwrap_or(u64::MAX)
    }
}

impl std::fmt::Display for TaskKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn random_u16() -> u16 {
    use std::io::Read as _;
    let mut b = [0u8; 2];
    if File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_ok()
    {
        return u16::from_le_bytes(b);
    }
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    u16::try_from(h.finish() & 0xffff).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_have_one_shape() {
        for provider in ProviderId::ALL {
            let k = TaskKey::generate(provider);
            assert!(k.as_str().starts_with(&format!("{provider}-")), "{k}");
            assert_eq!(TaskKey::parse(k.as_str()).unwrap(), k);
            assert_eq!(k.provider(), provider);
        }
        assert_eq!(
            TaskKey::parse("codex-1737465723-a3f9")
                .map(|k| k.secs())
                .ok(),
            Some(1_737_465_723)
        );
        for bad in [
            "codex-12-abc",
            "gpt-12-abcd",
            "Codex-12-abcd",
            "",
            "droid-",
            "droid-12-abc",
            "droid-12-ABCD",
            "droid-x-abcd",
            "droid-12-abcd/..",
            "../droid-12-abcd",
            "task-12-abcd",
        ] {
            assert!(
                matches!(TaskKey::parse(bad), Err(EngineError::NoSuchTask { .. })),
                "{bad}"
            );
        }
    }
}
