"""Drive `droid-executor mcp` with the official Python MCP SDK (`mcp` on PyPI), as a real client.

Usage: python mcp_py_client.py SCENARIO ARGS_JSON SERVER_CMD [SERVER_ARGS...]

Run by the suite `tests/tests/suite/mcp_python.rs` with the venvs `cargo xtask fetch-interop`
makes (mcp 2.3.0 and 1.30.0). It uses the low-level `ClientSession` over `stdio_client`, the API
both major versions share, and records every message as it went over the wire (between the SDK
and its stdio transport). The server gets exactly this script's environment (the Rust test
builds it) and writes its stderr to this one's.

Output: JSON lines on stdout. The first is `{"sdk": "mcp <version>"}`; the last is the
scenario's outcome, or `{"error": {...}}` (exit 1) when anything failed. Results are the SDK's
own parsed objects dumped by alias (`isError`, `structuredContent`, as on the wire).
Every scenario starts with `initialize`. Scenarios (ARGS_JSON: the tool arguments):
- list: ping, tools/list, `droid_ping`: `{"protocolVersion", "server", "tools", "droidPing"}`.
- execute: `execute_droid_task` with a progress callback (so the SDK sends a progressToken):
  `{"result", "progress", "requestId", "progressNotifications"}` (`progress`: what the callback
  got; the last two as on the wire).
- calls: ARGS_JSON is a list of `{"name", "arguments"}`, called in turn: `{"results": [...]}`,
  each `{"result"}` or, when the SDK raised a JSON-RPC error, `{"rejected": {"code", "message"}}`.
- submit_pend: `droid_submit`, then `droid_pend` with its task id and wait_seconds 60:
  `{"submit", "pend"}`.
- cancel: starts `execute_droid_task`, prints `{"event": "calling", "requestId"}` and waits for a
  line on stdin; abandons the call (cancels its anyio cancel scope), prints `{"event":
  "abandoned", "requestId", "cancelled"}` (`cancelled`: the notifications/cancelled the SDK sent
  for it by itself) and waits for a line. `cancel` sends notifications/cancelled for the request
  through the SDK's `send_notification` (the 1.x way), prints `{"event": "cancelled",
  "cancelled"}` and waits for another line; `finish` pings and prints `{"pinged": true,
  "responsesToCancelled"}` (what the server answered to the cancelled request: must be nothing).
"""

import importlib.metadata
import json
import os
import sys
import traceback

import anyio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

try:  # mcp >= 2
    from mcp import MCPError as SdkError
except ImportError:  # mcp 1.x
    from mcp import McpError as SdkError

# Every request but the cancelled one is bounded; droid_pend waits up to 60 s by itself.
REQUEST_TIMEOUT = 90
# How long to wait for the SDK to hand the tools/call of the cancel scenario to the transport.
SEND_TIMEOUT = 10
# What the cancel scenario's own notifications/cancelled says.
CANCEL_REASON = "cancelled by the interop test"


class Failed(Exception):
    """The SDK or the server did something a scenario cannot go on from."""


def emit(value):
    print(json.dumps(value, separators=(",", ":")), flush=True)


def dump(model):
    """An SDK object as JSON, by alias (the wire's camelCase names)."""
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def field(obj, snake, camel):
    """An attribute under its 2.x (snake_case) or 1.x (camelCase) name."""
    return getattr(obj, snake) if hasattr(obj, snake) else getattr(obj, camel)


class Wire:
    """Every JSON-RPC message the session sent and received, as on the wire."""

    def __init__(self):
        self.sent = []
        self.received = []

    def request_ids(self, method):
        return [m["id"] for m in self.sent if m.get("method") == method and "id" in m]

    def cancels(self, request_id):
        """The notifications/cancelled sent for `request_id`."""
        return [
            m
            for m in self.sent
            if m.get("method") == "notifications/cancelled"
            and m.get("params", {}).get("requestId") == request_id
        ]

    def responses_to(self, request_id):
        return [m for m in self.received if "method" not in m and m.get("id") == request_id]


def as_json(session_message):
    return json.loads(session_message.message.model_dump_json(by_alias=True, exclude_none=True))


class Recorded:
    """One of `stdio_client`'s streams, recording each message as it passes (before a send is
    handed on, so a message counts as sent once the SDK's send returned)."""

    def __init__(self, stream, log):
        self._stream = stream
        self._log = log

    async def send(self, item):
        self._log.append(as_json(item))
        await self._stream.send(item)

    async def receive(self):
        item = await self._stream.receive()
        if not isinstance(item, Exception):
            self._log.append(as_json(item))
        return item

    def __aiter__(self):
        return self

    async def __anext__(self):
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self):
        await self._stream.aclose()

    async def __aenter__(self):
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc):
        return await self._stream.__aexit__(*exc)

    def __getattr__(self, name):
        return getattr(self._stream, name)


async def read_command():
    """The next line on stdin (the Rust test's go-ahead or command), stripped."""
    try:
        line = await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
    except TypeError:  # anyio < 4.1 calls it `cancellable`
        line = await anyio.to_thread.run_sync(sys.stdin.readline, cancellable=True)
    if not line:
        raise Failed("stdin closed before the go-ahead")
    return line.strip()


async def bounded(awaitable):
    with anyio.fail_after(REQUEST_TIMEOUT):
        return await awaitable


async def list_scenario(session, init, _args, _wire):
    await bounded(session.send_ping())
    tools = (await bounded(session.list_tools())).tools
    ping = await bounded(session.call_tool("droid_ping", {}))
    return {
        "protocolVersion": field(init, "protocol_version", "protocolVersion"),
        "server": dump(field(init, "server_info", "serverInfo")),
        "tools": [dump(t) for t in tools],
        "droidPing": dump(ping),
    }


async def execute_scenario(session, _init, args, wire):
    progress = []

    async def on_progress(value, total, message):
        seen = {"progress": value, "total": total, "message": message}
        progress.append({k: v for k, v in seen.items() if v is not None})

    result = await bounded(
        session.call_tool("execute_droid_task", args, progress_callback=on_progress)
    )
    ids = wire.request_ids("tools/call")
    return {
        "result": dump(result),
        "progress": progress,
        "requestId": ids[-1] if ids else None,
        "progressNotifications": [
            m for m in wire.received if m.get("method") == "notifications/progress"
        ],
    }


async def calls_scenario(session, _init, args, _wire):
    results = []
    for call in args:
        try:
            result = await bounded(session.call_tool(call["name"], call["arguments"]))
            results.append({"result": dump(result)})
        except SdkError as e:
            results.append({"rejected": {"code": e.error.code, "message": e.error.message}})
    return {"results": results}


async def submit_pend_scenario(session, _init, args, _wire):
    submit = await bounded(session.call_tool("droid_submit", args))
    sc = field(submit, "structured_content", "structuredContent") or {}
    task_id = sc.get("task_id")
    if not isinstance(task_id, str):
        raise Failed(f"droid_submit gave no task_id: {dump(submit)}")
    pend = await bounded(session.call_tool("droid_pend", {"task_id": task_id, "wait_seconds": 60}))
    return {"submit": dump(submit), "pend": dump(pend)}


async def send_cancel(session, request_id):
    """notifications/cancelled for `request_id`, sent the way a 1.x application has to."""
    params = types.CancelledNotificationParams(requestId=request_id, reason=CANCEL_REASON)
    notification = types.CancelledNotification(method="notifications/cancelled", params=params)
    try:  # 1.x: a root model wrapping the union of client notifications
        notification = types.ClientNotification(notification)
    except TypeError:  # 2.x: a plain union
        pass
    await session.send_notification(notification)


async def cancel_scenario(session, _init, args, wire):
    before = len(wire.request_ids("tools/call"))
    scope = anyio.CancelScope()
    finished = []

    async def call():
        with scope:
            finished.append(await session.call_tool("execute_droid_task", args))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        with anyio.fail_after(SEND_TIMEOUT):
            while len(wire.request_ids("tools/call")) == before:
                await anyio.sleep(0.005)
        request_id = wire.request_ids("tools/call")[-1]
        emit({"event": "calling", "requestId": request_id})
        await read_command()
        scope.cancel()
    if finished:
        raise Failed(f"the call finished before it was abandoned: {dump(finished[0])}")
    emit({"event": "abandoned", "requestId": request_id, "cancelled": wire.cancels(request_id)})

    command = await read_command()
    if command == "cancel":
        await send_cancel(session, request_id)
        emit({"event": "cancelled", "cancelled": wire.cancels(request_id)})
        command = await read_command()
    if command != "finish":
        raise Failed(f"unknown command {command!r} (cancel or finish)")
    await bounded(session.send_ping())
    return {"pinged": True, "responsesToCancelled": wire.responses_to(request_id)}


SCENARIOS = {
    "list": list_scenario,
    "execute": execute_scenario,
    "calls": calls_scenario,
    "submit_pend": submit_pend_scenario,
    "cancel": cancel_scenario,
}


def describe(e):
    """The innermost error (anyio task groups wrap errors in exception groups)."""
    while isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
        e = e.exceptions[0]
    out = {"name": type(e).__name__, "message": str(e)}
    if isinstance(e, SdkError):
        out["code"] = e.error.code
    return out


async def main(scenario, args, command, command_args):
    emit({"sdk": f"mcp {importlib.metadata.version('mcp')}"})
    play = SCENARIOS[scenario]
    params = StdioServerParameters(command=command, args=command_args, env=dict(os.environ))
    wire = Wire()
    try:
        async with stdio_client(params) as (read, write):
            read, write = Recorded(read, wire.received), Recorded(write, wire.sent)
            async with ClientSession(read, write) as session:
                init = await bounded(session.initialize())
                outcome = await play(session, init, args, wire)
    except Exception as e:  # noqa: BLE001 - any escape is the scenario's failure
        emit({"error": describe(e)})
        traceback.print_exception(e, file=sys.stderr)
        sys.exit(1)
    emit(outcome)


if __name__ == "__main__":
    if len(sys.argv) < 4 or sys.argv[1] not in SCENARIOS:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    anyio.run(main, sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4:])
