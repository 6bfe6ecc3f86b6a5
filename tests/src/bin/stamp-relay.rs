//! `stamp-relay <stamp-file> <program> [args...]`: runs `program` with `args`, copies its
//! standard output to ours line by line (flushed per line), and when the first line holding
//! `"type":"completion"` comes, writes the wall-clock time (nanoseconds since the Unix epoch,
//! decimal) to `stamp-file` and then passes the line on. Standard input and error are inherited; the
//! exit code is the program's (128 + the signal if a signal ended it).
//!
//! What it is for: `cargo xtask bench completion` puts it between `droid-executor` and droid
//! (through a two-line `sh` wrapper, since `DROID_CLI_CMD` names a program only) to time what
//! issue 17's goal names, droid's completion event to our result, directly: the stamp against
//! the moment the result is read. The relay adds one file write and one pipe hop (microseconds)
//! to the measured time, never takes from it.

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
    let mut child = Command::new(&program)
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", program.to_string_lossy()))?;
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
        if !stamped && line.windows(MARK.len()).any(|w| w == MARK) {
            // stamped before the line goes on: once our caller has the line it may end this
            // process (and the stamp with it) at any moment
            stamped = true;
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_err(|e| format!("the clock is before 1970: {e}"))?;
            std::fs::write(&stamp, now.as_nanos().to_string())
                .map_err(|e| format!("writing {}: {e}", stamp.to_string_lossy()))?;
        }
        // a reader gone (our caller ended the run) is not an error of ours: keep draining
        let _ = to.write_all(&line).and_then(|()| to.flush());
    }
    let status = child
        .wait()
        .map_err(|e| format!("waiting for the program: {e}"))?;
    Ok(status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(2))
}
