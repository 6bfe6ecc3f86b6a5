#!/usr/bin/env python3
"""Tiny stdio MCP server (newline-delimited JSON-RPC 2.0) exposing two tools: `echo` and `add`.

Copied from the droid 0.225.2 recordings (mock-server/mcp_echo.py, the server of the
mcp-tool-call-* recordings); here it logs only when $MCP_LOG names a file it may write. The suite `acp_wire`
gives it to `droid-executor acp` as a client's MCP server (session/new `mcpServers`)."""
import json, os, sys, time

LOG = os.environ.get("MCP_LOG")


def log(direction, obj):
    if not LOG:
        return
    try:
        with open(LOG, "a") as f:
            f.write(json.dumps({"t": time.time(), "pid": os.getpid(), "dir": direction, "msg": obj}) + "\n")
    except OSError as e:
        # a log the server may not write (droid's confinement) must not stop the server
        sys.stderr.write("mcp_echo: cannot log to %s: %s\n" % (LOG, e))


def send(obj):
    log("out", obj)
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


TOOLS = [
    {"name": "echo", "description": "Echo back the given text.",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
    {"name": "add", "description": "Add two integers.",
     "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}},
]

for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    try:
        msg = json.loads(line)
    except Exception:
        log("in-unparsed", line)
        continue
    log("in", msg)
    mid = msg.get("id")
    method = msg.get("method")
    if mid is None:
        continue  # notification
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": msg.get("params", {}).get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "mcp-echo", "version": "0.0.1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        p = msg.get("params", {})
        name, a = p.get("name"), p.get("arguments") or {}
        if name == "echo":
            res = {"content": [{"type": "text", "text": "echo: " + str(a.get("text"))}], "isError": False}
        elif name == "add":
            res = {"content": [{"type": "text", "text": str(int(a.get("a", 0)) + int(a.get("b", 0)))}], "isError": False}
        else:
            res = {"content": [{"type": "text", "text": "unknown tool " + str(name)}], "isError": True}
        send({"jsonrpc": "2.0", "id": mid, "result": res})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": mid, "result": {}})
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "method not found: %s" % method}})
