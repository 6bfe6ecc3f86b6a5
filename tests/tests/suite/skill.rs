//! The Agent Skill in `skill/droid-executor/` against the Agent Skills format and against the
//! binary it teaches: the frontmatter rules (read by a small reader for the subset of YAML the
//! skill uses, strict about what a real YAML parser would read differently), the body's length
//! and links, every `droid-executor …` command it shows run with the fake droid, its request
//! example parsed as an ExecutionRequest, its result example checked against the result schema,
//! every status and issue type explained, `setup skill` installing exactly these files, and the
//! protocol reference (`references/droid-executor-protocol.md`) regenerated from the contract
//! types by xtask's own generator and compared with the checked-in file.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use droid_contract::ExecutionRequest;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::droid_bin::workspace_root;
use tests::temp_dir::TempDir;

use super::binary::{FakeHome, Out, droid_executor};

/// xtask's generator of the protocol reference, compiled here as well: the suite checks the
/// checked-in reference with the very code `cargo xtask codegen` writes it with (xtask is a
/// binary; sharing its source keeps both crates' dependencies as they are).
#[path = "../../../xtask/src/protocol_doc.rs"]
mod protocol_doc;

/// The frontmatter keys the Agent Skills specification defines (agentskills.io/specification).
const SPEC_KEYS: &[&str] = &[
    "name",
    "description",
    "license",
    "compatibility",
    "metadata",
    "allowed-tools",
];
/// The check names `doctor` prints, in order.
const DOCTOR_CHECKS: &[&str] = &[
    "config",
    "droid",
    "auth",
    "codex",
    "claude",
    "gemini",
    "opencode",
    "allowed_roots",
    "store",
    "git",
    "sandbox",
    "location",
    "reach",
    "limits",
    "bridge",
    "worktrees",
    "skill",
    "droid_mcp",
];
/// The task id SKILL.md shows in its examples; replaced by one `run --background` created.
const EXAMPLE_ID_PREFIX: &str = "droid-";
/// The repository path SKILL.md shows; replaced by the fake HOME's repository.
const EXAMPLE_REPO: &str = "/abs/path/to/repo";

fn skill_dir() -> PathBuf {
    workspace_root().join("skill/droid-executor")
}

fn skill_md() -> String {
    std::fs::read_to_string(skill_dir().join("SKILL.md")).unwrap()
}

/// SKILL.md split into its frontmatter (the text between the `---` lines) and its body.
fn split(text: &str) -> (&str, &str) {
    let rest = text
        .strip_prefix("---\n")
        .expect("SKILL.md starts with a `---` line");
    let end = rest
        .find("\n---\n")
        .expect("the frontmatter ends with a `---` line");
    (&rest[..=end], &rest[end + 5..])
}

/// The frontmatter: top-level `key: scalar` entries and one level of nested maps (`metadata:`).
#[derive(Debug, Default)]
struct Frontmatter {
    scalars: Vec<(String, String)>,
    maps: Vec<(String, Vec<(String, String)>)>,
}

impl Frontmatter {
    /// Reads the YAML subset the skill uses. Anything else is an error rather than a guess, and
    /// so is a plain scalar that YAML would read differently from how it looks.
    fn parse(yaml: &str) -> Result<Frontmatter, String> {
        let mut fm = Frontmatter::default();
        let mut keys = BTreeSet::new();
        for (n, line) in yaml.lines().enumerate() {
            let n = n + 2; // line 1 is the opening `---`
            if line.trim().is_empty() || line.trim_start().starts_with('#') {
                continue;
            }
            if line.starts_with('\t') {
                return Err(format!("line {n}: YAML forbids tabs for indentation"));
            }
            let nested = line.starts_with(' ');
            let (key, value) = line
                .trim_start()
                .split_once(':')
                .ok_or_else(|| format!("line {n}: not `key: value`: {line:?}"))?;
            if key.is_empty() || key.contains([' ', '"', '\'']) {
                return Err(format!("line {n}: unexpected key {key:?}"));
            }
            let value = value.trim();
            if nested {
                let Some((_, map)) = fm.maps.last_mut() else {
                    return Err(format!("line {n}: indented line outside a map: {line:?}"));
                };
                if map.iter().any(|(k, _)| k == key) {
                    return Err(format!("line {n}: duplicate key {key}"));
                }
                map.push((key.to_owned(), scalar(value, n)?));
                continue;
            }
            if !keys.insert(key.to_owned()) {
                return Err(format!("line {n}: duplicate key {key}"));
            }
            if value.is_empty() {
                fm.maps.push((key.to_owned(), Vec::new()));
            } else {
                fm.scalars.push((key.to_owned(), scalar(value, n)?));
            }
        }
        Ok(fm)
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.scalars
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn map(&self, key: &str) -> Option<&[(String, String)]> {
        self.maps
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, m)| m.as_slice())
    }

    fn keys(&self) -> Vec<&str> {
        let mut keys: Vec<&str> = self.scalars.iter().map(|(k, _)| k.as_str()).collect();
        keys.extend(self.maps.iter().map(|(k, _)| k.as_str()));
        keys
    }
}

/// One YAML scalar on line `n`: double-quoted (`\"` and `\\` escapes only), single-quoted, or
/// plain. A plain scalar must not start with an indicator character, hold `: ` (a nested map) or
/// ` #` (a comment), end with `:`, or be one YAML types as a boolean, null or number (every value
/// of the frontmatter is a string, `metadata`'s included).
fn scalar(value: &str, n: usize) -> Result<String, String> {
    if let Some(inner) = value.strip_prefix('"') {
        let inner = inner
            .strip_suffix('"')
            .ok_or_else(|| format!("line {n}: unterminated \"…\""))?;
        let mut out = String::new();
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some(e @ ('"' | '\\')) => out.push(e),
                    other => return Err(format!("line {n}: escape \\{other:?} not supported")),
                },
                '"' => return Err(format!("line {n}: unescaped \" inside \"…\"")),
                c => out.push(c),
            }
        }
        return Ok(out);
    }
    if let Some(inner) = value.strip_prefix('\'') {
        let inner = inner
            .strip_suffix('\'')
            .ok_or_else(|| format!("line {n}: unterminated '…'"))?;
        return Ok(inner.replace("''", "'"));
    }
    let first = value.chars().next().unwrap_or(' ');
    if "-?:,[]{}#&*!|>%@`".contains(first) {
        return Err(format!(
            "line {n}: a plain YAML scalar cannot start with {first:?}; quote it"
        ));
    }
    if value.contains(": ") || value.contains(" #") || value.ends_with(':') {
        return Err(format!(
            "line {n}: YAML would not read {value:?} as one plain string; quote it"
        ));
    }
    let lower = value.to_ascii_lowercase();
    if ["true", "false", "yes", "no", "on", "off", "null", "~"].contains(&lower.as_str())
        || value.parse::<f64>().is_ok()
    {
        return Err(format!(
            "line {n}: YAML reads {value} as a boolean, null or number, not a string; quote it"
        ));
    }
    Ok(value.to_owned())
}

/// A fenced code block of the body.
#[derive(Debug)]
struct Fence {
    lang: String,
    /// The body line (1-based, counted from the first line after the frontmatter) of its opening.
    line: usize,
    text: String,
}

/// The body's fenced blocks, and its other lines (the prose) with their line numbers.
fn fences_and_prose(body: &str) -> (Vec<Fence>, Vec<(usize, &str)>) {
    let mut fences = Vec::new();
    let mut prose = Vec::new();
    let mut open: Option<Fence> = None;
    for (i, line) in body.lines().enumerate() {
        let n = i + 1;
        match (&mut open, line.trim_start().strip_prefix("```")) {
            (None, Some(lang)) => {
                open = Some(Fence {
                    lang: lang.trim().to_owned(),
                    line: n,
                    text: String::new(),
                });
            }
            (Some(_), Some(_)) => fences.extend(open.take()),
            (Some(f), None) => {
                f.text.push_str(line);
                f.text.push('\n');
            }
            (None, None) => prose.push((n, line)),
        }
    }
    assert!(open.is_none(), "SKILL.md: an unclosed ``` block");
    (fences, prose)
}

/// The `` `code` `` spans of one line of prose.
fn code_spans(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

/// Split a command line the way `sh` does for the quoting SKILL.md uses: words separated by
/// blanks, `"…"` and `'…'` quoting.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '"' | '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some(q) if q == c => break,
                        Some('\\') if c == '"' => word.extend(chars.next()),
                        Some(x) => word.push(x),
                        None => panic!("unterminated quote in {line:?}"),
                    }
                }
            }
            '\\' => {
                in_word = true;
                word.extend(chars.next());
            }
            '|' | '&' | ';' | '<' | '>' | '$' | '*' | '(' | ')' => {
                panic!("{line:?}: shell syntax {c:?} is beyond what this test runs")
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

/// Every `droid-executor …` command SKILL.md shows, in order, each once: the lines of its ```sh
/// blocks (where every command must be ours), then the `` `droid-executor …` `` spans of its
/// prose. Each with where it was found.
fn shown_commands(body: &str) -> Vec<(String, Vec<String>)> {
    let (fences, prose) = fences_and_prose(body);
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    let mut push = |at: String, words: Vec<String>| {
        if !out.iter().any(|(_, w)| *w == words) {
            out.push((at, words));
        }
    };
    for f in fences.iter().filter(|f| f.lang == "sh") {
        let joined = f.text.replace("\\\n", " ");
        for (i, line) in joined.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let words = shell_words(line);
            assert_eq!(
                words.first().map(String::as_str),
                Some("droid-executor"),
                "SKILL.md body line {}: a ```sh block shows a command that is not ours: {line}",
                f.line + 1 + i
            );
            push(format!("```sh block at body line {}", f.line), words);
        }
    }
    for (n, line) in prose {
        for span in code_spans(line) {
            if span.starts_with("droid-executor ") {
                push(format!("`{span}` at body line {n}"), shell_words(span));
            }
        }
    }
    out
}

/// The body's ```json block holding `key`, parsed.
fn json_example(body: &str, key: &str) -> Value {
    let (fences, _) = fences_and_prose(body);
    let f = fences
        .iter()
        .find(|f| f.lang == "json" && f.text.contains(&format!("\"{key}\"")))
        .unwrap_or_else(|| panic!("SKILL.md has no ```json block with \"{key}\""));
    serde_json::from_str(&f.text).unwrap_or_else(|e| {
        panic!(
            "the ```json block at body line {} is not JSON ({e}):\n{}",
            f.line, f.text
        )
    })
}

#[test]
fn the_frontmatter_follows_the_agent_skills_spec() {
    let text = skill_md();
    let (yaml, body) = split(&text);
    let fm = Frontmatter::parse(yaml).unwrap_or_else(|e| panic!("SKILL.md frontmatter: {e}"));
    for key in fm.keys() {
        assert!(
            SPEC_KEYS.contains(&key),
            "frontmatter key {key:?} is not in the Agent Skills spec ({SPEC_KEYS:?})"
        );
    }

    let name = fm.get("name").expect("`name` is required");
    let folder = skill_dir();
    assert_eq!(
        Some(name),
        folder.file_name().and_then(|n| n.to_str()),
        "name = folder name"
    );
    assert_eq!(name, client_setup::skill::SKILL_NAME, "what setup installs");
    assert!(
        (1..=64).contains(&name.len()),
        "name is 1 to 64 characters: {name}"
    );
    assert!(
        name.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
        "name has lowercase letters, digits and hyphens only: {name}"
    );
    assert!(
        !name.starts_with('-') && !name.ends_with('-') && !name.contains("--"),
        "name has single hyphens, none leading or trailing: {name}"
    );

    let description = fm.get("description").expect("`description` is required");
    assert!(
        !description.trim().is_empty() && description.chars().count() <= 1024,
        "description is 1 to 1024 characters, is {}",
        description.chars().count()
    );
    let lower = description.to_lowercase();
    assert!(
        ["use it ", "use when", "use this skill"]
            .iter()
            .any(|w| lower.contains(w)),
        "the description says when to use the skill: {description}"
    );

    let license = fm.get("license").expect("`license` is present");
    assert!(license.contains("Apache-2.0"), "{license}");
    assert!(
        license.contains("LICENSE.txt") && folder.join("LICENSE.txt").is_file(),
        "license names LICENSE.txt, which exists: {license}"
    );
    let license_text = std::fs::read_to_string(folder.join("LICENSE.txt")).unwrap();
    assert!(
        license_text.contains("Apache License") && license_text.contains("Version 2.0"),
        "LICENSE.txt is the Apache License 2.0"
    );

    let compatibility = fm.get("compatibility").expect("`compatibility` is present");
    assert!(
        (1..=500).contains(&compatibility.chars().count()),
        "compatibility is 1 to 500 characters, is {}",
        compatibility.chars().count()
    );
    assert!(
        compatibility.contains("droid CLI") && compatibility.contains("droid-executor"),
        "compatibility names the droid CLI and droid-executor: {compatibility}"
    );
    assert!(
        compatibility.contains(droid_exec::health::TESTED_DROID),
        "compatibility names the droid version `doctor` checks for ({}): {compatibility}",
        droid_exec::health::TESTED_DROID
    );

    let metadata = fm.map("metadata").unwrap_or_default();
    let meta = |k: &str| {
        metadata
            .iter()
            .find(|(x, _)| x == k)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(
        meta("version"),
        Some(env!("CARGO_PKG_VERSION")),
        "metadata.version is the workspace version"
    );
    if let Some(protocol) = meta("protocol") {
        assert!(
            folder.join(protocol).is_file(),
            "metadata.protocol {protocol} exists"
        );
    }

    let lines = body.lines().count();
    assert!(lines < 500, "the body is under 500 lines, is {lines}");
}

#[test]
fn every_relative_link_in_the_body_exists() {
    let text = skill_md();
    let (_, body) = split(&text);
    let (_, prose) = fences_and_prose(body);
    let mut targets = Vec::new();
    for (n, line) in prose {
        for part in line.split("](").skip(1) {
            let target = part
                .split(')')
                .next()
                .unwrap_or_else(|| panic!("body line {n}: unclosed link"));
            targets.push((n, target.to_owned()));
        }
    }
    let relative: Vec<&(usize, String)> = targets
        .iter()
        .filter(|(_, t)| !t.contains("://") && !t.starts_with('#') && !t.starts_with("mailto:"))
        .collect();
    assert!(
        relative
            .iter()
            .any(|(_, t)| t == "references/droid-executor-protocol.md"),
        "the body links the protocol reference: {targets:?}"
    );
    for (n, target) in relative {
        let file = target.split('#').next().unwrap_or_default();
        assert!(
            !Path::new(file).is_absolute() && !file.split('/').any(|c| c == ".."),
            "body line {n}: {target} leaves the skill folder"
        );
        assert!(
            skill_dir().join(file).is_file(),
            "body line {n}: the link {target} names a missing file"
        );
    }
}

#[test]
fn the_request_example_is_a_valid_execution_request() {
    let text = skill_md();
    let (_, body) = split(&text);
    let example = json_example(body, "objective");
    // shape rules only: its repo_root is a placeholder on no machine
    let parsed = ExecutionRequest::from_value(&example, None)
        .unwrap_or_else(|v| panic!("SKILL.md's request example is invalid: {v:?}\n{example:#}"));
    let via_serde: ExecutionRequest = serde_json::from_value(example.clone()).unwrap();
    assert_eq!(parsed, via_serde);
    assert_eq!(
        example["context"]["repo_root"], EXAMPLE_REPO,
        "the placeholder the command test replaces"
    );
}

/// Resolve a `$ref` of the result schema.
fn resolve<'a>(root: &'a Value, node: &'a Value) -> &'a Value {
    match node.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let name = r.strip_prefix("#/$defs/").expect("a local $ref");
            resolve(root, &root["$defs"][name])
        }
        None => node,
    }
}

/// What of `value` does not fit `node` of the schema `root`: unknown fields, values outside an
/// enumeration, wrong types. Missing fields are allowed (the example is abridged).
fn misfits(root: &Value, node: &Value, value: &Value, at: &str, out: &mut Vec<String>) {
    let node = resolve(root, node);
    if let Some(alts) = node
        .get("oneOf")
        .or_else(|| node.get("anyOf"))
        .and_then(Value::as_array)
    {
        if alts.iter().all(|a| a.get("const").is_some()) {
            if !alts.iter().any(|a| a["const"] == *value) {
                out.push(format!("{at}: {value} is none of the allowed values"));
            }
            return;
        }
        let nullable = alts.iter().any(|a| resolve(root, a)["type"] == "null");
        if value.is_null() && nullable {
            return;
        }
        match alts.iter().find(|a| resolve(root, a)["type"] != "null") {
            Some(alt) => misfits(root, alt, value, at, out),
            None => out.push(format!("{at}: {value} fits no alternative")),
        }
        return;
    }
    let kind = match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    let allowed = match &node["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let fits = allowed.is_empty()
        || allowed.contains(&kind)
        || (kind == "integer" && allowed.contains(&"number"));
    if !fits {
        out.push(format!("{at}: a {kind}, the schema wants {allowed:?}"));
        return;
    }
    match value {
        Value::Object(fields) => {
            for (k, v) in fields {
                match node["properties"].get(k) {
                    Some(p) => misfits(root, p, v, &format!("{at}.{k}"), out),
                    None => out.push(format!("{at}.{k}: no such field in the result schema")),
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                misfits(root, &node["items"], v, &format!("{at}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// The `const`s of an enumeration of the result schema.
fn enumeration(schema: &Value, def: &str) -> Vec<String> {
    schema["$defs"][def]["oneOf"]
        .as_array()
        .unwrap_or_else(|| panic!("$defs.{def} is an enumeration"))
        .iter()
        .filter_map(|a| a["const"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn the_result_example_uses_only_the_result_schema() {
    let text = skill_md();
    let (_, body) = split(&text);
    let example = json_example(body, "status");
    assert!(
        example.get("objective").is_none(),
        "found the request, not the result"
    );
    let schema = droid_contract::result_schema();
    let mut out = Vec::new();
    misfits(&schema, &schema, &example, "$", &mut out);
    assert_eq!(out, Vec::<String>::new(), "{example:#}");
}

#[test]
fn every_status_and_issue_type_is_explained_and_the_table_names_only_real_ones() {
    let text = skill_md();
    let (_, body) = split(&text);
    let schema = droid_contract::result_schema();
    let statuses = enumeration(&schema, "Status");
    let kinds = enumeration(&schema, "IssueType");
    assert!(
        statuses.contains(&"partial".to_owned()) && kinds.contains(&"bridge_failure".to_owned())
    );
    let (_, prose) = fences_and_prose(body);
    let spans: BTreeSet<&str> = prose.iter().flat_map(|(_, l)| code_spans(l)).collect();
    for word in statuses.iter().chain(&kinds) {
        assert!(
            spans.contains(word.as_str()),
            "SKILL.md never names `{word}`: a calling agent meeting it has no advice"
        );
    }
    let rows: Vec<(usize, &str)> = prose
        .iter()
        .filter(|(_, l)| l.starts_with("| `"))
        .map(|(n, l)| (*n, l.split('|').nth(1).unwrap_or_default()))
        .collect();
    assert!(rows.len() >= 5, "the \"What to do next\" table: {rows:?}");
    for (n, cell) in rows {
        for word in code_spans(cell) {
            assert!(
                statuses.iter().chain(&kinds).any(|w| w == word),
                "body line {n}: `{word}` is neither a status nor an issue type"
            );
        }
    }
}

/// A fake droid HOME in which SKILL.md's commands run as shown, from HOME (`task.json` there).
struct Shown {
    home: FakeHome,
    /// The last task `run --background` created.
    task: Option<String>,
}

impl Shown {
    /// The words of a shown command with its placeholders made real: the example repository,
    /// the example task id, and `cargo test` as a verification command (the fake repository is
    /// no Cargo project; `true` passes).
    fn substitute(&self, words: &[String], at: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut after_command = false;
        for w in &words[1..] {
            let real = if w == EXAMPLE_REPO {
                self.home.repo().display().to_string()
            } else if is_example_id(w) {
                self.task.clone().unwrap_or_else(|| {
                    panic!("{at}: shows task id {w} before any `run --background` made one")
                })
            } else if after_command && w == "cargo test" {
                "true".to_owned()
            } else {
                w.clone()
            };
            after_command = w == "--command";
            out.push(real);
        }
        out
    }

    async fn run(&self, args: &[String]) -> Out {
        droid_executor(args, &self.env(), self.home.path()).await
    }

    fn env(&self) -> Vec<(OsString, OsString)> {
        self.home.env()
    }
}

/// `droid-<digits>-<hex>`, the shape of a task id.
fn is_example_id(word: &str) -> bool {
    word.strip_prefix(EXAMPLE_ID_PREFIX)
        .and_then(|rest| rest.split_once('-'))
        .is_some_and(|(secs, hex)| {
            !secs.is_empty()
                && secs.chars().all(|c| c.is_ascii_digit())
                && !hex.is_empty()
                && hex.chars().all(|c| c.is_ascii_hexdigit())
        })
}

fn json_of(out: &Out, at: &str) -> Value {
    serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("{at}: stdout is not JSON ({e}): {out:#?}"))
}

/// Check what one shown command did; `shown` learns the id a background run printed.
fn check(shown: &mut Shown, args: &[String], out: &Out, at: &str) {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let json = a.contains(&"--json");
    match a.as_slice() {
        ["run", ..] if a.contains(&"--background") => {
            assert_eq!(out.code, Some(0), "{at}: {out:#?}");
            let v = json_of(out, at);
            let id = v["task_id"]
                .as_str()
                .unwrap_or_else(|| panic!("{at}: {v:#}"));
            assert!(
                is_example_id(id),
                "{at}: {id} has the shape of SKILL.md's ids"
            );
            shown.task = Some(id.to_owned());
        }
        ["run", ..] => {
            assert_eq!(out.code, Some(0), "{at}: {out:#?}");
            assert_eq!(out.result().status, droid_contract::Status::Success, "{at}");
        }
        ["tasks", "wait", ..] => {
            assert!(matches!(out.code, Some(0 | 3)), "{at}: {out:#?}");
            if json {
                assert!(json_of(out, at)["state"].is_string(), "{at}: {out:#?}");
            }
        }
        ["tasks", "show" | "list", ..] => {
            assert_eq!(out.code, Some(0), "{at}: {out:#?}");
            if json {
                json_of(out, at);
            }
        }
        ["tasks", "apply", ..] => {
            // the fake droid changes nothing: the change applies cleanly (to nothing)
            assert_eq!(out.code, Some(0), "{at}: {out:#?}");
            if json {
                let outcome = json_of(out, at)["outcome"].clone();
                assert!(outcome == "applied" || outcome == "clean", "{at}: {out:#?}");
            }
        }
        ["tasks", "cancel", ..] => {
            // the task finished with success before: it is left as it is
            assert_eq!(out.code, Some(0), "{at}: {out:#?}");
        }
        ["setup", "mcp", ..] => assert_eq!(out.code, Some(0), "{at}: {out:#?}"),
        ["setup", "skill", ..] => {
            assert_eq!(out.code, Some(0), "{at}: {out:#?}");
            assert!(
                out.stdout.contains("\nskill ask-codex installed in "),
                "{at}: {out:#?}"
            );
        }
        ["ask", provider, ..] if a.contains(&"--background") => {
            assert_eq!(out.code, Some(0), "{at}: {out:#?}");
            let v = json_of(out, at);
            let id = v["task_id"]
                .as_str()
                .unwrap_or_else(|| panic!("{at}: {v:#}"));
            assert!(
                id.starts_with(&format!("{provider}-")) && droid_exec::TaskKey::parse(id).is_ok(),
                "{at}: {id} is a task id of {provider}"
            );
        }
        ["pend", provider, ..] => {
            // the fake HOME has no such agent CLI: its task ends `error` (exit 2) with the fix
            assert!(matches!(out.code, Some(0..=3)), "{at}: {out:#?}");
            if json {
                let v = json_of(out, at);
                assert!(
                    v["task_id"]
                        .as_str()
                        .is_some_and(|id| id.starts_with(&format!("{provider}-"))),
                    "{at}: {out:#?}"
                );
                assert!(v["state"].is_string(), "{at}: {out:#?}");
            }
        }
        ["ping", ..] => {
            assert!(matches!(out.code, Some(0 | 1)), "{at}: {out:#?}");
            let names: Vec<&str> = out
                .stdout
                .lines()
                .filter(|l| !l.trim_start().starts_with("fix: "))
                .map(|l| l.split_whitespace().nth(1).unwrap_or_default())
                .collect();
            assert_eq!(
                names,
                ["droid", "auth", "codex", "claude", "gemini", "opencode"],
                "{at}:\n{}",
                out.stdout
            );
        }
        ["doctor", ..] => {
            // the fake droid has no key and no custom models: WARN auth; exit 1 only on a FAIL
            assert!(matches!(out.code, Some(0 | 1)), "{at}: {out:#?}");
            let mut names = Vec::new();
            for line in out.stdout.lines() {
                let check = ["OK   ", "WARN ", "FAIL "]
                    .iter()
                    .find_map(|t| line.strip_prefix(t));
                match check {
                    Some(rest) => {
                        let name = rest.split_whitespace().next().unwrap_or_default();
                        if names.last() != Some(&name) {
                            names.push(name);
                        }
                    }
                    None => assert!(
                        line.trim_start().starts_with("fix: "),
                        "{at}: neither a check nor its fix: {line:?}"
                    ),
                }
            }
            assert_eq!(names, DOCTOR_CHECKS, "{at}:\n{}", out.stdout);
        }
        _ => panic!(
            "{at}: SKILL.md shows `droid-executor {}`, which this test does not know how to check: add it",
            a.join(" ")
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_the_skill_shows_runs() {
    let text = skill_md();
    let (_, body) = split(&text);
    let home = FakeHome::new("skill-cmds", &[]);
    home.play(&json!([{"completion": "Done."}]));
    // task.json: SKILL.md's own request example, on the fake HOME's repository, verified by `true`
    let mut request = json_example(body, "objective");
    request["context"]["repo_root"] = json!(home.repo().display().to_string());
    request["suggested_commands"] = json!(["true"]);
    std::fs::write(home.file("task.json"), request.to_string()).unwrap();
    let mut shown = Shown { home, task: None };
    let commands = shown_commands(body);
    let seen: Vec<String> = commands.iter().map(|(_, w)| w[1..].join(" ")).collect();
    for must in ["run --request task.json --json", "doctor"] {
        assert!(
            seen.iter().any(|s| s == must),
            "SKILL.md shows `droid-executor {must}`: {seen:#?}"
        );
    }
    assert!(
        seen.iter().any(|s| s.starts_with("tasks wait ")),
        "{seen:#?}"
    );
    for (at, words) in &commands {
        let args = shown.substitute(words, at);
        let out = shown.run(&args).await;
        check(&mut shown, &args, &out, at);
    }
}

/// Every file under `dir`, relative, sorted.
fn files_under(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let rel = path.strip_prefix(root).unwrap();
                out.push(rel.display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_installs_exactly_the_repository_files() {
    let home = TempDir::new("skill-install").unwrap();
    let root = home.path().join("skills");
    let env: Vec<(OsString, OsString)> = vec![("HOME".into(), home.path().into())];
    let out = droid_executor(
        &["setup", "skill", "--dir", &root.display().to_string()],
        &env,
        home.path(),
    )
    .await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let installed = root.join("droid-executor");
    let repo_files = files_under(&skill_dir());
    assert_eq!(
        repo_files,
        [
            "LICENSE.txt",
            "SKILL.md",
            "references/droid-executor-protocol.md"
        ],
        "a new file in skill/droid-executor/ must be bundled (wrapper-cli/src/skill_bundle.rs) \
         and listed here"
    );
    let mut expected = repo_files.clone();
    expected.push(".droid-executor-install.json".to_owned());
    expected.sort();
    assert_eq!(files_under(&installed), expected);
    for rel in &repo_files {
        let want = std::fs::read(skill_dir().join(rel)).unwrap();
        let got = std::fs::read(installed.join(rel)).unwrap();
        assert!(
            want == got,
            "the installed {rel} differs from the repository's: rebuild the binary \
             (cargo build -p wrapper-cli)"
        );
    }
}

#[test]
fn the_frontmatter_reader_refuses_what_yaml_reads_differently() {
    let ok = Frontmatter::parse(
        "name: x\ndescription: \"a: b\"\nlicense: 'it''s'\nmetadata:\n  version: \"1\"\n",
    )
    .unwrap();
    assert_eq!(ok.get("description"), Some("a: b"));
    assert_eq!(ok.get("license"), Some("it's"));
    assert_eq!(
        ok.map("metadata"),
        Some(&[("version".to_owned(), "1".to_owned())][..])
    );
    for (bad, why) in [
        ("description: use it: now\n", "line 2: YAML would not read"),
        (
            "description: text # comment\n",
            "line 2: YAML would not read",
        ),
        (
            "description: `code` first\n",
            "line 2: a plain YAML scalar cannot start with '`'",
        ),
        (
            "description: >\n  folded\n",
            "line 2: a plain YAML scalar cannot start with '>'",
        ),
        ("name: a\nname: b\n", "line 3: duplicate key name"),
        ("metadata:\n  version: 1.0\n", "line 3: YAML reads 1.0 as"),
        ("license: no\n", "line 2: YAML reads no as"),
        ("  orphan: x\n", "line 2: indented line outside a map"),
    ] {
        let err = Frontmatter::parse(bad).map(|_| ()).unwrap_err();
        assert!(err.starts_with(why), "{bad:?}: {err}");
    }
}

#[test]
fn the_protocol_reference_is_generated_from_the_contract_types() {
    let file = skill_dir().join("references/droid-executor-protocol.md");
    let checked_in = std::fs::read_to_string(&file).unwrap();
    let generated = protocol_doc::render()
        .unwrap_or_else(|e| panic!("the reference cannot be generated: {e:#}"));
    assert!(
        generated == checked_in,
        "{} is stale: run `cargo xtask codegen` (then rebuild the binary, which bundles it)",
        file.display()
    );
}
