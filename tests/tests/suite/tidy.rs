//! Tidy checks over the repository's own files (rust-analyzer style): the repository carries its
//! own design. No tracked file may send a reader to documents that are not in it (the design and
//! style notes the project started from, or the reference folder kept beside a checkout); what they
//! held is in `docs/architecture.md`, and every section of it that a file cites (the file name,
//! `#`, the heading's anchor) must be a heading there.

use std::path::{Path, PathBuf};

use tests::droid_bin::workspace_root;

/// The architecture document every design citation points to.
const ARCHITECTURE: &str = "docs/architecture.md";

/// Citations of documents outside the repository. Spelled in pieces so that this file does not
/// cite them itself.
fn outside_citations() -> Vec<String> {
    vec![
        ["DESIGN", ".md"].concat(),
        ["STYLE", ".md"].concat(),
        ["DESIGN", " §"].concat(),
        ["STYLE", " §"].concat(),
        ["../", "shared"].concat(),
        ["shared", "/reference/"].concat(),
        ["shared", "/fixtures/"].concat(),
        ["shared", "/seeds/"].concat(),
        ["mcp", ".md §"].concat(),
        ["droid-cli", ".md"].concat(),
    ]
}

/// Every tracked file of the repository (`git ls-files`), relative to the workspace root.
fn tracked_files(root: &Path) -> Vec<String> {
    #[allow(clippy::disallowed_methods)] // lists the checkout's files
    let out = std::process::Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root)
        .output()
        .unwrap_or_else(|e| panic!("git is needed to list the tracked files: {e}"));
    assert!(
        out.status.success(),
        "git ls-files in {} failed (the tidy checks need a git checkout): {}",
        root.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .split('\0')
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect()
}

/// GitHub's anchor for a Markdown heading: lowercase, punctuation dropped, spaces to `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of `docs/architecture.md`'s headings (outside code blocks).
fn architecture_anchors(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced && line.starts_with('#') {
            out.push(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

/// The anchors of the references to `docs/architecture.md` sections in `text`.
fn cited_anchors(text: &str) -> Vec<String> {
    // from the root (docs/…) and from docs/ (a relative Markdown link) alike
    let needle = format!("{}#", ARCHITECTURE.trim_start_matches("docs/"));
    text.match_indices(&needle)
        .map(|(at, _)| {
            text[at + needle.len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '-' || *c == '_')
                .collect()
        })
        .collect()
}

#[test]
fn anchors_are_what_github_makes_of_headings() {
    assert_eq!(anchor(" The task store"), "the-task-store");
    assert_eq!(anchor("Decisions, and why"), "decisions-and-why");
    assert_eq!(anchor("`droid` 0.225.2 facts"), "droid-02252-facts");
    let text = format!(
        "see {ARCHITECTURE}#task-store) and [x]({}#a_b).",
        "architecture.md"
    );
    assert_eq!(cited_anchors(&text), ["task-store", "a_b"]);
}

/// No tracked file cites a design or style document, or a reference folder, that is not in the
/// repository; the repository's own design is `docs/architecture.md`, and every section of it
/// that a file cites exists.
#[test]
fn tracked_files_cite_only_the_repositorys_own_design() {
    let root = workspace_root();
    let architecture = std::fs::read_to_string(root.join(ARCHITECTURE))
        .unwrap_or_else(|e| panic!("{ARCHITECTURE} is missing: {e}"));
    let anchors = architecture_anchors(&architecture);
    let outside = outside_citations();
    let mut found = Vec::new();
    // its own links to its sections
    for (at, _) in architecture.match_indices("](#") {
        let a: String = architecture[at + 3..]
            .chars()
            .take_while(|c| *c != ')')
            .collect();
        if !anchors.contains(&a) {
            found.push(format!(
                "{ARCHITECTURE}: links to #{a}, which is not a heading there"
            ));
        }
    }
    for rel in tracked_files(&root) {
        let Ok(text) = std::fs::read_to_string(root.join(&rel)) else {
            continue; // binary, or deleted in the work tree
        };
        for (n, line) in text.lines().enumerate() {
            for pattern in &outside {
                if line.contains(pattern.as_str()) {
                    found.push(format!(
                        "{rel}:{}: cites {pattern:?} (outside the repository; point to \
                         {ARCHITECTURE}#<section> instead): {}",
                        n + 1,
                        line.trim()
                    ));
                }
            }
            for a in cited_anchors(line) {
                if !anchors.contains(&a) {
                    found.push(format!(
                        "{rel}:{}: cites {ARCHITECTURE}#{a}, which is not a heading there",
                        n + 1
                    ));
                }
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The tests `docs/reliability.md` names by hand (`module::test` for a suite module,
/// `path/to/file.rs::test` for a unit test) exist: a renamed or removed test cannot leave the page
/// claiming a proof the suite no longer has.
#[test]
fn reliability_names_only_real_tests() {
    let root = workspace_root();
    let page = std::fs::read_to_string(root.join("docs/reliability.md")).unwrap();
    let mut named = 0;
    let mut missing = Vec::new();
    for quoted in page.split('`').skip(1).step_by(2) {
        let Some((place, test)) = quoted.rsplit_once("::") else {
            continue;
        };
        let ident = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        };
        if !ident(test) {
            continue;
        }
        let file = if place.ends_with(".rs") {
            root.join(place)
        } else if ident(place) {
            root.join("tests/tests/suite").join(format!("{place}.rs"))
        } else {
            continue;
        };
        named += 1;
        let source = std::fs::read_to_string(&file).unwrap_or_default();
        if !source.contains(&format!("fn {test}(")) {
            missing.push(quoted.to_owned());
        }
    }
    assert!(
        named >= 21,
        "docs/reliability.md names only {named} tests by hand"
    );
    assert!(
        missing.is_empty(),
        "docs/reliability.md names tests that do not exist: {missing:?}"
    );
}

/// The pages a user reads: the README, `docs/` but for the contributors' design document (whose
/// "Origin" section names the design drafts the code cites), and the skills.
fn user_pages(root: &Path) -> Vec<PathBuf> {
    let mut pages = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs"), root.join("skill")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") && path != root.join(ARCHITECTURE)
            {
                pages.push(path);
            }
        }
    }
    pages.sort();
    pages
}

/// Words of the project's own history in `text`: a design draft or a tracker item by number
/// (`seed 002`, `issue 17`), the drafts' possessive (`the seed's bridge`), the drafts' fallback
/// keyword.
fn history_words(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower.split_whitespace().collect();
    let mut found = Vec::new();
    for pair in words.windows(2) {
        let head = pair[0].trim_start_matches(['(', '[', '*', '_']);
        let numbered = pair[1].starts_with(|c: char| c.is_ascii_digit());
        if matches!(head, "seed" | "seeds" | "issue" | "issues") && numbered {
            found.push(format!("{} {}", pair[0], pair[1]));
        }
    }
    for word in ["seed's", "droid_fallback"] {
        if lower.contains(word) {
            found.push(word.to_owned());
        }
    }
    found
}

#[test]
fn history_words_are_found() {
    assert_eq!(
        history_words("From seed 002, (issue 17's goal), the Seed's bridge, DROID_FALLBACK."),
        ["seed 002,", "(issue 17's", "seed's", "droid_fallback"]
    );
    assert!(history_words("the seed corpus in fuzz/seeds/; issue types; 2 issues").is_empty());
}

/// A user who never saw the project's tracker or its design drafts reads every page without
/// meeting them: no "seed 000", "issue 17", "the seed's bridge" or the drafts' `DROID_FALLBACK`.
#[test]
fn user_pages_speak_no_word_of_the_projects_history() {
    let root = workspace_root();
    let mut found = Vec::new();
    for page in user_pages(&root) {
        let text = std::fs::read_to_string(&page).unwrap();
        for (n, line) in text.lines().enumerate() {
            for word in history_words(line) {
                found.push(format!(
                    "{}:{}: {word:?}",
                    page.strip_prefix(&root).unwrap().display(),
                    n + 1
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "say what the thing is, not where it came from:\n{}",
        found.join("\n")
    );
}

/// The licence the manifest declares is the one the repository ships: `LICENSE` at the root,
/// the same text the skill bundles.
#[test]
fn the_license_file_is_the_one_the_manifest_names() {
    let root = workspace_root();
    let manifest: toml::Table = std::fs::read_to_string(root.join("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let license = manifest["workspace"]["package"]["license"].as_str();
    assert_eq!(license, Some("Apache-2.0"));
    let text = std::fs::read_to_string(root.join("LICENSE"))
        .unwrap_or_else(|e| panic!("LICENSE is missing at the workspace root: {e}"));
    let opening: Vec<&str> = text.split_whitespace().take(4).collect();
    assert_eq!(opening, ["Apache", "License", "Version", "2.0,"]);
    assert!(
        text == std::fs::read_to_string(root.join("skill/droid-executor/LICENSE.txt")).unwrap(),
        "LICENSE and skill/droid-executor/LICENSE.txt differ"
    );
}

/// The text of `docs/architecture.md`'s "Code map" section.
fn code_map(root: &Path) -> String {
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let start = doc
        .find("\n## Code map\n")
        .expect("docs/architecture.md has no \"## Code map\" section");
    let rest = &doc[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    rest[..end].to_owned()
}

/// Every folder of the engine, and every crate's source folder, has its line in the code map
/// (what it owns, what it must not know): a new folder is written down when it is made.
#[test]
fn every_engine_folder_and_crate_is_in_the_code_map() {
    let root = workspace_root();
    let map = code_map(&root);
    let mut missing = Vec::new();
    let engine = root.join("droid-exec/src");
    for entry in std::fs::read_dir(&engine).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type().unwrap().is_dir() && !map.contains(&format!("`{name}/`")) {
            missing.push(format!("droid-exec/src/{name}/"));
        }
    }
    for krate in [
        "droid-contract",
        "bridge-http",
        "mcp-stdio",
        "acp-stdio",
        "client-setup",
        "wrapper-cli",
        "xtask",
    ] {
        if !map.contains(&format!("`{krate}/src/`")) {
            missing.push(format!("{krate}/src/"));
        }
    }
    missing.sort();
    assert_eq!(
        missing,
        Vec::<String>::new(),
        "not in docs/architecture.md's code map"
    );
}

/// The engine's layers, lowest first (docs/architecture.md#code-map): helpers (the files at the
/// engine's root named in [`ENGINE_HELPERS`]) ← `process/` ← `snapshot/` ← `worktree/` ← `run/` ←
/// `tasks/` and `session/`. For each folder or helper file, the engine's modules its non-test code
/// must not name (`crate::<module>`): a folder never reaches up.
const ONE_WAY: &[(&str, &[&str])] = &[
    (
        "process",
        &[
            "run",
            "snapshot",
            "worktree",
            "tasks",
            "session",
            "providers",
            "config",
            "run_slots",
        ],
    ),
    (
        "snapshot",
        &[
            "run",
            "worktree",
            "tasks",
            "session",
            "providers",
            "config",
            "run_slots",
        ],
    ),
    (
        "providers",
        &["run", "snapshot", "worktree", "tasks", "session"],
    ),
    (
        "worktree",
        &["run", "tasks", "session", "providers", "config"],
    ),
    ("run", &["tasks", "session"]),
];

/// The engine's root files below every folder: they name no folder of the engine.
const ENGINE_HELPERS: &[&str] = &[
    "error.rs",
    "excerpt.rs",
    "fnv.rs",
    "lock.rs",
    "no_follow.rs",
    "real_path.rs",
    "run_slots.rs",
    "state_file.rs",
    "task_key.rs",
    "timestamp.rs",
];

/// The folders of the engine (`droid-exec/src/<folder>/`).
const ENGINE_FOLDERS: &[&str] = &[
    "process",
    "snapshot",
    "providers",
    "worktree",
    "run",
    "tasks",
    "session",
];

/// The production part of a Rust file: up to its `#[cfg(test)]` module, comment lines dropped.
/// Test-only files (`tests.rs`, `props.rs`) have none.
fn production_lines(path: &Path) -> Vec<(usize, String)> {
    let name = path.file_name().unwrap().to_string_lossy();
    if name == "tests.rs" || name == "props.rs" {
        return Vec::new();
    }
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let next = lines.get(i + 1).map_or("", |l| l.trim_start());
        if line.trim() == "#[cfg(test)]" && next.starts_with("mod ") && !next.ends_with(';') {
            break;
        }
        let trimmed = line.trim_start();
        if !trimmed.starts_with("//") {
            out.push((i + 1, (*line).to_owned()));
        }
    }
    out
}

/// Every `.rs` file below `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Where `lines` name one of `modules` of the crate (`crate::<m>::`, `crate::<m>;`, `crate::<m>}`…).
fn named_modules(file: &str, lines: &[(usize, String)], modules: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for (n, line) in lines {
        for m in modules {
            let needle = format!("crate::{m}");
            let mut rest = line.as_str();
            while let Some(i) = rest.find(&needle) {
                let after = rest[i + needle.len()..].chars().next();
                if !after.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    found.push(format!("{file}:{n}: names crate::{m}: {}", line.trim()));
                }
                rest = &rest[i + needle.len()..];
            }
        }
    }
    found
}

/// The engine's folders import one way, helpers below all of them ([`ONE_WAY`]): `run/` knows no
/// task store (it publishes to an `EventSink`, takes its slot from `run_slots.rs`), the
/// snapshot and the process primitives know no run, no provider and no task.
#[test]
fn the_engine_layers_import_one_way() {
    let root = workspace_root();
    let engine = root.join("droid-exec/src");
    let mut found = Vec::new();
    for (folder, forbidden) in ONE_WAY {
        for path in rust_files(&engine.join(folder)) {
            let file = path.strip_prefix(&root).unwrap().display().to_string();
            found.extend(named_modules(&file, &production_lines(&path), forbidden));
        }
    }
    for helper in ENGINE_HELPERS {
        let path = engine.join(helper);
        assert!(
            path.is_file(),
            "{} is gone: update ENGINE_HELPERS",
            path.display()
        );
        let file = path.strip_prefix(&root).unwrap().display().to_string();
        found.extend(named_modules(
            &file,
            &production_lines(&path),
            ENGINE_FOLDERS,
        ));
    }
    assert_eq!(
        found,
        Vec::<String>::new(),
        "an engine layer reaches up (docs/architecture.md#code-map)"
    );
}

/// `unsafe` is allowed only in the spawn module (`process/spawn.rs`, `process/spawn/`), and the
/// one production `Command::new` (clippy's `disallowed-methods`) only in `process/spawn.rs`
/// (docs/architecture.md#house-rules). Tests, xtask and the test crate may run third-party tools.
#[test]
fn unsafe_and_command_new_live_only_in_the_spawn_module() {
    let root = workspace_root();
    let mut found = Vec::new();
    let sources = [
        "droid-contract/src",
        "droid-exec/src",
        "bridge-http/src",
        "mcp-stdio/src",
        "acp-stdio/src",
        "client-setup/src",
        "wrapper-cli/src",
    ];
    for path in sources.iter().flat_map(|dir| rust_files(&root.join(dir))) {
        let file = path.strip_prefix(&root).unwrap().display().to_string();
        let in_spawn = file == "droid-exec/src/process/spawn.rs"
            || file.starts_with("droid-exec/src/process/spawn/");
        for (n, line) in production_lines(&path) {
            if line.contains("allow(unsafe_code)") && !in_spawn {
                found.push(format!("{file}:{n}: {}", line.trim()));
            }
            if line.contains("clippy::disallowed_methods")
                && file != "droid-exec/src/process/spawn.rs"
            {
                found.push(format!("{file}:{n}: {}", line.trim()));
            }
        }
    }
    assert_eq!(found, Vec::<String>::new(), "outside the spawn module");
}

/// The CLI's subcommand modules (`wrapper-cli/src/`, dispatched from `cli.rs`).
const CLI_SUBCOMMANDS: &[&str] = &[
    "acp",
    "ask",
    "bridge",
    "cancel",
    "config_cmd",
    "doctor",
    "mcp",
    "pend",
    "ping",
    "run",
    "serve",
    "setup",
    "tasks",
    "worker",
];

/// The CLI imports downwards (docs/architecture.md#code-map): `cli.rs` dispatches to the
/// subcommands, no subcommand names another or `cli.rs` (what two share lives in a module below
/// them), and those modules below name no subcommand.
#[test]
fn the_cli_subcommands_import_one_way() {
    let root = workspace_root();
    let src = root.join("wrapper-cli/src");
    let mut found = Vec::new();
    for path in rust_files(&src) {
        let file = path.strip_prefix(&root).unwrap().display().to_string();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if name == "main" || name == "cli" {
            continue;
        }
        let mut forbidden: Vec<&str> = CLI_SUBCOMMANDS
            .iter()
            .copied()
            .filter(|m| *m != name)
            .collect();
        forbidden.push("cli");
        found.extend(named_modules(&file, &production_lines(&path), &forbidden));
    }
    for m in CLI_SUBCOMMANDS {
        assert!(
            src.join(format!("{m}.rs")).is_file(),
            "wrapper-cli/src/{m}.rs is gone: update CLI_SUBCOMMANDS"
        );
    }
    assert_eq!(
        found,
        Vec::<String>::new(),
        "a CLI module reaches sideways or up (docs/architecture.md#code-map)"
    );
}
