//! The documentation's "real output" blocks that `cargo xtask demo` generates: the README's tour
//! (between `<!-- tour:begin -->` and `<!-- tour:end -->`) and the five providers' runs in
//! `docs/providers.md` (between `<!-- providers:begin -->` and `<!-- providers:end -->`), each a
//! ```` ```console ```` block holding a whole transcript, commands (`$ …`) and their output.
//!
//! - [`check`] compares a block with the transcript of the run just made, line by line, after
//!   masking in both what differs from run to run or from machine to machine ([`mask`]): times,
//!   durations, task and session ids, pids, ports, and the `doctor` lines and `sandbox:` lines that
//!   describe the machine rather than droid-executor. Everything else must be equal, so a block
//!   cannot show a command, an output line or a line's wording that the binary no longer prints.
//! - [`write`] replaces the block with the transcript (every byte outside the markers kept).

use std::path::Path;

use anyhow::{Context, Result, bail};

use crate::sh::workspace_root;

/// A generated block: the file it lives in and the name of its markers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Block {
    /// Relative to the workspace root.
    pub file: &'static str,
    /// The markers are `<!-- {name}:begin -->` and `<!-- {name}:end -->`.
    pub name: &'static str,
}

/// The README's tour (`cargo xtask demo`).
pub(crate) const TOUR: Block = Block {
    file: "README.md",
    name: "tour",
};

/// The five providers' runs (`cargo xtask demo --providers`).
pub(crate) const PROVIDERS: Block = Block {
    file: "docs/providers.md",
    name: "providers",
};

/// `doctor` checks whose line depends on the machine, not on droid-executor: the other agent
/// CLIs (found on the caller's `PATH` or not), git's version, the kernel's confinement, where
/// the temp directory lies, the cgroup set-up, and whether the bridge's default port is free.
/// Their lines are compared by check name only, and their `fix:` lines not at all.
const MACHINE_CHECKS: &[&str] = &[
    "codex", "claude", "gemini", "opencode", "git", "sandbox", "location", "reach", "limits",
    "bridge",
];

/// The ids of tasks start with the provider's name.
const PROVIDERS_NAMES: &[&str] = &["droid", "codex", "claude", "gemini", "opencode"];

impl Block {
    fn begin(&self) -> String {
        format!("<!-- {}:begin -->", self.name)
    }

    fn end(&self) -> String {
        format!("<!-- {}:end -->", self.name)
    }

    /// The byte range of what lies between the begin line and the end line of `text`.
    fn body(&self, text: &str) -> Result<std::ops::Range<usize>> {
        let line_at = |marker: &str| -> Result<usize> {
            let mut found = text.match_indices(marker).map(|(i, _)| i).filter(|&i| {
                let starts = i == 0 || text.as_bytes()[i - 1] == b'\n';
                let rest = &text[i + marker.len()..];
                starts && (rest.is_empty() || rest.starts_with('\n'))
            });
            let first = found
                .next()
                .with_context(|| format!("{} has no line `{marker}`", self.file))?;
            if found.next().is_some() {
                bail!("{} has the line `{marker}` more than once", self.file);
            }
            Ok(first)
        };
        let (begin, end) = (self.begin(), self.end());
        let start = line_at(&begin)? + begin.len() + 1;
        let stop = line_at(&end)?;
        if stop < start {
            bail!("{} has `{end}` before `{begin}`", self.file);
        }
        Ok(start..stop)
    }

    fn path(&self) -> std::path::PathBuf {
        workspace_root().join(self.file)
    }
}

/// The transcript held by `block` in `text`: the lines of its ```` ``` ```` fence.
fn transcript_in(block: &Block, text: &str) -> Result<String> {
    let body = &text[block.body(text)?];
    let inner = body
        .strip_prefix("```console\n")
        .and_then(|b| b.strip_suffix("```\n"))
        .with_context(|| {
            format!(
                "{}: the {} block is not one ```console fence",
                block.file, block.name
            )
        })?;
    Ok(inner.to_owned())
}

/// `text` with `block` holding `transcript`; every byte outside the markers unchanged.
fn replaced(block: &Block, text: &str, transcript: &str) -> Result<String> {
    let body = block.body(text)?;
    let mut fenced = String::from("```console\n");
    fenced.push_str(transcript);
    if !transcript.ends_with('\n') {
        fenced.push('\n');
    }
    fenced.push_str("```\n");
    Ok(format!(
        "{}{fenced}{}",
        &text[..body.start],
        &text[body.end..]
    ))
}

/// Replace `block` in its file with `transcript` (written beside it, then renamed over it).
pub(crate) fn write(block: &Block, transcript: &str) -> Result<()> {
    let path = block.path();
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?;
    write_file(&path, &replaced(block, &text, transcript)?)
}

fn write_file(path: &Path, text: &str) -> Result<()> {
    let tmp = path.with_extension("md.demo.tmp");
    std::fs::write(&tmp, text).with_context(|| format!("write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("rename onto {}", path.display()))
}

/// Fail, naming the lines that differ, when `block` does not show `transcript` (masked).
pub(crate) fn check(block: &Block, transcript: &str, write_flag: &str) -> Result<()> {
    let path = block.path();
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?;
    let shown = transcript_in(block, &text)?;
    let differences = compare(&shown, transcript);
    if differences.is_empty() {
        return Ok(());
    }
    bail!(
        "{}'s {} block is not what this run printed ({} line(s) differ after masking times, ids, \
         pids, ports and the machine's own doctor lines; `-` the block's, `+` the run's):\n{}\n\
         run `cargo xtask demo {write_flag}` to replace the block with this run's output, and \
         review the difference",
        block.file,
        block.name,
        differences.len(),
        differences
            .iter()
            .take(12)
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join("\n")
    )
}

/// The lines that differ between the masked `shown` and the masked `ran`, as a line diff
/// (longest common subsequence): `- N: line` only in the documentation (its N-th line of the
/// fence), `+ N: line` only in the run.
fn compare(shown: &str, ran: &str) -> Vec<String> {
    let (a, b) = (mask(shown), mask(ran));
    // common[i][j]: the longest common subsequence of a[i..] and b[j..]
    let mut common = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            common[i][j] = if a[i] == b[j] {
                common[i + 1][j + 1] + 1
            } else {
                common[i + 1][j].max(common[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            i += 1;
            j += 1;
        } else if j == b.len() || (i < a.len() && common[i + 1][j] >= common[i][j + 1]) {
            out.push(format!("  - {}: {}", i + 1, a[i]));
            i += 1;
        } else {
            out.push(format!("  + {}: {}", j + 1, b[j]));
            j += 1;
        }
    }
    out
}

/// The lines of a transcript with what legitimately varies replaced by a placeholder:
/// - a `doctor` line of a [`MACHINE_CHECKS`] check becomes its level-less name, and its
///   indented continuation lines (`fix: …`) are dropped;
/// - a run's `sandbox:` line keeps only its label (the kernel decides what follows);
/// - `status: … (1.4 s)` durations, `session: …` ids, ISO times, task ids
///   (`droid-1795879186-1e63`), `pid N`, ports after `127.0.0.1:`, `--port` and `--bridge-port`
///   are masked wherever they stand.
pub(crate) fn mask(transcript: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_machine_check = false;
    for line in transcript.lines() {
        if in_machine_check && line.starts_with(' ') {
            continue;
        }
        in_machine_check = false;
        if let Some(name) = machine_check(line) {
            in_machine_check = true;
            out.push(format!("(doctor's {name} line: this machine's)"));
            continue;
        }
        if line.starts_with("sandbox: ") {
            out.push("sandbox: (this machine's confinement)".to_owned());
            continue;
        }
        if line.starts_with("session: ") {
            out.push("session: SESSION".to_owned());
            continue;
        }
        out.push(mask_words(&mask_duration(line)));
    }
    out
}

/// The check name of a `doctor` line (`OK   git           git version 2.47.3`) when it is one of
/// the machine's own.
fn machine_check(line: &str) -> Option<&'static str> {
    let rest = ["OK   ", "WARN ", "FAIL "]
        .iter()
        .find_map(|level| line.strip_prefix(level))?;
    let name = rest.split_whitespace().next()?;
    MACHINE_CHECKS.iter().copied().find(|c| *c == name)
}

/// `status: success (1.4 s)` as `status: success (N s)`.
fn mask_duration(line: &str) -> String {
    if let Some(rest) = line.strip_prefix("status: ")
        && let Some((head, tail)) = rest.rsplit_once(" (")
        && let Some(number) = tail.strip_suffix(" s)")
        && number.parse::<f64>().is_ok()
    {
        return format!("status: {head} (N s)");
    }
    line.to_owned()
}

/// Each space-separated word of `line` masked on its own (spacing kept exactly).
fn mask_words(line: &str) -> String {
    let words: Vec<&str> = line.split(' ').collect();
    let mut out = Vec::with_capacity(words.len());
    for (i, word) in words.iter().enumerate() {
        let before = i.checked_sub(1).map(|j| words[j]);
        out.push(match before {
            Some("--port" | "--bridge-port") => "PORT".to_owned(),
            Some("pid" | "(pid") if digits(word).parse::<u32>().is_ok() => {
                format!("PID{}", &word[digits(word).len()..])
            }
            _ => mask_word(word),
        });
    }
    out.join(" ")
}

/// `word` without its closing punctuation (`31708);` → `31708`).
fn digits(word: &str) -> &str {
    word.trim_end_matches([')', ';', ',', '.', ':'])
}

/// One word: an ISO time, a task id or a loopback port inside it masked.
fn mask_word(word: &str) -> String {
    let core = word.trim_end_matches([',', ':', ')', '.', ';']);
    let tail = &word[core.len()..];
    if is_iso_time(core) {
        return format!("TIME{tail}");
    }
    let core_unquoted = core.trim_start_matches(['(', '\'', '"']);
    if is_task_id(core_unquoted) {
        let head = &core[..core.len() - core_unquoted.len()];
        return format!("{head}TASK-ID{tail}");
    }
    if let Some((host, port)) = word.split_once("127.0.0.1:") {
        let rest: String = port.chars().skip_while(char::is_ascii_digit).collect();
        return format!("{host}127.0.0.1:PORT{rest}");
    }
    word.to_owned()
}

/// `2026-11-28T15:19:46.297Z`.
fn is_iso_time(w: &str) -> bool {
    let b = w.as_bytes();
    b.len() >= 20
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[10] == b'T'
        && w.ends_with('Z')
        && w[..w.len() - 1]
            .chars()
            .all(|c| c.is_ascii_digit() || "-T:.".contains(c))
}

/// `droid-1795879186-1e63`: a provider's name, unix seconds, four hex digits.
fn is_task_id(w: &str) -> bool {
    let mut parts = w.split('-');
    let (Some(provider), Some(secs), Some(hex), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    PROVIDERS_NAMES.contains(&provider)
        && secs.len() >= 6
        && secs.chars().all(|c| c.is_ascii_digit())
        && hex.len() == 4
        && hex.chars().all(|c| c.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    const RUN_A: &str = "\
$ droid-executor doctor
OK   config        ~/.config/droid-executor/config.toml not present; using defaults
WARN codex         not found (codex on PATH (not found)); tasks with provider codex cannot run
                   fix: install it if you want it: npm install -g @openai/codex@0.169.0
OK   git           git version 2.47.3
WARN limits        tasks: no limit
                   fix: run droid-executor as a user other than root
$ droid-executor run --background --mode code 'Add farewell'
droid-executor: follow it with: droid-executor tasks wait droid-1795879186-1e63
droid-1795879186-1e63
$ droid-executor tasks wait droid-1795879186-1e63
task droid-1795879186-1e63: success
created 2026-11-28T15:19:46.297Z, updated 2026-11-28T15:19:48.336Z
status: success (2.0 s)
sandbox: landlock (ABI 7), writes confined to repo_root and 13 other paths
session: 02d649b1-7449-4444-b865-ba6696ecbc13
$ droid-executor run --via bridge --bridge-port 41205 'Add farewell'
droid-executor: started the bridge on http://127.0.0.1:41205 (pid 31708)
$ droid-executor bridge stop --port 41205
bridge stopped (pid 31708)
";

    /// The same run on another machine, another day: everything that differs is masked.
    const RUN_B: &str = "\
$ droid-executor doctor
OK   config        ~/.config/droid-executor/config.toml not present; using defaults
OK   codex         ~/bin/codex (from PATH), version 0.169.0
OK   git           git version 2.39.5
OK   limits        tasks: 4096 (pids.max of the run's cgroup)
$ droid-executor run --background --mode code 'Add farewell'
droid-executor: follow it with: droid-executor tasks wait droid-1795500110-505d
droid-1795500110-505d
$ droid-executor tasks wait droid-1795500110-505d
task droid-1795500110-505d: success
created 2026-11-24T06:01:50.309Z, updated 2026-11-24T06:01:51.532Z
status: success (12.25 s)
sandbox: none (Landlock is not available: kernel 5.10)
session: c80568ec-7c9a-4a0e-900c-2a98cc1dd996
$ droid-executor run --via bridge --bridge-port 33313 'Add farewell'
droid-executor: started the bridge on http://127.0.0.1:33313 (pid 26324)
$ droid-executor bridge stop --port 33313
bridge stopped (pid 26324)
";

    #[test]
    fn what_varies_between_runs_and_machines_is_masked() {
        assert_eq!(mask(RUN_A), mask(RUN_B));
        assert_eq!(
            mask(RUN_A),
            [
                "$ droid-executor doctor",
                "OK   config        ~/.config/droid-executor/config.toml not present; using defaults",
                "(doctor's codex line: this machine's)",
                "(doctor's git line: this machine's)",
                "(doctor's limits line: this machine's)",
                "$ droid-executor run --background --mode code 'Add farewell'",
                "droid-executor: follow it with: droid-executor tasks wait TASK-ID",
                "TASK-ID",
                "$ droid-executor tasks wait TASK-ID",
                "task TASK-ID: success",
                "created TIME, updated TIME",
                "status: success (N s)",
                "sandbox: (this machine's confinement)",
                "session: SESSION",
                "$ droid-executor run --via bridge --bridge-port PORT 'Add farewell'",
                "droid-executor: started the bridge on http://127.0.0.1:PORT (pid PID)",
                "$ droid-executor bridge stop --port PORT",
                "bridge stopped (pid PID)",
            ]
        );
    }

    #[test]
    fn what_droid_executor_prints_is_compared() {
        // a missing sandbox line, a changed word, an extra line: each is a difference
        let without_sandbox = RUN_A.replace(
            "sandbox: landlock (ABI 7), writes confined to repo_root and 13 other paths\n",
            "",
        );
        assert!(!compare(&without_sandbox, RUN_A).is_empty());
        assert_eq!(
            compare(&RUN_A.replace("tasks: no limit", "tasks: 512"), RUN_A),
            Vec::<String>::new(),
            "a machine line's wording is not compared"
        );
        assert_eq!(
            mask_words("bridge running on http://127.0.0.1:41205 (pid 31708); droid 0.225.2"),
            "bridge running on http://127.0.0.1:PORT (pid PID); droid 0.225.2"
        );
        assert_eq!(
            compare(
                "status: success (1.0 s)\nfiles: 1 lines\n",
                "status: success (1.2 s)\nfiles: 1 line\n"
            ),
            ["  - 2: files: 1 lines", "  + 2: files: 1 line"]
        );
        // a line added in the middle is one difference, not every line after it
        assert_eq!(compare("a\nc\nd\n", "a\nb\nc\nd\n"), ["  + 2: b"]);
        assert_eq!(compare("a\nb\n", "a\n"), ["  - 2: b"]);
        // a task id of another shape, or a word that only looks like a port, stays
        assert_eq!(mask_word("droid-executor"), "droid-executor");
        assert_eq!(mask_word("codex-1795501789-aa22:"), "TASK-ID:");
        assert_eq!(mask_word("droid-1-abcd"), "droid-1-abcd");
        assert_eq!(
            mask_words("tasks wait codex-1795501789-aa22 --wait 60"),
            "tasks wait TASK-ID --wait 60"
        );
    }

    #[test]
    fn the_block_between_the_markers_is_read_and_replaced() {
        let doc = "# Title\n\nprose `<!-- tour:begin -->` inline\n<!-- tour:begin -->\n```console\n$ old\nout\n```\n<!-- tour:end -->\nafter\n";
        assert_eq!(transcript_in(&TOUR, doc).unwrap(), "$ old\nout\n");
        let new = replaced(&TOUR, doc, "$ new\nnew out\n").unwrap();
        assert_eq!(
            new,
            "# Title\n\nprose `<!-- tour:begin -->` inline\n<!-- tour:begin -->\n```console\n$ new\nnew out\n```\n<!-- tour:end -->\nafter\n"
        );
        assert_eq!(replaced(&TOUR, &new, "$ new\nnew out\n").unwrap(), new);
        let err = |t: &str| transcript_in(&TOUR, t).unwrap_err().to_string();
        assert_eq!(
            err("nothing\n"),
            "README.md has no line `<!-- tour:begin -->`"
        );
        assert_eq!(
            err("<!-- tour:end -->\n<!-- tour:begin -->\n"),
            "README.md has `<!-- tour:end -->` before `<!-- tour:begin -->`"
        );
        assert_eq!(
            err("<!-- tour:begin -->\nno fence\n<!-- tour:end -->\n"),
            "README.md: the tour block is not one ```console fence"
        );
    }

    /// The checked-in blocks are well formed (their content is checked against a real run by
    /// `cargo xtask demo --check-readme`, in CI).
    #[test]
    fn the_documentation_holds_both_blocks() {
        for block in [TOUR, PROVIDERS] {
            let text = std::fs::read_to_string(block.path()).unwrap();
            let transcript = transcript_in(&block, &text).unwrap();
            assert!(
                transcript.starts_with("$ cd ~/sample-repo\n"),
                "{}: {transcript}",
                block.file
            );
        }
    }
}
