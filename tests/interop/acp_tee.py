#!/usr/bin/env python3
"""A transparent relay that records an ACP conversation: the SDK clients launch it as their
"agent", and it launches the real agent.

    acp_tee.py LOG -- AGENT ARGS...

It starts AGENT in its own process group, copies its own stdin to the agent's stdin and the
agent's stdout to its own stdout, line by line, and appends every line to LOG as one JSON line
`{"dir": "c2a" | "a2c", "t": SECONDS, "line": TEXT}`: `dir` is client-to-agent or
agent-to-client, `t` is Unix time (so it lines up with the scripted model's own log), `line` is
the raw line as it was on the wire (without its newline; bytes that are not UTF-8 are replaced),
never re-encoded, so the validator judges exactly what the peer sent.

Each line is forwarded as soon as it is complete and flushed at once (never buffered behind the
next one). Memory is bounded: a line is forwarded in chunks of CHUNK bytes as they arrive, and
at most LOG_LINE_LIMIT bytes of it are kept for the log (a longer line is logged cut, with
`"truncated": true`). The agent's stderr is the relay's own stderr.

Stopping: EOF on stdin closes the agent's stdin; SIGTERM, SIGINT and SIGHUP are forwarded to the
agent's process group; if the relay itself dies the agent gets SIGTERM (parent-death signal), so
no agent outlives its client. The relay exits when the agent's stdout closes and the agent has
exited, with the agent's exit code (128 + N for signal N). Standard library only.
"""

import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time

# Bytes read from a pipe at once.
CHUNK = 64 * 1024
# Bytes of one line kept for the log.
LOG_LINE_LIMIT = 8 * 1024 * 1024
# prctl(2) option: signal to receive when the parent dies.
PR_SET_PDEATHSIG = 1


def usage() -> None:
    sys.stderr.write("usage: acp_tee.py LOG -- AGENT [ARGS...]\n")
    sys.exit(2)


class Log:
    """The transcript file, shared by the two copying threads."""

    def __init__(self, path: str) -> None:
        self.file = open(path, "a", encoding="utf-8")
        self.lock = threading.Lock()

    def write(self, direction: str, line: bytes, truncated: bool) -> None:
        record = {"dir": direction, "t": time.time(), "line": line.decode("utf-8", "replace")}
        if truncated:
            record["truncated"] = True
        text = json.dumps(record, ensure_ascii=False) + "\n"
        with self.lock:
            self.file.write(text)
            self.file.flush()


def copy_lines(src, dst, log: Log, direction: str) -> None:
    """Copies `src` to `dst` chunk by chunk, flushing each chunk at once, and logs each complete
    line (and a last line without newline). A chunk's complete lines are logged BEFORE the chunk
    is forwarded: the peer cannot answer a line before it has it, so the log keeps every answer
    after its request even though the two directions are copied by two threads."""
    kept = bytearray()
    truncated = False
    while True:
        data = src.read1(CHUNK)
        if not data:
            break
        start = 0
        while True:
            nl = data.find(b"\n", start)
            piece = data[start:] if nl < 0 else data[start:nl]
            room = LOG_LINE_LIMIT - len(kept)
            if len(piece) > room:
                kept += piece[:room]
                truncated = True
            else:
                kept += piece
            if nl < 0:
                break
            log.write(direction, bytes(kept), truncated)
            kept.clear()
            truncated = False
            start = nl + 1
        try:
            dst.write(data)
            dst.flush()
        except (BrokenPipeError, ValueError):
            # the reader is gone: keep draining (so the writer never blocks) and logging
            dst = _Sink()
    if kept:
        log.write(direction, bytes(kept), truncated)


class _Sink:
    """Where output goes once its reader has gone away."""

    def write(self, _data: bytes) -> None:
        pass

    def flush(self) -> None:
        pass


def set_parent_death_signal() -> None:
    """In the child, before exec: SIGTERM when the relay dies (Linux; ignored elsewhere)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def main() -> int:
    args = sys.argv[1:]
    if len(args) < 3 or args[1] != "--":
        usage()
    log = Log(args[0])
    command = args[2:]
    try:
        agent = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,
            process_group=0,
            preexec_fn=set_parent_death_signal,
        )
    except OSError as e:
        sys.stderr.write(f"acp_tee: cannot start {command[0]}: {e}\n")
        return 127

    def forward(signum, _frame):
        try:
            os.killpg(agent.pid, signum)
        except ProcessLookupError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)

    def client_to_agent():
        try:
            copy_lines(sys.stdin.buffer, agent.stdin, log, "c2a")
        finally:
            try:
                agent.stdin.close()
            except OSError:
                pass

    # a daemon: it may sit in a read of our stdin after the agent has gone
    threading.Thread(target=client_to_agent, daemon=True).start()
    copy_lines(agent.stdout, sys.stdout.buffer, log, "a2c")
    code = agent.wait()
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    status = main()
    # os._exit: the stdin thread may still sit in a read, and an orderly interpreter shutdown
    # would wait for (and then abort on) its lock; everything written has been flushed already
    os._exit(status)
