"""Drive `droid-executor mcp` with the official Python MCP SDK (`mcp` on PyPI), as a real client.

Usage: python mcp_py_client.py SERVER_CMD [ARGS...]

Run by the suite `tests/tests/suite/mcp_python.rs` with the venvs `cargo xtask fetch-interop`
makes (mcp 2.3.0 and 1.30.0). It uses the low-level `ClientSession` over `stdio_client`, the API
both major versions share. The server gets exactly this script's environment (the Rust test
builds it). One line per step on stdout; any failed check prints `FAIL <step>: <why>` and exits 1;
`sdk: mcp <version>` opens the output, `ALL OK` closes a run where every step passed.

Environment:
- MCP_TEST_REQUEST: an ExecutionRequest (JSON) that succeeds; run by `execute_droid_task` and by
  `droid_submit` + `droid_pend`.
- MCP_TEST_HANG_REQUEST: an ExecutionRequest (JSON) that never finishes by itself; abandoned after
  1.5 s to test cancellation. Without it the cancellation step is not run (the line says so).
- MCP_TEST_ONLY_CANCEL=1: run only initialize, the cancellation and the last ping (the fake
  droid plays one scenario per server, so the Rust test runs the hanging one separately).
"""

import importlib.metadata
import json
import os
import sys
import traceback

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

try:  # mcp >= 2
    from mcp import MCPError as SdkError
except ImportError:  # mcp 1.x
    from mcp import McpError as SdkError

PROTOCOL_VERSIONS = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}
TOOLS = {"execute_droid_task", "droid_submit", "droid_pend", "droid_cancel", "droid_ping"}
INVALID_PARAMS = -32602
# Every step is bounded; droid_pend waits up to 60 s by itself.
STEP_TIMEOUT = 90
# How long the hanging call runs before it is abandoned.
CANCEL_AFTER = 1.5


class Failed(Exception):
    """A check of the current step did not hold."""


def check(cond, why):
    if not cond:
        raise Failed(why)


def field(obj, snake, camel):
    """A result field under its 2.x (snake_case) or 1.x (camelCase) attribute name."""
    return getattr(obj, snake) if hasattr(obj, snake) else getattr(obj, camel)


def is_error(res):
    return field(res, "is_error", "isError")


def structured(res):
    return field(res, "structured_content", "structuredContent")


def text_of(res):
    """The result's text on one line (stdout is one line per step), cut at 300 characters."""
    text = " ".join(getattr(c, "text", "") for c in res.content)
    return " | ".join(line for line in text.splitlines() if line.strip())[:300]


def request_from(var):
    raw = os.environ.get(var)
    check(raw is not None, f"{var} is not set")
    return json.loads(raw)


class Steps:
    """Runs steps in order, each under STEP_TIMEOUT, remembering which one is running."""

    def __init__(self):
        self.current = None

    async def run(self, name, body):
        self.current = name
        with anyio.fail_after(STEP_TIMEOUT):
            detail = await body()
        print(f"ok {name}: {detail}", flush=True)
        self.current = None


async def main(command, args):
    only_cancel = os.environ.get("MCP_TEST_ONLY_CANCEL") == "1"
    hang_request = os.environ.get("MCP_TEST_HANG_REQUEST")
    params = StdioServerParameters(command=command, args=args, env=dict(os.environ))
    steps = Steps()
    print(f"sdk: mcp {importlib.metadata.version('mcp')}", flush=True)
    try:
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await all_steps(session, steps, only_cancel, hang_request)
    except BaseException as e:  # noqa: BLE001 - any escape is a failure of the current step
        if isinstance(e, KeyboardInterrupt):
            raise
        print(f"FAIL {steps.current or 'session'}: {describe(e)}", flush=True)
        traceback.print_exception(e, file=sys.stderr)
        sys.exit(1)
    print("ALL OK", flush=True)


def describe(e):
    """The innermost useful message (anyio task groups wrap errors in exception groups)."""
    while isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
        e = e.exceptions[0]
    if isinstance(e, Failed):
        return str(e)
    return f"{type(e).__name__}: {e}"


async def all_steps(session, steps, only_cancel, hang_request):
    check(
        not (only_cancel and hang_request is None),
        "MCP_TEST_ONLY_CANCEL=1 needs MCP_TEST_HANG_REQUEST",
    )

    async def initialize():
        init = await session.initialize()
        version = field(init, "protocol_version", "protocolVersion")
        check(version in PROTOCOL_VERSIONS, f"negotiated protocolVersion {version!r}")
        server = field(init, "server_info", "serverInfo")
        return f"protocolVersion {version}, server {server.name} {server.version}"

    await steps.run("initialize", initialize)

    if not only_cancel:
        await usage_steps(session, steps)

    if hang_request is None:
        print("skipped cancel: MCP_TEST_HANG_REQUEST is not set", flush=True)
    else:
        hang = json.loads(hang_request)

        async def cancel():
            with anyio.move_on_after(CANCEL_AFTER) as scope:
                res = await session.call_tool("execute_droid_task", hang)
                raise Failed(
                    f"the hanging call finished before {CANCEL_AFTER} s: "
                    f"isError={is_error(res)} {structured(res)}"
                )
            check(scope.cancelled_caught, "the hanging call was not cancelled")
            return f"execute_droid_task abandoned after {CANCEL_AFTER} s"

        await steps.run("cancel", cancel)

    async def ping_again():
        await session.send_ping()
        return "server still answers"

    await steps.run("ping again", ping_again)


async def usage_steps(session, steps):
    request = request_from("MCP_TEST_REQUEST")

    async def ping():
        await session.send_ping()
        return "pong"

    await steps.run("ping", ping)

    async def list_tools():
        names = {t.name for t in (await session.list_tools()).tools}
        check(TOOLS <= names, f"tools/list lacks {sorted(TOOLS - names)}: {sorted(names)}")
        return ", ".join(sorted(names))

    await steps.run("tools/list", list_tools)

    async def droid_ping():
        res = await session.call_tool("droid_ping", {})
        sc = structured(res)
        check(not is_error(res), f"isError: {text_of(res)}")
        check(isinstance(sc, dict), f"no structuredContent: {text_of(res)}")
        check(sc.get("droid_found") is True, f"droid_found is {sc.get('droid_found')!r}: {sc}")
        return f"droid_found, version {sc.get('droid_version')}"

    await steps.run("droid_ping", droid_ping)

    async def execute():
        seen = []

        async def on_progress(progress, total, message):
            seen.append((progress, total, message))

        res = await session.call_tool("execute_droid_task", request, progress_callback=on_progress)
        sc = structured(res)
        check(not is_error(res), f"isError: {text_of(res)}")
        check(isinstance(sc, dict), f"no structuredContent: {text_of(res)}")
        check(sc.get("status") == "success", f"status {sc.get('status')!r}: {sc}")
        check(len(seen) >= 1, "no progress notification")
        return f"status success, {len(seen)} progress events, last {seen[-1]}"

    await steps.run("execute_droid_task", execute)

    async def invalid():
        res = await session.call_tool("execute_droid_task", {"objective": ""})
        check(is_error(res) is True, f"isError {is_error(res)!r}: {text_of(res)}")
        return f"isError: {text_of(res)}"

    await steps.run("execute_droid_task invalid", invalid)

    async def unknown_tool():
        try:
            res = await session.call_tool("no_such_tool", {})
        except SdkError as e:
            check(e.error.code == INVALID_PARAMS, f"error code {e.error.code}: {e.error.message}")
            return f"{type(e).__name__} {e.error.code} {e.error.message}"
        raise Failed(f"no error, a result: isError={is_error(res)} {text_of(res)}")

    await steps.run("unknown tool", unknown_tool)

    async def submit_pend():
        res = await session.call_tool("droid_submit", request)
        sc = structured(res)
        check(not is_error(res), f"droid_submit isError: {text_of(res)}")
        check(isinstance(sc, dict) and isinstance(sc.get("task_id"), str), f"no task_id: {sc}")
        task_id = sc["task_id"]
        res = await session.call_tool("droid_pend", {"task_id": task_id, "wait_seconds": 60})
        rec = structured(res)
        check(not is_error(res), f"droid_pend isError: {text_of(res)}")
        check(isinstance(rec, dict), f"droid_pend: no structuredContent: {text_of(res)}")
        check(rec.get("task_id") == task_id, f"droid_pend answered for {rec.get('task_id')!r}")
        check(rec.get("state") == "success", f"state {rec.get('state')!r}: {rec}")
        return f"{task_id} success"

    await steps.run("droid_submit + droid_pend", submit_pend)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    anyio.run(main, sys.argv[1], sys.argv[2:])
