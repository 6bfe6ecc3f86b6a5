// The scenarios ts_client_v1.mjs and ts_client_v2.mjs play against `droid-executor mcp`, written
// once against a small adapter over either TypeScript SDK (see `play`).
//
// The SDKs are the ones `cargo xtask fetch-interop` installs in target/interop/node, found from
// this file's place in the workspace. They are loaded through `createRequire`, i.e. their
// CommonJS builds: ESM resolves bare specifiers only from the importing file's own folders, and
// nothing is installed beside these scripts.
//
// Output: JSON lines on stdout. The first is `{"sdk": "<package> <version>"}`; the last is the
// scenario's outcome, or `{"error": {...}}` (exit 1) when anything threw. The server gets this
// process's whole environment (the Rust test builds it) and writes its stderr to this one's.
// Scenarios (ARGS_JSON: the tool arguments):
// - list: `{"protocolVersion", "server", "tools"}` from initialize and tools/list (and
//   `sessionId` over HTTP, when the adapter has one).
// - execute: `execute_droid_task` with a progress callback: `{"result", "progress", "requestId",
//   "progressNotifications"}` (the last two as on the wire).
// - call: `execute_droid_task` once, no options: `{"result"}` (for isError answers).
// - submit: `droid_submit` once: `{"result"}` (an invalid request's isError answer must reach
//   the caller: `callTool` validates structured content against the tool's outputSchema).
// - submit_pend: `droid_submit`, then `droid_pend` with its task id and wait_seconds 60:
//   `{"submit", "pend"}`.
// - cancel: starts `execute_droid_task`, prints `{"event": "calling", "requestId"}` and waits for
//   a line on stdin; aborts the call (AbortSignal), prints `{"event": "aborted", "rejected",
//   "requestId", "cancelled"}` (`cancelled`: the notifications/cancelled the SDK sent) and waits
//   for another line; then pings and prints `{"pinged": true, "responsesToCancelled"}` (what the
//   server answered to the cancelled request: must be nothing).

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { createInterface } from "node:readline";

const NODE_DIR = new URL("../../target/interop/node/", import.meta.url);
/** Every request is bounded; droid_pend waits up to 60 s by itself. */
const REQUEST_TIMEOUT_MS = 90_000;

/** `require` resolving from target/interop/node. */
export const nodeRequire = createRequire(new URL("package.json", NODE_DIR));

const emit = (value) => console.log(JSON.stringify(value));
const describe = (e) => ({ name: e?.name, code: e?.code, message: String(e?.message ?? e) });

/**
 * Plays the scenario named in `argv` (`SCENARIO ARGS_JSON SERVER_CMD [SERVER_ARGS...]`) with the
 * SDK `sdkPackage`. `open(command, args)` starts a session: it returns `{client, transport,
 * callTool(params, options), protocolVersion()}` before connecting; `client.connect(transport)`
 * is called here.
 */
export async function play({ sdkPackage, usage, argv, open }) {
  const installed = JSON.parse(
    readFileSync(new URL(`node_modules/${sdkPackage}/package.json`, NODE_DIR), "utf8"),
  );
  emit({ sdk: `${sdkPackage} ${installed.version}` });
  const [scenario, argsJson, command, ...commandArgs] = argv;
  if (!command) {
    console.error(`usage: ${usage}`);
    process.exit(2);
  }
  const toolArgs = JSON.parse(argsJson);
  const session = open(command, commandArgs);
  const { client, transport, callTool } = session;
  const stdinLines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

  /** Waits for the next line on stdin (the Rust test's go-ahead). */
  async function goAhead() {
    const { done } = await stdinLines.next();
    if (done) throw new Error("stdin closed before the go-ahead");
  }

  /** Every message sent and received once connected, as on the wire. */
  const wire = { sent: [], received: [] };
  function recordWire() {
    const send = transport.send.bind(transport);
    transport.send = (message, options) => {
      wire.sent.push(message);
      return send(message, options);
    };
    const deliver = transport.onmessage;
    transport.onmessage = (message, extra) => {
      wire.received.push(message);
      deliver(message, extra);
    };
  }

  /** The id of the last tools/call sent, waiting (briefly) for the SDK to send one. */
  async function sentCallId() {
    const last = () => wire.sent.filter((m) => m.method === "tools/call").at(-1)?.id;
    for (let i = 0; i < 1000 && last() === undefined; i++) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    if (last() === undefined) throw new Error("the SDK never sent the tools/call");
    return last();
  }

  const bounded = { timeout: REQUEST_TIMEOUT_MS };
  const scenarios = {
    async list() {
      const { tools } = await client.listTools();
      return {
        protocolVersion: session.protocolVersion(),
        server: client.getServerVersion(),
        tools,
        // over HTTP: the session id the server gave (null when it gave none)
        ...(session.sessionId ? { sessionId: session.sessionId() } : {}),
      };
    },

    async execute() {
      const progress = [];
      const result = await callTool(
        { name: "execute_droid_task", arguments: toolArgs },
        { ...bounded, onprogress: (p) => progress.push(p), resetTimeoutOnProgress: true },
      );
      const progressNotifications = wire.received.filter(
        (m) => m.method === "notifications/progress",
      );
      return { result, progress, requestId: await sentCallId(), progressNotifications };
    },

    async call() {
      const result = await callTool({ name: "execute_droid_task", arguments: toolArgs }, bounded);
      return { result };
    },

    async submit() {
      const result = await callTool({ name: "droid_submit", arguments: toolArgs }, bounded);
      return { result };
    },

    async submit_pend() {
      const submit = await callTool({ name: "droid_submit", arguments: toolArgs }, bounded);
      const taskId = submit.structuredContent?.task_id;
      if (typeof taskId !== "string") return { submit, pend: null };
      const pend = await callTool(
        { name: "droid_pend", arguments: { task_id: taskId, wait_seconds: 60 } },
        bounded,
      );
      return { submit, pend };
    },

    async cancel() {
      const abort = new AbortController();
      const settled = callTool(
        { name: "execute_droid_task", arguments: toolArgs },
        { ...bounded, signal: abort.signal },
      ).then(
        (result) => ({ result }),
        (error) => ({ rejected: describe(error) }),
      );
      const requestId = await sentCallId();
      emit({ event: "calling", requestId });
      await goAhead();
      abort.abort("cancelled by the interop test");
      const outcome = await settled;
      const cancelled = wire.sent.filter((m) => m.method === "notifications/cancelled");
      emit({ event: "aborted", ...outcome, requestId, cancelled });
      await goAhead();
      await client.ping(bounded);
      const responsesToCancelled = wire.received.filter(
        (m) => m.id === requestId && m.method === undefined,
      );
      return { pinged: true, responsesToCancelled };
    },
  };

  try {
    const run = scenarios[scenario];
    if (!run) {
      throw new Error(`unknown scenario ${scenario}: ${Object.keys(scenarios).join(", ")}`);
    }
    await client.connect(transport);
    recordWire();
    emit(await run());
    await client.close();
  } catch (e) {
    emit({ error: describe(e) });
    console.error(e);
    process.exit(1);
  }
  // readline keeps stdin open; the session is over
  process.exit(0);
}
