//! Running git for the snapshot (and for worktree tasks, through `crate::worktree::git`): one
//! bounded, timed `git` command through the engine's spawn, with the settings that keep code
//! the repository controls from running ([`GIT_CONFIG`], [`neutral_filters`]), and git's
//! version.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::error::EngineError;
use crate::excerpt::head_str;
use crate::process::capture::capture;
use crate::process::spawn::SpawnSpec;
use crate::process::sweep::MARKER_VAR;

/// How long one git command may take.
const GIT_TIMEOUT: Duration = Duration::from_secs(120);

/// How much of git's output we keep; more than this is an error, not a silent cut.
const GIT_KEEP_BYTES: usize = 64 * 1024 * 1024;

/// The longest piece of git's stderr quoted in a warning or an error.
const MAX_MESSAGE_BYTES: usize = 2000;

/// Settings every git call gets: no hooks (`post-index-change` runs on every index write), no
/// fsmonitor (its value may name a program), no transport at all, raw path names, a full (not
/// split) index in our copy, no automatic gc, no dying on CRLF conversions, no
/// embedded-repository advice, and no Git LFS filter (it would write to `.git/lfs` and needs
/// git-lfs installed; LFS files are hashed as they are on disk instead).
///
/// Code the repository controls must never run on our behalf (an agent at `--auto low` can write
/// `.git/config` and `.git/hooks`): hooks and fsmonitor are off here, every other filter driver
/// configured anywhere is emptied per run by [`neutral_filters`], and `diff-tree` runs with
/// `--no-ext-diff --no-textconv`.
const GIT_CONFIG: &[&str] = &[
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "protocol.allow=never",
    "core.quotepath=false",
    "core.splitIndex=false",
    "core.safecrlf=false",
    // objects in scratch are read once, by our diff, and deleted with it: deflating them costs
    // more than it saves (a 1 GiB file took 43 s to stage deflated, 13 s stored)
    "core.compression=0",
    "core.looseCompression=0",
    "gc.auto=0",
    "advice.addEmbeddedRepo=false",
    "filter.lfs.clean=",
    "filter.lfs.smudge=",
    "filter.lfs.process=",
    "filter.lfs.required=false",
];

/// Numbers the scratch index directories and the git processes' markers.
static SEQ: AtomicU64 = AtomicU64::new(0);

pub(super) fn next_seq() -> u64 {
    SEQ.fetch_add(1, Ordering::Relaxed)
}

/// One finished git command.
#[derive(Debug)]
pub(crate) struct GitRun {
    /// What ran, for messages (`git` and the `-c` settings left out).
    pub(crate) args: String,
    /// Exited 0.
    pub(crate) success: bool,
    /// All of stdout.
    pub(crate) stdout: Vec<u8>,
    /// Stderr, trimmed and bounded (or why the command did not finish).
    pub(crate) message: String,
}

impl GitRun {
    /// Stdout of a successful run, else [`EngineError::Git`].
    pub(crate) fn into_stdout(self) -> Result<Vec<u8>, EngineError> {
        if self.success {
            Ok(self.stdout)
        } else {
            Err(self.into_error())
        }
    }

    pub(crate) fn into_error(self) -> EngineError {
        EngineError::Git {
            args: self.args,
            message: self.message,
        }
    }
}

/// Run `git <GIT_CONFIG> <args>` in `root` with `env` (plus a marker and the C locale, so that
/// messages we recognise are in English).
pub(crate) async fn git(
    root: &Path,
    env: &[(OsString, OsString)],
    args: &[OsString],
    input: Option<&[u8]>,
) -> Result<GitRun, EngineError> {
    let marker = format!("snapshot-{}-{}", std::process::id(), next_seq());
    let env = with_vars(
        env,
        &[
            (MARKER_VAR, OsString::from(&marker)),
            ("LC_ALL", OsString::from("C")),
        ],
    );
    let mut full = Vec::with_capacity(GIT_CONFIG.len() * 2 + args.len());
    for setting in GIT_CONFIG {
        full.push(OsString::from("-c"));
        full.push(OsString::from(setting));
    }
    full.extend(args.iter().cloned());
    let spec = SpawnSpec {
        program: PathBuf::from("git"),
        args: full,
        cwd: root.to_path_buf(),
        env,
        stdin_piped: false,
        stdin_file: None,
        detach_log: None,
        rlimits: crate::process::limits::Rlimits::NONE,
    };
    let out = capture(&spec, input, GIT_TIMEOUT, GIT_KEEP_BYTES, &marker).await?;
    let args = args
        .iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ");
    let stderr = head_str(out.stderr.text().trim(), MAX_MESSAGE_BYTES);
    let (success, message) = if out.timed_out {
        (
            false,
            format!("timed out after {} s", GIT_TIMEOUT.as_secs()),
        )
    } else if out.stdout.truncated() {
        (
            false,
            format!("its output exceeded {} MiB", GIT_KEEP_BYTES >> 20),
        )
    } else {
        (out.code == Some(0), stderr)
    };
    Ok(GitRun {
        args,
        success,
        stdout: out.stdout.bytes(),
        message,
    })
}

/// `env` with each of `vars` set (replacing any value it had).
pub(crate) fn with_vars(
    env: &[(OsString, OsString)],
    vars: &[(&str, OsString)],
) -> Vec<(OsString, OsString)> {
    let mut out: Vec<(OsString, OsString)> = env
        .iter()
        .filter(|(k, _)| !vars.iter().any(|(name, _)| k == name))
        .cloned()
        .collect();
    out.extend(
        vars.iter()
            .map(|(name, value)| (OsString::from(name), value.clone())),
    );
    out
}

pub(super) fn os_args(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

/// The oldest git the snapshot can use: `git rev-parse --path-format=absolute` came in 2.31.
pub(crate) const GIT_MIN: (u32, u32) = (2, 31);

/// git's version as `(major, minor)` and the text of `git --version` (run in `cwd` with `env`),
/// or why it could not be had.
///
/// # Errors
/// A message when git cannot be started, fails, or prints no version.
pub(crate) async fn git_version(
    cwd: &Path,
    env: &[(OsString, OsString)],
) -> Result<((u32, u32), String), String> {
    let run = git(cwd, env, &os_args(&["--version"]), None)
        .await
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&run.stdout).trim().to_owned();
    if !run.success {
        return Err(format!("git --version failed: {}", run.message));
    }
    parse_git_version(&text)
        .map(|v| (v, text.clone()))
        .ok_or_else(|| format!("git --version printed {text:?}"))
}

/// `(major, minor)` of `git version 2.30.2` (or `git version 2.39.5.windows.1`).
pub(super) fn parse_git_version(text: &str) -> Option<(u32, u32)> {
    let version = text.strip_prefix("git version ")?;
    let mut parts = version.split('.');
    let major = parts.next()?.trim().parse().ok()?;
    let minor = parts.next()?.trim().parse().ok()?;
    Some((major, minor))
}

/// The names of the filter drivers configured for the repository at `root`, in every scope and
/// include (`filter.<name>.<key>`; a name may hold dots). Reading configuration runs nothing.
/// When it cannot be read the snapshot must not stage with git, since a filter could then run.
pub(crate) async fn filter_names(
    root: &Path,
    env: &[(OsString, OsString)],
) -> Result<Vec<Vec<u8>>, String> {
    let args = os_args(&["config", "-z", "--name-only", "--get-regexp", r"^filter\."]);
    let run = match git(root, env, &args, None).await {
        Ok(run) => run,
        Err(e) => return Err(format!("git could not be started ({e})")),
    };
    if !run.success {
        // `git config --get-regexp` exits 1 when nothing matches, and then prints nothing
        if run.stdout.is_empty() && run.message.is_empty() {
            return Ok(Vec::new());
        }
        return Err(format!("git {} failed: {}", run.args, run.message));
    }
    Ok(parse_filter_names(&run.stdout))
}

/// The driver names in `git config -z --name-only` output (`filter.<name>.<key>\0`…), each
/// once, in order.
pub(super) fn parse_filter_names(out: &[u8]) -> Vec<Vec<u8>> {
    let mut names: Vec<Vec<u8>> = Vec::new();
    for key in out.split(|b| *b == 0) {
        let Some(rest) = key.strip_prefix(b"filter.") else {
            continue;
        };
        let Some(dot) = rest.iter().rposition(|b| *b == b'.') else {
            // `filter.x` (no subsection) names no driver
            continue;
        };
        let name = &rest[..dot];
        if !names.iter().any(|n| n == name) {
            names.push(name.to_vec());
        }
    }
    names
}

/// `env` with every driver of `names` emptied (`clean`, `smudge` and `process` set to nothing,
/// `required` to false), through `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_<n>`/`GIT_CONFIG_VALUE_<n>`
/// after any the environment already holds: unlike `-c`, these take a name holding `=`.
pub(crate) fn neutral_filters(
    env: &[(OsString, OsString)],
    names: &[Vec<u8>],
) -> Vec<(OsString, OsString)> {
    let mut settings: Vec<(Vec<u8>, &str)> = Vec::new();
    for name in names {
        for (key, value) in [
            ("clean", ""),
            ("smudge", ""),
            ("process", ""),
            ("required", "false"),
        ] {
            let mut full = b"filter.".to_vec();
            full.extend_from_slice(name);
            full.push(b'.');
            full.extend_from_slice(key.as_bytes());
            settings.push((full, value));
        }
    }
    with_config(env, &settings)
}

/// `env` with `settings` (key, value) added through `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_<n>`/
/// `GIT_CONFIG_VALUE_<n>` after any the environment already holds.
pub(super) fn with_config(
    env: &[(OsString, OsString)],
    settings: &[(Vec<u8>, &str)],
) -> Vec<(OsString, OsString)> {
    let start: usize = env
        .iter()
        .find(|(k, _)| k == "GIT_CONFIG_COUNT")
        .and_then(|(_, v)| v.to_str()?.trim().parse().ok())
        .unwrap_or(0);
    let mut out: Vec<(OsString, OsString)> = env
        .iter()
        .filter(|(k, _)| k != "GIT_CONFIG_COUNT")
        .cloned()
        .collect();
    let mut n = start;
    for (key, value) in settings {
        out.push((
            OsString::from(format!("GIT_CONFIG_KEY_{n}")),
            OsString::from_vec(key.clone()),
        ));
        out.push((
            OsString::from(format!("GIT_CONFIG_VALUE_{n}")),
            OsString::from(value),
        ));
        n += 1;
    }
    if n > 0 {
        out.push((
            OsString::from("GIT_CONFIG_COUNT"),
            OsString::from(n.to_string()),
        ));
    }
    out
}

/// The value for `GIT_ALTERNATE_OBJECT_DIRECTORIES`: `dirs`, then whatever `env` already had.
pub(super) fn alternates(dirs: &[&Path], env: &[(OsString, OsString)]) -> OsString {
    let mut out: Vec<u8> = Vec::new();
    let mut seen: Vec<&Path> = Vec::new();
    for dir in dirs {
        if seen.contains(dir) {
            continue;
        }
        seen.push(dir);
        if !out.is_empty() {
            out.push(b':');
        }
        out.extend(quote_alternate(dir.as_os_str().as_bytes()));
    }
    let inherited = env
        .iter()
        .find(|(k, _)| k == "GIT_ALTERNATE_OBJECT_DIRECTORIES")
        .map(|(_, v)| v.as_bytes())
        .filter(|v| !v.is_empty());
    if let Some(inherited) = inherited {
        out.push(b':');
        out.extend_from_slice(inherited);
    }
    OsString::from_vec(out)
}

/// Git reads an alternate that starts with `"` as a C-quoted string, which is how one holding
/// the `:` separator is written.
fn quote_alternate(path: &[u8]) -> Vec<u8> {
    if !path.contains(&b':') && path.first() != Some(&b'"') {
        return path.to_vec();
    }
    let mut out = vec![b'"'];
    for &b in path {
        if b == b'"' || b == b'\\' {
            out.push(b'\\');
        }
        out.push(b);
    }
    out.push(b'"');
    out
}
