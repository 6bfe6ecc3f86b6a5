#!/usr/bin/env python3
"""ACP v1 scenario driver on the official Python SDK (PyPI `agent-client-protocol` 0.12.1, in the
venv `cargo xtask fetch-interop` makes at target/interop/py-acp).

    python acp_py_client.py --scenario S --cwd DIR [--cwd2 DIR] [--log LOG] [--model ID]
        [--mode ID] [--prompt TEXT] [--second-prompt TEXT] [--cancel-after SECS]
        [--cancel-on chunk|stdin] [--pause-after-first] [--verify CMD]... [--timeout SECS]
        -- AGENT ARGS...

The same scenarios, flags and summary as acp_node_client.mjs (see tests/interop/acp/README.md).
With --log the agent is started through acp_tee.py (beside this file). Prints ONE JSON summary
line on stdout at the end and exits 0 when the scenario ran to its end (`ok`), 1 otherwise, also
after --timeout (default 120 s). Permission options are chosen by kind, never by id or
position; models and modes only from what session/new returned.

Driving from a test: with `--cancel-on stdin` the cancel scenario sends session/cancel when a
line `cancel` arrives on stdin (instead of at the first chunk); with `--pause-after-first` the
client prints `{"paused": {"stopReason": ...}}` after the first prompt of a two-prompt scenario
and waits for a line `go` on stdin before the second.

`--verify CMD` (repeatable) asks droid-executor to run CMD after every turn: session/new carries
`_meta: {"droidExecutor": {"verify": [CMD, ...]}}` (other agents ignore `_meta`).

The agent gets this process's whole environment: `spawn_agent_process` passes only a trimmed
one (PATH, HOME, ...) unless told otherwise, and droid without FACTORY_AIRGAP_ENABLED asks for a
login.
"""

import argparse
import asyncio
import json
import os
import sys
import threading
import time
from typing import Any

from acp import PROTOCOL_VERSION, Client, RequestError, text_block
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    Implementation,
    ReadTextFileResponse,
    RequestPermissionResponse,
    WriteTextFileResponse,
)
from acp.stdio import spawn_agent_process

SCENARIOS = ["stream", "tools-allow", "reject", "always", "cancel", "two-sessions", "error",
             "mode", "load"]
# Largest line the SDK's reader accepts (asyncio's default, 64 KiB, is less than a session/new
# answer listing many models may need).
LINE_LIMIT = 16 * 1024 * 1024
# How long the SDK waits for the agent to exit after closing its stdin, before SIGTERM.
SHUTDOWN_GRACE = 10.0


class Commands:
    """Lines on stdin (`cancel`, `go`) from a test driving the client, read by a daemon thread
    (an executor thread blocked in a read would hold up the event loop's shutdown)."""

    def __init__(self) -> None:
        self.waiting: dict[str, list[asyncio.Future]] = {"cancel": [], "go": []}
        self.started = False

    def _deliver(self, word: str) -> None:
        for fut in self.waiting.get(word, []):
            if not fut.done():
                fut.set_result(None)
        self.waiting.get(word, []).clear()

    def next(self, word: str) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self.waiting[word].append(fut)
        if not self.started:
            self.started = True

            def read() -> None:
                for line in sys.stdin:
                    loop.call_soon_threadsafe(self._deliver, line.strip())

            threading.Thread(target=read, daemon=True).start()
        return fut


def as_json(obj: Any) -> Any:
    if hasattr(obj, "model_dump"):
        return obj.model_dump(by_alias=True, exclude_none=True, mode="json")
    if isinstance(obj, list):
        return [as_json(o) for o in obj]
    return obj


class Driver(Client):
    """The client side: session/update and permission handling, and the summary."""

    def __init__(self, opts: argparse.Namespace) -> None:
        self.opts = opts
        self.summary = {
            "scenario": opts.scenario, "ok": False, "stopReasons": [], "chunks": [],
            "toolCalls": [], "permissionsAsked": 0, "modes": [], "configOptions": [],
            "errors": [], "firstChunkMs": None, "sessionIds": [], "prompts": [],
            "permissions": [], "updateKinds": {}, "agent": None, "replayed": [], "listed": [],
        }
        self.tool_calls: dict[tuple, dict] = {}
        self.running: dict[str, dict] = {}
        self.first_prompt_at: float | None = None
        self.replaying = False
        self.commands = Commands()

    # -- summary helpers
    def record_error(self, e: BaseException | dict) -> None:
        if isinstance(e, dict):
            self.summary["errors"].append(e)
            return
        code = e.code if isinstance(e, RequestError) else None
        entry = {"code": code, "message": str(e) or type(e).__name__}
        data = getattr(e, "data", None)
        if isinstance(e, RequestError) and data is not None:
            entry["data"] = data
        self.summary["errors"].append(entry)

    def apply_tool_call(self, session_id: str, u: dict) -> None:
        tid = u["toolCallId"]
        key = (session_id, tid)  # tool call ids are unique per session only
        entry = self.tool_calls.get(key)
        if entry is None:
            entry = {"id": tid, "sessionId": session_id, "kind": "other", "title": None,
                     "status": "pending", "contentTypes": [], "diffPaths": [], "meta": None}
            self.tool_calls[key] = entry
            self.summary["toolCalls"].append(entry)
        for key in ("kind", "title", "status"):
            if u.get(key) is not None:
                entry[key] = u[key]
        if isinstance(u.get("content"), list):
            entry["contentTypes"] = [c.get("type") for c in u["content"]]
            entry["diffPaths"] = [c.get("path") for c in u["content"] if c.get("type") == "diff"]
        if "_meta" in u:
            entry["meta"] = u["_meta"]

    # -- Client interface
    async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
        u = as_json(update)
        kind = u.get("sessionUpdate")
        kinds = self.summary["updateKinds"]
        kinds[kind] = kinds.get(kind, 0) + 1
        content = u.get("content") if isinstance(u.get("content"), dict) else {}
        if self.replaying:
            r = {"sessionUpdate": kind}
            if content.get("type") == "text":
                r["text"] = content["text"]
            for key in ("toolCallId", "status"):
                if u.get(key):
                    r[key] = u[key]
            self.summary["replayed"].append(r)
            return
        turn = self.running.get(session_id)
        if kind == "agent_message_chunk" and content.get("type") == "text":
            now = time.monotonic()
            self.summary["chunks"].append(content["text"])
            if turn is not None:
                turn["chunks"].append(content["text"])
                if turn["firstChunkMs"] is None:
                    turn["firstChunkMs"] = round((now - turn["_sentAt"]) * 1000, 1)
                if turn.get("_onChunk"):
                    await turn["_onChunk"]()
            if self.summary["firstChunkMs"] is None and self.first_prompt_at is not None:
                self.summary["firstChunkMs"] = round((now - self.first_prompt_at) * 1000, 1)
        elif kind in ("tool_call", "tool_call_update"):
            self.apply_tool_call(session_id, u)
        elif kind == "config_option_update":
            self.summary["configOptions"] = u.get("configOptions", [])

    async def request_permission(self, options, session_id, tool_call, **kw: Any):
        s = self.summary
        s["permissionsAsked"] += 1
        turn = self.running.get(session_id)
        if turn is not None:
            turn["permissionsAsked"] += 1
        opts = [as_json(o) for o in options]
        call = as_json(tool_call)
        record = {"toolCallId": call.get("toolCallId"), "kinds": [o["kind"] for o in opts],
                  "answer": None}
        s["permissions"].append(record)
        if call.get("toolCallId"):
            self.apply_tool_call(session_id, call)
        if (self.opts.scenario == "cancel" and turn is not None and turn.get("_cancellable")
                and (turn.get("_cancelSent") or turn.get("_cancelAtPermission"))):
            await turn["_cancel"]()
            record["answer"] = "cancelled"
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        if self.opts.scenario == "reject" and s["permissionsAsked"] == 1:
            kind = "reject_once"
        elif self.opts.scenario == "always" and s["permissionsAsked"] == 1:
            kind = "allow_always"
        else:
            kind = "allow_once"
        chosen = next((o for o in opts if o["kind"] == kind), None)
        if chosen is None:
            self.record_error({"code": None,
                               "message": f"permission request offers no option of kind {kind}"})
            record["answer"] = "cancelled"
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        record["answer"] = kind
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=chosen["optionId"]))

    async def read_text_file(self, path, session_id, limit=None, line=None, **kw: Any):
        with open(path, encoding="utf-8") as f:
            return ReadTextFileResponse(content=f.read())

    async def write_text_file(self, content, path, session_id, **kw: Any):
        with open(path, "w", encoding="utf-8") as f:
            f.write(content)
        return WriteTextFileResponse()

    async def ext_method(self, method: str, params: dict) -> dict:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict) -> None:
        pass

    # -- the flows
    async def initialize(self, conn) -> None:
        init = await conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(
                fs=FileSystemCapabilities(read_text_file=True, write_text_file=True),
                terminal=False),
            client_info=Implementation(name="droid-executor-acp-py-client", version="0.1.0"),
        )
        init = as_json(init)
        self.summary["agent"] = {"protocolVersion": init.get("protocolVersion"),
                                 "name": (init.get("agentInfo") or {}).get("name"),
                                 "agentCapabilities": init.get("agentCapabilities")}

    async def new_session(self, conn, cwd: str) -> dict:
        meta = {"droidExecutor": {"verify": self.opts.verify}} if self.opts.verify else {}
        sess = as_json(await conn.new_session(cwd=cwd, mcp_servers=[], **meta))
        self.summary["sessionIds"].append(sess["sessionId"])
        modes = sess.get("modes") or {}
        self.summary["modes"] = [m["id"] for m in modes.get("availableModes", [])]
        self.summary["currentMode"] = modes.get("currentModeId")
        self.summary["configOptions"] = sess.get("configOptions") or []
        return sess

    async def set_model(self, conn, sess: dict) -> None:
        option = next((o for o in sess.get("configOptions") or [] if o.get("category") == "model"),
                      None)
        values = []
        for o in (option or {}).get("options", []):
            values += [g["value"] for g in o["options"]] if "options" in o else [o["value"]]
        if option is None or self.opts.model not in values:
            raise RuntimeError(f"model {self.opts.model} is not among the session's models: "
                               + ", ".join(values))
        try:
            res = as_json(await conn.set_config_option(
                config_id=option["id"], session_id=sess["sessionId"], value=self.opts.model))
            self.summary["configOptions"] = res.get("configOptions", [])
        except RequestError:
            raise
        except Exception as e:  # the typed answer did not parse: the agent broke the schema
            self.record_error({"code": None,
                               "message": f"invalid answer to session/set_config_option: {e}"})

    async def set_mode(self, conn, sess: dict) -> None:
        if self.opts.mode not in self.summary["modes"]:
            raise RuntimeError(f"mode {self.opts.mode} is not among the session's modes: "
                               + ", ".join(self.summary["modes"]))
        await conn.set_session_mode(session_id=sess["sessionId"], mode_id=self.opts.mode)
        self.summary["currentMode"] = self.opts.mode

    async def prompt(self, conn, session_id: str, text: str, cancel: bool = False) -> str:
        turn = {"sessionId": session_id, "chunks": [], "permissionsAsked": 0, "stopReason": None,
                "firstChunkMs": None, "_sentAt": time.monotonic()}
        if self.first_prompt_at is None:
            self.first_prompt_at = turn["_sentAt"]
        self.summary["prompts"].append(turn)
        self.running[session_id] = turn
        timer = None
        if cancel:
            sent: list = []

            async def do_cancel() -> None:
                turn["_cancelSent"] = True
                if not sent:
                    sent.append(True)
                    turn["cancelSentMs"] = round((time.monotonic() - turn["_sentAt"]) * 1000, 1)
                    await conn.cancel(session_id=session_id)

            turn["_cancellable"] = True
            turn["_cancel"] = do_cancel
            if self.opts.cancel_after is not None:
                async def later() -> None:
                    await asyncio.sleep(self.opts.cancel_after)
                    await do_cancel()
                timer = asyncio.create_task(later())
            elif self.opts.cancel_on == "stdin":
                async def on_command() -> None:
                    await self.commands.next("cancel")
                    await do_cancel()
                timer = asyncio.create_task(on_command())
            else:
                # a permission request before any chunk is where the turn is cancelled
                turn["_cancelAtPermission"] = True
                turn["_onChunk"] = do_cancel
        try:
            res = await conn.prompt(session_id=session_id, prompt=[text_block(text)])
            reason = as_json(res)["stopReason"]
            turn["stopReason"] = reason
            self.summary["stopReasons"].append(reason)
            return reason
        finally:
            if timer is not None:
                timer.cancel()
            self.running.pop(session_id, None)
            for key in [k for k in turn if k.startswith("_")]:
                del turn[key]

    async def between(self, stop_reason: str) -> None:
        """Between the two prompts: with --pause-after-first, say so and wait for `go`."""
        if not self.opts.pause_after_first:
            return
        go = self.commands.next("go")
        print(json.dumps({"paused": {"stopReason": stop_reason}}), flush=True)
        await go

    async def scenario(self, conn) -> bool:
        o, s = self.opts, self.summary
        sc = o.scenario
        if sc == "two-sessions":
            await self.initialize(conn)
            a = await self.new_session(conn, o.cwd)
            b = await self.new_session(conn, o.cwd2)
            for sess in (a, b):
                if o.model:
                    await self.set_model(conn, sess)
                if o.mode:
                    await self.set_mode(conn, sess)
            await asyncio.gather(self.prompt(conn, a["sessionId"], o.prompt),
                                 self.prompt(conn, b["sessionId"], o.second_prompt))
            return len(s["stopReasons"]) == 2
        if sc == "error":
            try:
                await self.initialize(conn)
                sess = await self.new_session(conn, o.cwd)
                if o.model:
                    await self.set_model(conn, sess)
                await self.prompt(conn, sess["sessionId"], o.prompt)
            except RequestError as e:
                self.record_error(e)
            return len(s["stopReasons"]) + len(s["errors"]) > 0
        await self.initialize(conn)
        sess = await self.new_session(conn, o.cwd)
        sid = sess["sessionId"]
        if o.model:
            await self.set_model(conn, sess)
        if o.mode:
            await self.set_mode(conn, sess)
        if sc in ("stream", "tools-allow", "reject", "mode", "load"):
            await self.prompt(conn, sid, o.prompt)
            if sc == "load":
                caps = (s["agent"] or {}).get("agentCapabilities") or {}
                if (caps.get("sessionCapabilities") or {}).get("list") is not None:
                    listed = as_json(await conn.list_sessions(cwd=o.cwd))
                    s["listed"] = [{"sessionId": x["sessionId"], "cwd": x.get("cwd"),
                                    "title": x.get("title")} for x in listed.get("sessions", [])]
            return len(s["stopReasons"]) == 1
        if sc in ("always", "cancel"):
            await self.between(await self.prompt(conn, sid, o.prompt, cancel=(sc == "cancel")))
            await self.prompt(conn, sid, o.second_prompt)
            return len(s["stopReasons"]) == 2
        raise RuntimeError(f"unknown scenario {sc}")

    async def load(self, conn) -> bool:
        caps = (self.summary["agent"] or {}).get("agentCapabilities") or {}
        if not caps.get("loadSession"):
            self.record_error({"code": None, "message": "the agent does not announce loadSession"})
            return False
        await self.initialize(conn)
        self.replaying = True
        try:
            res = await conn.load_session(cwd=self.opts.cwd, session_id=self.summary["sessionIds"][0],
                                          mcp_servers=[])
        finally:
            self.replaying = False
        self.summary["loadResult"] = sorted((as_json(res) or {}).keys())
        return True


def agent_command(opts: argparse.Namespace) -> list[str]:
    if opts.log:
        here = os.path.dirname(os.path.abspath(__file__))
        return ["python3", os.path.join(here, "acp_tee.py"), opts.log, "--", *opts.agent]
    return list(opts.agent)


async def connect(driver: Driver, body) -> Any:
    cmd = agent_command(driver.opts)
    async with spawn_agent_process(
        driver, cmd[0], *cmd[1:], cwd=driver.opts.cwd, env=dict(os.environ),
        transport_kwargs={"limit": LINE_LIMIT, "shutdown_timeout": SHUTDOWN_GRACE},
    ) as (conn, proc):
        driver.proc = proc
        result = await body(conn)
    driver.summary.setdefault("agentExits", []).append(proc.returncode)
    return result


async def run(driver: Driver) -> None:
    done = False
    try:
        done = await connect(driver, driver.scenario)
        if driver.opts.scenario == "load" and done:
            done = await connect(driver, driver.load)
    except Exception as e:  # recorded in the summary; ok stays false
        driver.record_error(e)
        done = False
    driver.summary["ok"] = bool(done)


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", required=True, choices=SCENARIOS)
    ap.add_argument("--cwd", required=True)
    ap.add_argument("--cwd2")
    ap.add_argument("--log")
    ap.add_argument("--model")
    ap.add_argument("--mode")
    ap.add_argument("--prompt", default="Say hello")
    ap.add_argument("--second-prompt", default="Say hello again")
    ap.add_argument("--cancel-after", type=float)
    ap.add_argument("--cancel-on", choices=["chunk", "stdin"], default="chunk")
    ap.add_argument("--pause-after-first", action="store_true")
    ap.add_argument("--verify", action="append", default=[])
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("agent", nargs=argparse.REMAINDER)
    opts = ap.parse_args()
    if opts.agent and opts.agent[0] == "--":
        opts.agent = opts.agent[1:]
    if not opts.agent:
        ap.error("an agent command is required after --")
    if opts.scenario == "two-sessions" and not opts.cwd2:
        ap.error("two-sessions needs --cwd2")
    if opts.scenario == "mode" and not opts.mode:
        ap.error("mode needs --mode")
    return opts


async def main() -> int:
    driver = Driver(parse_args())
    driver.proc = None
    try:
        await asyncio.wait_for(run(driver), driver.opts.timeout)
    except asyncio.TimeoutError:
        driver.record_error({"code": None, "message": f"timed out after {driver.opts.timeout:g} s"})
        driver.summary["ok"] = False
        proc = driver.proc
        if proc is not None and proc.returncode is None:
            proc.terminate()
    print(json.dumps(driver.summary), flush=True)
    return 0 if driver.summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
