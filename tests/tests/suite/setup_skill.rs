//! `droid-executor setup skill [--dir SKILLS_ROOT] [--force] [--dry-run]`: the three files in
//! `SKILLS_ROOT/droid-executor/` (and the fallback skills `ask-<provider>/SKILL.md` beside it), a second run that changes nothing, `~/.claude/skills` by
//! default, a dry run that writes nothing, local edits refused (and kept) without `--force` and
//! backed up with it, and a root that cannot be written refused with a clear message and no
//! half-installed skill; a backup that cannot be written, or a rename that fails after others
//! succeeded, leaving the skill folder exactly as it was (nothing staged or kept left behind).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use pretty_assertions::assert_eq;
use tests::droid_bin::workspace_root;
use tests::temp_dir::TempDir;

use super::binary::{Out, droid_executor, path_var};

/// The bundled files, as `setup skill` lists them.
const FILES: [&str; 3] = [
    "SKILL.md",
    "references/droid-executor-protocol.md",
    "LICENSE.txt",
];
/// Where `setup skill` records what it wrote.
const MANIFEST: &str = ".droid-executor-install.json";
/// A directory that exists and that no one, root included, can create files in (procfs): it
/// stands for a read-only skills folder, since the suites may run as root, whom permission bits
/// do not stop.
const READ_ONLY_DIR: &str = "/proc/self/fdinfo";

/// A HOME and a skills root (`HOME/skills`) for `setup skill`.
struct Home {
    dir: TempDir,
}

impl Home {
    fn new() -> Home {
        Home {
            dir: TempDir::new("setup-skill").unwrap(),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn root(&self) -> PathBuf {
        self.path().join("skills")
    }

    /// The skill folder under the root.
    fn skill(&self) -> PathBuf {
        self.root().join("droid-executor")
    }

    fn env(&self) -> Vec<(OsString, OsString)> {
        vec![
            ("HOME".into(), self.path().into()),
            ("PATH".into(), path_var()),
        ]
    }

    /// `setup skill --dir ROOT ARGS`.
    async fn setup(&self, args: &[&str]) -> Out {
        let root = self.root().display().to_string();
        let mut all = vec!["setup", "skill", "--dir", &root];
        all.extend_from_slice(args);
        droid_executor(&all, &self.env(), self.path()).await
    }
}

/// The repository's copy of a bundled file.
fn bundled(rel: &str) -> Vec<u8> {
    std::fs::read(workspace_root().join("skill/droid-executor").join(rel)).unwrap()
}

/// The fallback skills `setup skill` installs for Claude Code beside the main one (every
/// provider but Claude's own), in the order it prints them.
const FALLBACKS: [&str; 4] = ["ask-codex", "ask-gemini", "ask-opencode", "ask-droid"];

/// What `setup skill` prints: one `VERB PATH` line per file (the verb padded to 14), then the
/// summary when it installed; then the same for each fallback skill beside it, whose one file
/// was created (or would be) with the main skill's, and is unchanged otherwise.
fn listing(dir: &Path, verbs: [&str; 3], installed: bool) -> String {
    let mut out = String::new();
    for (verb, rel) in verbs.iter().zip(FILES) {
        out.push_str(&format!("{verb:<14} {}\n", dir.join(rel).display()));
    }
    if installed {
        out.push_str(&format!(
            "skill droid-executor installed in {}\n",
            dir.display()
        ));
    }
    let verb = match verbs[0] {
        v @ ("created" | "would create") => v,
        _ => "unchanged",
    };
    let root = dir.parent().unwrap();
    for name in FALLBACKS {
        let skill = root.join(name);
        out.push_str(&format!(
            "{verb:<14} {}\n",
            skill.join("SKILL.md").display()
        ));
        if installed {
            out.push_str(&format!("skill {name} installed in {}\n", skill.display()));
        }
    }
    out
}

/// An old time, to tell a rewritten file from an untouched one.
fn long_ago() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000)
}

fn set_mtime(path: &Path, t: SystemTime) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

fn mtime(path: &Path) -> SystemTime {
    std::fs::metadata(path).unwrap().modified().unwrap()
}

/// Every entry under `dir`, relative, sorted (directories too); empty when it does not exist.
fn tree(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            out.push(path.strip_prefix(root).unwrap().display().to_string());
            if path.is_dir() && !path.is_symlink() {
                walk(root, &path, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installs_the_three_files_then_changes_nothing() {
    let home = Home::new();
    let out = home.setup(&[]).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert_eq!(out.stdout, listing(&home.skill(), ["created"; 3], true));
    assert_eq!(out.stderr, "");
    for rel in FILES {
        assert!(
            std::fs::read(home.skill().join(rel)).unwrap() == bundled(rel),
            "{rel} is not the bundled file"
        );
    }
    assert_eq!(
        tree(&home.skill()),
        [
            MANIFEST,
            "LICENSE.txt",
            "SKILL.md",
            "references",
            "references/droid-executor-protocol.md"
        ]
    );

    for rel in FILES {
        set_mtime(&home.skill().join(rel), long_ago());
    }
    let again = home.setup(&[]).await;
    assert_eq!(again.code, Some(0), "{again:#?}");
    assert_eq!(again.stdout, listing(&home.skill(), ["unchanged"; 3], true));
    for rel in FILES {
        assert_eq!(
            mtime(&home.skill().join(rel)),
            long_ago(),
            "{rel} was rewritten"
        );
        assert!(std::fs::read(home.skill().join(rel)).unwrap() == bundled(rel));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_does_not_rewrite_the_install_record() {
    let home = Home::new();
    assert_eq!(home.setup(&[]).await.code, Some(0));
    let manifest = home.skill().join(MANIFEST);
    let before = std::fs::read(&manifest).unwrap();
    set_mtime(&manifest, long_ago());
    let again = home.setup(&[]).await;
    assert_eq!(again.code, Some(0), "{again:#?}");
    assert_eq!(std::fs::read(&manifest).unwrap(), before);
    assert_eq!(
        mtime(&manifest),
        long_ago(),
        "an install that changed nothing rewrote {MANIFEST}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_root_is_claude_skills_in_home() {
    let home = Home::new();
    let out = droid_executor(&["setup", "skill"], &home.env(), home.path()).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let dir = home.path().join(".claude/skills/droid-executor");
    assert_eq!(out.stdout, listing(&dir, ["created"; 3], true));
    for rel in FILES {
        assert!(
            std::fs::read(dir.join(rel)).unwrap() == bundled(rel),
            "{rel}"
        );
    }

    let no_home = droid_executor(
        &["setup", "skill"],
        &[("PATH".into(), path_var())],
        home.path(),
    )
    .await;
    assert_eq!(no_home.code, Some(2), "{no_home:#?}");
    assert_eq!(
        no_home.stderr,
        "droid-executor: HOME is not set; name the skills root with --dir\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_writes_nothing() {
    let home = Home::new();
    let out = home.setup(&["--dry-run"]).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert_eq!(
        out.stdout,
        listing(&home.skill(), ["would create"; 3], false)
    );
    assert!(
        !home.root().exists(),
        "a dry run created {}",
        home.root().display()
    );

    assert_eq!(home.setup(&[]).await.code, Some(0));
    let skill = home.skill().join("SKILL.md");
    std::fs::write(&skill, "my edits\n").unwrap();
    let before = tree(&home.skill());
    let forced = home.setup(&["--dry-run", "--force"]).await;
    assert_eq!(forced.code, Some(0), "{forced:#?}");
    assert_eq!(
        forced.stdout,
        listing(
            &home.skill(),
            [
                "would replace (edits kept as .bak)",
                "unchanged",
                "unchanged"
            ],
            false
        )
    );
    assert_eq!(std::fs::read_to_string(&skill).unwrap(), "my edits\n");
    assert_eq!(tree(&home.skill()), before, "no .bak, nothing else");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_edits_are_kept_unless_forced_and_then_backed_up() {
    let home = Home::new();
    assert_eq!(home.setup(&[]).await.code, Some(0));
    let skill = home.skill().join("SKILL.md");
    std::fs::write(&skill, "my edits\n").unwrap();
    set_mtime(&skill, long_ago());

    let refused = home.setup(&[]).await;
    assert_eq!(refused.code, Some(2), "{refused:#?}");
    assert_eq!(
        refused.stderr,
        format!(
            "droid-executor: {} has local edits in SKILL.md; nothing was changed. Re-run with \
             --force to replace them (the edited files are kept as <file>.bak)\n",
            home.skill().display()
        )
    );
    // a refusal changes nothing and claims nothing
    assert_eq!(refused.stdout, "");
    assert_eq!(std::fs::read_to_string(&skill).unwrap(), "my edits\n");
    assert_eq!(mtime(&skill), long_ago(), "the edited file was touched");
    assert!(!home.skill().join("SKILL.md.bak").exists());

    let forced = home.setup(&["--force"]).await;
    assert_eq!(forced.code, Some(0), "{forced:#?}");
    assert_eq!(
        forced.stdout,
        listing(
            &home.skill(),
            ["replaced (edits kept as .bak)", "unchanged", "unchanged"],
            true
        )
    );
    assert!(std::fs::read(&skill).unwrap() == bundled("SKILL.md"));
    assert_eq!(
        std::fs::read_to_string(home.skill().join("SKILL.md.bak")).unwrap(),
        "my edits\n"
    );

    let after = home.setup(&[]).await;
    assert_eq!(after.code, Some(0), "{after:#?}");
    assert_eq!(after.stdout, listing(&home.skill(), ["unchanged"; 3], true));
    assert_eq!(
        std::fs::read_to_string(home.skill().join("SKILL.md.bak")).unwrap(),
        "my edits\n",
        "the backup is left alone"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_that_cannot_be_written_is_refused_clearly() {
    // the root is a regular file
    let home = Home::new();
    std::fs::write(home.root(), "not a directory\n").unwrap();
    let out = home.setup(&[]).await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    assert_eq!(
        out.stderr,
        format!(
            "droid-executor: read {}: Not a directory (os error 20)\n",
            home.skill().join("SKILL.md").display()
        )
    );
    assert_eq!(
        std::fs::read_to_string(home.root()).unwrap(),
        "not a directory\n"
    );

    // the root is a read-only directory
    let home = Home::new();
    std::os::unix::fs::symlink(READ_ONLY_DIR, home.root()).unwrap();
    let out = home.setup(&[]).await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    assert!(
        out.stderr.starts_with(&format!(
            "droid-executor: create {}: ",
            home.skill().display()
        )),
        "the message names the folder it could not create: {out:#?}"
    );
    assert_eq!(out.stderr.lines().count(), 1, "{out:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_install_leaves_no_half_installed_skill() {
    // SKILL.md can be written, references/ cannot: nothing may be left behind
    let home = Home::new();
    std::fs::create_dir_all(home.skill()).unwrap();
    std::os::unix::fs::symlink(READ_ONLY_DIR, home.skill().join("references")).unwrap();
    let out = home.setup(&[]).await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    assert!(
        out.stderr.contains("references/"),
        "the message names the file it could not write: {out:#?}"
    );
    assert_eq!(
        tree(&home.skill()),
        ["references"],
        "a failed install left part of the skill behind"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_install_does_not_claim_what_it_did_not_do() {
    let home = Home::new();
    std::os::unix::fs::symlink(READ_ONLY_DIR, home.root()).unwrap();
    let out = home.setup(&[]).await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    assert!(
        !out.stdout.lines().any(|l| l.starts_with("created ")),
        "nothing was created, yet stdout says so: {out:#?}"
    );
}

/// Every entry under `dir` with the content of each file (directories as `DIR/`), sorted.
fn contents(dir: &Path) -> Vec<(String, String)> {
    tree(dir)
        .into_iter()
        .map(|rel| {
            let path = dir.join(&rel);
            if path.is_dir() {
                (format!("{rel}/"), String::new())
            } else {
                let bytes = std::fs::read(&path).unwrap();
                (rel, String::from_utf8_lossy(&bytes).into_owned())
            }
        })
        .collect()
}

/// An installed skill with SKILL.md edited and LICENSE.txt removed: `--force` would replace the
/// one (backing it up) and create the other.
async fn edited_install() -> Home {
    let home = Home::new();
    let out = home.setup(&[]).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    std::fs::write(home.skill().join("SKILL.md"), "my edits\n").unwrap();
    std::fs::remove_file(home.skill().join("LICENSE.txt")).unwrap();
    home
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_that_cannot_be_written_changes_nothing() {
    // `SKILL.md.bak` is a directory holding a file: the edits cannot be kept there, so nothing
    // may be replaced (and nothing staged may be left behind)
    let home = edited_install().await;
    let bak = home.skill().join("SKILL.md.bak");
    std::fs::create_dir_all(&bak).unwrap();
    std::fs::write(bak.join("mine"), "keep\n").unwrap();
    let before = contents(&home.skill());
    let out = home.setup(&["--force"]).await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    assert_eq!(
        contents(&home.skill()),
        before,
        "SKILL.md keeps the edits, no LICENSE.txt, nothing staged or kept"
    );
    assert_eq!(
        out.stderr,
        format!(
            "droid-executor: rename {}: Is a directory (os error 21)\n",
            bak.display()
        )
    );
    assert_eq!(out.stdout, "", "nothing was done, nothing is claimed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rename_failing_after_others_puts_everything_back() {
    // the install record is renamed last; a directory in its place makes that rename fail after
    // the backup, SKILL.md and LICENSE.txt were renamed into place: they must be put back
    let home = edited_install().await;
    let manifest = home.skill().join(MANIFEST);
    std::fs::remove_file(&manifest).unwrap();
    std::fs::create_dir_all(&manifest).unwrap();
    std::fs::write(manifest.join("mine"), "keep\n").unwrap();
    let before = contents(&home.skill());
    let out = home.setup(&["--force"]).await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    assert_eq!(
        contents(&home.skill()),
        before,
        "SKILL.md keeps the edits, no LICENSE.txt, no SKILL.md.bak, nothing staged or kept"
    );
    assert_eq!(
        out.stderr,
        format!(
            "droid-executor: rename {}: Is a directory (os error 21)\n",
            manifest.display()
        )
    );
    assert_eq!(out.stdout, "", "nothing was done, nothing is claimed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_droid_client_gets_factory_skills_and_every_fallback_but_its_own() {
    let home = Home::new();
    let out = droid_executor(
        &["setup", "skill", "--client", "droid"],
        &home.env(),
        home.path(),
    )
    .await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let root = home.path().join(".factory/skills");
    let main = root.join("droid-executor");
    let mut expected = String::new();
    for rel in FILES {
        expected.push_str(&format!("{:<14} {}\n", "created", main.join(rel).display()));
    }
    expected.push_str(&format!(
        "skill droid-executor installed in {}\n",
        main.display()
    ));
    for name in ["ask-codex", "ask-claude", "ask-gemini", "ask-opencode"] {
        let dir = root.join(name);
        expected.push_str(&format!(
            "{:<14} {}\nskill {name} installed in {}\n",
            "created",
            dir.join("SKILL.md").display(),
            dir.display()
        ));
        assert!(
            std::fs::read(dir.join("SKILL.md")).unwrap()
                == std::fs::read(workspace_root().join("skill").join(name).join("SKILL.md"))
                    .unwrap(),
            "{name} is not the repository's file"
        );
    }
    assert_eq!(out.stdout, expected);
    assert!(
        !root.join("ask-droid").exists(),
        "droid does not ask itself"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_fallback_skill_refuses_the_whole_install_unless_forced() {
    let home = Home::new();
    assert_eq!(home.setup(&[]).await.code, Some(0));
    let edited = home.root().join("ask-codex/SKILL.md");
    std::fs::write(&edited, "my codex notes\n").unwrap();
    // an older main skill, unedited, would be updated: the refusal leaves it too
    let main = home.skill().join("SKILL.md");
    std::fs::remove_file(&main).unwrap();
    let refused = home.setup(&[]).await;
    assert_eq!(refused.code, Some(2), "{refused:#?}");
    assert_eq!(
        refused.stderr,
        format!(
            "droid-executor: {} has local edits in SKILL.md; nothing was changed. Re-run with \
             --force to replace them (the edited files are kept as <file>.bak)\n",
            home.root().join("ask-codex").display()
        )
    );
    assert_eq!(refused.stdout, "");
    assert!(!main.exists(), "nothing was written");
    assert_eq!(
        std::fs::read_to_string(&edited).unwrap(),
        "my codex notes\n"
    );

    let forced = home.setup(&["--force"]).await;
    assert_eq!(forced.code, Some(0), "{forced:#?}");
    assert!(main.exists());
    assert_eq!(
        std::fs::read_to_string(home.root().join("ask-codex/SKILL.md.bak")).unwrap(),
        "my codex notes\n"
    );
}
