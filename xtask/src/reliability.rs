//! `cargo xtask reliability [--check] [--observed FILE]`: `docs/reliability.md`'s fault matrix
//! and list of security probes, generated from the tests themselves.
//!
//! - The fault suites (`tests/tests/suite/faults_*.rs`) each end a test by appending what it
//!   observed (front-end, droid, status, issue types, results, processes left, peak RSS, a note)
//!   as JSON lines to the file named by `DROID_EXECUTOR_FAULT_LOG`. Without `--check`, this
//!   command runs those suites with the variable set and rewrites the matrix between
//!   `<!-- matrix:begin -->` and `<!-- matrix:end -->`, one row per test and front-end, the case
//!   being the test's own name.
//! - The security probes are the tests of `tests/tests/suite/security.rs`, listed between
//!   `<!-- probes:begin -->` and `<!-- probes:end -->` by name and the first paragraph of their
//!   doc comments.
//! - `--from FILE` rewrites the tables from the log of a fault-suite run already made (the
//!   file `DROID_EXECUTOR_FAULT_LOG` named), without running the suites again.
//! - `--check` rewrites nothing: it fails when the document names a test that does not exist or
//!   misses one that does; with `--observed FILE` (the log of a full test run, as `.ci/run`
//!   keeps it) it also fails when a fault test recorded nothing, or when an observed status,
//!   issue, result count or process count differs from the document's. Figures that vary from
//!   run to run (RSS, durations in notes) are not compared.
//!
//! Everything outside the markers is hand-written and kept as is.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::sh::{cargo, run, workspace_root};

const DOC: &str = "docs/reliability.md";
const SUITE_DIR: &str = "tests/tests/suite";
/// The fault suites, in the order of the matrix, with their section titles.
const FAULT_SUITES: [(&str, &str); 3] = [
    ("faults_droid.rs", "droid's own faults (fake droid)"),
    ("faults_model.rs", "the model server's faults (real droid)"),
    ("faults_store.rs", "the store, races and the clock"),
];
const PROBES: &str = "security.rs";
const LOG_ENV: &str = "DROID_EXECUTOR_FAULT_LOG";
const USAGE: &str = "usage: cargo xtask reliability [--from FILE | --check [--observed FILE]]";

/// A test found in a suite's source: its name and first doc line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TestFn {
    name: String,
    doc: String,
}

/// Entry point.
pub(crate) fn reliability(args: &[&str]) -> Result<()> {
    let (check, observed) = match args {
        [] => (false, None),
        // rewrite from a log a fault-suite run already wrote (as `.ci/run` keeps one), without
        // running the suites again
        ["--from", f] => (false, Some(PathBuf::from(f))),
        ["--check"] => (true, None),
        ["--check", "--observed", f] | ["--observed", f, "--check"] => {
            (true, Some(PathBuf::from(f)))
        }
        _ => bail!("{USAGE}"),
    };
    let root = workspace_root();
    let suites = fault_suites(&root)?;
    let probes = tests_in(&root.join(SUITE_DIR).join(PROBES))?;
    let doc_path = root.join(DOC);
    let doc = std::fs::read_to_string(&doc_path)
        .with_context(|| format!("reading {}", doc_path.display()))?;
    if check {
        return check_doc(&doc, &suites, &probes, observed.as_deref());
    }
    let log = match observed {
        Some(log) => log,
        None => {
            let log = root.join("target/reliability/observed.ndjson");
            std::fs::create_dir_all(log.parent().context("log dir")?)?;
            let _ = std::fs::remove_file(&log);
            crate::preflight::require("reliability", crate::preflight::RELIABILITY)?;
            run(cargo().args(["build", "--workspace", "--bins"]))
                .context("building the binaries")?;
            let droid = crate::droid::fetch()?;
            let mut cmd = cargo();
            cmd.args([
                "test",
                "-p",
                "tests",
                "--test",
                "all",
                "--",
                "suite::faults_",
            ])
            .env(LOG_ENV, &log)
            .env("DROID_EXECUTOR_TEST_DROID", &droid);
            run(&mut cmd).context("the fault suites failed")?;
            log
        }
    };
    let rows = read_log(&log)?;
    let matrix = render_matrix(&suites, &rows)?;
    let text = replace_between(&doc, "matrix", &matrix)?;
    let text = replace_between(&text, "probes", &render_probes(&probes))?;
    std::fs::write(&doc_path, text).with_context(|| format!("writing {}", doc_path.display()))?;
    println!("wrote {DOC}: {} rows from {}", rows.len(), log.display());
    Ok(())
}

/// The fault suites that exist, with their tests.
fn fault_suites(root: &Path) -> Result<Vec<(&'static str, Vec<TestFn>)>> {
    let mut suites = Vec::new();
    for (file, title) in FAULT_SUITES {
        let path = root.join(SUITE_DIR).join(file);
        if path.exists() {
            suites.push((title, tests_in(&path)?));
        }
    }
    Ok(suites)
}

/// The tests of a suite file, in source order: every `fn` right after a `#[test]` or
/// `#[tokio::test…]` attribute, with the first paragraph of the doc comment above the attribute.
fn tests_in(path: &Path) -> Result<Vec<TestFn>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(parse_tests(&text))
}

fn parse_tests(text: &str) -> Vec<TestFn> {
    let mut found = Vec::new();
    let mut doc: Vec<&str> = Vec::new();
    let mut in_test = false;
    for line in text.lines() {
        let t = line.trim();
        if let Some(d) = t.strip_prefix("///") {
            if !in_test {
                doc.push(d.trim());
            }
            continue;
        }
        if t.starts_with("#[test]") || t.starts_with("#[tokio::test") {
            in_test = true;
            continue;
        }
        if in_test {
            if t.starts_with("#[") {
                continue;
            }
            let sig = t.strip_prefix("async ").unwrap_or(t);
            if let Some(rest) = sig.strip_prefix("fn ") {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let paragraph: Vec<&str> =
                    doc.iter().copied().take_while(|l| !l.is_empty()).collect();
                found.push(TestFn {
                    name,
                    doc: paragraph.join(" "),
                });
            }
            in_test = false;
        }
        doc.clear();
    }
    found
}

/// One observed row of the fault log.
#[derive(Debug, Clone)]
struct Row {
    test: String,
    front_end: String,
    droid: String,
    status: String,
    issues: String,
    results: u64,
    left: u64,
    rss: f64,
    note: String,
}

impl Row {
    fn from_json(v: &Value) -> Option<Row> {
        let issues: Vec<&str> = v["issues"]
            .as_array()?
            .iter()
            .filter_map(Value::as_str)
            .collect();
        Some(Row {
            test: v["test"].as_str()?.to_owned(),
            front_end: v["front_end"].as_str()?.to_owned(),
            droid: v["droid"].as_str()?.to_owned(),
            status: v["status"].as_str()?.to_owned(),
            issues: if issues.is_empty() {
                "—".to_owned()
            } else {
                issues.join(", ")
            },
            results: v["results"].as_u64()?,
            left: v["processes_left"].as_u64()?,
            rss: v["peak_rss_mib"].as_f64()?,
            note: v["note"].as_str().unwrap_or_default().to_owned(),
        })
    }

    /// The columns compared by `--check`: everything but the figures.
    fn stable(&self) -> [String; 7] {
        [
            humanize(&self.test),
            self.front_end.clone(),
            self.droid.clone(),
            format!("`{}`", self.status),
            self.issues.clone(),
            self.results.to_string(),
            self.left.to_string(),
        ]
    }
}

fn read_log(path: &Path) -> Result<Vec<Row>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the fault log {}", path.display()))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| {
            let v: Value = serde_json::from_str(l)
                .with_context(|| format!("{} line {}: not JSON", path.display(), i + 1))?;
            Row::from_json(&v).with_context(|| {
                format!("{} line {}: not a fault record: {l}", path.display(), i + 1)
            })
        })
        .collect()
}

/// `a_1_gib_flood_keeps_memory` → `a 1 gib flood keeps memory`.
fn humanize(name: &str) -> String {
    name.replace('_', " ")
}

/// The matrix: a table per suite, rows in test order then in the order recorded.
fn render_matrix(suites: &[(&str, Vec<TestFn>)], rows: &[Row]) -> Result<String> {
    let mut out = String::new();
    let mut missing = Vec::new();
    for (title, tests) in suites {
        let _ = writeln!(out, "\n### {}\n", capitalize(title));
        out.push_str(
            "| case (test name) | front-end | droid | status | issues | results | processes left | peak RSS MiB | observed |\n",
        );
        out.push_str("|---|---|---|---|---|---|---|---|---|\n");
        for t in tests {
            let mine: Vec<&Row> = rows.iter().filter(|r| r.test == t.name).collect();
            if mine.is_empty() {
                missing.push(t.name.clone());
            }
            for r in mine {
                let [case, front, droid, status, issues, results, left] = r.stable();
                let rss = if r.rss > 0.0 {
                    format!("{:.1}", r.rss)
                } else {
                    "—".to_owned()
                };
                let _ = writeln!(
                    out,
                    "| {case} | {front} | {droid} | {status} | {issues} | {results} | {left} | {rss} | {} |",
                    r.note.replace('|', "\\|").replace('\n', " ")
                );
            }
        }
    }
    if !missing.is_empty() {
        bail!(
            "fault tests that recorded nothing (call record() at the end): {}",
            missing.join(", ")
        );
    }
    Ok(out)
}

fn render_probes(probes: &[TestFn]) -> String {
    let mut out = String::from("\n| probe (test name) | what it proves |\n|---|---|\n");
    for p in probes {
        let _ = writeln!(
            out,
            "| {} | {} |",
            humanize(&p.name),
            p.doc.replace('|', "\\|")
        );
    }
    out
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}

fn markers(name: &str) -> (String, String) {
    (
        format!("<!-- {name}:begin -->"),
        format!("<!-- {name}:end -->"),
    )
}

/// The text between a pair of markers.
fn between<'a>(doc: &'a str, name: &str) -> Result<&'a str> {
    let (begin, end) = markers(name);
    let start = doc
        .find(&begin)
        .with_context(|| format!("{DOC} has no {begin}"))?
        + begin.len();
    let stop = doc[start..]
        .find(&end)
        .with_context(|| format!("{DOC} has no {end} after {begin}"))?
        + start;
    Ok(&doc[start..stop])
}

fn replace_between(doc: &str, name: &str, body: &str) -> Result<String> {
    let old = between(doc, name)?;
    let start = old.as_ptr() as usize - doc.as_ptr() as usize;
    Ok(format!(
        "{}{body}\n{}",
        &doc[..start],
        &doc[start + old.len()..]
    ))
}

/// The stable columns of the document's matrix rows.
fn doc_rows(doc: &str) -> Result<Vec<[String; 7]>> {
    let mut rows = Vec::new();
    for line in between(doc, "matrix")?.lines() {
        let cells: Vec<String> = line
            .trim()
            .trim_matches('|')
            .split(" | ")
            .map(|c| c.trim().to_owned())
            .collect();
        if cells.len() < 9 || cells[0] == "case (test name)" || cells[0].starts_with("---") {
            continue;
        }
        rows.push(std::array::from_fn(|i| cells[i].clone()));
    }
    Ok(rows)
}

fn check_doc(
    doc: &str,
    suites: &[(&str, Vec<TestFn>)],
    probes: &[TestFn],
    observed: Option<&Path>,
) -> Result<()> {
    let mut problems = Vec::new();
    let tests: Vec<String> = suites
        .iter()
        .flat_map(|(_, t)| t.iter().map(|t| humanize(&t.name)))
        .collect();
    let rows = doc_rows(doc)?;
    for t in &tests {
        if !rows.iter().any(|r| &r[0] == t) {
            problems.push(format!("the matrix has no row for the test `{t}`"));
        }
    }
    for r in &rows {
        if !tests.contains(&r[0]) {
            problems.push(format!(
                "the matrix names `{}`, which is no fault test",
                r[0]
            ));
        }
    }
    if between(doc, "probes")?.trim() != render_probes(probes).trim() {
        problems.push("the list of security probes differs from security.rs".to_owned());
    }
    if let Some(log) = observed {
        let seen = read_log(log)?;
        let mut now: Vec<[String; 7]> = Vec::new();
        for (_, ts) in suites {
            for t in ts {
                let mine: Vec<[String; 7]> = seen
                    .iter()
                    .filter(|r| r.test == t.name)
                    .map(Row::stable)
                    .collect();
                if mine.is_empty() {
                    problems.push(format!("the fault test `{}` recorded nothing", t.name));
                }
                now.extend(mine);
            }
        }
        for r in &now {
            if !rows.contains(r) {
                problems.push(format!(
                    "observed now but not in the document: {}",
                    r.join(" | ")
                ));
            }
        }
        for r in &rows {
            if !now.contains(r) {
                problems.push(format!(
                    "in the document but not observed now: {}",
                    r.join(" | ")
                ));
            }
        }
    }
    if problems.is_empty() {
        println!(
            "{DOC}: {} matrix rows and {} probes up to date",
            rows.len(),
            probes.len()
        );
        return Ok(());
    }
    bail!(
        "{DOC} is stale (run `cargo xtask reliability`):\n  {}",
        problems.join("\n  ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_test_names_and_their_first_doc_line() {
        let src = "/// helper\nfn helper() {}\n\n/// First line,\n/// second.\n///\n/// Not this.\n#[tokio::test(flavor = \"multi_thread\")]\nasync fn a_case_is_error() {}\n#[test]\n#[allow(x)]\nfn plain_test() {}\n";
        assert_eq!(
            parse_tests(src),
            vec![
                TestFn {
                    name: "a_case_is_error".into(),
                    doc: "First line, second.".into()
                },
                TestFn {
                    name: "plain_test".into(),
                    doc: String::new()
                },
            ]
        );
    }

    #[test]
    fn the_matrix_round_trips_through_the_document() {
        let suites = vec![(
            "t",
            vec![TestFn {
                name: "x_is_error".into(),
                doc: String::new(),
            }],
        )];
        let v: Value = serde_json::from_str(r#"{"test":"x_is_error","front_end":"cli","droid":"fake","status":"error","issues":["droid_not_found"],"results":1,"processes_left":0,"peak_rss_mib":12.5,"note":"a | b"}"#).unwrap();
        let rows = vec![Row::from_json(&v).unwrap()];
        let doc = format!(
            "head\n<!-- matrix:begin -->{}\n<!-- matrix:end -->\n<!-- probes:begin -->{}\n<!-- probes:end -->\ntail\n",
            render_matrix(&suites, &rows).unwrap(),
            render_probes(&[])
        );
        assert_eq!(doc_rows(&doc).unwrap(), vec![rows[0].stable()]);
        check_doc(&doc, &suites, &[], None).unwrap();
        let replaced = replace_between(&doc, "matrix", "\nnew\n").unwrap();
        assert!(replaced.starts_with("head\n<!-- matrix:begin -->\nnew\n\n<!-- matrix:end -->"));
        assert!(replaced.ends_with("tail\n"));
        assert!(render_matrix(&suites, &[]).is_err());
    }
}
