//! Reading an input the user names (a request file, an instructions file, a config or token
//! file, stdin) with a bound on its size and on how long it may stay silent, in constant memory.
//!
//! Every front-end reads such inputs before it calls the engine; this is the one place that
//! knows how to do it safely:
//! - at most `limit + 1` bytes are ever read: `/dev/zero`, `/dev/urandom` or a 2 GB file is an
//!   [`EngineError::InputTooLarge`] naming the limit, not a process that grows until the OOM
//!   killer ends it;
//! - a file is opened with `O_NONBLOCK`, so opening a FIFO that has no writer does not block;
//!   a FIFO, pipe, socket or terminal is then read only when `poll` says it is readable, and
//!   [`INPUT_IDLE`] without a byte is an [`EngineError::InputIdle`]. Key choice: a bounded
//!   wait rather than a refusal, so `--request <(generate)` and `generate | … --request -`
//!   keep working (the writer has [`INPUT_IDLE`] to produce each next piece); a FIFO nobody
//!   opens for writing, or a terminal nobody types into, ends the command with a clear error
//!   instead of hanging for ever.

use std::fs::File;
use std::io::Read;
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use crate::error::EngineError;

/// How long a pipe, FIFO or terminal may stay silent before reading it is given up.
pub const INPUT_IDLE: Duration = Duration::from_secs(30);

/// The size of one read.
const CHUNK: usize = 64 * 1024;

/// What to read.
#[derive(Debug, Clone, Copy)]
pub enum Input<'a> {
    /// This process's standard input.
    Stdin,
    /// A file (or FIFO, or device) by path.
    Path(&'a Path),
}

/// Read all of `input`, at most `limit` bytes, waiting at most [`INPUT_IDLE`] for each piece of
/// a pipe, FIFO or terminal. `what` names the input in errors (`--request /dev/zero`); `why`
/// says where the limit comes from and how to raise it.
///
/// # Errors
/// [`EngineError::InputTooLarge`] past `limit` (only `limit` + one chunk was read),
/// [`EngineError::InputIdle`] for a silent pipe or FIFO, [`EngineError::Input`] when it
/// cannot be opened or read.
pub fn read_input(
    input: Input<'_>,
    what: &str,
    limit: usize,
    why: &str,
) -> Result<Vec<u8>, EngineError> {
    read_input_with(input, what, limit, why, INPUT_IDLE)
}

/// [`read_input`] with the idle limit given.
pub(crate) fn read_input_with(
    input: Input<'_>,
    what: &str,
    limit: usize,
    why: &str,
    idle: Duration,
) -> Result<Vec<u8>, EngineError> {
    let failed = |source| EngineError::Input {
        what: what.to_owned(),
        source,
    };
    let file = match input {
        // a duplicate of fd 0, read directly: std's buffered stdin would hide bytes from `poll`
        Input::Stdin => File::from(
            std::io::stdin()
                .as_fd()
                .try_clone_to_owned()
                .map_err(failed)?,
        ),
        Input::Path(path) => std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(OFlag::O_NONBLOCK.bits())
            .open(path)
            .map_err(failed)?,
    };
    let regular = file.metadata().map_err(failed)?.file_type().is_file();
    let mut file = file;
    let mut out = Vec::new();
    let mut buf = vec![0u8; CHUNK];
    loop {
        if !regular && !readable_within(&file, idle).map_err(failed)? {
            return Err(EngineError::InputIdle {
                what: what.to_owned(),
                secs: idle.as_secs(),
            });
        }
        match file.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => {
                if out.len() + n > limit {
                    return Err(EngineError::InputTooLarge {
                        what: what.to_owned(),
                        limit,
                        why: why.to_owned(),
                    });
                }
                out.extend_from_slice(&buf[..n]);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock
                ) => {}
            Err(e) => return Err(failed(e)),
        }
    }
}

/// Whether `file` has something to read (data, or its end) within `idle`.
fn readable_within(file: &File, idle: Duration) -> std::io::Result<bool> {
    let deadline = Instant::now() + idle;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(false);
        }
        let timeout = PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX);
        let mut fds = [PollFd::new(file.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, timeout) {
            Ok(0) => {}
            Ok(_) => return Ok(true),
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    fn temp(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("droid-exec-input-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_file_within_the_limit_is_read_whole() {
        let dir = temp("whole");
        let path = dir.join("f");
        std::fs::write(&path, b"12345").unwrap();
        let got = read_input(Input::Path(&path), "--x f", 5, "the x limit").unwrap();
        assert_eq!(got, b"12345");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn dev_zero_stops_at_the_limit_with_an_error_naming_it() {
        let e = read_input(
            Input::Path(Path::new("/dev/zero")),
            "--request /dev/zero",
            1000,
            "body_limit",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "--request /dev/zero is larger than the limit of 1000 bytes (body_limit)"
        );
    }

    #[test]
    fn a_file_one_byte_over_is_refused() {
        let dir = temp("over");
        let path = dir.join("f");
        std::fs::File::create(&path)
            .unwrap()
            .write_all(b"123456")
            .unwrap();
        let e = read_input(Input::Path(&path), "--x f", 5, "why").unwrap_err();
        assert!(
            matches!(e, EngineError::InputTooLarge { limit: 5, .. }),
            "{e}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_fifo_without_a_writer_is_an_idle_error_not_a_hang() {
        let dir = temp("fifo");
        let path = dir.join("fifo");
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let e = read_input_with(
            Input::Path(&path),
            "--request fifo",
            100,
            "why",
            Duration::from_millis(200),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "--request fifo: nothing arrived for 0 s (a pipe or FIFO without a writer?); write \
             the input to it, or name a regular file"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_fifo_with_a_writer_is_read_to_its_end() {
        let dir = temp("fifo-writer");
        let path = dir.join("fifo");
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let writer_path = path.clone();
        let writer = std::thread::spawn(move || {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .open(writer_path)
                .unwrap();
            f.write_all(b"{\"objective\": \"x\"}").unwrap();
        });
        let got = read_input(Input::Path(&path), "--request fifo", 100, "why").unwrap();
        writer.join().unwrap();
        assert_eq!(got, b"{\"objective\": \"x\"}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
