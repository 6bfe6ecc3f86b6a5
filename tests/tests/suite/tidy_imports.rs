//! Tidy check: no circle of imports between the files of a crate (docs/architecture.md#house-rules:
//! a type lives in the lowest file that needs it). Two files that name each other are one concept
//! split in two, or a type living above a file that needs it; either way neither can be read, moved
//! or tested alone.
//!
//! The analysis, per crate: every `crate::a::b`, `super::x`, `self::x` path of a file's non-test
//! code (in `use` items, groups expanded, and inline; comments and strings stripped,
//! `#[cfg(test)]` items and test-only modules dropped) is resolved to the file that defines the
//! module it names, following `pub use` re-exports of a module file; the strongly connected
//! components of more than one file (Tarjan) are the circles. A hand-written scanner stands in
//! for regular expressions (the test crate has no regex crate); it reads Rust as a tidy check
//! needs to, not as the compiler does (no `#[path]`, no macros).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use tests::droid_bin::workspace_root;
use tests::temp_dir::TempDir;

/// A module named by its file: `src/a/b.rs` and `src/a/b/mod.rs` are `["a", "b"]`, the crate root
/// (`lib.rs`, `main.rs`) is `[]`.
type Module = Vec<String>;

/// One crate's import graph between its non-test files.
#[derive(Debug, Default)]
struct Graph {
    /// Every `.rs` file below `src`, by the module it defines.
    files: BTreeMap<Module, PathBuf>,
    /// The modules whose file is a folder's `mod.rs` (or `bin/<x>/main.rs`).
    folders: BTreeSet<Module>,
    /// The non-test files (not below a module declared under `#[cfg(test)]`).
    modules: BTreeSet<Module>,
    /// Which files each file's paths resolve to (itself left out).
    edges: BTreeMap<Module, BTreeSet<Module>>,
}

/// The attribute of test-only items.
const CFG_TEST: &str = "#[cfg(test)]";

/// A word character as regular expressions see it (`\w`).
fn word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether `s` holds `pat` at `i`.
fn at(s: &[char], i: usize, pat: &str) -> bool {
    pat.chars()
        .enumerate()
        .all(|(k, c)| s.get(i + k) == Some(&c))
}

/// How many chars from `i` satisfy `f`.
fn run(s: &[char], i: usize, f: impl Fn(char) -> bool) -> usize {
    s.get(i..)
        .map_or(0, |rest| rest.iter().take_while(|c| f(**c)).count())
}

/// The length of the char literal at `i` (`'x'`, `'\n'`, `'\x7f'`, `'\u{1F600}'`), if one starts
/// there; a lifetime (`'a`) is none.
fn char_literal(s: &[char], i: usize) -> Option<usize> {
    let get = |k: usize| s.get(i + k).copied();
    let escape = match (get(1), get(2)) {
        (Some('\\'), Some('x')) => (get(3).is_some_and(|c| c != '\n')
            && get(4).is_some_and(|c| c != '\n')
            && get(5) == Some('\''))
        .then_some(6),
        (Some('\\'), Some('u')) if get(3) == Some('{') => {
            let hex = run(s, i + 4, |c| c.is_ascii_hexdigit());
            (hex > 0 && get(4 + hex) == Some('}') && get(5 + hex) == Some('\'')).then_some(6 + hex)
        }
        _ => None,
    };
    let simple = match (get(1), get(2), get(3)) {
        (Some('\\'), Some(c), Some('\'')) if c != '\n' => Some(4),
        (Some(c), Some('\''), _) if c != '\\' && c != '\'' => Some(3),
        _ => None,
    };
    // a `\u{…}` escape counts only when it is short (twelve chars at most)
    if simple.is_none() && escape.is_none_or(|len| len > 12) {
        return None;
    }
    escape.or(simple)
}

/// `src` with comments dropped and each string, raw string and char literal made empty (`""`,
/// `' '`), so that a path written in them is not read as code.
fn strip_comments_and_strings(src: &str) -> String {
    let s: Vec<char> = src.chars().collect();
    let n = s.len();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < n {
        let c = s[i];
        if at(&s, i, "//") {
            i += run(&s, i, |c| c != '\n');
        } else if at(&s, i, "/*") {
            let (mut depth, mut j) = (1, i + 2);
            while j < n && depth > 0 {
                if at(&s, j, "/*") {
                    (depth, j) = (depth + 1, j + 2);
                } else if at(&s, j, "*/") {
                    (depth, j) = (depth - 1, j + 2);
                } else {
                    j += 1;
                }
            }
            i = j;
        } else if let Some(hashes) = (c == 'r' && (i == 0 || !word(s[i - 1])))
            .then(|| run(&s, i + 1, |c| c == '#'))
            .filter(|h| *h <= 8 && s.get(i + 1 + h) == Some(&'"'))
        {
            let close: Vec<char> = std::iter::once('"')
                .chain("#".repeat(hashes).chars())
                .collect();
            let from = i + hashes + 2;
            i = (from..n)
                .find(|j| s[*j..].starts_with(&close))
                .map_or(n, |j| j + close.len());
            out.push_str("\"\"");
        } else if c == '"' {
            let mut j = i + 1;
            while j < n && s[j] != '"' {
                j += if s[j] == '\\' { 2 } else { 1 };
            }
            i = j + 1;
            out.push_str("\"\"");
        } else if let Some(len) = (c == '\'').then(|| char_literal(&s, i)).flatten() {
            i += len;
            out.push_str("' '");
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// `src` without the items that carry `#[cfg(test)]` (a `mod tests { … }`, a `mod props;`, a
/// `use`, a `fn`): each ends at the first `;` before any `{`, or at the matching `}`.
fn strip_cfg_test(mut src: String) -> String {
    while let Some(start) = src.find(CFG_TEST) {
        let from = start + CFG_TEST.len();
        let mut depth = 0i32;
        let end = src.as_bytes()[from..]
            .iter()
            .position(|b| {
                depth += i32::from(*b == b'{') - i32::from(*b == b'}');
                matches!(b, b'}' | b';') && depth == 0
            })
            .map_or(src.len(), |k| from + k + 1);
        src.replace_range(start..end, "");
    }
    src
}

/// `a::{b, c::{d, self}}` -> `[a::b, a::c::d, a::c]`, aliases (`as x`) dropped.
fn expand_use(tree: &str) -> Vec<String> {
    let s: Vec<char> = tree.chars().collect();
    let mut flat = String::new();
    let mut i = 0;
    while i < s.len() {
        // ` as name`: whitespace, `as`, whitespace, a word
        let lead = run(&s, i, char::is_whitespace);
        let gap = run(&s, i + lead + 2, char::is_whitespace);
        let name = run(&s, i + lead + 2 + gap, word);
        if lead > 0 && at(&s, i + lead, "as") && gap > 0 && name > 0 {
            i += lead + 2 + gap + name;
        } else {
            flat.extend((!s[i].is_whitespace()).then_some(s[i]));
            i += 1;
        }
    }
    expand(&flat)
}

/// [`expand_use`] of a tree without whitespace.
fn expand(s: &str) -> Vec<String> {
    let Some(open) = s.find('{') else {
        return vec![s.to_owned()];
    };
    let prefix = &s[..open];
    let close = s
        .rfind('}')
        .or_else(|| s.char_indices().last().map(|(i, _)| i))
        .unwrap_or(0);
    let inner = s.get(open + 1..close).unwrap_or("");
    let (mut parts, mut depth, mut cur) = (Vec::new(), 0, String::new());
    for c in inner.chars() {
        depth += i32::from(c == '{') - i32::from(c == '}');
        if c == ',' && depth == 0 {
            parts.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    parts.extend((!cur.is_empty()).then_some(cur));
    let full = |q: String| match q.as_str() {
        "self" => prefix.trim_end_matches(':').to_owned(),
        _ => format!("{prefix}{q}"),
    };
    parts.iter().flat_map(|p| expand(p)).map(full).collect()
}

/// Where `[pub[(…)] ]` at `i` ends (the whitespace after it included), if it is there.
fn pub_prefix(s: &[char], i: usize) -> Option<usize> {
    if !at(s, i, "pub") {
        return None;
    }
    let mut j = i + 3;
    if s.get(j) == Some(&'(') {
        j = (j..s.len()).find(|k| s[*k] == ')')? + 1;
    }
    let gap = run(s, j, char::is_whitespace);
    (gap > 0).then_some(j + gap)
}

/// The `use` item at `i` (`[pub[(…)] ]use tree;`): its end, whether it is `pub`, its tree.
fn use_item_at(s: &[char], i: usize) -> Option<(usize, bool, String)> {
    let body = |j: usize| {
        let gap = run(s, j + 3, char::is_whitespace);
        if !at(s, j, "use") || gap == 0 {
            return None;
        }
        let semi = (j + 3..s.len()).find(|k| s[*k] == ';')?;
        (semi >= j + 5).then(|| (semi + 1, s[j + 3 + gap..semi].iter().collect()))
    };
    match pub_prefix(s, i).and_then(body) {
        Some((end, tree)) => Some((end, true, tree)),
        None => body(i).map(|(end, tree)| (end, false, tree)),
    }
}

/// The module named by `#[cfg(test)] [pub[(…)] ]mod name;` if that starts `s`, past the attribute.
fn test_only_mod(s: &[char]) -> Option<String> {
    let j = run(s, 0, char::is_whitespace);
    let j = pub_prefix(s, j).unwrap_or(j);
    let gap = run(s, j + 3, char::is_whitespace);
    let name = run(s, j + 3 + gap, word);
    let end = j + 3 + gap + name;
    let semi = end + run(s, end, char::is_whitespace);
    (at(s, j, "mod") && gap > 0 && name > 0 && s.get(semi) == Some(&';'))
        .then(|| s[j + 3 + gap..end].iter().collect())
}

/// The paths of `code`'s `use` items, expanded (`pub` or not), and the code without them.
fn use_items(code: &str) -> (Vec<(bool, String)>, String) {
    let s: Vec<char> = code.chars().collect();
    let (mut items, mut rest, mut i) = (Vec::new(), String::new(), 0);
    while i < s.len() {
        if let Some((end, public, tree)) = use_item_at(&s, i) {
            items.extend(expand_use(&tree).into_iter().map(|p| (public, p)));
            i = end;
        } else {
            rest.push(s[i]);
            i += 1;
        }
    }
    (items, rest)
}

/// The `crate::…`, `super::…`, `self::…` paths written inline in `code`.
fn inline_paths(code: &str) -> Vec<String> {
    let s: Vec<char> = code.chars().collect();
    let (mut out, mut i) = (Vec::new(), 0);
    while i < s.len() {
        let head = ["crate", "super", "self"]
            .into_iter()
            .find(|k| at(&s, i, k) && (i == 0 || !word(s[i - 1])));
        if let Some(head) = head {
            let mut end = i + head.len();
            while at(&s, end, "::") && run(&s, end + 2, word) > 0 {
                end += 2 + run(&s, end + 2, word);
            }
            if end > i + head.len() {
                out.push(s[i..end].iter().collect());
                i = end;
                continue;
            }
        }
        i += 1;
    }
    out
}

/// The path `path` written in `module`, from the crate root: `crate::a` is `[a]`, `super::b` in
/// `x/y` is `[x, b]`, `child::c` (a module file below `module`) is `module + [child, c]`.
fn absolute(module: &[String], path: &str, files: &BTreeMap<Module, PathBuf>) -> Option<Module> {
    let parts: Vec<String> = path.split("::").map(str::to_owned).collect();
    if parts[0] == "crate" {
        return Some(parts[1..].to_vec());
    }
    if files.contains_key(&[module, &parts[..1]].concat()) {
        return Some([module, &parts[..]].concat());
    }
    if parts[0] != "self" && parts[0] != "super" {
        return None;
    }
    let mut base = module.to_vec();
    let rest: Vec<&String> = parts
        .iter()
        .skip_while(|p| *p == "self" || *p == "super")
        .collect();
    for part in parts.iter().take(parts.len() - rest.len()) {
        if part == "super" {
            base.pop()?;
        }
    }
    Some(base.into_iter().chain(rest.into_iter().cloned()).collect())
}

/// The file that defines what `path` (from the root) names: its longest prefix that is a module
/// file, or, when that file re-exports the next segment (`pub use`), where the re-export leads.
fn resolve(
    path: &[String],
    files: &BTreeMap<Module, PathBuf>,
    reexports: &BTreeMap<Module, BTreeMap<String, Module>>,
    depth: usize,
) -> Option<Module> {
    let k = (0..=path.len())
        .rev()
        .find(|k| files.contains_key(&path[..*k]))?;
    let target = path
        .get(k)
        .filter(|_| depth < 10)
        .and_then(|next| reexports.get(&path[..k])?.get(next))
        .filter(|target| target[..] != path[..]);
    match target {
        Some(target) => resolve(target, files, reexports, depth + 1),
        None => Some(path[..k].to_vec()),
    }
}

/// Reads the crate whose sources are in `src` and builds its [`Graph`]. A crate with both
/// `lib.rs` and `main.rs` is read as one root (the last file in path order of a module wins).
fn analyse(src: &Path) -> Graph {
    let mut graph = Graph::default();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                stack.push(path);
            } else if let Some(rel) = path.strip_prefix(src).unwrap().to_str()
                && let Some(rel) = rel.strip_suffix(".rs")
            {
                // `a/b.rs` and `a/b/mod.rs` are module `a::b`, `lib.rs` and `main.rs` the root
                let mut module: Module = rel.split('/').map(str::to_owned).collect();
                if matches!(
                    module.last().map(String::as_str),
                    Some("mod" | "lib" | "main")
                ) {
                    module.pop();
                    graph
                        .folders
                        .extend((!module.is_empty()).then(|| module.clone()));
                }
                graph.files.insert(module, path);
            }
        }
    }
    let mut code: BTreeMap<Module, String> = graph
        .files
        .iter()
        .map(|(m, path)| {
            let text = std::fs::read_to_string(path).unwrap();
            (m.clone(), strip_comments_and_strings(&text))
        })
        .collect();
    // modules declared under `#[cfg(test)]` (`#[cfg(test)] mod props;`), and all below them
    let mut test_only = Vec::new();
    for (module, text) in &code {
        for (attr, _) in text.match_indices(CFG_TEST) {
            let rest: Vec<char> = text[attr + CFG_TEST.len()..].chars().collect();
            test_only.extend(test_only_mod(&rest).map(|m| [&module[..], &[m]].concat()));
        }
    }
    code.retain(|m, _| !test_only.iter().any(|t| m.starts_with(t)));
    graph.modules = code.keys().cloned().collect();
    let (mut uses, mut edges) = (BTreeMap::new(), BTreeMap::<_, BTreeSet<_>>::new());
    let mut reexports: BTreeMap<Module, BTreeMap<String, Module>> = BTreeMap::new();
    for (module, text) in code {
        let (items, body) = use_items(&strip_cfg_test(text));
        for (_, path) in items.iter().filter(|(public, _)| *public) {
            if let Some(to) = absolute(&module, path, &graph.files).filter(|p| !p.is_empty()) {
                let last = to[to.len() - 1].clone();
                reexports
                    .entry(module.clone())
                    .or_default()
                    .insert(last, to);
            }
        }
        let mut paths: Vec<String> = items.into_iter().map(|(_, p)| p).collect();
        paths.extend(inline_paths(&body));
        uses.insert(module, paths);
    }
    for (module, paths) in uses {
        for path in paths {
            let target = absolute(&module, &path, &graph.files)
                .and_then(|to| resolve(&to, &graph.files, &reexports, 0))
                .filter(|t| *t != module && graph.modules.contains(t));
            if let Some(target) = target {
                edges.entry(module.clone()).or_default().insert(target);
            }
        }
    }
    graph.edges = edges;
    graph
}

/// Tarjan's walk of a graph: each file's index and low link once seen, the stack, the strongly
/// connected components found (each in order).
#[derive(Default)]
struct Tarjan<'g> {
    seen: BTreeMap<&'g Module, (usize, usize)>,
    stack: Vec<&'g Module>,
    components: Vec<Vec<Module>>,
}

impl<'g> Tarjan<'g> {
    fn strong(&mut self, edges: &'g BTreeMap<Module, BTreeSet<Module>>, v: &'g Module) {
        let n = self.seen.len();
        self.seen.insert(v, (n, n));
        self.stack.push(v);
        for w in edges.get(v).into_iter().flatten() {
            let low = match self.seen.get(w) {
                None => {
                    self.strong(edges, w);
                    self.seen[w].1
                }
                Some(&(index, _)) if self.stack.contains(&w) => index,
                Some(_) => continue,
            };
            let entry = self.seen.get_mut(v).unwrap();
            entry.1 = entry.1.min(low);
        }
        if self.seen[v].0 == self.seen[v].1 {
            let from = self.stack.iter().rposition(|m| *m == v).unwrap();
            let mut component: Vec<Module> = self.stack.drain(from..).cloned().collect();
            component.sort();
            self.components.push(component);
        }
    }
}

/// The circles of `graph`: its strongly connected components of more than one file, the
/// largest first.
fn circles(graph: &Graph) -> Vec<Vec<Module>> {
    let mut tarjan = Tarjan::default();
    for v in &graph.modules {
        if !tarjan.seen.contains_key(v) {
            tarjan.strong(&graph.edges, v);
        }
    }
    let mut found: Vec<Vec<Module>> = tarjan
        .components
        .into_iter()
        .filter(|c| c.len() > 1)
        .collect();
    found.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    found
}

/// A module as a reader names its file: `a/b`, or `lib` for the root.
fn name(module: &[String]) -> String {
    if module.is_empty() {
        "lib".to_owned()
    } else {
        module.join("/")
    }
}

/// What the test reports of a crate: its size, and each circle's files, their top folders and
/// the edges inside it.
fn describe(src: &str, graph: &Graph, found: &[Vec<Module>]) -> String {
    let edges: usize = graph.edges.values().map(BTreeSet::len).sum();
    let mut out = format!(
        "{src}: {} files, {edges} edges, {} circle(s)\n",
        graph.modules.len(),
        found.len()
    );
    for circle in found {
        let folder = |m: &Module| match m.first() {
            Some(top) if m.len() > 1 || graph.folders.contains(m) => top.clone(),
            _ => "(root)".to_owned(),
        };
        let tops: Vec<String> = circle
            .iter()
            .map(folder)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let names: BTreeSet<String> = circle.iter().map(|m| name(m)).collect();
        let names: Vec<String> = names.into_iter().collect();
        let (len, tops, names) = (circle.len(), tops.join(", "), names.join(" "));
        out += &format!("  [{len} files; folders: {tops}] {names}\n");
        for m in circle {
            let to: BTreeSet<String> = graph.edges[m]
                .iter()
                .filter(|t| circle.contains(t))
                .map(|t| name(t))
                .collect();
            let to: Vec<String> = to.into_iter().collect();
            out += &format!("      {} -> {}\n", name(m), to.join(", "));
        }
    }
    out
}

/// The workspace's members (the root `Cargo.toml`'s `[workspace] members`).
fn workspace_members(root: &Path) -> Vec<String> {
    let manifest: toml::Table = std::fs::read_to_string(root.join("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let members = manifest["workspace"]["members"].as_array().unwrap();
    members
        .iter()
        .map(|m| m.as_str().unwrap().to_owned())
        .inspect(|m| assert!(!m.contains('*'), "member glob {m:?}: list members by name"))
        .collect()
}

/// No crate of the workspace has two files that import each other, directly or round a longer
/// circle (docs/architecture.md#house-rules).
#[test]
fn no_crate_has_a_circle_of_imports_between_its_files() {
    let root = workspace_root();
    let members = workspace_members(&root);
    assert!(
        members.len() >= 9,
        "found only {members:?} in Cargo.toml's [workspace] members"
    );
    let mut report = String::new();
    for member in &members {
        let src = root.join(member).join("src");
        assert!(src.is_dir(), "{} is not a directory", src.display());
        let graph = analyse(&src);
        let found = circles(&graph);
        if !found.is_empty() {
            report += &describe(&format!("{member}/src"), &graph, &found);
        }
    }
    assert!(
        report.is_empty(),
        "circles of imports between files; the rule is in docs/architecture.md, section \
         \"House rules\": a type lives in the lowest file that needs it (move it down, or merge \
         the files that are one concept):\n{report}"
    );
}

/// The report of a crate made of `files` (path below `src`, text) as the test gives it.
fn report_of(files: &[(&str, &str)]) -> String {
    let dir = TempDir::new("tidy-imports").unwrap();
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let graph = analyse(dir.path());
    describe("src", &graph, &circles(&graph))
}

/// The report of a crate whose one edge (`a` -> `b`) goes one way.
const ONE_WAY: &str = "src: 2 files, 1 edges, 0 circle(s)\n";

/// `a.rs`, which names a type of `b.rs`.
const A: (&str, &str) = ("a.rs", "use crate::b::X;\npub struct Y;\n");

/// Two files that name each other (a `use`, an inline path) are a circle; the report names both
/// edges.
#[test]
fn a_two_file_circle_is_found() {
    let b = ("b.rs", "pub struct X;\nfn f() -> crate::a::Y { todo!() }\n");
    assert_eq!(
        report_of(&[("lib.rs", "mod a;\nmod b;\n"), A, b]),
        "src: 3 files, 2 edges, 1 circle(s)\n  [2 files; folders: (root)] a b\n      \
         a -> b\n      b -> a\n"
    );
}

/// An edge back in a `#[cfg(test)]` module, inline or in its own file, is not counted.
#[test]
fn test_code_is_left_out() {
    let b =
        "pub struct X;\n#[cfg(test)]\nmod tests {\n    use crate::a::Y;\n    fn f() { {} }\n}\n";
    assert_eq!(report_of(&[A, ("b.rs", b)]), ONE_WAY);
    let b = (
        "b.rs",
        "pub struct X;\n#[cfg(test)]\npub(crate) mod props;\n",
    );
    let props = ("b/props.rs", "use crate::a::Y;\n");
    assert_eq!(report_of(&[A, b, props]), ONE_WAY);
}

/// A path in a comment, a string, a raw string or next to a char literal is not code.
#[test]
fn comments_and_strings_are_not_code() {
    let b = concat!(
        "pub struct X; // crate::a::Y\n/* use crate::a::Y; /* nested */ crate::a::Y */\n",
        "const S: &str = \"crate::a::Y \\\" crate::a::Y\";\n",
        "const R: &str = r#\"crate::a::Y \" crate::a::Y\"#;\n",
        "const C: [char; 2] = ['\"', '\\''];\nfn f<'a>(x: &'a str) {}\n",
    );
    assert_eq!(report_of(&[A, ("b.rs", b)]), ONE_WAY);
    let stripped = strip_comments_and_strings(b);
    assert!(!stripped.contains("crate::a"), "{stripped}");
    assert!(stripped.contains("fn f<'a>(x: &'a str)"), "{stripped}");
}

/// A path through a `pub use` re-export leads to the file that defines the item: `a` names
/// `c::Z`, which is `b`'s.
#[test]
fn a_reexport_is_followed() {
    let files = [
        ("lib.rs", "mod a;\nmod b;\nmod c;\n"),
        ("a.rs", "use crate::c::Z;\npub struct Y;\n"),
        ("c.rs", "pub use crate::b::Z;\n"),
        ("b.rs", "pub struct Z;\nfn f(_: super::a::Y) {}\n"),
    ];
    assert_eq!(
        report_of(&files),
        "src: 4 files, 3 edges, 1 circle(s)\n  [2 files; folders: (root)] a b\n      \
         a -> b\n      b -> a\n"
    );
}

/// `super::` in `x/y.rs` names `x`, whether its file is `x.rs` or `x/mod.rs`; `self::` in `x`
/// names `x/…`.
#[test]
fn super_and_self_resolve_to_the_parent_and_child_files() {
    let y = ("x/y.rs", "use super::P;\npub struct Q;\n");
    for (parent, folders) in [("x.rs", "(root), x"), ("x/mod.rs", "x")] {
        let x = (parent, "mod y;\npub struct P;\nfn f(_: self::y::Q) {}\n");
        assert_eq!(
            report_of(&[("lib.rs", "mod x;\n"), x, y]),
            format!(
                "src: 3 files, 2 edges, 1 circle(s)\n  [2 files; folders: {folders}] x x/y\n      \
                 x -> x/y\n      x/y -> x\n"
            )
        );
    }
}

/// A nested `use` group is expanded (aliases dropped, `self` the group's module).
#[test]
fn use_groups_are_expanded() {
    let tree = "crate::m::{p::{Q, R as Arr}, S,\n self}";
    let paths = [
        "crate::m::p::Q",
        "crate::m::p::R",
        "crate::m::S",
        "crate::m",
    ];
    assert_eq!(expand_use(tree), paths);
    let files = [
        ("a.rs", "use crate::m::{p::{Q, R}, S};\npub struct Y;\n"),
        ("m.rs", "pub mod p;\npub struct S;\n"),
        ("m/p.rs", "pub struct Q;\nfn f(_: crate::a::Y) {}\n"),
    ];
    assert_eq!(
        report_of(&files),
        "src: 3 files, 3 edges, 1 circle(s)\n  [2 files; folders: (root), m] a m/p\n      \
         a -> m/p\n      m/p -> a\n"
    );
}
