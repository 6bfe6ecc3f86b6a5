//! `stamp-relay <stamp-file> <program> [args...]`: runs `program` with `args`, copies its
//! standard output to ours line by line (flushed per line), and when the first line holding
//! `"type":"completion"` comes, writes the wall-clock time (nanoseconds since the Unix epoch,
//! decimal) to `stamp-file` and then passes the line on. It also writes the wall-clock time just
//! before it starts the program to `<stamp-file>.start`, and just after the program's exit was
//! collected to `<stamp-file>.exit`. A run with the single argument `--version` (a version probe,
//! not the run being timed) writes no stamp. Standard input and error are inherited; the exit code is
//! the program's (128 + the signal if a signal ended it).
//!
//! What it is for: `cargo xtask bench completion` and `bench engine` put it between
//! `droid-executor` and the agent (through a two-line `sh` wrapper, since `DROID_CLI_CMD` names
//! a program only) to time what issue 17's goals name directly: droid's completion event to our
//! result (the completion stamp against the moment the result is read), and the agent's own
//! time inside one of our runs (`.start` to `.exit`, against the whole run). The relay adds one
//! file write and one pipe hop (microseconds) to what is timed as ours, and so does its own
//! start: all of it counts against us, never for us.

use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::process::ExitStatusExt as _;
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

const MARK: &[u8] = b"\"type\":\"completion\"";

fn main() {
    std::process::exit(match relay() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("stamp-relay: {e}");
            2
        }
    });
}

#[allow(clippy::disallowed_methods)] // a bench's test double standing in front of droid, not a run
fn relay() -> Result<i32, String> {
    let mut args = std::env::args_os().skip(1);
    let (Some(stamp), Some(program)) = (args.next(), args.next()) else {
        return Err("usage: stamp-relay <stamp-file> <program> [args...]".into());
    };
    let args: Vec<std::ffi::OsString> = args.collect();
    // the engine's version probe (beside the run when it finds no package.json) is not the run
    // being timed: it writes no stamp
    let stamps = args.as_slice() != [std::ffi::OsString::from("--version")];
    let with_suffix = |suffix: &str| {
        let mut path = stamp.clone();
        path.push(suffix);
        path
    };
    // the time just before the start, written once the program runs (the write is not the
    // program's time)
    let started = now()?;
    let mut child = Command::new(&program)
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", program.to_string_lossy()))?;
    if stamps {
        write_stamp(&with_suffix(".start"), started)?;
    }
    let from = child
        .stdout
        .take()
        .ok_or("the program's stdout was not piped")?;
    let mut from = BufReader::new(from);
    let mut to = std::io::stdout().lock();
    let mut line = Vec::new();
    let mut stamped = false;
    loop {
        line.clear();
        let n = from
            .read_until(b'\n', &mut line)
            .map_err(|e| format!("reading the program's output: {e}"))?;
        if n == 0 {
            break;
        }
        if stamps && !stamped && line.windows(MARK.len()).any(|w| w == MARK) {
            // stamped before the line goes on: once our caller has the line it may end this
            // process (and the stamp with it) at any moment
            stamped = true;
            write_stamp(&stamp, now()?)?;
        }
        // a reader gone (our caller ended the run) is not an error of ours: keep draining
        let _ = to.write_all(&line).and_then(|()| to.flush());
    }
    let status = child
        .wait()
        .map_err(|e| format!("waiting for the program: {e}"))?;
    if stamps {
        write_stamp(&with_suffix(".exit"), now()?)?;
    }
    Ok(status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(2))
}

/// The wall-clock time, in ns since the Unix epoch.
fn now() -> Result<u128, String> {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .map_err(|e| format!("the clock is before 1970: {e}"))
}

/// Write a stamp (`now()`'s decimal) to `path`.
fn write_stamp(path: &std::ffi::OsStr, at: u128) -> Result<(), String> {
    std::fs::write(path, at.to_string())
        .map_err(|e| format!("writing {}: {e}", path.to_string_lossy()))
}
