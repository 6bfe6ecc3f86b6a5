//! `git diff-tree --raw --numstat` output (and `--name-status`) parsed into [`FileChange`]s:
//! renames with their old path, line counts where git gives them.

use std::collections::HashMap;

use droid_contract::{ChangeType, FileChange};

/// The files of `git diff-tree -z -r -M --raw --numstat` output, with their line counts; `None`
/// when the output is not of that shape (the worktree's `files_changed`, measured between two
/// commits).
pub(crate) fn parse_diff_tree(out: &[u8]) -> Option<Vec<FileChange>> {
    let (name_status, numstat) = parse_raw(out)?;
    let statuses = parse_name_status(&name_status)?;
    let mut counts = parse_numstat(numstat)?;
    Some(
        statuses
            .into_iter()
            .map(|entry| {
                let (lines_added, lines_removed) =
                    counts.remove(&entry.path).unwrap_or((None, None));
                FileChange {
                    path: String::from_utf8_lossy(&entry.path).into_owned(),
                    change_type: entry.change_type,
                    old_path: entry
                        .old_path
                        .map(|p| String::from_utf8_lossy(&p).into_owned()),
                    highlights: Vec::new(),
                    lines_added,
                    lines_removed,
                }
            })
            .collect(),
    )
}

/// Split `git diff-tree -z --raw --numstat` output: the raw records (`:<modes> <ids> <status>\0
/// path\0`, a second path for renames and copies) rewritten as `--name-status` records, and the
/// numstat part that follows them. `None` when a raw record is cut short.
pub(super) fn parse_raw(out: &[u8]) -> Option<(Vec<u8>, &[u8])> {
    let mut name_status = Vec::new();
    let mut rest = out;
    while rest.first() == Some(&b':') {
        let end = rest.iter().position(|b| *b == 0)?;
        let meta = &rest[..end];
        let status = meta.rsplit(|b| *b == b' ').next()?;
        let paths = match status.first() {
            Some(b'R' | b'C') => 2,
            Some(_) => 1,
            None => return None,
        };
        name_status.extend_from_slice(status);
        name_status.push(0);
        rest = &rest[end + 1..];
        for _ in 0..paths {
            let end = rest.iter().position(|b| *b == 0)?;
            name_status.extend_from_slice(&rest[..=end]);
            rest = &rest[end + 1..];
        }
    }
    Some((name_status, rest))
}

/// One `--name-status` record.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct StatusEntry {
    pub(super) change_type: ChangeType,
    pub(super) path: Vec<u8>,
    pub(super) old_path: Option<Vec<u8>>,
}

/// Parse `git diff-tree -z --name-status`: `X\0path\0`, or `R<score>\0old\0new\0` for renames
/// (and copies). `None` when the output does not have that shape.
pub(super) fn parse_name_status(out: &[u8]) -> Option<Vec<StatusEntry>> {
    let mut fields = out.split(|b| *b == 0);
    let mut entries = Vec::new();
    while let Some(status) = fields.next() {
        let Some(&letter) = status.first() else {
            // the empty field after the final NUL (or empty output) must be the last one
            return fields.next().is_none().then_some(entries);
        };
        let entry = match letter {
            b'R' => {
                let old = path_field(&mut fields)?.to_vec();
                StatusEntry {
                    change_type: ChangeType::Renamed,
                    path: path_field(&mut fields)?.to_vec(),
                    old_path: Some(old),
                }
            }
            b'C' => {
                // a copy leaves its source alone: for this file it is new
                let _source = path_field(&mut fields)?;
                StatusEntry {
                    change_type: ChangeType::Added,
                    path: path_field(&mut fields)?.to_vec(),
                    old_path: None,
                }
            }
            other => {
                let change_type = match other {
                    b'A' => ChangeType::Added,
                    b'D' => ChangeType::Deleted,
                    // M: content or mode; T: type (file ↔ symlink ↔ submodule); anything
                    // newer git invents is at least a change
                    _ => ChangeType::Modified,
                };
                StatusEntry {
                    change_type,
                    path: path_field(&mut fields)?.to_vec(),
                    old_path: None,
                }
            }
        };
        entries.push(entry);
    }
    Some(entries)
}

/// The next NUL-separated field, which must be a (never empty) path.
fn path_field<'a>(fields: &mut impl Iterator<Item = &'a [u8]>) -> Option<&'a [u8]> {
    fields.next().filter(|f| !f.is_empty())
}

/// Lines added and removed, `None` for binary files.
type LineCounts = (Option<u64>, Option<u64>);

/// Parse `git diff-tree -z --numstat`: `added\tremoved\tpath\0`, or `added\tremoved\t\0old\0new\0`
/// for renames; `-` counts (binary files) become `None`. Keyed by the (new) path.
pub(super) fn parse_numstat(out: &[u8]) -> Option<HashMap<Vec<u8>, LineCounts>> {
    let mut fields = out.split(|b| *b == 0);
    let mut counts = HashMap::new();
    while let Some(field) = fields.next() {
        if field.is_empty() {
            // the empty field after the final NUL (or empty output) must be the last one
            return fields.next().is_none().then_some(counts);
        }
        let mut parts = field.splitn(3, |b| *b == b'\t');
        let added = parse_count(parts.next()?)?;
        let removed = parse_count(parts.next()?)?;
        let path = parts.next()?;
        let path = if path.is_empty() {
            let _old = path_field(&mut fields)?;
            path_field(&mut fields)?
        } else {
            path
        };
        counts.insert(path.to_vec(), (added, removed));
    }
    Some(counts)
}

/// `Some(None)` for git's `-` (binary), `Some(Some(n))` for a number, `None` for anything else.
fn parse_count(field: &[u8]) -> Option<Option<u64>> {
    if field == b"-" {
        return Some(None);
    }
    std::str::from_utf8(field).ok()?.parse().ok().map(Some)
}
