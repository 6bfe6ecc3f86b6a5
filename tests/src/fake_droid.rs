//! The scenario player behind the `fake-droid` binary: a stand-in for droid for the faults the
//! real one cannot be made to produce on demand (crash, hang, ignore SIGTERM, leak a grandchild,
//! flood stdout, print garbage).
//!
//! # Invocation
//! Exactly like droid: `fake-droid exec --output-format stream-json --cwd DIR [--auto L] [-m M]
//! [-r R] [-s S] -f PROMPTFILE` (every `droid exec` option is accepted, an unknown one fails like
//! droid: `error: unknown option '--x'` on stderr, exit 1), and `fake-droid --version` (prints
//! `0.225.2`, exit 0).
//!
//! # Environment
//! - `FAKE_DROID_RECORD=PATH`: before anything else, `exec` writes (atomically)
//!   `{"argv": [arguments after the program name], "prompt": <content of the -f file, else the
//!   prompt argument, else stdin; null if unreadable>, "cwd": <process cwd>, "env": {NAME: value}}`.
//! - `FAKE_DROID_SCENARIO=PATH`: the scenario, `{"steps": [ ... ]}`.
//!
//! # Steps
//! Each step is an object with one key; they run in order, then the process exits 0.
//!
//! | step | effect |
//! |---|---|
//! | `{"emit": <json>}` | print the value as one compact JSON line on stdout |
//! | `{"raw": "text"}` | print the text and a newline on stdout |
//! | `{"partial": "text"}` | print the text without a newline |
//! | `{"stderr": "text"}` | print the text and a newline on stderr |
//! | `{"completion": "final text"}` | emit a droid `completion` event (see [`completion_event`]) |
//! | `{"sleep_ms": N}` | sleep N ms |
//! | `{"hang": true}` | sleep forever |
//! | `{"exit": N}` | exit with status N |
//! | `{"crash": true}` | abort (SIGABRT) |
//! | `{"kill_self": "SIGKILL"}` | send itself that signal (any name `nix` knows) |
//! | `{"ignore_sigterm": true}` | from now on SIGTERM does nothing |
//! | `{"spawn_grandchild": {"command": C, "pid_file": P}}` | run `setsid sh -c C` (own session, stdio on /dev/null, cwd = `--cwd`, this environment) and write the pid of `sh`, the session and process-group leader, to P |
//! | `{"wait_file": P}` | wait until P exists (polling every 10 ms; after 60 s it fails like a bad scenario) |
//! | `{"flood_bytes": N}` | write exactly N bytes of `x` lines (1 KiB each, the last one shorter) |
//! | `{"flood_events": {"events": [E, ...], "bytes": N}}` | write the events (compact JSON lines) round-robin until at least N bytes are out |
//! | `{"long_line": N}` | write one line of N `x` |
//! | `{"write_file": {"path": P, "content": C}}` | create or overwrite P (parents too) |
//! | `{"sh": C}` | run `sh -c C` in the `--cwd` directory with this environment, stdin on /dev/null, and wait for it; its stdout and stderr go to this process's stderr (the hostile agent's tool: whatever it does, its exit status is ignored) |
//!
//! Relative paths in `write_file`, `wait_file` and `pid_file` are relative to the `--cwd` directory. stdout is
//! flushed after every step. A bad scenario (unknown step, missing variable) prints
//! `fake-droid: <reason>` on stderr and exits 2.

use std::ffi::OsString;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::str::FromStr as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

/// The version `--version` prints.
pub const VERSION: &str = "0.225.2";
/// The variable naming the scenario file.
pub const SCENARIO_ENV: &str = "FAKE_DROID_SCENARIO";
/// The variable naming the file the invocation is recorded to.
pub const RECORD_ENV: &str = "FAKE_DROID_RECORD";

/// How long a `wait_file` step waits.
const WAIT_FILE_LIMIT: Duration = Duration::from_secs(60);
/// Length of one `flood_bytes` line, newline included.
const FLOOD_LINE_BYTES: usize = 1024;

/// `droid exec` options that take a value (from `droid exec --help`, 0.225.2).
const VALUE_OPTIONS: &[&str] = &[
    "-o",
    "--output-format",
    "--input-format",
    "-f",
    "--file",
    "--auto",
    "-s",
    "--session-id",
    "--fork",
    "-m",
    "--model",
    "-r",
    "--reasoning-effort",
    "--spec-model",
    "--spec-reasoning-effort",
    "--only-tools",
    "--add-tools",
    "--remove-tools",
    "--cwd",
    "--settings",
    "--worktree-dir",
    "--tag",
    "--log-group-id",
    "--worker-model",
    "--worker-reasoning-effort",
    "--validator-model",
    "--validator-reasoning-effort",
    "--append-system-prompt",
    "--append-system-prompt-file",
];

/// `droid exec` options without a value.
const FLAG_OPTIONS: &[&str] = &[
    "--skip-permissions-unsafe",
    "--disable-builtin-skills",
    "--use-spec",
    "--mission",
    "--list-tools",
    "-w",
    "--worktree",
    "-h",
    "--help",
];

/// How the process should end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Exit with this status.
    Exit(i32),
    /// Abort (SIGABRT).
    Abort,
}

/// The `completion` event droid 0.225.2 prints last on success, with fixed counters.
pub fn completion_event(final_text: &str, timestamp_ms: u64) -> Value {
    json!({
        "type": "completion",
        "finalText": final_text,
        "numTurns": 1,
        "durationMs": 5,
        "session_id": "fake-session",
        "timestamp": timestamp_ms,
        "usage": {
            "input_tokens": 10,
            "output_tokens": 5,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
            "factory_credits": 0,
            "ttft_ms": 3,
        },
    })
}

/// The options of an `exec` invocation that the player uses.
#[derive(Debug, Default)]
struct Exec {
    cwd: Option<PathBuf>,
    prompt_file: Option<PathBuf>,
    prompt_arg: Option<String>,
}

/// Parses `exec` arguments like droid's commander does; `Err` is the message droid prints.
fn parse_exec(args: &[String]) -> Result<Exec, String> {
    let mut exec = Exec::default();
    let mut rest = args.iter();
    let mut options_done = false;
    while let Some(arg) = rest.next() {
        if options_done || !arg.starts_with('-') || arg == "-" {
            if exec.prompt_arg.is_none() {
                exec.prompt_arg = Some(arg.clone());
            }
            continue;
        }
        if arg == "--" {
            options_done = true;
            continue;
        }
        let (name, inline) = match arg.split_once('=') {
            Some((name, value)) if name.starts_with("--") => (name, Some(value.to_owned())),
            _ => (arg.as_str(), None),
        };
        if FLAG_OPTIONS.contains(&name) {
            continue;
        }
        if !VALUE_OPTIONS.contains(&name) {
            return Err(format!("error: unknown option '{arg}'"));
        }
        let value = match inline {
            Some(value) => value,
            None => rest
                .next()
                .cloned()
                .ok_or_else(|| format!("error: option '{name}' argument missing"))?,
        };
        match name {
            "--cwd" => exec.cwd = Some(PathBuf::from(value)),
            "-f" | "--file" => exec.prompt_file = Some(PathBuf::from(value)),
            _ => {}
        }
    }
    Ok(exec)
}

/// Runs `fake-droid` with these arguments (after the program name).
///
/// # Errors
/// A scenario that cannot be read or has a bad step, or a failed write.
pub async fn run(args: Vec<OsString>) -> anyhow::Result<Ending> {
    let args: Vec<String> = args
        .into_iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    match args.first().map(String::as_str) {
        Some("--version" | "-v") => {
            let mut out = io::stdout().lock();
            writeln!(out, "{VERSION}")?;
            out.flush()?;
            return Ok(Ending::Exit(0));
        }
        Some("exec") => {}
        Some(other) => {
            eprintln!("error: unknown command '{other}'");
            return Ok(Ending::Exit(1));
        }
        None => {
            eprintln!(
                "fake-droid: usage: fake-droid exec [options] [prompt] | fake-droid --version"
            );
            return Ok(Ending::Exit(1));
        }
    }
    let parsed = parse_exec(&args[1..]);
    let prompt = parsed.as_ref().ok().and_then(read_prompt);
    if let Some(record) = std::env::var_os(RECORD_ENV) {
        write_record(Path::new(&record), &args, prompt.as_deref())?;
    }
    let exec = match parsed {
        Ok(exec) => exec,
        Err(message) => {
            eprintln!("{message}");
            return Ok(Ending::Exit(1));
        }
    };
    if prompt.is_none() {
        eprintln!("fake-droid: no readable prompt");
        return Ok(Ending::Exit(1));
    }
    let scenario_path =
        std::env::var_os(SCENARIO_ENV).with_context(|| format!("{SCENARIO_ENV} is not set"))?;
    let scenario_path = PathBuf::from(scenario_path);
    let text = std::fs::read(&scenario_path)
        .with_context(|| format!("reading scenario {}", scenario_path.display()))?;
    let scenario: Value = serde_json::from_slice(&text)
        .with_context(|| format!("parsing scenario {}", scenario_path.display()))?;
    let Some(steps) = scenario.get("steps").and_then(Value::as_array) else {
        bail!("the scenario has no \"steps\" array");
    };
    let base = exec.cwd.clone().unwrap_or_else(|| PathBuf::from("."));
    for step in steps {
        if let Some(ending) = play(step, &base).await? {
            io::stdout().flush()?;
            return Ok(ending);
        }
    }
    io::stdout().flush()?;
    Ok(Ending::Exit(0))
}

/// The prompt droid would use: the `-f` file, else the argument, else stdin.
fn read_prompt(exec: &Exec) -> Option<String> {
    if let Some(file) = &exec.prompt_file {
        return std::fs::read(file)
            .ok()
            .map(|b| String::from_utf8_lossy(&b).into_owned());
    }
    if let Some(arg) = &exec.prompt_arg {
        return Some(arg.clone());
    }
    let mut input = Vec::new();
    io::Read::read_to_end(&mut io::stdin(), &mut input).ok()?;
    Some(String::from_utf8_lossy(&input).into_owned())
}

fn write_record(path: &Path, args: &[String], prompt: Option<&str>) -> anyhow::Result<()> {
    let cwd = std::env::current_dir()
        .map(|d| d.to_string_lossy().into_owned())
        .ok();
    let env: serde_json::Map<String, Value> = std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                Value::String(v.to_string_lossy().into_owned()),
            )
        })
        .collect();
    let record = json!({"argv": args, "prompt": prompt, "cwd": cwd, "env": env});
    write_atomically(path, record.to_string().as_bytes())
        .with_context(|| format!("writing record {}", path.display()))
}

/// Writes through a temporary sibling and a rename, so a reader never sees half a file.
fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn print_line(bytes: &[u8]) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(bytes)?;
    out.write_all(b"\n")?;
    out.flush()
}

fn number(value: &Value, step: &str) -> anyhow::Result<u64> {
    value
        .as_u64()
        .with_context(|| format!("step {step:?} needs a non-negative integer"))
}

fn text<'a>(value: &'a Value, step: &str) -> anyhow::Result<&'a str> {
    value
        .as_str()
        .with_context(|| format!("step {step:?} needs a string"))
}

/// Plays one step; `Some` when the process must end now.
async fn play(step: &Value, base: &Path) -> anyhow::Result<Option<Ending>> {
    let Some((name, arg)) = step
        .as_object()
        .and_then(|o| if o.len() == 1 { o.iter().next() } else { None })
    else {
        bail!("a step must be an object with exactly one key: {step}");
    };
    match name.as_str() {
        "emit" => print_line(arg.to_string().as_bytes())?,
        "raw" => print_line(text(arg, name)?.as_bytes())?,
        "partial" => {
            let mut out = io::stdout().lock();
            out.write_all(text(arg, name)?.as_bytes())?;
            out.flush()?;
        }
        "stderr" => eprintln!("{}", text(arg, name)?),
        "completion" => {
            let event = completion_event(text(arg, name)?, now_ms());
            print_line(event.to_string().as_bytes())?;
        }
        "sleep_ms" => tokio::time::sleep(Duration::from_millis(number(arg, name)?)).await,
        "hang" => std::future::pending::<()>().await,
        "exit" => {
            let code = arg
                .as_i64()
                .and_then(|c| i32::try_from(c).ok())
                .context("step \"exit\" needs an integer")?;
            return Ok(Some(Ending::Exit(code)));
        }
        "crash" => return Ok(Some(Ending::Abort)),
        "kill_self" => {
            let name = text(arg, name)?;
            let signal = nix::sys::signal::Signal::from_str(name)
                .with_context(|| format!("unknown signal {name:?}"))?;
            io::stdout().flush()?;
            nix::sys::signal::raise(signal).context("raising a signal")?;
        }
        "ignore_sigterm" => {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
            // Keep the stream alive and drain it; tokio's handler stays installed, so SIGTERM
            // no longer terminates the process.
            tokio::spawn(async move { while term.recv().await.is_some() {} });
        }
        "spawn_grandchild" => {
            let command = text(&arg["command"], "spawn_grandchild.command")?;
            let pid_file = base.join(text(&arg["pid_file"], "spawn_grandchild.pid_file")?);
            let pid = spawn_grandchild(command, base)
                .with_context(|| format!("starting `setsid sh -c {command:?}`"))?;
            write_atomically(&pid_file, format!("{pid}\n").as_bytes())
                .with_context(|| format!("writing {}", pid_file.display()))?;
        }
        "wait_file" => {
            let path = base.join(text(arg, name)?);
            let until = std::time::Instant::now() + WAIT_FILE_LIMIT;
            while !path.exists() {
                if std::time::Instant::now() >= until {
                    bail!(
                        "{} did not appear within {WAIT_FILE_LIMIT:?}",
                        path.display()
                    );
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        "flood_bytes" => flood(usize::try_from(number(arg, name)?)?)?,
        "flood_events" => {
            let events = arg["events"]
                .as_array()
                .filter(|e| !e.is_empty())
                .context("step \"flood_events\" needs a non-empty \"events\" list")?;
            let total = usize::try_from(number(&arg["bytes"], "flood_events.bytes")?)?;
            flood_events(events, total)?;
        }
        "long_line" => {
            let line = vec![b'x'; usize::try_from(number(arg, name)?)?];
            print_line(&line)?;
        }
        "write_file" => {
            let path = base.join(text(&arg["path"], "write_file.path")?);
            let content = text(&arg["content"], "write_file.content")?;
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&path, content)
                .with_context(|| format!("writing {}", path.display()))?;
        }
        "sh" => {
            let command = text(arg, name)?;
            run_sh(command, base).with_context(|| format!("running `sh -c {command:?}`"))?;
        }
        other => bail!("unknown step {other:?}"),
    }
    Ok(None)
}

/// Starts `setsid sh -c COMMAND` in its own session, like droid's Execute supervisor, and lets it
/// go: it is never waited for, so it outlives this process. `setsid` execs in place (this child
/// is not a group leader), so the pid is `sh`, the leader of the new session and process group.
/// `sh` (dash) may fork the command rather than exec it: kill the group (`kill -- -PID`) to get
/// everything.
#[allow(clippy::disallowed_methods)]
fn spawn_grandchild(command: &str, cwd: &Path) -> io::Result<u32> {
    let child = std::process::Command::new("setsid")
        .arg("sh")
        .arg("-c")
        .arg(command)
        .current_dir(cwd)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    Ok(child.id())
}

/// Runs `sh -c COMMAND` in `cwd` and waits for it, its output on this process's stderr (stdout
/// carries the event stream). Its exit status is not looked at.
#[allow(clippy::disallowed_methods)]
fn run_sh(command: &str, cwd: &Path) -> io::Result<()> {
    use std::os::fd::AsFd as _;
    let err = io::stderr().as_fd().try_clone_to_owned()?;
    let out = err.try_clone()?;
    std::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(cwd)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::from(out))
        .stderr(std::process::Stdio::from(err))
        .status()
        .map(|_| ())
}

/// Writes `events` as JSON lines, round-robin, until at least `total` bytes are out.
fn flood_events(events: &[Value], total: usize) -> io::Result<()> {
    let lines: Vec<String> = events.iter().map(|e| format!("{e}\n")).collect();
    let mut out = io::BufWriter::with_capacity(64 * 1024, io::stdout().lock());
    let mut written = 0;
    for line in lines.iter().cycle() {
        if written >= total {
            break;
        }
        out.write_all(line.as_bytes())?;
        written += line.len();
    }
    out.flush()
}

/// Writes exactly `total` bytes of `x` lines as fast as stdout takes them.
fn flood(total: usize) -> io::Result<()> {
    let mut line = vec![b'x'; FLOOD_LINE_BYTES];
    line[FLOOD_LINE_BYTES - 1] = b'\n';
    let mut out = io::BufWriter::with_capacity(64 * 1024, io::stdout().lock());
    let mut left = total;
    while left >= FLOOD_LINE_BYTES {
        out.write_all(&line)?;
        left -= FLOOD_LINE_BYTES;
    }
    if left > 0 {
        out.write_all(&line[FLOOD_LINE_BYTES - left..])?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn parses_the_engine_invocation() {
        let exec = parse_exec(&strings(&[
            "--output-format",
            "stream-json",
            "--cwd",
            "/r",
            "--auto",
            "low",
            "-m",
            "custom:X-0",
            "-f",
            "/p",
        ]))
        .unwrap();
        assert_eq!(exec.cwd, Some(PathBuf::from("/r")));
        assert_eq!(exec.prompt_file, Some(PathBuf::from("/p")));
        assert_eq!(exec.prompt_arg, None);
    }

    #[test]
    fn rejects_unknown_options_like_droid() {
        let err = parse_exec(&strings(&["--frobnicate", "hi"])).unwrap_err();
        assert_eq!(err, "error: unknown option '--frobnicate'");
    }

    #[test]
    fn inline_values_and_double_dash() {
        let exec = parse_exec(&strings(&["--cwd=/a", "--", "-x prompt"])).unwrap();
        assert_eq!(exec.cwd, Some(PathBuf::from("/a")));
        assert_eq!(exec.prompt_arg.as_deref(), Some("-x prompt"));
    }
}
