//! `droid-executor config show [--json]`: every key of the configuration with its effective value
//! and where it came from (a variable, the file, the default), the same in the human listing and
//! in JSON; `--config FILE` and `XDG_CONFIG_HOME` choosing the file; an invalid file refused with
//! its line and column; an `allowed_roots` list that names no directory labelled as ignored (the
//! value shown is the default); every variable set to "" counting as unset; an empty `HOME`
//! giving no config path rather than one relative to the working directory.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use droid_exec::provenance::env_names;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::temp_dir::TempDir;

use super::binary::{NO_DROID_PATH, Out, droid_executor};

/// The keys the original design names (docs/architecture.md#configuration); `config show` lists
/// them all (and the ones added since).
const DESIGN_KEYS: &[&str] = &[
    "droid_bin",
    "port",
    "host",
    "allowed_roots",
    "max_autonomy",
    "allow_unsafe",
    "max_concurrent",
    "verify",
    "sandbox",
    "default_timeout",
    "task_ttl",
    "excerpt_bytes",
    "body_limit",
];

/// A HOME for `config show`, droid found through `DROID_CLI_CMD`.
struct Home {
    dir: TempDir,
}

impl Home {
    fn new() -> Home {
        Home {
            dir: TempDir::new("config-show").unwrap(),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn s(&self) -> String {
        self.path().display().to_string()
    }

    /// The default config file, `HOME/.config/droid-executor/config.toml`.
    fn default_file(&self) -> PathBuf {
        self.path().join(".config/droid-executor/config.toml")
    }

    /// Write `text` to `path` (parents too).
    fn write(&self, path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn env(&self, extra: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        let mut env: Vec<(OsString, OsString)> = vec![
            ("HOME".into(), self.path().into()),
            ("PATH".into(), NO_DROID_PATH.into()),
            ("DROID_CLI_CMD".into(), tests::fake_droid_bin!().into()),
        ];
        env.extend(extra.iter().map(|(k, v)| ((*k).into(), (*v).into())));
        env
    }

    async fn show(&self, args: &[&str], extra: &[(&str, &str)]) -> Out {
        droid_executor(args, &self.env(extra), self.path()).await
    }

    /// `config show --json` (plus `args`), checked to succeed, as a value.
    async fn json(&self, args: &[&str], extra: &[(&str, &str)]) -> Value {
        let mut all = vec!["config", "show", "--json"];
        all.extend_from_slice(args);
        let out = self.show(&all, extra).await;
        assert_eq!(out.code, Some(0), "{out:#?}");
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {out:#?}"))
    }
}

/// The rows of the human listing: `key = value # source`, blanks collapsed.
fn rows(out: &Out) -> Vec<(String, String, String)> {
    out.stdout
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (key, rest) = l
                .split_once(" = ")
                .unwrap_or_else(|| panic!("not `key = value # source`: {l:?}"));
            let (value, source) = rest
                .rsplit_once(" # ")
                .unwrap_or_else(|| panic!("no `# source`: {l:?}"));
            (
                key.trim().to_owned(),
                value.trim().to_owned(),
                source.trim().to_owned(),
            )
        })
        .collect()
}

/// The row of `key` in the JSON: (value, source).
fn row(v: &Value, key: &str) -> (Value, String) {
    let r = v["settings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == key)
        .unwrap_or_else(|| panic!("no {key} in {v:#}"));
    (r["value"].clone(), r["source"].as_str().unwrap().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_every_key_with_its_value_and_source() {
    let home = Home::new();
    let h = home.s();
    let fake = tests::fake_droid_bin!().display().to_string();
    let v = home.json(&[], &[]).await;
    assert_eq!(
        v,
        json!({
            "config_file": home.default_file().display().to_string(),
            "config_file_present": false,
            "settings": [
                {"key": "droid_bin", "value": null, "source": "default"},
                {"key": "codex_bin", "value": null, "source": "default"},
                {"key": "claude_bin", "value": null, "source": "default"},
                {"key": "gemini_bin", "value": null, "source": "default"},
                {"key": "opencode_bin", "value": null, "source": "default"},
                {"key": "port", "value": 53002, "source": "default"},
                {"key": "host", "value": "127.0.0.1", "source": "default"},
                {"key": "allowed_roots", "value": [h], "source": "default (HOME)"},
                {"key": "max_autonomy", "value": "medium", "source": "default"},
                {"key": "allow_unsafe", "value": false, "source": "default"},
                {"key": "max_concurrent", "value": 4, "source": "default"},
                {"key": "verify", "value": true, "source": "default"},
                {"key": "sandbox", "value": "auto", "source": "default"},
                {"key": "sandbox_writable", "value": [], "source": "default"},
                {"key": "cgroups", "value": true, "source": "default"},
                {"key": "max_pids", "value": 4096, "source": "default"},
                {"key": "max_memory_mb", "value": 8192, "source": "default"},
                {"key": "default_timeout", "value": 600, "source": "default"},
                {"key": "task_ttl", "value": 86400, "source": "default"},
                {"key": "excerpt_bytes", "value": 4096, "source": "default"},
                {"key": "body_limit", "value": 1_048_576, "source": "default"},
                {"key": "max_queue", "value": 64, "source": "default"},
                {"key": "token_file", "value": null, "source": "default"},
                {"key": "allowed_hosts", "value": [], "source": "default"},
                {"key": "allowed_origins", "value": [], "source": "default"},
                {"key": "model", "value": null, "source": "default"},
                {"key": "env_passthrough", "value": [], "source": "default"},
                {"key": "store_dir", "value": format!("{h}/.local/state/droid-executor"),
                 "source": "default (XDG_STATE_HOME or HOME)"},
                {"key": "providers", "value": ["droid", "codex", "claude", "gemini", "opencode"],
                 "source": "default"},
                {"key": "toolsets", "value": ["droid", "delegate"], "source": "default"},
                {"key": "isolation", "value": "none", "source": "default"},
                {"key": "setup_commands", "value": [], "source": "default"},
                {"key": "worktree_copy", "value": [], "source": "default"},
                {"key": "max_worktrees", "value": 16, "source": "default"},
            ],
            "droid": {"path": fake, "source": "DROID_CLI_CMD"},
        })
    );
    let keys: Vec<&str> = env_names().iter().map(|(k, _)| *k).collect();
    let listed: Vec<&str> = v["settings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect();
    assert_eq!(listed, keys);
    for k in DESIGN_KEYS {
        assert!(listed.contains(k), "configuration key {k} is not shown");
    }

    let out = home.show(&["config", "show"], &[]).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines.first().copied(),
        Some(
            format!(
                "# config file: {} (not present)",
                home.default_file().display()
            )
            .as_str()
        )
    );
    assert_eq!(
        lines.last().copied(),
        Some(format!("# droid: {fake} (DROID_CLI_CMD)").as_str())
    );
    let from_json: Vec<(String, String, String)> = v["settings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap().to_owned(),
                r["value"].to_string(),
                r["source"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(rows(&out), from_json, "the listing and the JSON agree");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_value_names_the_variable_the_file_or_the_default() {
    let home = Home::new();
    home.write(
        &home.default_file(),
        "port = 4321\nverify = false\nmax_queue = 7\nallowed_hosts = [\"example.test\"]\n",
    );
    let out = home
        .show(
            &["config", "show"],
            &[
                ("PORT", "1234"),
                ("DROID_TIMEOUT", "45"),
                ("DROID_EXECUTOR_MAX_CONCURRENT", "3"),
            ],
        )
        .await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert_eq!(
        out.stdout.lines().next(),
        Some(format!("# config file: {}", home.default_file().display()).as_str())
    );
    let got = rows(&out);
    let get = |k: &str| {
        let (_, value, source) = got.iter().find(|(key, _, _)| key == k).unwrap();
        format!("{k} = {value} # {source}")
    };
    assert_eq!(
        get("port"),
        "port = 1234 # env PORT",
        "the variable beats the file"
    );
    assert_eq!(get("verify"), "verify = false # file");
    assert_eq!(get("max_queue"), "max_queue = 7 # file");
    assert_eq!(
        get("allowed_hosts"),
        "allowed_hosts = [\"example.test\"] # file"
    );
    assert_eq!(
        get("default_timeout"),
        "default_timeout = 45 # env DROID_TIMEOUT"
    );
    assert_eq!(
        get("max_concurrent"),
        "max_concurrent = 3 # env DROID_EXECUTOR_MAX_CONCURRENT"
    );
    assert_eq!(get("task_ttl"), "task_ttl = 86400 # default");

    // of seed 000's name (docs/architecture.md#origin) and ours, ours wins
    let v = home
        .json(&[], &[("PORT", "1234"), ("DROID_EXECUTOR_PORT", "1235")])
        .await;
    assert_eq!(
        row(&v, "port"),
        (json!(1235), "env DROID_EXECUTOR_PORT".into())
    );
    assert_eq!(v["config_file_present"], json!(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_config_flag_and_xdg_config_home_choose_the_file() {
    let home = Home::new();
    home.write(&home.default_file(), "port = 1111\n");
    let other = home.path().join("elsewhere/other.toml");
    home.write(&other, "port = 2222\nmodel = \"custom:M-0\"\n");
    let other_s = other.display().to_string();
    for args in [
        vec!["--config", &other_s, "config", "show"],
        vec!["config", "show", "--config", &other_s],
    ] {
        let out = home.show(&args, &[]).await;
        assert_eq!(out.code, Some(0), "{out:#?}");
        assert_eq!(
            out.stdout.lines().next(),
            Some(format!("# config file: {other_s}").as_str()),
            "{args:?}"
        );
        let got = rows(&out);
        assert!(
            got.contains(&("port".into(), "2222".into(), "file".into())),
            "{args:?}: {got:?}"
        );
        assert!(
            got.contains(&("model".into(), "\"custom:M-0\"".into(), "file".into())),
            "{args:?}: {got:?}"
        );
    }
    let v = home.json(&["--config", &other_s], &[]).await;
    assert_eq!(v["config_file"], json!(other_s));
    assert_eq!(row(&v, "port"), (json!(2222), "file".into()));

    let xdg = home.path().join("xdg");
    home.write(&xdg.join("droid-executor/config.toml"), "port = 3333\n");
    let v = home
        .json(&[], &[("XDG_CONFIG_HOME", &xdg.display().to_string())])
        .await;
    assert_eq!(
        v["config_file"],
        json!(xdg.join("droid-executor/config.toml").display().to_string())
    );
    assert_eq!(row(&v, "port"), (json!(3333), "file".into()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_file_is_refused_with_its_line_and_column() {
    let home = Home::new();
    let file = home.default_file();
    home.write(&file, "port = 1\nverify = \"yes\"\n");
    for args in [&["config", "show"][..], &["config", "show", "--json"][..]] {
        let out = home.show(args, &[]).await;
        assert_eq!(out.code, Some(2), "{out:#?}");
        assert_eq!(out.stdout, "", "{args:?}");
        assert!(
            out.stderr.starts_with(&format!(
                "droid-executor config: invalid config {}: TOML parse error at line 2, column 10\n",
                file.display()
            )),
            "{out:#?}"
        );
        assert!(out.stderr.contains("expected a boolean"), "{out:#?}");
    }

    let bad = home.path().join("bad.toml");
    home.write(&bad, "port = 1\n\nbogus = 3\n");
    let out = home
        .show(
            &["config", "show", "--config", &bad.display().to_string()],
            &[],
        )
        .await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    assert!(
        out.stderr.starts_with(&format!(
            "droid-executor config: invalid config {}: TOML parse error at line 3, column 1\n",
            bad.display()
        )),
        "{out:#?}"
    );
    assert!(out.stderr.contains("unknown field `bogus`"), "{out:#?}");

    std::fs::remove_file(&file).unwrap();
    let out = home.show(&["config", "show"], &[("PORT", "http")]).await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    assert!(
        out.stderr.contains("PORT") && out.stderr.contains("\"http\""),
        "a bad variable is named: {out:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_variable_that_overrides_the_file_is_named_as_the_source() {
    // `DROID_EXECUTOR_ALLOWED_HOSTS=` and `DROID_EXECUTOR_ALLOWED_ROOTS=` replace the file's
    // lists; what is shown must be what is used, labelled with what set it
    let home = Home::new();
    home.write(
        &home.default_file(),
        "allowed_hosts = [\"example.test\"]\nallowed_roots = [\"/srv/repos\"]\n",
    );
    let v = home
        .json(
            &[],
            &[
                ("DROID_EXECUTOR_ALLOWED_HOSTS", ""),
                ("DROID_EXECUTOR_ALLOWED_ROOTS", ""),
            ],
        )
        .await;
    let mislabelled: Vec<String> = [
        ("allowed_hosts", json!(["example.test"])),
        ("allowed_roots", json!(["/srv/repos"])),
    ]
    .into_iter()
    .filter_map(|(key, file_value)| {
        let (value, source) = row(&v, key);
        let honest = source.starts_with("env ") || (source == "file" && value == file_value);
        (!honest).then(|| format!("{key} = {value} # {source} (the file says {file_value})"))
    })
    .collect();
    assert_eq!(mislabelled, Vec::<String>::new());
}

/// A config file, the environment, and the `allowed_roots` row expected: value and source.
type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], Value, String);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_roots_list_that_names_no_directory_is_labelled_as_ignored() {
    let home = Home::new();
    let h = home.s();
    let ignored_var = "DROID_EXECUTOR_ALLOWED_ROOTS=\":\" names no directory: ignored";
    let ignored_file = "the file's list names no directory: ignored";
    // (the file, the environment, the value shown, its source)
    let cases: [Case<'_>; 4] = [
        (
            "allowed_roots = []\n",
            &[],
            json!([h]),
            format!("default (HOME; {ignored_file})"),
        ),
        (
            "allowed_roots = [\"\"]\n",
            &[],
            json!([h]),
            format!("default (HOME; {ignored_file})"),
        ),
        (
            "",
            &[("DROID_EXECUTOR_ALLOWED_ROOTS", ":")],
            json!([h]),
            format!("default (HOME; {ignored_var})"),
        ),
        (
            "allowed_roots = [\"/srv/repos\"]\n",
            &[("DROID_EXECUTOR_ALLOWED_ROOTS", ":")],
            json!(["/srv/repos"]),
            format!("file ({ignored_var})"),
        ),
    ];
    for (file, env, value, source) in cases {
        home.write(&home.default_file(), file);
        let v = home.json(&[], env).await;
        assert_eq!(
            row(&v, "allowed_roots"),
            (value.clone(), source.clone()),
            "{file:?} {env:?}"
        );
        let out = home.show(&["config", "show"], env).await;
        assert_eq!(out.code, Some(0), "{out:#?}");
        let got = rows(&out);
        assert!(
            got.contains(&("allowed_roots".into(), value.to_string(), source.clone())),
            "{file:?} {env:?}: {got:?}"
        );
        // what `run` would allow is what is shown: doctor's line lists the same roots
        let doctor = home.show(&["doctor"], env).await;
        let roots: Vec<String> = serde_json::from_value(value).unwrap();
        let want = format!("OK   allowed_roots {}", roots.join(", "));
        assert!(
            doctor.stdout.lines().any(|l| l == want),
            "{want}\n{}",
            doctor.stdout
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_variable_set_to_empty_counts_as_unset() {
    let home = Home::new();
    home.write(
        &home.default_file(),
        "port = 4321\nmax_autonomy = \"low\"\nverify = false\n",
    );
    let empty: Vec<(&str, &str)> = env_names()
        .iter()
        .flat_map(|(_, vars)| vars.iter().map(|v| (*v, "")))
        .collect();
    assert!(
        empty.contains(&("DROID_EXECUTOR_MAX_AUTONOMY", "")),
        "{empty:?}"
    );
    let with_empty = home.json(&[], &empty).await;
    let without = home.json(&[], &[]).await;
    assert_eq!(with_empty, without);
    assert_eq!(
        row(&with_empty, "max_autonomy"),
        (json!("low"), "file".into())
    );
    assert_eq!(row(&with_empty, "port"), (json!(4321), "file".into()));
    // doctor loads the settings as `run` does: no FAIL for an empty DROID_EXECUTOR_MAX_AUTONOMY
    let out = home
        .show(&["doctor"], &[("DROID_EXECUTOR_MAX_AUTONOMY", "")])
        .await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert!(!out.stdout.contains("MAX_AUTONOMY"), "{out:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_home_gives_no_config_path() {
    // with HOME="" a path built from it would be relative: a config.toml in whatever directory
    // the command runs in would be read
    let home = Home::new();
    home.write(&home.default_file(), "port = 7777\n");
    let v = home.json(&[], &[("HOME", "")]).await;
    assert_eq!(v["config_file"], Value::Null);
    assert_eq!(v["config_file_present"], json!(false));
    assert_eq!(row(&v, "port"), (json!(53002), "default".into()));
    let out = home.show(&["config", "show"], &[("HOME", "")]).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert_eq!(
        out.stdout.lines().next(),
        Some("# config file: none (HOME unset)")
    );
}
