#!/usr/bin/env python3
"""The baseline of `cargo xtask bench bridge`: a minimal Python HTTP bridge in front of droid, as
Python droid bridges are built (docs/architecture.md#origin).

The Python droid-executor skill (czdtech/skills_dev) put a Python HTTP bridge, `droid_bridge.py`, between
the skill wrapper and the droid CLI: `POST /execute` on 127.0.0.1:53002 (env `PORT`), the request
`{objective, instructions, context: {repo_root, files_of_interest}, constraints,
acceptance_criteria}`, droid run with `subprocess.run` under a 600 s timeout (`DROID_TIMEOUT`),
the program from `DROID_CLI_CMD`, and the answer `{status, summary, files_changed, commands_run,
tests, logs, issues}`; pm2 kept it alive. This file rebuilds that design with the standard library
only (http.server's ThreadingHTTPServer: one thread per connection, no limit on concurrent runs)
so the Rust bridge can be measured against it in the same run. It is a baseline, not a product:
no auth, no Host/Origin checks, no queue, no cancellation when the client goes away.

Extra for the benchmark only: `PORT=0` binds any free port, and the bound address is printed on
stderr as `listening on http://ADDR`, the same line `droid-executor serve` prints.
"""

import json
import os
import shlex
import subprocess
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(os.environ.get("PORT", "53002"))
DROID_TIMEOUT = int(os.environ.get("DROID_TIMEOUT", "600"))
DROID_CLI_CMD = shlex.split(os.environ.get("DROID_CLI_CMD", "droid"))
MAX_OBJECTIVE = 50000
MAX_INSTRUCTIONS = 100000


def result(status, summary, logs=None, issues=None):
    """The seed's ExecutionResult."""
    return {
        "status": status,
        "summary": summary,
        "files_changed": [],
        "commands_run": [],
        "tests": {"passed": False, "details": ""},
        "logs": logs or [],
        "issues": issues or [],
    }


def issue(kind, description, action=""):
    return {"type": kind, "description": description, "suggested_action": action}


def build_prompt(req):
    """One prompt from the request's fields, as the seed's bridge did."""
    ctx = req.get("context") or {}
    parts = ["Objective: " + req["objective"]]
    if req.get("instructions"):
        parts.append("Instructions:\n" + req["instructions"])
    if ctx.get("files_of_interest"):
        parts.append("Files of interest:\n" + "\n".join("- " + f for f in ctx["files_of_interest"]))
    if req.get("constraints"):
        parts.append("Constraints:\n" + "\n".join("- " + c for c in req["constraints"]))
    if req.get("acceptance_criteria"):
        parts.append("Acceptance criteria:\n" + "\n".join("- " + a for a in req["acceptance_criteria"]))
    return "\n\n".join(parts)


def validate(req):
    objective = req.get("objective")
    if not isinstance(objective, str) or not objective.strip():
        return "objective is required"
    if len(objective) > MAX_OBJECTIVE:
        return "objective exceeds %d characters" % MAX_OBJECTIVE
    if len(req.get("instructions") or "") > MAX_INSTRUCTIONS:
        return "instructions exceed %d characters" % MAX_INSTRUCTIONS
    return None


def execute(req):
    problem = validate(req)
    if problem:
        return result("error", problem, issues=[issue("validation_error", problem)])
    cwd = (req.get("context") or {}).get("repo_root") or os.getcwd()
    argv = DROID_CLI_CMD + ["exec", "-o", "json", "--auto", "low", build_prompt(req)]
    try:
        proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=DROID_TIMEOUT)
    except subprocess.TimeoutExpired:
        return result("timeout", "droid did not finish within %d s" % DROID_TIMEOUT,
                      issues=[issue("timeout", "execution exceeded DROID_TIMEOUT",
                                    "split the task or raise DROID_TIMEOUT")])
    except FileNotFoundError:
        return result("failed", "droid CLI not found",
                      issues=[issue("env_issue", "cannot run %s" % DROID_CLI_CMD[0],
                                    "install the droid CLI or set DROID_CLI_CMD")])
    except Exception as e:  # the seed answered anything unexpected as `failed`
        return result("failed", str(e), issues=[issue("unknown", str(e))])
    lines = [l for l in proc.stdout.splitlines() if l.strip()]
    summary = lines[-1] if lines else ""
    try:
        last = json.loads(summary)
        # `droid exec -o json` prints {"result": …}; a stream's completion event has finalText
        summary = last.get("result") or last.get("finalText") or summary
    except (ValueError, AttributeError):
        pass
    logs = proc.stderr.splitlines()[-20:]
    if proc.returncode != 0:
        return result("failed", summary or "droid exited with %d" % proc.returncode, logs,
                      [issue("unknown", "droid exited with %d" % proc.returncode)])
    return result("success", summary, logs)


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        if self.path != "/execute":
            return self.answer(404, {"error": "not found"})
        try:
            length = int(self.headers.get("Content-Length", "0"))
            req = json.loads(self.rfile.read(length))
            if not isinstance(req, dict):
                raise ValueError("the request must be a JSON object")
        except ValueError as e:
            return self.answer(400, result("error", "invalid JSON: %s" % e))
        self.answer(200, execute(req))

    def answer(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main():
    server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
    host, port = server.server_address[:2]
    print("droid bridge: listening on http://%s:%d" % (host, port), file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
