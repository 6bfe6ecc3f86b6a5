//! The files that differ between two in-process records of a work tree
//! ([`crate::snapshot::stat_scan`]): added, deleted, modified (content, executable bit, symlink
//! target, file type, an embedded repository's commit) and renamed, with git's line counts.
//!
//! A path whose metadata did not change is unchanged (unless it was racy: then its content is
//! compared). A path whose metadata changed is compared by content: with what the first record
//! kept, or with the index's blob when the index vouched for the file (its blob id computed
//! from the file, no repository read). Only then is old content fetched, for line counts and
//! only for files that did change: kept bytes, or the blob from the repository
//! (`git cat-file --batch`, one process, and only when such a file exists).
//!
//! Renames are paired as `git diff -M` pairs them: an identical file first, then the most
//! similar text at 50 % or more ([`crate::snapshot::line_diff::similarity`]), among at most
//! [`RENAME_PAIRS`] pairs.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use droid_contract::{ChangeType, FileChange};

use crate::snapshot::line_diff;
use crate::snapshot::path_map::{PathMap, path_hash};
use crate::snapshot::stat_scan::{
    KEEP_FILE_BYTES, Kept, Scan, Seen, Tracked, blob_id, blob_id_of_file, display, os_path,
    read_bounded,
};

/// Files larger than this get no line counts (reading both sides costs more than they tell).
const LINES_MAX_BYTES: u64 = 8 * 1024 * 1024;
/// Deleted × added pairs compared for a similar-content rename at most (git's `diff.renameLimit`
/// is per side; this bounds the product).
const RENAME_PAIRS: usize = 10_000;
/// The similarity at which a deleted and an added file are a rename (git's default).
const RENAME_SCORE: u8 = 50;
/// Blobs fetched from the repository for line counts, in bytes at most.
pub(crate) const BLOBS_MAX_BYTES: u64 = 32 * 1024 * 1024;

/// How a path changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Change {
    Added,
    Deleted,
    Modified,
}

/// What the first record holds of `path`: stored, or (a clean tracked file) in `extra`.
fn before_seen<'a>(before: &'a Scan, extra: &'a PathMap<Seen>, path: &[u8]) -> Option<&'a Seen> {
    before.seen.get(path).or_else(|| extra.get(path))
}

/// The paths that changed between `before` and `after` (records of `root`, `prefix` its place
/// in the work tree whose index is `tracked`), sorted, and what the first record held of the
/// clean tracked files among them (it stored nothing of those: the index says).
pub(crate) fn changed(
    root: &Path,
    before: &Scan,
    after: &Scan,
    (tracked, prefix): (&Tracked, &[u8]),
    warnings: &mut Vec<String>,
) -> (Vec<(Vec<u8>, Change)>, PathMap<Seen>) {
    let mut out = Vec::new();
    let mut extra = PathMap::default();
    let clean_before = |path: &[u8]| -> Option<Seen> {
        if before.clean.is_empty() {
            return None;
        }
        let top = [prefix, path].concat();
        let (pos, seen) = tracked.clean_seen(&top)?;
        (before.clean.get(usize::try_from(pos).ok()?) == Some(&true)).then_some(seen)
    };
    if !before.clean.is_empty() {
        for (top, pos) in tracked.positions() {
            let at = usize::try_from(pos).unwrap_or(usize::MAX);
            // clean before, and the later record found it still holding the index's blob (it
            // stored nothing of it): the common case, settled without a lookup by path
            if before.clean.get(at) != Some(&true) || after.clean.get(at) == Some(&true) {
                continue;
            }
            let Some(path) = top.strip_prefix(prefix) else {
                continue;
            };
            let change = match after.seen.get(path) {
                None if after.unchanged.contains(&path_hash(path)) => None,
                None => Some(Change::Deleted),
                Some(a) => {
                    let b = tracked.clean_seen(top).map(|(_, s)| s);
                    b.filter(|b| differs(root, before, path, b, a, warnings))
                        .map(|_| Change::Modified)
                }
            };
            if let Some(change) = change
                && let Some((_, seen)) = tracked.clean_seen(top)
            {
                extra.insert(path.to_vec(), seen);
                out.push((path.to_vec(), change));
            }
        }
    }
    for (path, b) in &before.seen {
        match after.seen.get(path) {
            // the later record found it as the earlier one did
            None if after.unchanged.contains(&path_hash(path)) => {}
            None => out.push((path.clone(), Change::Deleted)),
            Some(a) => {
                if differs(root, before, path, b, a, warnings) {
                    out.push((path.clone(), Change::Modified));
                }
            }
        }
    }
    for path in after.seen.keys() {
        if !before.seen.contains_key(path)
            && !extra.contains_key(path)
            && clean_before(path).is_none()
        {
            out.push((path.clone(), Change::Added));
        }
    }
    // what changed without its earlier content: no line counts, and said so
    let mut unread: Vec<Vec<u8>> = out
        .iter()
        .filter(|(p, c)| *c != Change::Added && before.unread(p))
        .map(|(p, _)| p.clone())
        .collect();
    if !unread.is_empty() {
        warnings.push(unread_warning(&mut unread));
    }
    out.sort();
    (out, extra)
}

/// At most this many paths are named by a warning about many files.
const NAMED: usize = 10;

/// The warning for files changed before their earlier content was read.
fn unread_warning(paths: &mut [Vec<u8>]) -> String {
    paths.sort();
    let named: Vec<String> = paths.iter().take(NAMED).map(|p| display(p)).collect();
    let more = paths.len().saturating_sub(NAMED);
    format!(
        "{} file(s) changed before their content from before the run was read (that is read \
         while the agent starts, and the agent changed them first): compared by size and times \
         only (a mere touch counts as modified), no line counts: {}{}",
        paths.len(),
        named.join(", "),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    )
}

fn differs(
    root: &Path,
    before: &Scan,
    path: &[u8],
    b: &Seen,
    a: &Seen,
    warnings: &mut Vec<String>,
) -> bool {
    match (b, a) {
        (
            Seen::File {
                stat: sb,
                clean_blob,
            },
            Seen::File { stat: sa, .. },
        ) => {
            if b.executable() != a.executable() {
                return true;
            }
            if sb == sa && !before.racy.contains_key(path) {
                return false;
            }
            if sb.size != sa.size {
                return true;
            }
            let abs = root.join(os_path(path));
            match before.kept(path) {
                Some(Kept::Bytes(old)) => {
                    read_bounded(&abs, KEEP_FILE_BYTES).is_none_or(|now| now != *old)
                }
                Some(Kept::Blob(id)) => blob_id_of_file(&abs) != Some(*id),
                None => match clean_blob {
                    Some(id) => blob_id_of_file(&abs) != Some(*id),
                    // racy, the budgets spent: the metadata is all there is, and it is the same
                    None if sb == sa => false,
                    // changed before its content was read: named by `changed`
                    None if before.unread(path) => true,
                    None => {
                        warnings.push(format!(
                            "{} was compared by size and times only (too large to keep \
                             before the run): a mere touch counts as modified",
                            display(path)
                        ));
                        true
                    }
                },
            }
        }
        (Seen::Symlink { target: tb, .. }, Seen::Symlink { target: ta, .. }) => tb != ta,
        (Seen::Gitlink { head: hb }, Seen::Gitlink { head: ha }) => hb != ha,
        _ => true,
    }
}

/// The blob ids whose content the line counts need from the repository: clean tracked files
/// that changed or went away, of which nothing was kept.
pub(crate) fn blobs_needed(
    before: &Scan,
    extra: &PathMap<Seen>,
    changes: &[(Vec<u8>, Change)],
) -> Vec<[u8; 20]> {
    let mut out = Vec::new();
    for (path, change) in changes {
        if *change == Change::Added || before.kept(path).is_some() {
            continue;
        }
        if let Some(Seen::File {
            clean_blob: Some(id),
            stat,
        }) = before_seen(before, extra, path)
            && stat.size <= LINES_MAX_BYTES
        {
            out.push(*id);
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// What a side of a change held, for line counts: `None` when unknown or too large.
fn old_content<'a>(
    before: &'a Scan,
    extra: &'a PathMap<Seen>,
    path: &[u8],
    blobs: &'a HashMap<[u8; 20], Vec<u8>>,
) -> Option<std::borrow::Cow<'a, [u8]>> {
    match before_seen(before, extra, path)? {
        Seen::File { clean_blob, .. } => match before.kept(path) {
            Some(Kept::Bytes(b)) => Some(b.as_slice().into()),
            Some(Kept::Blob(_)) => None,
            None => clean_blob
                .and_then(|id| blobs.get(&id))
                .map(|b| b.as_slice().into()),
        },
        Seen::Symlink { target, .. } => Some(target.as_slice().into()),
        Seen::Gitlink { head } => Some(subproject(head.as_deref()).into()),
    }
}

fn new_content<'a>(
    root: &Path,
    after: &'a Scan,
    path: &[u8],
) -> Option<std::borrow::Cow<'a, [u8]>> {
    match after.seen.get(path)? {
        Seen::File { stat, .. } => {
            if stat.size > LINES_MAX_BYTES {
                return None;
            }
            read_bounded(&root.join(os_path(path)), LINES_MAX_BYTES).map(Into::into)
        }
        Seen::Symlink { target, .. } => Some(target.as_slice().into()),
        Seen::Gitlink { head } => Some(subproject(head.as_deref()).into()),
    }
}

/// The text git diffs for an embedded repository's commit.
fn subproject(head: Option<&str>) -> Vec<u8> {
    head.map_or_else(Vec::new, |h| {
        format!("Subproject commit {h}\n").into_bytes()
    })
}

/// The blob id of what a deleted file held, when known without reading the repository.
fn old_id(before: &Scan, extra: &PathMap<Seen>, path: &[u8]) -> Option<[u8; 20]> {
    match before_seen(before, extra, path)? {
        Seen::File { clean_blob, .. } => match before.kept(path) {
            Some(Kept::Bytes(b)) => Some(blob_id(b)),
            Some(Kept::Blob(id)) => Some(*id),
            None => *clean_blob,
        },
        _ => None,
    }
}

fn counts(old: Option<&[u8]>, new: Option<&[u8]>) -> (Option<u64>, Option<u64>) {
    match (old, new) {
        (Some(o), Some(n)) => {
            line_diff::line_counts(o, n).map_or((None, None), |(a, r)| (Some(a), Some(r)))
        }
        _ => (None, None),
    }
}

/// The result's entries for `changes`, renames paired, sorted by path.
pub(crate) fn assemble(
    root: &Path,
    before: &Scan,
    after: &Scan,
    extra: &PathMap<Seen>,
    changes: &[(Vec<u8>, Change)],
    blobs: &HashMap<[u8; 20], Vec<u8>>,
) -> Vec<FileChange> {
    let is_file = |scan: &Scan, p: &[u8]| matches!(scan.seen.get(p), Some(Seen::File { .. }));
    let deleted: Vec<&[u8]> = changes
        .iter()
        .filter(|(p, c)| {
            *c == Change::Deleted
                && matches!(before_seen(before, extra, p), Some(Seen::File { .. }))
        })
        .map(|(p, _)| p.as_slice())
        .collect();
    let added: Vec<&[u8]> = changes
        .iter()
        .filter(|(p, c)| *c == Change::Added && is_file(after, p))
        .map(|(p, _)| p.as_slice())
        .collect();
    let mut renamed: HashMap<&[u8], &[u8]> = HashMap::new(); // new → old
    let mut paired_old: HashSet<&[u8]> = HashSet::new();
    let mut new_cache: HashMap<&[u8], Option<Vec<u8>>> = HashMap::new();
    if !deleted.is_empty() && !added.is_empty() {
        // identical content first
        let mut by_id: HashMap<[u8; 20], Vec<&[u8]>> = HashMap::new();
        for d in &deleted {
            if let Some(id) = old_id(before, extra, d) {
                by_id.entry(id).or_default().push(d);
            }
        }
        for a in &added {
            let abs = root.join(os_path(a));
            if let Some(id) = blob_id_of_file(&abs)
                && let Some(olds) = by_id.get_mut(&id)
                && let Some(old) = olds.pop()
            {
                renamed.insert(a, old);
                paired_old.insert(old);
            }
        }
        // then the most similar text
        let left_d: Vec<&[u8]> = deleted
            .iter()
            .copied()
            .filter(|d| !paired_old.contains(d))
            .collect();
        let left_a: Vec<&[u8]> = added
            .iter()
            .copied()
            .filter(|a| !renamed.contains_key(a))
            .collect();
        if !left_d.is_empty()
            && !left_a.is_empty()
            && left_d.len().saturating_mul(left_a.len()) <= RENAME_PAIRS
        {
            let mut scores = Vec::new();
            for d in &left_d {
                let Some(old) = old_content(before, extra, d, blobs) else {
                    continue;
                };
                for a in &left_a {
                    let new = new_cache.entry(a).or_insert_with(|| {
                        new_content(root, after, a).map(std::borrow::Cow::into_owned)
                    });
                    if let Some(new) = new {
                        let s = line_diff::similarity(&old, new);
                        if s >= RENAME_SCORE {
                            scores.push((s, *d, *a));
                        }
                    }
                }
            }
            scores.sort_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(y.1)).then(x.2.cmp(y.2)));
            for (_, d, a) in scores {
                if !paired_old.contains(d) && !renamed.contains_key(a) {
                    renamed.insert(a, d);
                    paired_old.insert(d);
                }
            }
        }
    }
    let mut out = Vec::with_capacity(changes.len());
    for (path, change) in changes {
        let p = path.as_slice();
        if *change == Change::Deleted && paired_old.contains(p) {
            continue;
        }
        let old_path = renamed.get(p).copied();
        let change_type = match (change, old_path) {
            (Change::Added, Some(_)) => ChangeType::Renamed,
            (Change::Added, None) => ChangeType::Added,
            (Change::Deleted, _) => ChangeType::Deleted,
            (Change::Modified, _) => ChangeType::Modified,
        };
        let new = match change {
            Change::Deleted => Some(std::borrow::Cow::Borrowed(&[][..])),
            _ => match new_cache.remove(p) {
                Some(cached) => cached.map(std::borrow::Cow::Owned),
                None => new_content(root, after, p),
            },
        };
        let old = match (change, old_path) {
            (Change::Added, None) => Some(std::borrow::Cow::Borrowed(&[][..])),
            (Change::Added, Some(o)) => old_content(before, extra, o, blobs),
            _ => old_content(before, extra, p, blobs),
        };
        let (lines_added, lines_removed) = counts(old.as_deref(), new.as_deref());
        out.push(FileChange {
            path: display(p),
            change_type,
            old_path: old_path.map(display),
            highlights: Vec::new(),
            lines_added,
            lines_removed,
        });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}
