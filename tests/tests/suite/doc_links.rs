//! Every relative link of the repository's Markdown resolves: the README, `docs/`, the skills
//! under `skill/` and every other Markdown file of the checkout (tracked, or new and not
//! ignored). A link to a file or directory must name one that exists inside the workspace (a
//! skill's links must stay inside that skill's folder, which `setup skill` installs on its own),
//! and a `#fragment` must be an anchor of the target page as GitHub makes them from its headings
//! (or a `#L10` line anchor on a file that is not Markdown). Web links are not followed.

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};

use pretty_assertions::assert_eq;
use tests::droid_bin::workspace_root;

/// The Markdown files to check, relative to the workspace root: `git ls-files` of tracked and
/// untracked, not ignored, `*.md` files.
fn markdown_files(root: &Path) -> Vec<String> {
    #[allow(clippy::disallowed_methods)] // lists the checkout's files
    let out = std::process::Command::new("git")
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
            "--",
            "*.md",
        ])
        .current_dir(root)
        .output()
        .unwrap_or_else(|e| panic!("git is needed to list the Markdown files: {e}"));
    assert!(
        out.status.success(),
        "git ls-files in {} failed (the link check needs a git checkout): {}",
        root.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut files: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .split('\0')
        .filter(|p| !p.is_empty() && root.join(p).is_file())
        .map(str::to_owned)
        .collect();
    files.sort();
    files.dedup();
    files
}

/// A fenced code block's opening: its character and length (```` ``` ````, `~~~~`).
fn fence(line: &str) -> Option<(char, usize)> {
    let t = line.trim_start();
    if line.len() - t.len() > 3 {
        return None;
    }
    let c = t.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let n = t.chars().take_while(|x| *x == c).count();
    (n >= 3).then_some((c, n))
}

/// The lines of `text` outside fenced code blocks, with their 1-based numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut open: Option<(char, usize)> = None;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        match (open, fence(line)) {
            (None, Some(f)) => open = Some(f),
            (Some((c, n)), Some((c2, n2)))
                if c == c2 && n2 >= n && line.trim().chars().all(|x| x == c) =>
            {
                open = None;
            }
            (None, None) => out.push((i + 1, line)),
            (Some(_), _) => {}
        }
    }
    out
}

/// `line` without its code spans (`` `…` ``), which hold no links.
fn without_code(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(at) = rest.find('`') {
        out.push_str(&rest[..at]);
        let run = rest[at..].chars().take_while(|c| *c == '`').count();
        let after = &rest[at + run..];
        let closing = "`".repeat(run);
        match after.find(&closing) {
            Some(end) => rest = &after[end + run..],
            None => {
                // an unclosed run is literal text
                out.push_str(&rest[at..at + run]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The targets of a prose line's links: inline `[text](target "title")`, images, reference
/// definitions `[name]: target`, and HTML `href="…"`.
fn link_targets(line: &str) -> Vec<String> {
    let line = without_code(line);
    let mut out = Vec::new();
    let mut rest = line.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let mut depth = 0usize;
        let mut end = after.len();
        for (i, c) in after.char_indices() {
            match c {
                '(' => depth += 1,
                ')' if depth == 0 => {
                    end = i;
                    break;
                }
                ')' => depth -= 1,
                _ => {}
            }
        }
        let inner = after[..end].trim();
        let target = match inner.strip_prefix('<') {
            Some(bracketed) => bracketed.split('>').next().unwrap_or_default(),
            None => inner.split_whitespace().next().unwrap_or_default(),
        };
        if !target.is_empty() {
            out.push(target.to_owned());
        }
        rest = &after[end.min(after.len())..];
    }
    let trimmed = line.trim_start();
    if line.len() - trimmed.len() <= 3
        && trimmed.starts_with('[')
        && let Some((label, def)) = trimmed[1..].split_once("]:")
        && !label.is_empty()
        && let Some(target) = def.split_whitespace().next()
    {
        out.push(target.trim_matches(['<', '>']).to_owned());
    }
    for attr in ["href=\"", "src=\""] {
        for (at, _) in line.match_indices(attr) {
            if let Some(target) = line[at + attr.len()..].split('"').next() {
                out.push(target.to_owned());
            }
        }
    }
    out
}

/// A heading's text as GitHub renders it for its anchor: links as their text, HTML tags and
/// the closing `#`s dropped.
fn heading_text(raw: &str) -> String {
    let raw = raw.trim().trim_end_matches('#').trim_end();
    let mut out = String::new();
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            // `[text](url)`: keep the text, drop the url
            ']' if chars.peek() == Some(&'(') => {
                for c in chars.by_ref() {
                    if c == ')' {
                        break;
                    }
                }
            }
            '<' => {
                for c in chars.by_ref() {
                    if c == '>' {
                        break;
                    }
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// GitHub's anchor for a heading (github-slugger): lowercase; letters, digits, `-` and `_` kept;
/// spaces to `-`; everything else dropped.
fn slug(text: &str) -> String {
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Every anchor a page offers: one per heading (ATX `#` and setext `===`/`---`), a repeated
/// one suffixed `-1`, `-2`, … as GitHub does, and the explicit `<a id|name="…">`.
fn anchors(text: &str) -> HashSet<String> {
    let mut seen: HashSet<String> = HashSet::new();
    let add = |base: String, seen: &mut HashSet<String>| {
        let mut anchor = base.clone();
        let mut n = 0;
        while seen.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        seen.insert(anchor);
    };
    let lines = prose_lines(text);
    for (i, (number, line)) in lines.iter().enumerate() {
        let t = line.trim_start();
        let indent = line.len() - t.len();
        if indent <= 3 && t.starts_with('#') {
            let hashes = t.chars().take_while(|c| *c == '#').count();
            let rest = &t[hashes..];
            if hashes <= 6 && (rest.is_empty() || rest.starts_with(' ')) {
                add(slug(&heading_text(rest)), &mut seen);
                continue;
            }
        }
        // setext: a paragraph line followed by a line of `=` or `-`
        if let Some((next_number, next)) = lines.get(i + 1)
            && *next_number == number + 1
            && !t.is_empty()
            && indent <= 3
            && !t.starts_with(['#', '>', '|', '-', '*', '+', '<'])
            && !t.chars().next().is_some_and(|c| c.is_ascii_digit())
        {
            let n = next.trim();
            if !n.is_empty() && (n.chars().all(|c| c == '=') || n.chars().all(|c| c == '-')) {
                add(slug(&heading_text(t)), &mut seen);
            }
        }
        for attr in ["<a id=\"", "<a name=\""] {
            for (at, _) in line.match_indices(attr) {
                if let Some(id) = line[at + attr.len()..].split('"').next() {
                    add(id.to_owned(), &mut seen);
                }
            }
        }
    }
    seen
}

/// `%20` and the like decoded (paths with spaces are written so in links).
fn percent_decoded(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(hex) = std::str::from_utf8(&bytes[i + 1..i + 3])
            && let Ok(b) = u8::from_str_radix(hex, 16)
        {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `path` with `.` and `..` resolved without touching the file system; `None` when it climbs
/// above its start.
fn lexical(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(p) => out.push(p),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// A web link (`https:`, `mailto:`, …), which this check does not follow.
fn is_external(target: &str) -> bool {
    let scheme: String = target
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || "+.-".contains(*c))
        .collect();
    !scheme.is_empty()
        && target[scheme.len()..].starts_with(':')
        && scheme
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic())
}

/// `#L10` or `#L10-L20`: GitHub's line anchors on a file that is not Markdown.
fn is_line_anchor(anchor: &str) -> bool {
    let part = |p: &str| {
        p.strip_prefix('L')
            .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
    };
    match anchor.split_once('-') {
        Some((a, b)) => part(a) && part(b),
        None => part(anchor),
    }
}

/// The problems of every link in the Markdown file `rel` (relative to `root`).
fn problems_of(root: &Path, rel: &str, pages: &mut PageCache) -> Vec<String> {
    let text = std::fs::read_to_string(root.join(rel)).unwrap();
    let rel_path = Path::new(rel);
    let dir = rel_path.parent().unwrap_or(Path::new(""));
    // a skill is installed on its own: its links must stay inside its folder
    let confine: Option<PathBuf> = match rel_path.components().collect::<Vec<_>>().as_slice() {
        [Component::Normal(s), Component::Normal(name), ..] if *s == "skill" => {
            Some(Path::new("skill").join(name))
        }
        _ => None,
    };
    let mut out = Vec::new();
    for (number, line) in prose_lines(&text) {
        for target in link_targets(line) {
            if is_external(&target) {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let mut report = |problem: String| {
                out.push(format!("{rel}:{number}: ({target}) {problem}"));
            };
            let resolved = if path.is_empty() {
                Some(rel_path.to_path_buf())
            } else if let Some(from_root) = path.strip_prefix('/') {
                lexical(Path::new(&percent_decoded(from_root)))
            } else {
                lexical(&dir.join(percent_decoded(path)))
            };
            let Some(resolved) = resolved else {
                report("climbs out of the repository".into());
                continue;
            };
            if let Some(skill) = &confine
                && !resolved.starts_with(skill)
            {
                report(format!(
                    "leaves {} (the skill is installed on its own, without the rest of the \
                     repository)",
                    skill.display()
                ));
                continue;
            }
            let on_disk = root.join(&resolved);
            if !on_disk.exists() {
                report(format!(
                    "names {}, which does not exist",
                    resolved.display()
                ));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            let is_markdown = resolved.extension().is_some_and(|e| e == "md");
            if !is_markdown {
                if !is_line_anchor(anchor) {
                    report(format!(
                        "#{anchor} on {}, which is not a Markdown page",
                        resolved.display()
                    ));
                }
                continue;
            }
            if !pages.anchors(&on_disk).contains(&percent_decoded(anchor)) {
                report(format!(
                    "#{anchor} is not a heading of {}",
                    resolved.display()
                ));
            }
        }
    }
    out
}

/// The anchors of each page, read once.
#[derive(Default)]
struct PageCache(std::collections::HashMap<PathBuf, HashSet<String>>);

impl PageCache {
    fn anchors(&mut self, path: &Path) -> &HashSet<String> {
        self.0
            .entry(path.to_path_buf())
            .or_insert_with(|| anchors(&std::fs::read_to_string(path).unwrap_or_default()))
    }
}

#[test]
fn every_relative_link_and_anchor_in_the_markdown_resolves() {
    let root = workspace_root();
    let files = markdown_files(&root);
    for must in [
        "README.md",
        "docs/protocol.md",
        "skill/droid-executor/SKILL.md",
    ] {
        assert!(
            files.iter().any(|f| f == must),
            "{must} is not among the Markdown files found: {files:?}"
        );
    }
    let mut pages = PageCache::default();
    let problems: Vec<String> = files
        .iter()
        .flat_map(|rel| problems_of(&root, rel, &mut pages))
        .collect();
    assert!(
        problems.is_empty(),
        "{} broken link(s) in the Markdown:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// The parsing the check rests on, on the cases the documentation has.
#[test]
fn links_and_anchors_are_read_as_github_reads_them() {
    assert_eq!(
        link_targets(
            "See [the tour](#a-5-minute-tour), ![x](img/a.png \"t\") and [ops](docs/operations.md#logs); \
             `[not](a-link.md)` and [web](https://example.com/a_(b))."
        ),
        [
            "#a-5-minute-tour",
            "img/a.png",
            "docs/operations.md#logs",
            "https://example.com/a_(b)"
        ]
    );
    assert_eq!(
        link_targets("[ref]: docs/acp.md#tests"),
        ["docs/acp.md#tests"]
    );
    assert_eq!(link_targets("<a href=\"LICENSE\">x</a>"), ["LICENSE"]);
    let page = "\
# droid-executor
## Front-end: MCP
## What droid's autonomy levels protect against, and what they do not
### `bridge_failure` after a killed supervisor
## [Five providers](docs/providers.md)
## Tests
## Tests
Setext heading
--------------
```sh
# not a heading
```
<a id=\"custom-anchor\"></a>
";
    let mut found: Vec<String> = anchors(page).into_iter().collect();
    found.sort();
    assert_eq!(
        found,
        [
            "bridge_failure-after-a-killed-supervisor",
            "custom-anchor",
            "droid-executor",
            "five-providers",
            "front-end-mcp",
            "setext-heading",
            "tests",
            "tests-1",
            "what-droids-autonomy-levels-protect-against-and-what-they-do-not",
        ]
    );
    assert!(is_external("https://x") && is_external("mailto:a@b"));
    assert!(!is_external("docs/protocol.md#front-end-mcp") && !is_external("#x:y"));
    assert!(is_line_anchor("L10") && is_line_anchor("L10-L20") && !is_line_anchor("main"));
    assert_eq!(
        lexical(Path::new("docs/../README.md")),
        Some(PathBuf::from("README.md"))
    );
    assert_eq!(lexical(Path::new("../outside.md")), None);
    assert_eq!(percent_decoded("a%20b.md"), "a b.md");
}
