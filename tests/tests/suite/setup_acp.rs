//! `droid-executor setup acp --client zed [--settings FILE] [--name NAME] [--print]` through the
//! binary: the `agent_servers` entry written into Zed's settings (JSON with comments) with every
//! other byte of the file kept, the file's mode kept, idempotence, an older entry replaced, a file
//! that does not parse refused and left as it was, and `--print`, which writes nothing. The entry
//! names droid as `setup` found it (`env.DROID_CLI_CMD`), and an ACP client starting the agent as
//! the entry says, with a `PATH` that has no droid (Zed started from the desktop), gets its
//! session answered by the real droid.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::acp_world::{AcpWorld, Agent, Scenario, Sdk};
use tests::droid_bin::{droid_executor_bin, real_droid};
use tests::temp_dir::TempDir;

use super::binary::{droid_executor, path_var};

/// HOME, PATH and droid (and `XDG_CONFIG_HOME` when given): where the settings are is up to
/// them.
fn env(home: &Path, xdg: Option<&Path>) -> Vec<(OsString, OsString)> {
    let mut env = vec![
        ("HOME".into(), home.into()),
        ("PATH".into(), path_var()),
        ("DROID_CLI_CMD".into(), real_droid().into()),
    ];
    if let Some(xdg) = xdg {
        env.push(("XDG_CONFIG_HOME".into(), xdg.into()));
    }
    env
}

fn program() -> String {
    droid_executor_bin().display().to_string()
}

fn droid() -> String {
    real_droid().display().to_string()
}

/// The entry's value.
fn entry() -> Value {
    json!({"type": "custom", "command": program(), "args": ["acp"], "env": {"DROID_CLI_CMD": droid()}})
}

/// Our entry as `setup acp` writes it, at the indentation of a member of `agent_servers` whose
/// own members are indented by `unit` more.
fn member(indent: &str, unit: &str) -> String {
    let inner = format!("{indent}{unit}");
    format!(
        "\"Droid (droid-executor)\": {{\n{inner}\"type\": \"custom\",\n{inner}\"command\": {},\n{inner}\"args\": [\"acp\"],\n{inner}\"env\": {{\n{inner}{unit}\"DROID_CLI_CMD\": {}\n{inner}}}\n{indent}}}",
        json!(program()),
        json!(droid())
    )
}

fn wrote_line(verb: &str, path: &Path) -> String {
    format!(
        "{verb} {}: agent_servers.\"Droid (droid-executor)\" = {}\n",
        path.display(),
        entry()
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
            entry()
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
    let kept = json!({"type": "custom", "command": program(), "args": ["acp"],
                      "env": {"FACTORY_API_KEY": "fk-test", "DROID_CLI_CMD": droid()},
                      "default_mode": "low"});
    assert_eq!(
        out.stdout,
        format!(
            "wrote {}: agent_servers.\"Droid (droid-executor)\" = {kept}\n",
            path.display()
        )
    );
    let expected = old
        .replace(
            "\"/home/me/.cargo/bin/droid-executor\"",
            &json!(program()).to_string(),
        )
        .replace("[\"acp\", \"--verbose\"]", "[\"acp\"]")
        .replace(
            "{\"FACTORY_API_KEY\": \"fk-test\"}",
            &format!(
                "{{\"FACTORY_API_KEY\": \"fk-test\",\n                \"DROID_CLI_CMD\": {}\n            }}",
                json!(droid())
            ),
        );
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
        json!({"agent_servers": {"Droid (droid-executor)": entry()}})
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
    assert_eq!(written, json!({"agent_servers": {"Droid": entry()}}));
}

/// `PATH` without a directory holding a `droid`: the session environment of a desktop Zed, where
/// the shell profile that adds droid's directory never ran.
fn path_without_droid() -> OsString {
    let dirs: Vec<std::path::PathBuf> = std::env::split_paths(&path_var())
        .filter(|d| !d.join("droid").exists())
        .collect();
    std::env::join_paths(dirs).unwrap()
}

/// The agent an ACP client starts from the entry `setup acp` wrote (command, args, env), on a
/// `PATH` without droid: the entry's `env.DROID_CLI_CMD` finds droid, and the session is answered
/// by the real droid. The same agent without the entry's env (what `env: {}` of earlier releases
/// gave it) fails at the first session, when nothing else leads to droid on this machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_entry_finds_droid_off_zeds_path() {
    let w = AcpWorld::new().await;
    let repo = w.repo("zed-repo");
    w.model.set_script(json!([{"text": "Hello from droid."}]));
    let path = w.home.path().join(".config/zed/settings.json");
    // setup runs in the user's shell, where droid is found
    let mut shell = w.home.env();
    shell.push(("DROID_CLI_CMD".into(), real_droid().into()));
    let out = droid_executor(&["setup", "acp", "--client", "zed"], &shell, w.home.path()).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let settings: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let written = &settings["agent_servers"]["Droid (droid-executor)"];
    assert_eq!(written, &entry());
    let desktop = path_without_droid();
    let mut agent = Agent {
        program: written["command"].as_str().unwrap().into(),
        args: vec!["acp".into()],
        env: vec![("PATH".into(), desktop.clone())],
    };
    let bare = agent.clone();
    for (k, v) in written["env"].as_object().unwrap() {
        agent = agent.with_env(k, v.as_str().unwrap());
    }
    let scenario = Scenario::new("stream", &repo)
        .model(&w.model_id())
        .prompt("Say hello");
    let run = w.run(Sdk::Node, &agent, &scenario).await;
    let summary = run.assert_ok();
    assert_eq!(summary["errors"], json!([]), "{summary:#}");
    assert_eq!(
        summary["prompts"][0]["chunks"]
            .as_array()
            .map(|c| c.iter().filter_map(Value::as_str).collect::<String>()),
        Some("Hello from droid.".to_owned()),
        "{summary:#}"
    );

    // without the entry's env: does anything else on this machine lead to droid?
    let mut probe = w.home.env();
    probe.push(("PATH".into(), desktop));
    let doctor = droid_executor(&["doctor", "--json"], &probe, w.home.path()).await;
    let checks: Value = serde_json::from_str(&doctor.stdout).unwrap_or(Value::Null);
    let found_anyway = checks
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["check"] == "droid" && c["level"] == "ok");
    if found_anyway {
        eprintln!("droid is installed where droid-executor finds it without PATH: {doctor:#?}");
        return;
    }
    let failed = w
        .run(
            Sdk::Node,
            &bare,
            &Scenario::new("error", &repo).prompt("Say hello"),
        )
        .await;
    let errors = failed.summary["errors"].clone();
    assert_eq!(errors[0]["code"], -32001, "droid not available: {errors:#}");
}
