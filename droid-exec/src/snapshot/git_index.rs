//! A reader for git's index file (`.git/index`), after git's `gitformat-index.txt`
//! and `read-cache.c`.
//!
//! Supported: versions 2, 3 and 4 (v4 prefix-compressed paths included), stages 0-3,
//! the skip-worktree and intent-to-add flags, and optional extensions (signature
//! starting with `A`..=`Z`: `TREE`, `REUC`, `UNTR`, `IEOT`, ...), which are skipped
//! (`EOIE` is checked against the end of the entries).
//!
//! Refused with [`Unsupported`], so that the caller falls back to running git: other
//! versions; required extensions (lowercase: `link` is a split index whose entries
//! live partly in `sharedindex.*`, `sdir` a sparse index with entries for whole
//! directories); sparse directory entries; modes other than file, executable, symlink
//! and gitlink; extended flags git does not know, or in a version 2 index; and data
//! that does not add up (truncation, a wrong entry count, unsorted entries, ...).
//!
//! SHA-1 only: the index does not name its hash, so the caller must check
//! `extensions.objectFormat`. The trailing checksum is not verified (that would hash
//! the whole file), so a file cut right after its entries or one of its extensions,
//! plus 20 bytes, cannot be told from a valid one.

use std::fmt;

/// Length of an object id and of the trailing checksum (SHA-1).
const OID_LEN: usize = 20;
/// Length of an entry without extended flags and path: 10 × 32 bits, oid, 16-bit flags.
const ENTRY_FIXED_LEN: usize = 40 + OID_LEN + 2;
/// Flags bit: "assume valid" (`git update-index --assume-unchanged`).
const FLAG_VALID: u16 = 0x8000;
/// Flags bit: a second 16-bit flags field follows (version 3 and later).
const FLAG_EXTENDED: u16 = 0x4000;
/// Flags bits holding the path length; the mask itself means "0xFFF or more".
const NAME_MASK: u16 = 0x0FFF;
/// Extended flags bit: skip-worktree.
const EXT_SKIP_WORKTREE: u16 = 0x4000;
/// Extended flags bit: intent-to-add.
const EXT_INTENT_TO_ADD: u16 = 0x2000;
/// Mode of a sparse directory entry.
const MODE_DIRECTORY: u32 = 0o040_000;
/// Bound on the ratio of all (v4-decompressed) path bytes to the file size.
const PATH_EXPANSION_LIMIT: usize = 64;

/// One stage-0..3 entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IndexEntry {
    /// The path as stored, `/`-separated, relative to the top of the work tree.
    pub(crate) path: Vec<u8>,
    /// 0o100644, 0o100755, 0o120000 (symlink) or 0o160000 (gitlink).
    pub(crate) mode: u32,
    /// The object id (SHA-1).
    pub(crate) oid: [u8; 20],
    /// 0 normally, 1-3 during a merge conflict.
    pub(crate) stage: u8,
    /// The cached stat data.
    pub(crate) stat: IndexStat,
    /// Extended flag (v3+): added with `git add -N`.
    pub(crate) intent_to_add: bool,
    /// Extended flag (v3+): the work tree file is not looked at.
    pub(crate) skip_worktree: bool,
    /// Flag: git assumes the work tree file unchanged (`--assume-unchanged`).
    pub(crate) assume_unchanged: bool,
}

/// The stat data cached in an entry, all as stored (32 bits, truncated by git).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IndexStat {
    /// Change time as (seconds, nanoseconds).
    pub(crate) ctime: (u32, u32),
    /// Modification time as (seconds, nanoseconds).
    pub(crate) mtime: (u32, u32),
    /// Device number.
    pub(crate) dev: u32,
    /// Inode number.
    pub(crate) ino: u32,
    /// Owner's user id.
    pub(crate) uid: u32,
    /// Owner's group id.
    pub(crate) gid: u32,
    /// File size in bytes.
    pub(crate) size: u32,
}

/// A parsed index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Index {
    /// The format version: 2, 3 or 4.
    pub(crate) version: u32,
    /// The entries, in file order (sorted by path, then stage).
    pub(crate) entries: Vec<IndexEntry>,
}

/// Why an index cannot be used by this parser (the caller then falls back to running git).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unsupported {
    /// The file does not start with `DIRC`.
    BadSignature,
    /// The version is not 2, 3 or 4.
    Version(u32),
    /// An entry of a version 2 index has the extended flag set.
    ExtendedFlagInVersion2,
    /// An entry has extended flag bits git does not define (the whole field).
    UnknownExtendedFlags(u16),
    /// An entry has a mode that is not file, executable, symlink or gitlink.
    Mode(u32),
    /// An entry is a sparse directory (sparse index).
    SparseDirectory,
    /// The index has a required extension (lowercase signature), e.g. `link` or `sdir`.
    Extension([u8; 4]),
    /// The v4-compressed paths expand to more than [`PATH_EXPANSION_LIMIT`] times the file.
    PathsTooLong,
    /// The data is truncated or inconsistent.
    Corrupt(String),
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadSignature => f.write_str("the file is not a git index (no `DIRC` signature)"),
            Self::Version(v) => write!(f, "the index has unsupported version {v}"),
            Self::ExtendedFlagInVersion2 => f.write_str("a version 2 index has extended flags"),
            Self::UnknownExtendedFlags(x) => write!(f, "the index has unknown flags {x:#06x}"),
            Self::Mode(mode) => write!(f, "the index has an entry with mode {mode:06o}"),
            Self::SparseDirectory => f.write_str("the index is a sparse index (directory entry)"),
            Self::Extension(sig) => {
                let what = match sig {
                    b"link" => "a split index",
                    b"sdir" => "a sparse index",
                    _ => "in an unknown format",
                };
                let sig = sig.escape_ascii();
                write!(f, "the index is {what} (extension `{sig}`)")
            }
            Self::PathsTooLong => f.write_str("the index's paths expand to an implausible size"),
            Self::Corrupt(what) => write!(f, "the index is corrupt: {what}"),
        }
    }
}

impl std::error::Error for Unsupported {}

/// Builds an [`Unsupported::Corrupt`] for a problem found at a byte offset.
fn corrupt_at(offset: usize, problem: &str) -> Unsupported {
    Unsupported::Corrupt(format!("{problem} at offset {offset}"))
}

/// A cursor over the index bytes that reports running off the end as corruption.
struct Reader<'a> {
    /// The bytes that may be read.
    bytes: &'a [u8],
    /// Offset of the next byte to read; never more than `bytes.len()`.
    pos: usize,
}

impl<'a> Reader<'a> {
    /// The bytes not read yet.
    fn rest(&self) -> &'a [u8] {
        self.bytes.get(self.pos..).unwrap_or_default()
    }

    /// The error for `what` running past the end of the data.
    fn eof(&self, what: &str) -> Unsupported {
        corrupt_at(self.pos, &format!("truncated {what}"))
    }

    /// Reads `n` bytes.
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], Unsupported> {
        let head = self.rest().get(..n).ok_or_else(|| self.eof(what))?;
        self.pos = self.pos.saturating_add(n);
        Ok(head)
    }

    /// Reads `N` bytes as an array.
    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], Unsupported> {
        let head = self.rest().first_chunk().ok_or_else(|| self.eof(what))?;
        self.pos = self.pos.saturating_add(N);
        Ok(*head)
    }

    /// Reads a big-endian 32-bit number.
    fn u32(&mut self, what: &str) -> Result<u32, Unsupported> {
        self.array(what).map(u32::from_be_bytes)
    }

    /// Reads bytes up to a NUL, consuming the NUL too but not returning it.
    fn until_nul(&mut self, what: &str) -> Result<&'a [u8], Unsupported> {
        let nul = self.rest().iter().position(|&b| b == 0);
        let bytes = self.take(nul.unwrap_or(usize::MAX), what)?; // no NUL: past the end
        self.take(1, what)?;
        Ok(bytes)
    }

    /// Reads one of git's offset varints (`decode_varint` in git's `varint.c`).
    fn varint(&mut self) -> Result<usize, Unsupported> {
        let [mut byte] = self.array("path prefix length")?;
        let mut value = usize::from(byte & 0x7f);
        while byte & 0x80 != 0 {
            [byte] = self.array("path prefix length")?;
            let next = value.checked_add(1).and_then(|v| v.checked_mul(0x80));
            value = next.ok_or_else(|| corrupt_at(self.pos, "overflowing varint"))?;
            value |= usize::from(byte & 0x7f);
        }
        Ok(value)
    }
}

/// Parses a whole index file.
pub(crate) fn parse(bytes: &[u8]) -> Result<Index, Unsupported> {
    parse_with_tree(bytes).map(|(index, _)| index)
}

/// Parses a whole index file, and the root of its cache tree (`TREE` extension) when that is
/// valid and covers every entry: the tree `git write-tree` would write from this index, without
/// hashing anything (used to prove a work tree is HEAD's, `crate::worktree::clean`).
pub(crate) fn parse_with_tree(bytes: &[u8]) -> Result<(Index, Option<[u8; 20]>), Unsupported> {
    // The checksum is not read, only kept out of the way.
    let bytes = bytes
        .get(..bytes.len().saturating_sub(OID_LEN))
        .unwrap_or_default();
    let mut reader = Reader { bytes, pos: 0 };
    if reader.array("signature")? != *b"DIRC" {
        return Err(Unsupported::BadSignature);
    }
    let version = reader.u32("header")?;
    if !(2..=4).contains(&version) {
        return Err(Unsupported::Version(version));
    }
    let count = usize::try_from(reader.u32("header")?)
        .map_err(|_| corrupt_at(8, "entry count too large"))?;
    let mut entries: Vec<IndexEntry> = Vec::with_capacity(count.min(bytes.len() / ENTRY_FIXED_LEN));
    let path_budget = bytes.len().saturating_mul(PATH_EXPANSION_LIMIT);
    let mut path_bytes = 0_usize;
    for _ in 0..count {
        let previous = entries.last().map_or(&[][..], |e| e.path.as_slice());
        let entry = parse_entry(&mut reader, version, previous)?;
        path_bytes = path_bytes.saturating_add(entry.path.len());
        if path_bytes > path_budget {
            return Err(Unsupported::PathsTooLong);
        }
        entries.push(entry);
    }
    let entries_end = reader.pos;
    let mut tree = None;

    while !reader.rest().is_empty() {
        let signature = reader.array::<4>("extension header")?;
        if !signature.iter().all(u8::is_ascii_alphanumeric) {
            return Err(corrupt_at(reader.pos, "bad extension signature"));
        }
        if !signature.first().is_some_and(u8::is_ascii_uppercase) {
            return Err(Unsupported::Extension(signature));
        }
        let size = usize::try_from(reader.u32("extension header")?)
            .map_err(|_| corrupt_at(reader.pos, "extension too large"))?;
        let data = reader.take(size, "extension")?;
        // The end-of-index-entries extension: the entries' end offset, then a hash.
        let eoie_offset = data.first_chunk().map(|o| u32::from_be_bytes(*o));
        let eoie_ok = data.len() == 4 + OID_LEN
            && eoie_offset.and_then(|o| usize::try_from(o).ok()) == Some(entries_end);
        if &signature == b"EOIE" && !eoie_ok {
            return Err(corrupt_at(entries_end, "entries do not end as `EOIE` says"));
        }
        if &signature == b"TREE" {
            tree = cache_tree_root(data, entries.len());
        }
    }
    // Checked only now, so that a split index (`link`), whose entries may have empty
    // paths, is reported as such.
    for pair in entries.windows(2) {
        if let [previous, next] = pair {
            check_order(previous, next)?;
        }
    }
    if entries.iter().any(|entry| entry.path.is_empty()) {
        return Err(Unsupported::Corrupt("empty path".to_owned()));
    }
    Ok((Index { version, entries }, tree))
}

/// The root entry of a `TREE` extension (`\0<entry count> <subtrees>\n<oid>`), when it is
/// valid (its count not -1) and covers all `entries` of the index.
fn cache_tree_root(data: &[u8], entries: usize) -> Option<[u8; 20]> {
    let rest = data.strip_prefix(b"\0")?;
    let space = rest.iter().position(|&b| b == b' ')?;
    let count: i64 = std::str::from_utf8(rest.get(..space)?).ok()?.parse().ok()?;
    let newline = rest.iter().position(|&b| b == b'\n')?;
    if usize::try_from(count).ok()? != entries {
        return None;
    }
    rest.get(newline + 1..)?.first_chunk().copied()
}

/// Parses the entry at the reader's position; `prev` is the previous entry's path (v4).
fn parse_entry(
    reader: &mut Reader<'_>,
    version: u32,
    prev: &[u8],
) -> Result<IndexEntry, Unsupported> {
    let (start, e) = (reader.pos, "index entry");
    let ctime = (reader.u32(e)?, reader.u32(e)?);
    let mtime = (reader.u32(e)?, reader.u32(e)?);
    let (dev, ino, mode) = (reader.u32(e)?, reader.u32(e)?, reader.u32(e)?);
    let (uid, gid, size) = (reader.u32(e)?, reader.u32(e)?, reader.u32(e)?);
    let (oid, flags) = (reader.array(e)?, u16::from_be_bytes(reader.array(e)?));
    let extended = match (flags & FLAG_EXTENDED != 0, version) {
        (false, _) => 0,
        (true, 2) => return Err(Unsupported::ExtendedFlagInVersion2),
        (true, _) => u16::from_be_bytes(reader.array(e)?),
    };
    if extended & !(EXT_SKIP_WORKTREE | EXT_INTENT_TO_ADD) != 0 {
        return Err(Unsupported::UnknownExtendedFlags(extended));
    }

    let path = if version == 4 {
        let strip = reader.varint()?;
        let keep = prev
            .len()
            .checked_sub(strip)
            .and_then(|keep| prev.get(..keep));
        let keep = keep.ok_or_else(|| corrupt_at(start, "path strips too much"))?;
        [keep, reader.until_nul("path")?].concat()
    } else {
        let path = reader.until_nul("path")?.to_vec();
        // 1-8 NULs (the terminator included) pad the entry to a multiple of 8 bytes.
        let padding = reader.pos.saturating_sub(start).wrapping_neg() & 7;
        if reader.take(padding, "padding")?.iter().any(|&b| b != 0) {
            return Err(corrupt_at(start, "nonzero padding"));
        }
        path
    };
    let name_len = usize::from(flags & NAME_MASK);
    if path.len() != name_len && (name_len < usize::from(NAME_MASK) || path.len() < name_len) {
        return Err(corrupt_at(start, "wrong path length"));
    }

    let skip_worktree = extended & EXT_SKIP_WORKTREE != 0;
    match mode {
        0o100_644 | 0o100_755 | 0o120_000 | 0o160_000 => {}
        MODE_DIRECTORY if skip_worktree => return Err(Unsupported::SparseDirectory),
        other => return Err(Unsupported::Mode(other)),
    }
    let [high, _] = flags.to_be_bytes();
    Ok(IndexEntry {
        path,
        mode,
        oid,
        stage: (high >> 4) & 3,
        stat: IndexStat {
            ctime,
            mtime,
            dev,
            ino,
            uid,
            gid,
            size,
        },
        intent_to_add: extended & EXT_INTENT_TO_ADD != 0,
        skip_worktree,
        assume_unchanged: flags & FLAG_VALID != 0,
    })
}

/// Checks the order git requires (`check_ce_order` in `read-cache.c`): paths never
/// decrease, and a path repeats only as conflict stages in increasing order.
fn check_order(previous: &IndexEntry, next: &IndexEntry) -> Result<(), Unsupported> {
    let sorted = match previous.path.cmp(&next.path) {
        std::cmp::Ordering::Less => true,
        std::cmp::Ordering::Equal => previous.stage != 0 && previous.stage <= next.stage,
        std::cmp::Ordering::Greater => false,
    };
    if sorted {
        return Ok(());
    }
    let message = format!("entries out of order at `{}`", next.path.escape_ascii());
    Err(Unsupported::Corrupt(message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::{ffi::OsStrExt, fs::MetadataExt, fs::PermissionsExt};
    use std::{fs, path::PathBuf, process::Command, process::Output};

    /// A temporary directory holding `HOME` and a git repository in `repo/`; removed on drop.
    struct Repo {
        top: PathBuf,
        work: PathBuf,
    }

    impl Repo {
        fn new(name: &str) -> Self {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            let unique = format!("{name}-{}-{}", std::process::id(), now.unwrap().as_nanos());
            let top = std::env::temp_dir().join(format!("git-index-test-{unique}"));
            let work = top.join("repo");
            fs::create_dir_all(&work).unwrap();
            let repo = Self { top, work };
            repo.git(&["init", "-q"]);
            repo
        }

        #[allow(clippy::disallowed_methods)] // the test's own git, checking the parser against it
        fn run(&self, args: &[&str]) -> Output {
            let mut cmd = Command::new("git");
            cmd.current_dir(&self.work)
                .env_clear()
                .env("HOME", &self.top);
            cmd.env("PATH", std::env::var_os("PATH").unwrap_or_default());
            cmd.env("GIT_CONFIG_NOSYSTEM", "1").env("LC_ALL", "C");
            let config = "core.hooksPath=/dev/null user.name=t user.email=t@example.com \
                init.defaultBranch=main commit.gpgSign=false core.autocrlf=false";
            for setting in config.split(' ') {
                cmd.args(["-c", setting]);
            }
            cmd.args(args).output().unwrap()
        }

        fn git(&self, args: &[&str]) -> Vec<u8> {
            let out = self.run(args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "git {args:?}: {stderr}");
            out.stdout
        }

        fn write(&self, path: &str, data: &str) {
            let path = self.work.join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, data).unwrap();
        }

        fn index_bytes(&self) -> Vec<u8> {
            fs::read(self.work.join(".git/index")).unwrap()
        }

        /// Parses the index and checks it against `git ls-files -s`.
        fn checked(&self) -> Index {
            let index = parse(&self.index_bytes()).unwrap();
            let listed = self.git(&["ls-files", "-s", "-z"]);
            let lines = listed.split(|&b| b == 0).filter(|line| !line.is_empty());
            let expected: Vec<_> = lines.map(String::from_utf8_lossy).collect();
            let line = |e: &IndexEntry| {
                let oid = e.oid.map(|b| format!("{b:02x}")).concat();
                let path = String::from_utf8_lossy(&e.path);
                format!("{:06o} {oid} {}\t{path}", e.mode, e.stage)
            };
            let actual: Vec<_> = index.entries.iter().map(line).collect();
            assert_eq!(actual, expected);
            index
        }

        /// Checks an entry's stat data against the file's metadata.
        fn assert_stat(&self, entry: &IndexEntry) {
            let path = self.work.join(std::ffi::OsStr::from_bytes(&entry.path));
            let meta = fs::symlink_metadata(path).unwrap();
            let low = |v: u64| u32::try_from(v & 0xFFFF_FFFF).unwrap();
            let time = |s: i64, ns: i64| (low(s.unsigned_abs()), low(ns.unsigned_abs()));
            let expected = IndexStat {
                ctime: time(meta.ctime(), meta.ctime_nsec()),
                mtime: time(meta.mtime(), meta.mtime_nsec()),
                dev: low(meta.dev()),
                ino: low(meta.ino()),
                uid: meta.uid(),
                gid: meta.gid(),
                size: low(meta.size()),
            };
            assert_eq!(entry.stat, expected, "{}", entry.path.escape_ascii());
        }
    }

    impl Drop for Repo {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.top);
        }
    }

    #[test]
    fn real_indexes_of_every_version() {
        let repo = Repo::new("versions");
        let names: Vec<_> = "plain|with space|ünïcödé ✓|new\nline|exec|d/sub/f"
            .split('|')
            .collect();
        for name in &names {
            repo.write(name, name);
        }
        let executable = fs::Permissions::from_mode(0o755);
        fs::set_permissions(repo.work.join("exec"), executable).unwrap();
        std::os::unix::fs::symlink("plain", repo.work.join("link")).unwrap();
        repo.git(&["add", "-A"]);
        // A path longer than 0xFFF bytes: too long for the file system, so added by oid.
        let long = format!("{}/", "d".repeat(200)).repeat(21);
        let blob = String::from_utf8(repo.git(&["hash-object", "-w", "plain"])).unwrap();
        let long_info = format!("100644,{},{long}file", blob.trim());
        let gitlink_info = format!("160000,{},sub", blob.trim());
        let cacheinfo = ["--cacheinfo", &long_info, "--cacheinfo", &gitlink_info];
        repo.git(&[&["update-index", "--add"][..], &cacheinfo].concat());
        repo.git(&["commit", "-qm", "one"]); // adds a `TREE` extension
        for version in [2, 3, 4] {
            repo.git(&["update-index", "--index-version", &version.to_string()]);
            let index = repo.checked();
            // git demotes version 3 to 2 when no entry has extended flags.
            assert_eq!(index.version, if version == 3 { 2 } else { version });
            let entry = |path: &str| index.entries.iter().find(|e| e.path == path.as_bytes());
            assert_eq!(entry(&format!("{long}file")).unwrap().path.len(), 4225);
            let modes = ["plain", "exec", "link", "sub"].map(|path| entry(path).unwrap().mode);
            assert_eq!(modes, [0o100_644, 0o100_755, 0o120_000, 0o160_000]);
            for name in names.iter().chain(&["link"]) {
                repo.assert_stat(entry(name).unwrap());
            }
            let flagged = |e: &IndexEntry| e.intent_to_add || e.skip_worktree || e.stage != 0;
            assert!(!index.entries.iter().any(flagged));
        }
        repo.write("ita", "x");
        repo.git(&["add", "-N", "ita"]);
        repo.git(&["update-index", "--skip-worktree", "plain"]);
        for version in [3, 4, 2] {
            repo.git(&["update-index", "--index-version", &version.to_string()]);
            let index = repo.checked();
            // git promotes version 2 to 3 when an entry has extended flags.
            assert_eq!(index.version, version.max(3));
            for e in &index.entries {
                assert_eq!(e.intent_to_add, e.path == b"ita");
                assert_eq!(e.skip_worktree, e.path == b"plain");
            }
        }
    }

    #[test]
    fn real_conflict_has_stages() {
        let repo = Repo::new("conflict");
        repo.write("a", "a\n");
        repo.write("c", "base\n");
        repo.git(&["add", "."]);
        repo.git(&["commit", "-qm", "base"]);
        repo.git(&["checkout", "-qb", "other"]);
        repo.write("c", "other\n");
        repo.git(&["commit", "-qam", "other"]);
        repo.git(&["checkout", "-q", "main"]);
        repo.write("c", "main\n");
        repo.git(&["commit", "-qam", "main"]);
        assert!(!repo.run(&["merge", "-q", "other"]).status.success());
        let stage = |e: &IndexEntry| format!("{}{}", e.path.escape_ascii(), e.stage);
        let stages: Vec<_> = repo.checked().entries.iter().map(stage).collect();
        assert_eq!(stages, ["a0", "c1", "c2", "c3"]);
    }

    #[test]
    fn real_split_and_sparse_indexes_are_refused() {
        let repo = Repo::new("split");
        repo.write("in/a", "a");
        repo.write("out/b", "b");
        repo.git(&["add", "."]);
        repo.git(&["commit", "-qm", "one"]);
        repo.git(&["update-index", "--split-index"]);
        let err = parse(&repo.index_bytes()).unwrap_err();
        assert_eq!(err, Unsupported::Extension(*b"link"));
        let message = "the index is a split index (extension `link`)";
        assert_eq!(err.to_string(), message);
        repo.git(&["update-index", "--no-split-index"]);
        repo.checked();
        repo.git(&["sparse-checkout", "set", "--cone", "--sparse-index", "in"]);
        let err = parse(&repo.index_bytes()).unwrap_err();
        assert!(err.to_string().contains("sparse index"), "{err}");
    }

    #[test]
    fn ten_thousand_entries() {
        let repo = Repo::new("many");
        for i in 0..10_000 {
            repo.write(&format!("dir{:02}/file{i:05}.txt", i % 100), &i.to_string());
        }
        // Two threads make git write the `IEOT` and `EOIE` extensions.
        let threads = "-c index.threads=2 -c index.recordOffsetTable=true \
            -c index.recordEndOfIndexEntries=true";
        let threads: Vec<_> = threads.split(' ').collect();
        repo.git(&[&threads[..], &["add", "."]].concat());
        for version in ["2", "4"] {
            repo.git(&[&threads[..], &["update-index", "--index-version", version]].concat());
            let bytes = repo.index_bytes();
            let has = |signature: &[u8]| bytes.windows(4).any(|w| w == signature);
            assert!(has(b"IEOT") && has(b"EOIE"));
            let started = std::time::Instant::now();
            let index = parse(&bytes).unwrap();
            let (elapsed, len) = (started.elapsed(), bytes.len());
            eprintln!("parsed a v{version} index of {len} bytes in {elapsed:?}");
            assert_eq!(index.entries.len(), 10_000);
        }
        repo.checked();
    }

    /// An entry for [`build`]: path, mode, flags (stage bits), extended flags.
    type Spec<'a> = (&'a [u8], u32, u16, Option<u16>);

    /// Builds an index by hand, with the given extensions and a zero checksum.
    fn build(version: u32, entries: &[Spec<'_>], extensions: &[(&[u8; 4], &[u8])]) -> Vec<u8> {
        let mut out = [*b"DIRC", version.to_be_bytes()].concat();
        out.extend(u32::try_from(entries.len()).unwrap().to_be_bytes());
        let mut previous: &[u8] = b"";
        for (i, &(path, mode, flags, extended)) in entries.iter().enumerate() {
            let start = out.len();
            for field in [1, 2, 3, 4, 5, 6, mode, 7, 8, 9] {
                out.extend(field.to_be_bytes());
            }
            out.extend([u8::try_from(i).unwrap(); 20]);
            let len = u16::try_from(path.len().min(0xFFF)).unwrap();
            out.extend((flags | len | extended.map_or(0, |_| 0x4000)).to_be_bytes());
            out.extend(extended.map(u16::to_be_bytes).iter().flatten());
            if version == 4 {
                let common = path.iter().zip(previous).take_while(|(a, b)| a == b);
                let common = common.count();
                // git's `encode_varint`.
                let mut strip = previous.len() - common;
                let mut varint = vec![u8::try_from(strip & 127).unwrap()];
                while strip >> 7 != 0 {
                    strip = (strip >> 7) - 1;
                    varint.insert(0, 128 | u8::try_from(strip & 127).unwrap());
                }
                out.extend(varint.iter().chain(&path[common..]).chain(&[0]));
            } else {
                out.extend(path.iter().chain(&[0]));
                out.resize(start + (out.len() - start).div_ceil(8) * 8, 0);
            }
            previous = path;
        }
        for (signature, data) in extensions {
            let size = u32::try_from(data.len()).unwrap().to_be_bytes();
            out.extend(signature.iter().chain(&size).chain(*data));
        }
        out.extend([0; 20]);
        out
    }

    #[test]
    fn hand_made_indexes_round_trip_and_truncations_fail() {
        let (p_a, p_b) = (
            [&[b'p'; 300][..], b"/a"].concat(),
            [&[b'p'; 300][..], b"/b"].concat(),
        );
        let long = [b'x'; 5000];
        let specs: Vec<Spec<'_>> = vec![
            (b"a", 0o100_644, 0, None),
            (&p_a, 0o100_755, 0, None),
            (&p_b, 0o120_000, 0, None),
            (b"q", 0o160_000, 0, None), // strips 302 bytes: a 2-byte varint
            (&long, 0o100_644, 0, None),
            (b"y", 0o100_644, 0x1000, None),
            (b"y", 0o100_644, 0x2000, None),
            (b"y", 0o100_644, 0x3000, None),
            (b"z1", 0o100_644, 0, Some(0x2000)),
            (b"z2", 0o100_644, 0, Some(0x4000)),
        ];
        for version in [2, 3, 4] {
            let specs = &specs[..if version == 2 { 8 } else { 10 }];
            let bytes = build(version, specs, &[]);
            let index = parse(&bytes).unwrap();
            assert_eq!(index.version, version);
            assert_eq!(index.entries.len(), specs.len());
            for (i, e) in index.entries.iter().enumerate() {
                let (path, mode, flags, extended) = specs[i];
                assert_eq!((e.path.as_slice(), e.mode), (path, mode));
                assert_eq!(
                    (e.oid, e.stat.mtime),
                    ([u8::try_from(i).unwrap(); 20], (3, 4))
                );
                assert_eq!(u16::from(e.stage) << 12, flags);
                assert_eq!(e.intent_to_add, extended == Some(0x2000));
                assert_eq!(e.skip_worktree, extended == Some(0x4000));
            }
            for len in 0..bytes.len() {
                assert!(parse(&bytes[..len]).is_err(), "v{version} cut to {len}");
            }
        }
        // Flipping any bit of a small index never panics.
        let mut bytes = build(4, &specs[..4], &[(b"TREE", b"abc")]);
        for bit in 0..bytes.len() * 8 {
            bytes[bit / 8] ^= 1 << (bit % 8);
            let _ = parse(&bytes);
            bytes[bit / 8] ^= 1 << (bit % 8);
        }
    }

    #[test]
    fn hand_made_indexes_are_refused() {
        use Unsupported::{BadSignature, Corrupt, ExtendedFlagInVersion2, Extension};
        use Unsupported::{Mode, PathsTooLong, SparseDirectory, UnknownExtendedFlags, Version};
        const F: u32 = 0o100_644;
        let (a, b, ab): (Spec<'_>, Spec<'_>, Spec<'_>) =
            ((b"a", F, 0, None), (b"b", F, 0, None), (b"ab", F, 0, None));
        let (ext, bad_ext): (Spec<'_>, Spec<'_>) =
            ((b"a", F, 0, Some(0)), (b"a", F, 0, Some(0x8000)));
        let bad_mode: Spec<'_> = (b"a", 0o100_664, 0, None);
        let sparse: Spec<'_> = (b"d/", 0o040_000, 0, Some(0x4000));
        let patched = |mut bytes: Vec<u8>, at: usize, value: u8| {
            bytes[at] = value;
            bytes
        };
        let refused = [
            (patched(build(2, &[a], &[]), 3, b'X'), BadSignature),
            (build(5, &[a], &[]), Version(5)),
            (build(1, &[a], &[]), Version(1)),
            (build(2, &[ext], &[]), ExtendedFlagInVersion2),
            (build(3, &[bad_ext], &[]), UnknownExtendedFlags(0x8000)),
            (build(2, &[bad_mode], &[]), Mode(0o100_664)),
            (build(3, &[sparse], &[]), SparseDirectory),
            (
                build(2, &[a], &[(b"TREE", b"x"), (b"sdir", b"")]),
                Extension(*b"sdir"),
            ),
        ];
        for (bytes, expected) in refused {
            assert_eq!(parse(&bytes), Err(expected));
        }
        let eoie = [&[0, 0, 0, 76][..], &[0; 20]].concat();
        let extensions: [(&[u8; 4], &[u8]); 3] =
            [(b"TREE", b"x"), (b"ABCD", b""), (b"EOIE", &eoie)];
        assert!(parse(&build(2, &[a], &extensions)).is_ok());
        let stages = [(b"y", F, 0x2000, None), (b"y", F, 0x1000, None)];
        let corrupt = [
            ("eoie", build(2, &[ab], &[(b"EOIE", &eoie)])),
            ("signature", build(2, &[a], &[(b"TR\0E", b"")])),
            ("size", patched(build(2, &[a], &[(b"TREE", b"")]), 83, 1)),
            (
                "stray bytes",
                [&build(2, &[a], &[])[..76], &[0; 23]].concat(),
            ),
            ("count too large", patched(build(2, &[a], &[]), 11, 2)),
            ("count too small", patched(build(2, &[a, b], &[]), 11, 1)),
            ("unsorted", build(2, &[b, a], &[])),
            ("duplicate", build(2, &[a, a], &[])),
            (
                "stages",
                build(2, &stages.map(|s| (&s.0[..], s.1, s.2, s.3)), &[]),
            ),
            ("strip", patched(build(4, &[a], &[]), 74, 1)),
            ("padding", patched(build(2, &[ab], &[]), 80, 1)),
            ("name length", patched(build(2, &[a], &[]), 73, 2)),
            ("empty path", build(2, &[(b"", F, 0, None)], &[])),
            ("empty", Vec::new()),
            ("no checksum", build(2, &[], &[])[..31].to_vec()),
        ];
        for (what, bytes) in corrupt {
            assert!(matches!(parse(&bytes), Err(Corrupt(_))), "{what}");
        }
        for error in [BadSignature, Version(5), Extension(*b"abcd"), PathsTooLong] {
            let message = error.to_string();
            assert!(message.starts_with(char::is_lowercase) && !message.ends_with('.'));
        }
    }
}
