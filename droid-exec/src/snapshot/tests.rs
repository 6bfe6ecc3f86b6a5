//! The snapshot's tests: the three strategies through `Snapshot::take` and `Snapshot::diff`
//! on real repositories, and the parsers of git's output.

use std::sync::atomic::AtomicU64;

use pretty_assertions::assert_eq;

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use droid_contract::{ChangeType, FileChange};

use crate::process::capture::capture;
use crate::process::spawn::SpawnSpec;

use super::diff_tree::*;
use super::git::*;
use super::git_tree::*;
use super::stat_scan::{self, Scan};
use super::take::*;
use super::walk::SnapshotLimits;

static DIRS: AtomicU64 = AtomicU64::new(0);

/// A temp directory with a `repo`, a `home` and a run's `scratch`, removed on drop, and an
/// environment that lets git commit on a machine without any git configuration.
struct Fixture {
    dir: PathBuf,
    repo: PathBuf,
    scratch: PathBuf,
    env: Vec<(OsString, OsString)>,
}

impl Fixture {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!(
            "droid-snapshot-test-{}-{}",
            std::process::id(),
            DIRS.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let (repo, home, scratch) = (dir.join("repo"), dir.join("home"), dir.join("scratch"));
        for d in [&repo, &home, &scratch] {
            std::fs::create_dir_all(d).unwrap();
        }
        let mut env: Vec<(OsString, OsString)> = [
            ("HOME", home.into_os_string()),
            ("GIT_AUTHOR_NAME", "Test".into()),
            ("GIT_AUTHOR_EMAIL", "test@example.com".into()),
            ("GIT_COMMITTER_NAME", "Test".into()),
            ("GIT_COMMITTER_EMAIL", "test@example.com".into()),
            ("GIT_CONFIG_NOSYSTEM", "1".into()),
            // never find a repository above the fixture (a plain directory must stay plain)
            ("GIT_CEILING_DIRECTORIES", dir.clone().into_os_string()),
        ]
        .into_iter()
        .map(|(k, v)| (OsString::from(k), v))
        .collect();
        env.push((
            "PATH".into(),
            std::env::var_os("PATH").expect("PATH is set"),
        ));
        Self {
            dir,
            repo,
            scratch,
            env,
        }
    }

    /// Run git in `cwd`; returns (exit code, stdout, stderr).
    async fn git_status(&self, cwd: &Path, args: &[&str]) -> (Option<i32>, String, String) {
        let spec = SpawnSpec {
            program: PathBuf::from("git"),
            args: os_args(args),
            cwd: cwd.to_path_buf(),
            env: self.env.clone(),
            stdin_piped: false,
            stdin_file: None,
            detach_log: None,
            rlimits: crate::process::limits::Rlimits::NONE,
        };
        let out = capture(
            &spec,
            None,
            Duration::from_secs(60),
            1 << 20,
            "snapshot-test",
        )
        .await
        .expect("git is installed (apt-get install git)");
        (out.code, out.stdout.text(), out.stderr.text())
    }

    /// Run git in the repository, which must succeed.
    async fn git(&self, args: &[&str]) -> String {
        let (code, stdout, stderr) = self.git_status(&self.repo, args).await;
        assert_eq!(code, Some(0), "git {args:?} failed: {stderr}");
        stdout
    }

    async fn init(&self) {
        self.git(&["-c", "init.defaultBranch=main", "init", "-q"])
            .await;
    }

    async fn commit_all(&self) {
        self.git(&["add", "-A"]).await;
        self.git(&["commit", "-q", "--allow-empty", "-m", "commit"])
            .await;
    }

    fn write(&self, rel: &str, content: impl AsRef<[u8]>) {
        let path = self.repo.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    fn remove(&self, rel: &str) {
        std::fs::remove_file(self.repo.join(rel)).unwrap();
    }

    fn rename(&self, from: &str, to: &str) {
        let to = self.repo.join(to);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::rename(self.repo.join(from), to).unwrap();
    }

    async fn take_at(
        &self,
        root: &Path,
        limits: SnapshotLimits,
        previous: Option<&Snapshot>,
    ) -> Snapshot {
        Snapshot::take(root, &self.env, &self.scratch, &limits, previous)
            .await
            .unwrap()
    }

    async fn take(&self) -> Snapshot {
        self.take_at(&self.repo, SnapshotLimits::default(), None)
            .await
    }

    /// The second snapshot of a run, as the engine takes it.
    async fn take_after(&self, before: &Snapshot) -> Snapshot {
        self.take_at(&self.repo, SnapshotLimits::default(), Some(before))
            .await
    }

    async fn diff(&self, before: &Snapshot, after: &Snapshot) -> Changes {
        before.diff(after, &self.env).await.unwrap()
    }

    /// Every file under `.git` with its content.
    fn git_dir_files(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        fn visit(dir: &Path, base: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    visit(&path, base, out);
                } else {
                    let rel = path.strip_prefix(base).unwrap().to_path_buf();
                    out.insert(rel, std::fs::read(&path).unwrap());
                }
            }
        }
        let mut out = BTreeMap::new();
        visit(&self.repo.join(".git"), &self.repo, &mut out);
        out
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn change(path: &str, change_type: ChangeType, lines: Option<(u64, u64)>) -> FileChange {
    FileChange {
        path: path.to_owned(),
        change_type,
        old_path: None,
        highlights: Vec::new(),
        lines_added: lines.map(|l| l.0),
        lines_removed: lines.map(|l| l.1),
    }
}

fn renamed(from: &str, to: &str, lines: (u64, u64)) -> FileChange {
    FileChange {
        old_path: Some(from.to_owned()),
        ..change(to, ChangeType::Renamed, Some(lines))
    }
}

fn no_warnings() -> Vec<String> {
    Vec::new()
}

use ChangeType::{Added, Deleted, Modified};

#[tokio::test]
async fn git_reports_added_modified_and_deleted_files_and_leaves_the_repo_alone() {
    let f = Fixture::new();
    f.init().await;
    f.write("keep.txt", "same\n");
    f.write("change.txt", "one\ntwo\n");
    f.write("gone.txt", "bye\n");
    f.write("src/lib.rs", "fn a() {}\n");
    f.commit_all().await;
    f.write("dirty-untracked.txt", "here before the run\n");
    let git_dir = f.git_dir_files();
    assert!(git_dir.contains_key(Path::new(".git/index")));

    let before = f.take().await;
    f.write("change.txt", "one\nTWO\nthree\n");
    f.remove("gone.txt");
    f.write("new.txt", "a\nb\n");
    f.write("src/new/mod.rs", "mod x;\n");
    let after = f.take_after(&before).await;
    let changes = f.diff(&before, &after).await;

    assert_eq!(
        changes,
        Changes {
            incomplete: None,
            files: vec![
                change("change.txt", Modified, Some((2, 1))),
                change("gone.txt", Deleted, Some((0, 1))),
                change("new.txt", Added, Some((2, 0))),
                change("src/new/mod.rs", Added, Some((1, 0))),
            ],
            warnings: no_warnings(),
        }
    );
    // the user's index and object store (indeed all of .git) are byte for byte the same
    assert_eq!(f.git_dir_files(), git_dir);
    // recorded in-process: nothing written to scratch either
    assert!(!f.scratch.join("objects").exists());
}

/// The in-process record (issue 17): a same-size edit right after the first record (same
/// coarse file time) is still seen; a tracked file inside an ignored directory is still
/// compared; a tree large enough for the parallel walk sees every change; and no git process
/// runs unless a changed file's old content must come from the repository.
#[tokio::test]
async fn in_process_record_sees_racy_edits_ignored_tracked_files_and_large_trees() {
    let f = Fixture::new();
    f.init().await;
    f.write(".gitignore", "build/\n");
    f.write("build/tracked.txt", "t\n");
    f.git(&["add", "-f", "build/tracked.txt"]).await;
    for i in 0..2_500 {
        f.write(&format!("d{}/f{i}.txt", i % 50), format!("{i}\n"));
    }
    f.write("racy.txt", "aaaa\n");
    f.commit_all().await;
    // the committed files are no longer racy: their old content is the repository's blob
    std::thread::sleep(Duration::from_millis(300));
    f.write("racy.txt", "bbbb\n");

    let before = f.take().await;
    assert!(matches!(before.kind, Kind::Scan(_)), "recorded in-process");
    f.write("racy.txt", "cccc\n"); // same size, same (coarse) second
    f.write("build/tracked.txt", "t2\n");
    f.write("build/untracked.txt", "ignored\n");
    f.write("d7/f2057.txt", "changed\n");
    f.remove("d49/f2499.txt");
    f.write("d3/new.txt", "n\n");
    let after = f.take_after(&before).await;
    assert!(matches!(after.kind, Kind::Scan(_)));
    assert_eq!(
        f.diff(&before, &after).await,
        Changes {
            incomplete: None,
            files: vec![
                change("build/tracked.txt", Modified, Some((1, 1))),
                change("d3/new.txt", Added, Some((1, 0))),
                change("d49/f2499.txt", Deleted, Some((0, 1))),
                change("d7/f2057.txt", Modified, Some((1, 1))),
                change("racy.txt", Modified, Some((1, 1))),
            ],
            warnings: no_warnings(),
        }
    );
    assert!(!f.scratch.join("objects").exists(), "nothing written");
}

#[tokio::test]
async fn nothing_changed_is_an_empty_list() {
    let f = Fixture::new();
    f.init().await;
    f.write("a.txt", "a\n");
    f.commit_all().await;
    let before = f.take().await;
    let after = f.take_after(&before).await;
    assert_eq!(f.diff(&before, &after).await, Changes::default());
}

#[tokio::test]
async fn renames_carry_the_old_path() {
    let f = Fixture::new();
    f.init().await;
    let body: String = (1..=20).map(|i| format!("line {i}\n")).collect();
    f.write("big.txt", &body);
    f.write("plain.txt", body.replace("line", "row"));
    f.commit_all().await;

    let before = f.take().await;
    f.rename("big.txt", "moved/big.txt");
    f.write("moved/big.txt", format!("{body}one more\n"));
    f.rename("plain.txt", "same.txt");
    let after = f.take_after(&before).await;

    assert_eq!(
        f.diff(&before, &after).await,
        Changes {
            incomplete: None,
            files: vec![
                renamed("big.txt", "moved/big.txt", (1, 0)),
                renamed("plain.txt", "same.txt", (0, 0)),
            ],
            warnings: no_warnings(),
        }
    );
}

#[tokio::test]
async fn binary_files_have_no_line_counts() {
    let f = Fixture::new();
    f.init().await;
    f.write("image.bin", [0u8, 1, 2, 3, 0, 255]);
    f.commit_all().await;

    let before = f.take().await;
    f.write("image.bin", [0u8, 9, 9, 0, 1]);
    f.write("new.bin", [0u8, 0, 7]);
    let after = f.take_after(&before).await;

    assert_eq!(
        f.diff(&before, &after).await,
        Changes {
            incomplete: None,
            files: vec![
                change("image.bin", Modified, None),
                change("new.bin", Added, None),
            ],
            warnings: no_warnings(),
        }
    );
}

#[tokio::test]
async fn names_with_spaces_unicode_and_newlines() {
    let f = Fixture::new();
    f.init().await;
    f.write("a b.txt", "x\n");
    f.write("ünï cødé/файл.txt", "y\n");
    f.commit_all().await;

    let before = f.take().await;
    f.write("a b.txt", "x\nz\n");
    f.remove("ünï cødé/файл.txt");
    f.write("new\nline.txt", "n\n");
    f.write("日本 語.md", "#\n");
    f.write("tab\there \"quoted\".txt", "q\n");
    let after = f.take_after(&before).await;

    assert_eq!(
        f.diff(&before, &after).await,
        Changes {
            incomplete: None,
            files: vec![
                change("a b.txt", Modified, Some((1, 0))),
                change("new\nline.txt", Added, Some((1, 0))),
                change("tab\there \"quoted\".txt", Added, Some((1, 0))),
                change("ünï cødé/файл.txt", Deleted, Some((0, 1))),
                change("日本 語.md", Added, Some((1, 0))),
            ],
            warnings: no_warnings(),
        }
    );
}

#[tokio::test]
async fn repo_without_commits_or_index() {
    let f = Fixture::new();
    f.init().await;
    assert!(!f.repo.join(".git/index").exists());
    let git_dir = f.git_dir_files();

    let before = f.take().await;
    f.write("first.txt", "hello\n");
    let after = f.take_after(&before).await;

    assert_eq!(
        f.diff(&before, &after).await,
        Changes {
            incomplete: None,
            files: vec![change("first.txt", Added, Some((1, 0)))],
            warnings: no_warnings(),
        }
    );
    assert_eq!(f.git_dir_files(), git_dir);
}

#[tokio::test]
async fn repo_without_commits_but_with_staged_files() {
    let f = Fixture::new();
    f.init().await;
    f.write("staged.txt", "one\n");
    f.write("also.txt", "two\n");
    f.git(&["add", "staged.txt", "also.txt"]).await;
    let git_dir = f.git_dir_files();

    let before = f.take().await;
    f.write("staged.txt", "one\nmore\n");
    let after = f.take_after(&before).await;

    assert_eq!(
        f.diff(&before, &after).await,
        Changes {
            incomplete: None,
            files: vec![change("staged.txt", Modified, Some((1, 0)))],
            warnings: no_warnings(),
        }
    );
    assert_eq!(f.git_dir_files(), git_dir);
}

#[tokio::test]
async fn subdirectory_root_sees_only_itself_with_relative_paths() {
    let f = Fixture::new();
    f.init().await;
    f.write("top.txt", "top\n");
    f.write("sub/inner.txt", "inner\n");
    f.write("sub/moving.txt", "moving\n");
    f.commit_all().await;
    let root = f.repo.join("sub");

    let before = f.take_at(&root, SnapshotLimits::default(), None).await;
    f.write("top.txt", "top changed\n");
    f.write("outside.txt", "outside\n");
    f.write("sub/inner.txt", "inner changed\n");
    f.write("sub/deep/new.txt", "new\n");
    // moved out of the root: gone, as far as the root is concerned
    f.rename("sub/moving.txt", "moved-out.txt");
    let after = f
        .take_at(&root, SnapshotLimits::default(), Some(&before))
        .await;

    assert_eq!(
        f.diff(&before, &after).await,
        Changes {
            incomplete: None,
            files: vec![
                change("deep/new.txt", Added, Some((1, 0))),
                change("inner.txt", Modified, Some((1, 1))),
                change("moving.txt", Deleted, Some((0, 1))),
            ],
            warnings: no_warnings(),
        }
    );
}

#[tokio::test]
async fn subdirectory_root_that_git_does_not_know_yet() {
    let f = Fixture::new();
    f.init().await;
    f.write("top.txt", "top\n");
    f.commit_all().await;
    let root = f.repo.join("fresh");
    std::fs::create_dir(&root).unwrap();

    let before = f.take_at(&root, SnapshotLimits::default(), None).await;
    f.write("fresh/x.txt", "x\n");
    f.write("top.txt", "elsewhere\n");
    let after = f
        .take_at(&root, SnapshotLimits::default(), Some(&before))
        .await;

    assert_eq!(
        f.diff(&before, &after).await,
        Changes {
            incomplete: None,
            files: vec![change("x.txt", Added, Some((1, 0)))],
            warnings: no_warnings(),
        }
    );
}

#[tokio::test]
async fn unmerged_files_outside_a_subdirectory_root() {
    let f = Fixture::new();
    f.init().await;
    f.write("conflict.txt", "base\n");
    f.write("sub/s.txt", "s\n");
    f.commit_all().await;
    f.git(&["checkout", "-q", "-b", "other"]).await;
    f.write("conflict.txt", "theirs\n");
    f.commit_all().await;
    f.git(&["checkout", "-q", "main"]).await;
    f.write("conflict.txt", "ours\n");
    f.commit_all().await;
    let (code, _, _) = f.git_status(&f.repo, &["merge", "-q", "other"]).await;
    assert_eq!(code, Some(1), "the merge conflicts");
    let git_dir = f.git_dir_files();
    let root = f.repo.join("sub");

    let before = f.take_at(&root, SnapshotLimits::default(), None).await;
    f.write("sub/s.txt", "s2\n");
    let after = f
        .take_at(&root, SnapshotLimits::default(), Some(&before))
        .await;

    assert_eq!(
        f.diff(&before, &after).await,
        Changes {
            incomplete: None,
            files: vec![change("s.txt", Modified, Some((1, 1)))],
            warnings: no_warnings(),
        }
    );
    assert_eq!(f.git_dir_files(), git_dir);
}

#[tokio::test]
async fn dirty_before_the_run_counts_only_if_changed_during_it() {
    let f = Fixture::new();
    f.init().await;
    f.write("untouched.txt", "committed\n");
    f.write("further.txt", "committed\n");
    f.commit_all().await;
    f.write("untouched.txt", "dirty\n");
    f.write("further.txt", "dirty\n");
    f.write("untracked.txt", "dirty\n");

    let before = f.take().await;
    f.write("further.txt", "dirty\nand more\n");
    let after = f.take_after(&before).await;

    assert_eq!(
        f.diff(&before, &after).await,
        Changes {
            incomplete: None,
            files: vec![change("further.txt", Modified, Some((1, 0)))],
            warnings: no_warnings(),
        }
    );
}

#[tokio::test]
async fn committing_during_the_run_hides_nothing() {
    let f = Fixture::new();
    f.init().await;
    f.write("a.txt", "a\n");
    f.write("b.txt", "b\n");
    f.commit_all().await;

    let before = f.take().await;
    f.write("a.txt", "a\nA\n");
    f.write("n.txt", "n\n");
    f.remove("b.txt");
    f.commit_all().await;
    let after = f.take_after(&before).await;

    assert_eq!(
        f.diff(&before, &after).await,
        Changes {
            incomplete: None,
            files: vec![
                change("a.txt", Modified, Some((1, 0))),
                change("b.txt", Deleted, Some((0, 1))),
                change("n.txt", Added, Some((1, 0))),
            ],
            warnings: no_warnings(),
        }
    );
}

#[tokio::test]
async fn ignored_files_are_not_reported() {
    let f = Fixture::new();
    f.init().await;
    f.write(".gitignore", "*.log\ntarget/\n");
    f.write("tracked.log", "tracked even though ignored\n");
    f.git(&["add", ".gitignore"]).await;
    f.git(&["add", "-f", "tracked.log"]).await;
    f.commit_all().await;

    let before = f.take().await;
    f.write("build.log", "noise\n");
    f.write("target/debug/app", "binary\n");
    f.write("tracked.log", "changed\n");
    let after = f.take_after(&before).await;

    assert_eq!(
        f.diff(&before, &after).await,
        Changes {
            incomplete: None,
            files: vec![change("tracked.log", Modified, Some((1, 1)))],
            warnings: no_warnings(),
        }
    );
}

#[tokio::test]
async fn symlinks_and_type_changes() {
    let f = Fixture::new();
    f.init().await;
    f.write("target.txt", "t\n");
    f.write("becomes-link.txt", "file\n");
    std::os::unix::fs::symlink("target.txt", f.repo.join("link")).unwrap();
    f.commit_all().await;

    let before = f.take().await;
    f.remove("link");
    std::os::unix::fs::symlink("elsewhere.txt", f.repo.join("link")).unwrap();
    f.remove("becomes-link.txt");
    std::os::unix::fs::symlink("target.txt", f.repo.join("becomes-link.txt")).unwrap();
    let after = f.take_after(&before).await;

    assert_eq!(
        f.diff(&before, &after).await,
        Changes {
            incomplete: None,
            files: vec![
                change("becomes-link.txt", Modified, Some((1, 1))),
                change("link", Modified, Some((1, 1))),
            ],
            warnings: no_warnings(),
        }
    );
}

#[tokio::test]
async fn a_nested_repository_without_commits_is_a_warning_not_a_failure() {
    let f = Fixture::new();
    f.init().await;
    f.write("a.txt", "a\n");
    f.commit_all().await;

    let before = f.take().await;
    std::fs::create_dir(f.repo.join("nested")).unwrap();
    f.git_status(&f.repo.join("nested"), &["init", "-q"]).await;
    f.write("nested/inside.txt", "i\n");
    f.write("b.txt", "b\n");
    let after = f.take_after(&before).await;

    assert_eq!(
        f.diff(&before, &after).await,
        Changes {
            incomplete: None,
            files: vec![change("b.txt", Added, Some((1, 0)))],
            warnings: vec![
                "'nested/' is a repository without a commit checked out: its files were \
                 not compared"
                    .to_owned()
            ],
        }
    );
}

#[tokio::test]
async fn git_lfs_clean_filter_is_not_run() {
    let f = Fixture::new();
    f.init().await;
    f.write(".gitattributes", "*.dat filter=lfs\n");
    f.write("x.dat", "data\n");
    f.commit_all().await;
    let ran = f.dir.join("clean-filter-ran");
    let filter = format!("touch '{}'; cat", ran.display());
    // as `git lfs install` sets it up: a long-running process filter and a clean command
    f.git(&["config", "filter.lfs.process", &filter]).await;
    f.git(&["config", "filter.lfs.clean", &filter]).await;
    f.git(&["config", "filter.lfs.required", "true"]).await;

    let before = f.take().await;
    f.write("x.dat", "more data\n");
    let after = f.take_after(&before).await;

    assert_eq!(
        f.diff(&before, &after).await,
        Changes {
            incomplete: None,
            files: vec![change("x.dat", Modified, Some((1, 1)))],
            warnings: no_warnings(),
        }
    );
    assert!(!ran.exists(), "the clean filter must not run");
}

#[tokio::test]
async fn repository_hooks_and_filters_are_not_run() {
    let f = Fixture::new();
    f.init().await;
    let ran = f.dir.join("repository-code-ran");
    let program = f.dir.join("planted");
    std::fs::write(
        &program,
        format!("#!/bin/sh\necho \"$*\" >> '{}'\nexec cat\n", ran.display()),
    )
    .unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let hook = f.repo.join(".git/hooks/post-index-change");
    std::fs::write(&hook, format!("#!/bin/sh\n'{}' hook\n", program.display())).unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let p = program.display();
    f.git(&["config", "filter.evil.clean", &format!("{p} clean")])
        .await;
    f.git(&["config", "filter.evil.required", "true"]).await;
    f.git(&["config", "filter.x.y.process", &format!("{p} process")])
        .await;
    f.git(&["config", "core.fsmonitor", &format!("{p} fsmonitor")])
        .await;
    f.write(".gitattributes", "*.dat filter=evil\n*.xy filter=x.y\n");
    f.write("a.dat", "a\n");
    f.write("a.xy", "a\n");
    let before = f.take().await;
    f.write("b.dat", "b\n");
    f.write("b.xy", "b\n");
    let after = f.take_after(&before).await;

    assert_eq!(
        f.diff(&before, &after).await,
        Changes {
            incomplete: None,
            files: vec![
                change("b.dat", Added, Some((1, 0))),
                change("b.xy", Added, Some((1, 0))),
            ],
            warnings: no_warnings(),
        }
    );
    assert_eq!(std::fs::read_to_string(&ran).unwrap_or_default(), "");
}

// ------------------------------------------------------------------------------- walk

#[tokio::test]
async fn plain_directory_reports_added_modified_and_deleted_without_lines() {
    use std::os::unix::fs::symlink;
    let f = Fixture::new();
    f.write("keep.txt", "same");
    f.write("change.txt", "abcd");
    f.write("gone.txt", "bye");
    f.write("script.sh", "echo");
    f.write("a b/ünï.txt", "u");
    symlink("keep.txt", f.repo.join("link")).unwrap();
    symlink("keep.txt", f.repo.join("same-link")).unwrap();
    std::fs::create_dir(f.repo.join("empty-dir")).unwrap();

    let before = f.take().await;
    f.write("change.txt", "wxyz"); // same size: only the hash tells
    f.remove("gone.txt");
    f.write("new.txt", "new");
    f.write("a b/ünï.txt", "changed");
    std::fs::set_permissions(
        f.repo.join("script.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::fs::remove_file(f.repo.join("link")).unwrap();
    symlink("change.txt", f.repo.join("link")).unwrap();
    let after = f.take_after(&before).await;

    assert_eq!(
        f.diff(&before, &after).await,
        Changes {
            incomplete: None,
            files: vec![
                change("a b/ünï.txt", Modified, None),
                change("change.txt", Modified, None),
                change("gone.txt", Deleted, None),
                change("link", Modified, None),
                change("new.txt", Added, None),
                change("script.sh", Modified, None),
            ],
            warnings: no_warnings(),
        }
    );
}

#[tokio::test]
async fn git_init_during_the_run_keeps_the_walk() {
    let f = Fixture::new();
    f.write("old.txt", "old");

    let before = f.take().await;
    f.init().await;
    f.write("new.txt", "new");
    f.commit_all().await;
    let after = f.take_after(&before).await;

    assert_eq!(
        f.diff(&before, &after).await,
        Changes {
            incomplete: None,
            files: vec![change("new.txt", Added, None)],
            warnings: no_warnings(),
        }
    );
}

#[tokio::test]
async fn git_missing_still_records_in_process_without_old_line_counts() {
    let mut f = Fixture::new();
    f.init().await;
    f.write("a.txt", "a");
    f.commit_all().await;
    // no longer racy: its old content is the index's blob, which needs git to read
    std::thread::sleep(Duration::from_millis(300));
    let empty = f.dir.join("empty-path");
    std::fs::create_dir(&empty).unwrap();
    for (k, v) in &mut f.env {
        if k == "PATH" {
            *v = empty.clone().into_os_string();
        }
    }

    let before = f.take().await;
    f.write("a.txt", "b");
    let after = f.take_after(&before).await;

    assert_eq!(
        f.diff(&before, &after).await,
        Changes {
            incomplete: None,
            files: vec![change("a.txt", Modified, None)],
            warnings: vec![
                "the line counts of 1 file(s) are unknown: their old content could not be \
                 read from the repository (could not start git: No such file or directory \
                 (os error 2))"
                    .to_owned()
            ],
        }
    );
}

#[tokio::test]
async fn walk_stops_at_the_file_limit_and_compares_only_what_both_saw() {
    let f = Fixture::new();
    for name in ["a", "b", "c", "d", "e"] {
        f.write(name, name);
    }
    let limits = SnapshotLimits {
        max_files: 3,
        ..SnapshotLimits::default()
    };

    let before = f.take_at(&f.repo, limits, None).await; // a b c
    f.remove("a");
    f.write("e", "changed beyond the limit");
    let after = f.take_at(&f.repo, limits, Some(&before)).await; // b c d
    let cut_at_c =
        "the walk of the directory stopped at 3 files; changes after c were not checked".to_owned();

    assert_eq!(
        f.diff(&before, &after).await,
        Changes {
            incomplete: Some(cut_at_c.clone()),
            files: vec![change("a", Deleted, None)],
            warnings: vec![
                cut_at_c,
                "the walk of the directory stopped at 3 files; changes after d were not \
                 checked"
                    .to_owned(),
            ],
        }
    );
}

#[tokio::test]
async fn walk_past_the_byte_budget_compares_size_and_mtime() {
    let f = Fixture::new();
    f.write("a", "12345678");
    f.write("b", "12345678");
    f.write("c", "12345678");
    let limits = SnapshotLimits {
        max_bytes: 10,
        ..SnapshotLimits::default()
    };
    let set_mtime = |name: &str, t: SystemTime| {
        std::fs::File::options()
            .write(true)
            .open(f.repo.join(name))
            .unwrap()
            .set_modified(t)
            .unwrap();
    };
    let old = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    for name in ["a", "b", "c"] {
        set_mtime(name, old);
    }

    let before = f.take_at(&f.repo, limits, None).await; // only a is hashed
    // a: same size, same mtime, new content: the hash sees it
    f.write("a", "abcdefgh");
    set_mtime("a", old);
    // b: same size, new mtime: seen by mtime
    f.write("b", "abcdefgh");
    // c: same size, same mtime, new content: beyond the budget, not seen
    f.write("c", "abcdefgh");
    set_mtime("c", old);
    let after = f.take_at(&f.repo, limits, Some(&before)).await;

    assert_eq!(
        f.diff(&before, &after).await,
        Changes {
            incomplete: None,
            files: vec![change("a", Modified, None), change("b", Modified, None)],
            warnings: vec![
                "snapshot stopped hashing after 10 bytes; files beyond were compared by size \
                 and modification time only"
                    .to_owned()
            ],
        }
    );
}

#[test]
fn parses_git_versions() {
    assert_eq!(parse_git_version("git version 2.30.2"), Some((2, 30)));
    assert_eq!(
        parse_git_version("git version 2.39.5.windows.1"),
        Some((2, 39))
    );
    assert_eq!(parse_git_version("git version 10.1"), Some((10, 1)));
    assert_eq!(parse_git_version("hub version 2.14.2"), None);
    assert!((2, 30) < GIT_MIN && (2, 31) >= GIT_MIN && (3, 0) > GIT_MIN);
}

#[test]
fn parses_name_status_and_numstat() {
    let status = parse_name_status(b"M\0a b\0R087\0old\0new\0A\0x\ny\0D\0gone\0T\0t\0").unwrap();
    assert_eq!(
        status,
        vec![
            StatusEntry {
                change_type: Modified,
                path: b"a b".to_vec(),
                old_path: None
            },
            StatusEntry {
                change_type: ChangeType::Renamed,
                path: b"new".to_vec(),
                old_path: Some(b"old".to_vec())
            },
            StatusEntry {
                change_type: Added,
                path: b"x\ny".to_vec(),
                old_path: None
            },
            StatusEntry {
                change_type: Deleted,
                path: b"gone".to_vec(),
                old_path: None
            },
            StatusEntry {
                change_type: Modified,
                path: b"t".to_vec(),
                old_path: None
            },
        ]
    );
    let counts = parse_numstat(b"1\t2\ta b\0-\t-\tbin\0" as &[u8])
        .unwrap()
        .into_iter()
        .collect::<BTreeMap<_, _>>();
    assert_eq!(
        counts,
        BTreeMap::from([
            (b"a b".to_vec(), (Some(1), Some(2))),
            (b"bin".to_vec(), (None, None)),
        ])
    );
    let renamed = parse_numstat(b"3\t0\t\0old\0new\0").unwrap();
    assert_eq!(
        renamed,
        HashMap::from([(b"new".to_vec(), (Some(3), Some(0)))])
    );
    assert_eq!(parse_name_status(b"R100\0only-old\0"), None);
    assert_eq!(parse_numstat(b"x\ty\tz\0"), None);
    assert_eq!(parse_numstat(b"1\t1\t\0old\0"), None);
    assert_eq!(parse_name_status(b"M\0\0A\0x\0"), None);
    assert_eq!(parse_name_status(b""), Some(Vec::new()));
}

#[test]
fn filter_names_are_read_once_each_dotted_ones_whole() {
    let out = b"filter.lfs.clean\0filter.lfs.process\0filter.a.b.clean\0\
                filter.x\0filter.Evil=1.smudge\0";
    assert_eq!(
        parse_filter_names(out),
        vec![b"lfs".to_vec(), b"a.b".to_vec(), b"Evil=1".to_vec()]
    );
    assert_eq!(parse_filter_names(b""), Vec::<Vec<u8>>::new());
}

#[test]
fn filters_are_emptied_after_the_environment_s_own_settings() {
    let env = vec![
        (OsString::from("GIT_CONFIG_COUNT"), OsString::from("1")),
        (OsString::from("GIT_CONFIG_KEY_0"), OsString::from("core.x")),
        (OsString::from("GIT_CONFIG_VALUE_0"), OsString::from("y")),
    ];
    let out = neutral_filters(&env, &[b"a=b".to_vec()]);
    let shown: Vec<(String, String)> = out
        .iter()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect();
    let pair = |k: &str, v: &str| (k.to_owned(), v.to_owned());
    assert_eq!(
        shown,
        vec![
            pair("GIT_CONFIG_KEY_0", "core.x"),
            pair("GIT_CONFIG_VALUE_0", "y"),
            pair("GIT_CONFIG_KEY_1", "filter.a=b.clean"),
            pair("GIT_CONFIG_VALUE_1", ""),
            pair("GIT_CONFIG_KEY_2", "filter.a=b.smudge"),
            pair("GIT_CONFIG_VALUE_2", ""),
            pair("GIT_CONFIG_KEY_3", "filter.a=b.process"),
            pair("GIT_CONFIG_VALUE_3", ""),
            pair("GIT_CONFIG_KEY_4", "filter.a=b.required"),
            pair("GIT_CONFIG_VALUE_4", "false"),
            pair("GIT_CONFIG_COUNT", "5"),
        ]
    );
    assert_eq!(neutral_filters(&[], &[]), Vec::new());
}

#[test]
fn alternates_quote_colons_and_keep_inherited_ones() {
    let env = vec![(
        OsString::from("GIT_ALTERNATE_OBJECT_DIRECTORIES"),
        OsString::from("/inherited"),
    )];
    assert_eq!(
        alternates(&[Path::new("/a"), Path::new("/b:c"), Path::new("/a")], &env),
        OsString::from("/a:\"/b:c\":/inherited")
    );
    assert_eq!(alternates(&[Path::new("/a")], &[]), OsString::from("/a"));
}

#[tokio::test]
async fn walk_of_more_files_than_the_old_limit_sees_every_change() {
    let f = Fixture::new();
    for i in 0..25_000 {
        f.write(&format!("d{:02}/f{i:05}", i / 1000), "x");
    }

    let before = f.take().await;
    f.write("d00/f00000", "changed");
    f.write("d24/f24999", "changed");
    f.write("d24/new", "new");
    let after = f.take_after(&before).await;

    assert_eq!(
        f.diff(&before, &after).await,
        Changes {
            files: vec![
                change("d00/f00000", Modified, None),
                change("d24/f24999", Modified, None),
                change("d24/new", Added, None),
            ],
            warnings: no_warnings(),
            incomplete: None,
        }
    );
}

#[tokio::test]
async fn walk_out_of_time_says_files_changed_may_be_incomplete() {
    let f = Fixture::new();
    f.write("a", "a");
    let limits = SnapshotLimits {
        max_time: Duration::ZERO,
        ..SnapshotLimits::default()
    };

    let before = f.take_at(&f.repo, limits, None).await;
    f.write("b", "b");
    let after = f.take_at(&f.repo, limits, Some(&before)).await;

    let cut = "the walk of the directory stopped at 0 s (0 files); changes after its start \
               were not checked"
        .to_owned();
    assert_eq!(
        f.diff(&before, &after).await,
        Changes {
            files: Vec::new(),
            warnings: vec![cut.clone()],
            incomplete: Some(cut),
        }
    );
}

#[tokio::test]
async fn large_untracked_files_are_compared_by_metadata_and_never_stored() {
    let f = Fixture::new();
    f.init().await;
    f.write("a.txt", "a\n");
    f.commit_all().await;
    let big = vec![7_u8; usize::try_from(BIG_FILE).unwrap()];
    for name in ["same.bin", "grows.bin", "gone.bin"] {
        f.write(name, &big);
    }

    let before = f.take().await;
    // the engine reads their content while the agent starts; here the reader finishes first
    // (a change before it has read a file is the next tests' case, with its warning)
    if let Kind::Scan(tree) = &before.kind {
        tree.scan.finish_reading();
    }
    let mut grows = std::fs::OpenOptions::new()
        .append(true)
        .open(f.repo.join("grows.bin"))
        .unwrap();
    std::io::Write::write_all(&mut grows, b"more").unwrap();
    f.remove("gone.bin");
    f.write("new.txt", "n\n");
    let after = f.take_after(&before).await;

    assert_eq!(
        f.diff(&before, &after).await,
        Changes {
            files: vec![
                change("gone.bin", Deleted, None),
                change("grows.bin", Modified, None),
                change("new.txt", Added, Some((1, 0))),
            ],
            // in-process records hash them (within SnapshotLimits::max_bytes): by content
            warnings: no_warnings(),
            incomplete: None,
        }
    );
    fn size(dir: &Path) -> u64 {
        std::fs::read_dir(dir).map_or(0, |entries| {
            entries
                .map(|e| e.unwrap())
                .map(|e| {
                    let meta = std::fs::symlink_metadata(e.path()).unwrap();
                    if meta.is_dir() {
                        size(&e.path())
                    } else {
                        meta.len()
                    }
                })
                .sum()
        })
    }
    let stored = size(&f.scratch.join("objects"));
    assert!(
        stored < 1 << 20,
        "{stored} bytes of objects written to scratch"
    );
}

#[tokio::test]
async fn a_filter_configured_during_the_run_is_not_run_by_the_second_snapshot() {
    let f = Fixture::new();
    f.init().await;
    f.write("a.txt", "a\n");
    f.commit_all().await;
    let ran = f.dir.join("filter-ran");

    let before = f.take().await;
    // droid (at --auto low it may write .git/config) plants a filter mid-run
    f.git(&[
        "config",
        "filter.planted.clean",
        &format!("touch '{}'; cat", ran.display()),
    ])
    .await;
    f.write(".gitattributes", "*.dat filter=planted\n");
    f.write("x.dat", "x\n");
    let after = f.take_after(&before).await;

    assert_eq!(
        f.diff(&before, &after).await,
        Changes {
            files: vec![
                change(".gitattributes", Added, Some((1, 0))),
                change("x.dat", Added, Some((1, 0))),
            ],
            warnings: no_warnings(),
            incomplete: None,
        }
    );
    assert!(!ran.exists(), "the planted clean filter must not run");
}

#[tokio::test]
async fn git_init_at_a_subdirectory_root_during_the_run_locates_again() {
    let f = Fixture::new();
    f.init().await;
    f.write("sub/kept.txt", "k\n");
    f.write("outside.txt", "o\n");
    f.commit_all().await;
    let root = f.repo.join("sub");

    let before = f.take_at(&root, SnapshotLimits::default(), None).await;
    f.git_status(&root, &["init", "-q"]).await;
    f.write("sub/new.txt", "n\n");
    let after = f
        .take_at(&root, SnapshotLimits::default(), Some(&before))
        .await;

    assert_eq!(
        f.diff(&before, &after).await,
        Changes {
            files: vec![change("new.txt", Added, Some((1, 0)))],
            warnings: no_warnings(),
            incomplete: None,
        }
    );
}

/// Commit `n` files, then modify `n - 10` of them and add 10, long enough before the record
/// that none is racy: more than the record reads itself.
async fn dirty_past_the_inline_bound(f: &Fixture, n: usize) {
    f.init().await;
    for i in 0..n {
        f.write(&format!("f{i}.txt"), format!("{i}\n"));
    }
    f.commit_all().await;
    for i in 0..n - 10 {
        f.write(&format!("f{i}.txt"), format!("{i}\ndirty\n"));
    }
    for i in 0..10 {
        f.write(&format!("new{i}.txt"), "new\n");
    }
    std::thread::sleep(Duration::from_millis(300));
}

fn scan_of(s: &Snapshot) -> &Scan {
    match &s.kind {
        Kind::Scan(t) => &t.scan,
        _ => panic!("recorded in-process"),
    }
}

/// A directory the run's first record listed is not listed again by the second while its
/// own stat is unchanged (a file edited in place leaves it so); one where an entry was
/// created, removed or renamed is, and what changed there is found. A directory changed
/// just before the first record (racy) is listed again whatever its stat says.
#[tokio::test]
async fn directories_whose_entries_did_not_change_are_not_listed_again() {
    let f = Fixture::new();
    f.init().await;
    for dir in ["created", "edited", "removed", "renamed"] {
        f.write(&format!("{dir}/a.txt"), "a\n");
        f.write(&format!("{dir}/b.txt"), "b\n");
    }
    f.commit_all().await;
    // older than the racy window: the first record keeps their listings
    std::thread::sleep(Duration::from_millis(300));
    f.write("fresh/a.txt", "just made\n");
    let before = f.take().await;
    let first = scan_of(&before);
    for dir in ["created/", "edited/", "removed/", "renamed/"] {
        assert!(first.kept_listing(dir.as_bytes()), "{dir:?} kept");
    }
    // `fresh/` was just made, and the root changed with it
    for dir in ["fresh/", ""] {
        assert!(!first.kept_listing(dir.as_bytes()), "racy {dir:?} not kept");
    }

    f.write("created/c.txt", "c\n");
    f.write("edited/a.txt", "a\nmore\n");
    f.remove("removed/b.txt");
    std::fs::rename(f.repo.join("renamed/b.txt"), f.repo.join("renamed/z.txt")).unwrap();
    f.write("fresh/b.txt", "also new\n");
    let after = f.take_after(&before).await;
    // `edited/` only: the others gained, lost or renamed an entry, and the two racy ones
    // were not kept
    assert_eq!(scan_of(&after).listings_reused, 1);
    let changes = f.diff(&before, &after).await;
    let mut paths: Vec<(String, Option<(u64, u64)>)> = changes
        .files
        .iter()
        .map(|c| (c.path.clone(), c.lines_added.zip(c.lines_removed)))
        .collect();
    paths.sort();
    assert_eq!(
        paths,
        vec![
            ("created/c.txt".to_owned(), Some((1, 0))),
            ("edited/a.txt".to_owned(), Some((1, 0))),
            ("fresh/b.txt".to_owned(), Some((1, 0))),
            ("removed/b.txt".to_owned(), Some((0, 1))),
            ("renamed/z.txt".to_owned(), Some((0, 0))),
        ],
        "{changes:#?}"
    );
}

#[tokio::test]
async fn dirty_files_past_the_inline_bound_are_read_while_the_agent_works() {
    let f = Fixture::new();
    let n = stat_scan::INLINE_FILES + 40;
    dirty_past_the_inline_bound(&f, n).await;

    let before = f.take().await;
    let scan = scan_of(&before);
    assert!(scan.reading(), "read by a thread of its own");
    scan.finish_reading(); // the agent's first edit comes later
    // a touch (same content) is no change; an edit has its line counts
    let touched = f.repo.join("f1.txt");
    let content = std::fs::read(&touched).unwrap();
    std::fs::write(&touched, content).unwrap();
    f.write("f0.txt", "0\ndirty\nmore\n");
    f.write("new3.txt", "newer\n");
    f.remove("new4.txt");
    let after = f.take_after(&before).await;

    assert_eq!(
        f.diff(&before, &after).await,
        Changes {
            incomplete: None,
            files: vec![
                change("f0.txt", Modified, Some((1, 0))),
                change("new3.txt", Modified, Some((1, 1))),
                change("new4.txt", Deleted, Some((0, 1))),
            ],
            warnings: no_warnings(),
        }
    );
}

#[tokio::test]
async fn a_dirty_file_the_agent_changed_before_it_was_read_has_no_line_counts() {
    let f = Fixture::new();
    let n = stat_scan::INLINE_FILES + 40;
    dirty_past_the_inline_bound(&f, n).await;

    let mut before = f.take().await;
    let Kind::Scan(tree) = &mut before.kind else {
        panic!("recorded in-process");
    };
    tree.scan.finish_reading();
    let scan = Arc::get_mut(&mut tree.scan).expect("only the snapshot holds its record");
    scan.lose_read(b"f0.txt");
    scan.lose_read(b"f1.txt");
    f.write("f0.txt", "0\ndirty\nmore\n");
    f.write("f2.txt", "2\ndirty\nmore\n");
    let after = f.take_after(&before).await;

    let changes = f.diff(&before, &after).await;
    assert_eq!(
        changes.files,
        vec![
            change("f0.txt", Modified, None),
            change("f2.txt", Modified, Some((1, 0))),
        ]
    );
    assert_eq!(changes.warnings.len(), 1, "{:?}", changes.warnings);
    let w = &changes.warnings[0];
    assert!(
        w.starts_with("1 file(s) changed before their content from before the run was read")
            && w.ends_with("no line counts: f0.txt"),
        "{w}"
    );
}
