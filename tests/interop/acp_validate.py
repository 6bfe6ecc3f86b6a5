#!/usr/bin/env python3
"""Validates ACP v1 transcripts against the official JSON schema (the `schema/v1/schema.json` the
npm package @agentclientprotocol/sdk ships).

    acp_validate.py [--json] SCHEMA.json LOG [LOG...]

A LOG is either an `acp_tee.py` transcript (one JSON line per wire line:
`{"dir": "c2a"|"a2c", "t", "line"}`) or a `raw_drive.py` transcript of the ACP research
recordings (`[  t] >> {json}` client to agent, `[  t] << {json}` agent to client; other lines
there are the driver's own notes and are skipped). Every wire line must be exactly one JSON-RPC
2.0 message, and:

- a request (`method` and `id`) is checked against the params `$defs` of its method, and must
  go in the direction the schema gives the method (`x-side`: who handles it);
- a notification (`method`, no `id`) likewise;
- a result is checked against the result `$defs` of the request it answers, matched by id among
  the requests the other side sent; an error against the schema's `Error` (and it too must
  answer a request, unless its id is null: the answer to a line that could not be read);
- a method the schema does not know is a violation unless it is an extension (`_` prefix, which
  ACP reserves for them); so is a line that is not JSON, not an object, not `"jsonrpc": "2.0"`,
  or a response to no request.

The schema's own `x-method` / `x-side` annotations give the method table, so a schema update
needs no change here. Prints per file `PATH: N passed, M failed` and each violation (line,
direction, method, the `$defs` it was checked against, the JSON-schema messages); `--json` prints
one JSON document instead (`{"files": [{"path", "passed", "failed", "violations": [{"line",
"dir", "method", "def", "errors"}]}]}`). Exit 1 on any violation, 2 on a usage error. Needs
`jsonschema` (4.26.0) and its `referencing`.
"""

import json
import re
import sys

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

RAW_DRIVE = re.compile(r"\[\s*[\d.]+\] (>>|<<) (.*)$")
RAW_DIRS = {">>": "c2a", "<<": "a2c"}
# x-side in the schema: who HANDLES the message; the other side sends it.
SENDER = {"agent": "c2a", "client": "a2c", "protocol": None}
# Errors reported per message, at most.
MAX_ERRORS = 5


class Schema:
    def __init__(self, path: str) -> None:
        with open(path, encoding="utf-8") as f:
            self.doc = json.load(f)
        self.registry = Registry().with_resource("urn:acp", Resource.from_contents(self.doc))
        self.validators = {}
        # method -> {"params": def, "result": def, "notification": def, "dir": c2a|a2c|None}
        self.methods = {}
        for name, d in self.doc["$defs"].items():
            method = d.get("x-method")
            if not method:
                continue
            entry = self.methods.setdefault(method, {})
            for suffix, key in (("Request", "params"), ("Response", "result"),
                                ("Notification", "notification")):
                if name.endswith(suffix):
                    entry[key] = name
            entry["dir"] = SENDER.get(d.get("x-side"))

    def errors(self, def_name: str, value) -> list:
        v = self.validators.get(def_name)
        if v is None:
            v = Draft202012Validator({"$ref": f"urn:acp#/$defs/{def_name}"}, registry=self.registry)
            self.validators[def_name] = v
        found = sorted(v.iter_errors(value), key=lambda e: list(e.absolute_path))
        return [f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message[:200]}"
                for e in found[:MAX_ERRORS]]


def wire_lines(path: str):
    """(line number, direction, text) of every wire line of a transcript."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    tee = next((l for l in lines if l.strip()), "").lstrip().startswith("{")
    for n, line in enumerate(lines, 1):
        if tee:
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                yield n, rec["dir"], rec["line"]
            except (ValueError, KeyError, TypeError):
                yield n, "?", None
        else:
            m = RAW_DRIVE.match(line)
            if m:
                yield n, RAW_DIRS[m.group(1)], m.group(2)


def other(direction: str) -> str:
    return "a2c" if direction == "c2a" else "c2a"


def check_file(schema: Schema, path: str) -> dict:
    passed = 0
    violations = []
    pending = {}  # (sender direction, json id) -> method

    def bad(n, direction, method, def_name, errors):
        violations.append({"line": n, "dir": direction, "method": method, "def": def_name,
                           "errors": errors})

    for n, direction, text in wire_lines(path):
        if text is None:
            bad(n, direction, None, None, ["not a transcript record of acp_tee.py"])
            continue
        try:
            msg = json.loads(text)
        except ValueError as e:
            bad(n, direction, None, None, [f"not JSON: {e}: {text[:120]!r}"])
            continue
        if not isinstance(msg, dict):
            bad(n, direction, None, None, [f"not one JSON-RPC object: {text[:120]!r}"])
            continue
        errs = []
        if msg.get("jsonrpc") != "2.0":
            errs.append(f"jsonrpc is {msg.get('jsonrpc')!r}, not \"2.0\"")
        has_id = "id" in msg
        if has_id and not (msg["id"] is None or isinstance(msg["id"], (str, int))
                           and not isinstance(msg["id"], bool)):
            errs.append(f"id {msg['id']!r} is not a string, an integer or null")
        method = msg.get("method")
        if method is not None:
            if not isinstance(method, str):
                bad(n, direction, None, None, errs + [f"method {method!r} is not a string"])
                continue
            entry = schema.methods.get(method)
            kind = "params" if has_id else "notification"
            if has_id:
                pending[(direction, json.dumps(msg["id"]))] = method
            if entry is None or kind not in entry:
                if method.startswith("_") and not errs:
                    passed += 1
                else:
                    what = "request" if has_id else "notification"
                    bad(n, direction, method, None,
                        errs + [f"{what} method {method!r} is not in the v1 schema"])
                continue
            if entry["dir"] and entry["dir"] != direction:
                errs.append(f"{method} is sent {entry['dir']}, not {direction}")
            def_name = entry[kind]
            errs += schema.errors(def_name, msg.get("params"))
        elif "result" in msg or "error" in msg:
            if "result" in msg and "error" in msg:
                errs.append("both result and error")
            if not has_id:
                errs.append("a response without id")
            method = pending.pop((other(direction), json.dumps(msg.get("id"))), None)
            if "error" in msg:
                def_name = "Error"
                errs += schema.errors("Error", msg["error"])
                # id null is how a request that could not be read is answered (-32700)
                if method is None and msg.get("id") is not None:
                    errs.append(f"an error for id {msg.get('id')!r}, which no request of the "
                                "other side carries")
            elif method is None:
                def_name = None
                errs.append(f"a result for id {msg.get('id')!r}, which no request of the other "
                            "side carries")
            else:
                entry = schema.methods.get(method, {})
                def_name = entry.get("result")
                if def_name:
                    errs += schema.errors(def_name, msg["result"])
                elif not method.startswith("_"):
                    errs.append(f"no result type for {method!r} in the v1 schema")
        else:
            bad(n, direction, None, None,
                errs + ["neither a request, a notification nor a response"])
            continue
        if errs:
            bad(n, direction, method, def_name, errs)
        else:
            passed += 1
    return {"path": path, "passed": passed, "failed": len(violations), "violations": violations}


def main() -> int:
    args = sys.argv[1:]
    as_json = False
    if args and args[0] == "--json":
        as_json = True
        args = args[1:]
    if len(args) < 2:
        sys.stderr.write("usage: acp_validate.py [--json] SCHEMA.json LOG [LOG...]\n")
        return 2
    schema = Schema(args[0])
    files = [check_file(schema, p) for p in args[1:]]
    if as_json:
        print(json.dumps({"files": files}, indent=1))
    else:
        for f in files:
            for v in f["violations"]:
                print(f"{f['path']}:{v['line']}: {v['dir']} {v['method']} vs {v['def']}: "
                      + "; ".join(v["errors"]))
            print(f"{f['path']}: {f['passed']} passed, {f['failed']} failed")
    return 1 if any(f["failed"] for f in files) else 0


if __name__ == "__main__":
    sys.exit(main())
