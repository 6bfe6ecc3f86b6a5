//! `droid-executor setup acp --client zed [--settings FILE] [--name NAME] [--print]` through the
//! binary: the `agent_servers` entry written into Zed's settings (JSON with comments) with every
//! other byte of the file kept, the file's mode kept, idempotence, an older entry replaced, a file
//! that does not parse refused and left as it was, and `--print`, which writes nothing.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::droid_bin::droid_executor_bin;
use tests::temp_dir::TempDir;

use super::binary::{droid_executor, path_var};

/// Only HOME and PATH (and `XDG_CONFIG_HOME` when given): where the settings are is up to them.
fn env(home: &Path, xdg: Option<&Path>) -> Vec<(OsString, OsString)> {
    let mut env = vec![("HOME".into(), home.into()), ("PATH".into(), path_var())];
    if let Some(xdg) = xdg {
        env.push(("XDG_CONFIG_HOME".into(), xdg.into()));
    }
    env
}

fn program() -> String {
    droid_executor_bin().display().to_string()
}

/// Our entry as `setup acp` writes it, at the indentation of a member of `agent_servers` whose
/// own members are indented by `unit` more.
fn member(indent: &str, unit: &str) -> String {
    let inner = format!("{indent}{unit}");
    format!(
        "\"Droid (droid-executor)\": {{\n{inner}\"type\": \"custom\",\n{inner}\"command\": {},\n{inner}\"args\": [\"acp\"],\n{inner}\"env\": {{}}\n{indent}}}",
        json!(program())
    )
}

fn wrote_line(verb: &str, path: &Path) -> String {
    format!(
        "{verb} {}: agent_servers.\"Droid (droid-executor)\" = {}\n",
        path.display(),
        json!({"type": "custom", "command": program(), "args": ["acp"], "env": {}})
    )
}

/// A hand-edited Zed settings file: comments of both kinds, trailing commas, nested objects.
const SETTINGS: &str = "// Zed settings\n//\n// For information on how to configure Zed, see the Zed\n// documentation: https://zed.dev/docs/configuring-zed\n{\n  \"ui_font_size\": 16,\n  /* the font I like */\n  \"buffer_font_family\": \"Iosevka\",\n  \"theme\": {\n    \"mode\": \"system\", // follow the OS\n    \"dark\": \"One Dark\",\n  },\n  \"languages\": {\"Rust\": {\"tab_size\": 4,},},\n  // \"vim_mode\": true,\n}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zed_settings_keep_every_comment_and_key() {
    let home = TempDir::new("setup-acp-zed").unwrap();
    let path = home.path().join(".config/zed/settings.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, SETTINGS).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let env = env(home.path(), None);

    let out = droid_executor(&["setup", "acp", "--client", "zed"], &env, home.path()).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert_eq!(out.stdout, wrote_line("wrote", &path));
    let written = std::fs::read_to_string(&path).unwrap();
    // the old text up to the end of the comment before `}`, then our block; nothing else moved
    let expected = SETTINGS.replace(
        "  // \"vim_mode\": true,\n}\n",
        &format!(
            "  // \"vim_mode\": true,\n  \"agent_servers\": {{\n    {}\n  }}\n}}\n",
            member("    ", "  ")
        ),
    );
    assert_eq!(written, expected);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the file keeps its mode");

    let again = droid_executor(&["setup", "acp", "--client", "zed"], &env, home.path()).await;
    assert_eq!(again.code, Some(0), "{again:#?}");
    assert_eq!(
        again.stdout,
        format!(
            "{} already has agent_servers.\"Droid (droid-executor)\" = {}; nothing to do\n",
            path.display(),
            json!({"type": "custom", "command": program(), "args": ["acp"], "env": {}})
        )
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        expected,
        "idempotent"
    );
    let names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["settings.json"], "no temporary file left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_absent_file_is_created_under_xdg_config_home() {
    let home = TempDir::new("setup-acp-xdg").unwrap();
    let xdg = home.path().join("xdg");
    let path = xdg.join("zed/settings.json");
    let env = env(home.path(), Some(&xdg));
    let out = droid_executor(&["setup", "acp", "--client", "zed"], &env, home.path()).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert_eq!(out.stdout, wrote_line("created", &path));
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        format!(
            "{{\n  \"agent_servers\": {{\n    {}\n  }}\n}}\n",
            member("    ", "  ")
        )
    );
    assert!(
        !home.path().join(".config/zed").exists(),
        "XDG_CONFIG_HOME wins over ~/.config"
    );
}

/// An entry of ours from an older install (another path) is replaced in place: the command and
/// args are ours again, what the user added (a key in `env`, a default mode, a comment) stays,
/// and other agents are untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_existing_entry_is_replaced() {
    let home = TempDir::new("setup-acp-replace").unwrap();
    let path = home.path().join("zed.json");
    let old = "{\n    \"agent_servers\": {\n        \"Claude Code\": {\"type\": \"registry\"},\n        \"Droid (droid-executor)\": {\n            \"type\": \"custom\",\n            // installed with cargo\n            \"command\": \"/home/me/.cargo/bin/droid-executor\",\n            \"args\": [\"acp\", \"--verbose\"],\n            \"env\": {\"FACTORY_API_KEY\": \"fk-test\"},\n            \"default_mode\": \"low\",\n        },\n    },\n}\n";
    std::fs::write(&path, old).unwrap();
    let env = env(home.path(), None);
    let settings = path.display().to_string();
    let out = droid_executor(
        &["setup", "acp", "--client", "zed", "--settings", &settings],
        &env,
        home.path(),
    )
    .await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert_eq!(out.stdout, wrote_line("wrote", &path));
    let expected = old
        .replace(
            "\"/home/me/.cargo/bin/droid-executor\"",
            &json!(program()).to_string(),
        )
        .replace("[\"acp\", \"--verbose\"]", "[\"acp\"]");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_file_is_refused_and_left_untouched() {
    let home = TempDir::new("setup-acp-broken").unwrap();
    let path = home.path().join(".config/zed/settings.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    // a missing comma on line 3
    let broken = "{\n  \"ui_font_size\": 16\n  \"theme\": \"One Dark\"\n}\n";
    std::fs::write(&path, broken).unwrap();
    let env = env(home.path(), None);
    let out = droid_executor(&["setup", "acp", "--client", "zed"], &env, home.path()).await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    assert_eq!(out.stdout, "");
    assert_eq!(
        out.stderr,
        format!(
            "droid-executor: invalid config {}: line 3, column 3: expected ',' or '}}'; Zed's \
             settings must be JSON with comments (fix the file, or paste the entry `setup acp \
             --print` shows)\n",
            path.display()
        )
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), broken);
    // `agent_servers` that is not an object is refused the same way
    let odd = "{\"agent_servers\": [\"droid\"]}";
    std::fs::write(&path, odd).unwrap();
    let out = droid_executor(&["setup", "acp", "--client", "zed"], &env, home.path()).await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    assert!(
        out.stderr
            .contains("line 1, column 19: agent_servers is not an object"),
        "{out:#?}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), odd);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn print_shows_the_entry_and_writes_nothing() {
    let home = TempDir::new("setup-acp-print").unwrap();
    let env = env(home.path(), None);
    let out = droid_executor(
        &["setup", "acp", "--client", "zed", "--print"],
        &env,
        home.path(),
    )
    .await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert_eq!(
        out.stdout,
        format!("\"agent_servers\": {{\n  {}\n}}\n", member("  ", "  "))
    );
    // the snippet is what a user pastes: wrapped in braces it is the settings object we write
    let pasted: Value = serde_json::from_str(&format!("{{{}}}", out.stdout)).unwrap();
    assert_eq!(
        pasted,
        json!({"agent_servers": {"Droid (droid-executor)": {
            "type": "custom", "command": program(), "args": ["acp"], "env": {}}}})
    );
    assert!(
        !home.path().join(".config").exists(),
        "--print writes nothing"
    );
    // --name renames the entry
    let path = home.path().join("s.json");
    let settings = path.display().to_string();
    let out = droid_executor(
        &[
            "setup",
            "acp",
            "--client",
            "zed",
            "--settings",
            &settings,
            "--name",
            "Droid",
        ],
        &env,
        home.path(),
    )
    .await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(
        written,
        json!({"agent_servers": {"Droid": {
            "type": "custom", "command": program(), "args": ["acp"], "env": {}}}})
    );
}
