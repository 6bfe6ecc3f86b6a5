//! Fuzz target `contract_request`: `droid_contract::ExecutionRequest::from_json`, the parser every
//! front-end hands a caller's request to, without host checks and with them (over an in-memory
//! host, so the fuzzer is fast and deterministic).
//!
//! Invariants: it never panics; a refusal lists at least one violation, each with a JSON path
//! starting at `$` and a message; the serde `Deserialize` impl agrees with `from_json`; and an
//! accepted request, serialized, parses again to an equal value under the same rules (the task
//! store writes requests out and reads them back).
#![no_main]

use std::path::{Path, PathBuf};

use droid_contract::{ExecutionRequest, HostCheck, PathFacts, PathKind, Violations};
use libfuzzer_sys::fuzz_target;

/// A small host: `/repo` is a repository holding a file, a subdirectory and two symlinks (one
/// leading out of it), `/alias` is a symlink to `/repo`, `/srv` a directory outside the allowed
/// root, `/etc/passwd` a file outside everything.
#[derive(Debug)]
struct Host;

/// Symlinks of the host: (link, target).
const LINKS: &[(&str, &str)] = &[
    ("/alias", "/repo"),
    ("/repo/out", "/etc"),
    ("/repo/in", "/repo/src"),
];

impl Host {
    /// `path` with its symlinks resolved (the host's `realpath`), whether or not it exists.
    fn resolve(path: &Path) -> PathBuf {
        let p = droid_contract::normalize(path).unwrap_or_else(|| path.to_path_buf());
        // every link target is itself link-free, so one pass resolves a path fully
        for (link, target) in LINKS {
            if let Ok(rest) = p.strip_prefix(link) {
                // normalised again: joining an empty rest leaves a trailing `/`
                let joined = Path::new(target).join(rest);
                return droid_contract::normalize(&joined).unwrap_or(joined);
            }
        }
        p
    }
}

impl PathFacts for Host {
    fn kind(&self, path: &Path) -> PathKind {
        let real = Self::resolve(path);
        match real.to_str() {
            Some("/" | "/repo" | "/repo/src" | "/etc" | "/srv" | "/srv/other") => PathKind::Dir,
            Some("/repo/README.md" | "/repo/src/lib.rs" | "/etc/passwd") => PathKind::File,
            Some("/dev/null") => PathKind::Other,
            _ => PathKind::Missing,
        }
    }

    fn canonical(&self, path: &Path) -> Option<PathBuf> {
        (self.kind(path) != PathKind::Missing).then(|| Self::resolve(path))
    }
}

fn check_refusal(text: &str, v: &Violations) {
    assert!(!v.0.is_empty(), "a refusal without violations for {text:?}");
    for one in &v.0 {
        assert!(
            one.path.starts_with('$'),
            "violation path {:?} does not start at $ (input {text:?})",
            one.path
        );
        assert!(
            !one.message.trim().is_empty(),
            "violation at {} has no message (input {text:?})",
            one.path
        );
    }
}

/// Parse under `host`; when accepted, the serialized request must parse again, equal.
fn parse_round_trip(text: &str, host: Option<HostCheck<'_>>) -> Option<ExecutionRequest> {
    match ExecutionRequest::from_json(text, host) {
        Ok(req) => {
            let wire = serde_json::to_string(&req)
                .unwrap_or_else(|e| panic!("an accepted request does not serialize: {e}"));
            match ExecutionRequest::from_json(&wire, host) {
                Ok(again) => assert_eq!(
                    again, req,
                    "round trip changed the request\n input: {text:?}\n wire:  {wire}"
                ),
                Err(e) => panic!(
                    "an accepted request does not parse again after serialization: {e}\n input: {text:?}\n wire:  {wire}"
                ),
            }
            Some(req)
        }
        Err(v) => {
            check_refusal(text, &v);
            None
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let shape_only = parse_round_trip(&text, None);

    // the serde impl is the same parser (the task store reads requests back through it)
    match serde_json::from_str::<ExecutionRequest>(&text) {
        Ok(r) => assert_eq!(
            Some(&r),
            shape_only.as_ref(),
            "Deserialize accepted what from_json refused: {text:?}"
        ),
        Err(_) => assert!(
            shape_only.is_none(),
            "Deserialize refused what from_json accepted: {text:?}"
        ),
    }

    let allowed = [PathBuf::from("/repo")];
    let host = HostCheck {
        facts: &Host,
        allowed_roots: &allowed,
    };
    let checked = parse_round_trip(&text, Some(host));
    // the host rules only add violations, they never change a value: whatever passes them
    // passes the shape rules, as the same request
    if checked.is_some() {
        assert_eq!(
            checked, shape_only,
            "host checks changed what was parsed: {text:?}"
        );
    }
    let anywhere = HostCheck {
        facts: &Host,
        allowed_roots: &[],
    };
    parse_round_trip(&text, Some(anywhere));
});
