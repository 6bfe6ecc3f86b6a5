#!/usr/bin/env node
// ACP v1 scenario driver on the official TypeScript SDK (npm @agentclientprotocol/sdk 2.4.0,
// installed by `cargo xtask fetch-interop` in target/interop/node-acp; run with
// NODE_PATH=target/interop/node-acp/node_modules or from a directory that resolves it).
//
//   node acp_node_client.mjs --scenario S --cwd DIR [--cwd2 DIR] [--log LOG] [--model ID]
//        [--mode ID] [--prompt TEXT] [--second-prompt TEXT] [--cancel-after SECS]
//        [--cancel-on chunk|stdin] [--pause-after-first] [--verify CMD]... [--timeout SECS]
//        -- AGENT ARGS...
//
// `--verify CMD` (repeatable) asks droid-executor to run CMD after every turn: session/new
// carries `_meta: {"droidExecutor": {"verify": [CMD, …]}}` (other agents ignore `_meta`).
//
// Driving from a test: with `--cancel-on stdin` the cancel scenario sends session/cancel when a
// line `cancel` arrives on stdin (instead of at the first chunk); with `--pause-after-first`
// the client prints `{"paused":{"stopReason":…}}` after the first prompt of a two-prompt
// scenario and waits for a line `go` on stdin before the second.
//
// With --log the agent is started through acp_tee.py (beside this file), which records every
// wire line to LOG for acp_validate.py. Prints ONE JSON summary line on stdout at the end (the
// same shape as acp_py_client.py; see tests/interop/acp/README.md) and exits 0 when the
// scenario ran to its end (`ok`), 1 otherwise, also after --timeout (default 120 s).
// Permission options are chosen by kind, never by id or position; models and modes only from
// what session/new returned.
import { spawn } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { Readable, Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";

// Resolve the SDK from NODE_PATH (ESM imports ignore it) or next to this file.
const require = createRequire(join(process.cwd(), "noop.js"));
let acp;
try {
  acp = await import(require.resolve("@agentclientprotocol/sdk"));
} catch {
  acp = await import("@agentclientprotocol/sdk");
}

const SCENARIOS = ["stream", "tools-allow", "reject", "always", "cancel", "two-sessions", "error", "mode", "load"];

function parseArgs(argv) {
  const opts = { timeout: 120, prompt: "Say hello", secondPrompt: "Say hello again", verify: [] };
  const names = {
    "--scenario": "scenario", "--cwd": "cwd", "--cwd2": "cwd2", "--log": "log", "--model": "model",
    "--mode": "mode", "--prompt": "prompt", "--second-prompt": "secondPrompt",
    "--cancel-after": "cancelAfter", "--timeout": "timeout", "--cancel-on": "cancelOn",
  };
  const flags = { "--pause-after-first": "pauseAfterFirst" };
  let i = 0;
  for (; i < argv.length && argv[i] !== "--"; i += 2) {
    if (flags[argv[i]]) {
      opts[flags[argv[i]]] = true;
      i -= 1;
      continue;
    }
    if (argv[i] === "--verify" && i + 1 < argv.length) {
      opts.verify.push(argv[i + 1]);
      continue;
    }
    const key = names[argv[i]];
    if (!key || i + 1 >= argv.length) usage(`unknown or incomplete option ${argv[i]}`);
    opts[key] = argv[i + 1];
  }
  opts.agent = argv.slice(i + 1);
  if (!SCENARIOS.includes(opts.scenario)) usage(`--scenario must be one of ${SCENARIOS.join(", ")}`);
  if (!opts.cwd || opts.agent.length === 0) usage("--cwd and an agent command are required");
  if (opts.scenario === "two-sessions" && !opts.cwd2) usage("two-sessions needs --cwd2");
  if (opts.scenario === "mode" && !opts.mode) usage("mode needs --mode");
  opts.cancelOn ??= "chunk";
  if (!["chunk", "stdin"].includes(opts.cancelOn)) usage("--cancel-on must be chunk or stdin");
  opts.timeout = Number(opts.timeout);
  if (opts.cancelAfter !== undefined) opts.cancelAfter = Number(opts.cancelAfter);
  return opts;
}

function usage(why) {
  process.stderr.write(`acp_node_client: ${why}\nusage: node acp_node_client.mjs --scenario S --cwd DIR [options] -- AGENT ARGS...\n`);
  process.exit(2);
}

const opts = parseArgs(process.argv.slice(2));

// ---- commands on stdin (`cancel`, `go`), for a test driving the client ------------------------
const waiting = { cancel: [], go: [] };
let stdinLines = null;
function onStdinLine(line) {
  const word = line.trim();
  const queue = waiting[word];
  if (queue) queue.splice(0).forEach((resolve) => resolve());
}
function nextCommand(word) {
  if (stdinLines === null) {
    stdinLines = "";
    process.stdin.setEncoding("utf8");
    process.stdin.on("data", (data) => {
      stdinLines += data;
      let nl;
      while ((nl = stdinLines.indexOf("\n")) >= 0) {
        onStdinLine(stdinLines.slice(0, nl));
        stdinLines = stdinLines.slice(nl + 1);
      }
    });
  }
  return new Promise((resolve) => waiting[word].push(resolve));
}

// ---- the summary, filled in as messages arrive ------------------------------------------------
const summary = {
  scenario: opts.scenario,
  ok: false,
  stopReasons: [],
  chunks: [],
  toolCalls: [],
  permissionsAsked: 0,
  modes: [],
  configOptions: [],
  errors: [],
  firstChunkMs: null,
  sessionIds: [],
  prompts: [],
  permissions: [],
  updateKinds: {},
  agent: null,
  replayed: [],
  listed: [],
};
const toolCalls = new Map(); // "sessionId toolCallId" -> entry of summary.toolCalls (ids are per session)
const running = new Map(); // sessionId -> the prompt record being run
let firstPromptAt = null;
let replaying = false;

function recordError(e) {
  const code = typeof e?.code === "number" ? e.code : null;
  const message = e?.message ?? String(e);
  summary.errors.push({ code, message, ...(e?.data !== undefined ? { data: e.data } : {}) });
}

function applyToolCall(sessionId, u) {
  const key = `${sessionId} ${u.toolCallId}`;
  let entry = toolCalls.get(key);
  if (!entry) {
    entry = { id: u.toolCallId, sessionId, kind: "other", title: null, status: "pending", contentTypes: [], diffPaths: [], meta: null };
    toolCalls.set(key, entry);
    summary.toolCalls.push(entry);
  }
  if (u.kind !== undefined) entry.kind = u.kind;
  if (u.title !== undefined) entry.title = u.title;
  if (u.status !== undefined && u.status !== null) entry.status = u.status;
  if (Array.isArray(u.content)) {
    entry.contentTypes = u.content.map((c) => c.type);
    entry.diffPaths = u.content.filter((c) => c.type === "diff").map((c) => c.path);
  }
  if (u._meta !== undefined) entry.meta = u._meta;
}

function onUpdate(params) {
  const u = params.update;
  const kind = u.sessionUpdate;
  summary.updateKinds[kind] = (summary.updateKinds[kind] ?? 0) + 1;
  if (replaying) {
    const r = { sessionUpdate: kind };
    if (u.content?.type === "text") r.text = u.content.text;
    if (u.toolCallId) r.toolCallId = u.toolCallId;
    if (u.status) r.status = u.status;
    summary.replayed.push(r);
    return;
  }
  const turn = running.get(params.sessionId);
  if (kind === "agent_message_chunk" && u.content?.type === "text") {
    summary.chunks.push(u.content.text);
    if (turn) {
      turn.chunks.push(u.content.text);
      if (turn.firstChunkMs === null) turn.firstChunkMs = performance.now() - turn.sentAt;
      turn.onChunk?.();
    }
    if (summary.firstChunkMs === null && firstPromptAt !== null) {
      summary.firstChunkMs = Math.round((performance.now() - firstPromptAt) * 10) / 10;
    }
  } else if (kind === "tool_call" || kind === "tool_call_update") {
    applyToolCall(params.sessionId, u);
  } else if (kind === "config_option_update") {
    summary.configOptions = u.configOptions;
  }
}

// ---- permission answers, by kind --------------------------------------------------------------
function wantedKind(turn, nthInPrompt) {
  switch (opts.scenario) {
    case "reject":
      return summary.permissionsAsked === 1 ? "reject_once" : "allow_once";
    case "always":
      return summary.permissionsAsked === 1 ? "allow_always" : "allow_once";
    default:
      return "allow_once";
  }
}

async function onPermission(params) {
  summary.permissionsAsked += 1;
  const turn = running.get(params.sessionId);
  if (turn) turn.permissionsAsked += 1;
  const record = { toolCallId: params.toolCall?.toolCallId ?? null, kinds: params.options.map((o) => o.kind), answer: null };
  summary.permissions.push(record);
  if (params.toolCall) applyToolCall(params.sessionId, params.toolCall);
  if (opts.scenario === "cancel" && turn?.cancellable && (turn.cancelSent || turn.cancelAtPermission)) {
    // the turn is being cancelled (or this request is what we cancel at): answer `cancelled`
    await turn.cancel();
    record.answer = "cancelled";
    return { outcome: { outcome: "cancelled" } };
  }
  const kind = wantedKind(turn);
  const option = params.options.find((o) => o.kind === kind);
  if (!option) {
    recordError({ code: null, message: `permission request offers no option of kind ${kind}` });
    record.answer = "cancelled";
    return { outcome: { outcome: "cancelled" } };
  }
  record.answer = kind;
  return { outcome: { outcome: "selected", optionId: option.optionId } };
}

// ---- the agent process ------------------------------------------------------------------------
let currentAgent = null; // ended on timeout

function startAgent() {
  const here = dirname(fileURLToPath(import.meta.url));
  const [program, ...args] = opts.log
    ? ["python3", join(here, "acp_tee.py"), opts.log, "--", ...opts.agent]
    : opts.agent;
  const child = spawn(program, args, { cwd: opts.cwd, stdio: ["pipe", "pipe", "inherit"], env: process.env });
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  child.on("error", (e) => recordError({ code: null, message: `cannot start ${program}: ${e.message}` }));
  child.stdin.on("error", () => {}); // the agent may exit before reading everything
  currentAgent = child;
  return { child, exited };
}

/// Closes the agent's stdin and waits for it to exit (then SIGTERM, then SIGKILL).
async function stopAgent(agent) {
  agent.child.stdin.end();
  const wait = (ms) => new Promise((r) => setTimeout(r, ms).unref());
  const res = await Promise.race([agent.exited, wait(10000).then(() => null)]);
  if (res) return res;
  agent.child.kill("SIGTERM");
  const res2 = await Promise.race([agent.exited, wait(5000).then(() => null)]);
  if (res2) return res2;
  agent.child.kill("SIGKILL");
  return agent.exited;
}

function app() {
  return acp
    .client({ name: "droid-executor-acp-node-client" })
    .onNotification("session/update", ({ params }) => onUpdate(params))
    .onRequest("session/request_permission", ({ params }) => onPermission(params))
    .onRequest("fs/read_text_file", async ({ params }) => ({ content: await readFile(params.path, "utf8") }))
    .onRequest("fs/write_text_file", async ({ params }) => {
      await writeFile(params.path, params.content);
      return {};
    });
}

async function initialize(ctx) {
  const init = await ctx.request("initialize", {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: false },
    clientInfo: { name: "droid-executor-acp-node-client", version: "0.1.0" },
  });
  summary.agent = { protocolVersion: init.protocolVersion, name: init.agentInfo?.name ?? null, agentCapabilities: init.agentCapabilities ?? null };
  return init;
}

async function newSession(ctx, cwd) {
  const request = { cwd, mcpServers: [] };
  if (opts.verify.length > 0) request._meta = { droidExecutor: { verify: opts.verify } };
  const sess = await ctx.request("session/new", request);
  summary.sessionIds.push(sess.sessionId);
  summary.modes = (sess.modes?.availableModes ?? []).map((m) => m.id);
  summary.currentMode = sess.modes?.currentModeId ?? null;
  summary.configOptions = sess.configOptions ?? [];
  return sess;
}

async function setModel(ctx, sess) {
  const option = (sess.configOptions ?? []).find((o) => o.category === "model");
  const values = (option?.options ?? []).flatMap((o) => (o.options ? o.options : [o])).map((o) => o.value);
  if (!option || !values.includes(opts.model)) {
    throw { code: null, message: `model ${opts.model} is not among the session's models: ${values.join(", ")}` };
  }
  const res = await ctx.request("session/set_config_option", { sessionId: sess.sessionId, configId: option.id, value: opts.model });
  if (Array.isArray(res?.configOptions)) summary.configOptions = res.configOptions;
  else recordError({ code: null, message: `invalid answer to session/set_config_option: ${JSON.stringify(res)}` });
}

async function setMode(ctx, sess) {
  if (!summary.modes.includes(opts.mode)) {
    throw { code: null, message: `mode ${opts.mode} is not among the session's modes: ${summary.modes.join(", ")}` };
  }
  await ctx.request("session/set_mode", { sessionId: sess.sessionId, modeId: opts.mode });
  summary.currentMode = opts.mode;
}

/// Sends one prompt; resolves with its stop reason. `setup(turn)` may arm cancellation.
async function prompt(ctx, sessionId, text, setup) {
  const turn = { sessionId, chunks: [], permissionsAsked: 0, stopReason: null, firstChunkMs: null, sentAt: performance.now() };
  summary.prompts.push(turn);
  running.set(sessionId, turn);
  setup?.(turn);
  if (firstPromptAt === null) firstPromptAt = turn.sentAt;
  try {
    const res = await ctx.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] });
    turn.stopReason = res.stopReason;
    summary.stopReasons.push(res.stopReason);
    return res.stopReason;
  } finally {
    running.delete(sessionId);
    clearTimeout(turn.timer);
    delete turn.sentAt;
    delete turn.onChunk;
    delete turn.cancel;
    delete turn.cancellable;
    delete turn.cancelSent;
    delete turn.cancelAtPermission;
    delete turn.timer;
    if (turn.firstChunkMs !== null) turn.firstChunkMs = Math.round(turn.firstChunkMs * 10) / 10;
  }
}

/// Arms the cancel scenario's first prompt: session/cancel at the first chunk, after
/// --cancel-after seconds, or at the first permission request, whichever comes first.
function armCancel(ctx) {
  return (turn) => {
    let sent = null;
    turn.cancellable = true;
    turn.cancel = () => {
      turn.cancelSent = true;
      if (!sent) {
        turn.cancelSentMs = Math.round((performance.now() - turn.sentAt) * 10) / 10;
        sent = ctx.notify("session/cancel", { sessionId: turn.sessionId });
      }
      return sent;
    };
    if (opts.cancelAfter !== undefined) {
      turn.timer = setTimeout(() => turn.cancel(), opts.cancelAfter * 1000);
    } else if (opts.cancelOn === "stdin") {
      nextCommand("cancel").then(() => turn.cancel());
    } else {
      // a permission request before any chunk is where the turn is cancelled
      turn.cancelAtPermission = true;
      turn.onChunk = () => turn.cancel();
    }
  };
}

async function session(ctx, body) {
  await initialize(ctx);
  const sess = await newSession(ctx, opts.cwd);
  if (opts.model) await setModel(ctx, sess);
  if (opts.mode) await setMode(ctx, sess);
  return body(sess);
}

/// Between the two prompts of a scenario: with --pause-after-first, say so and wait for `go`.
async function between(stopReason) {
  if (!opts.pauseAfterFirst) return;
  const go = nextCommand("go");
  process.stdout.write(JSON.stringify({ paused: { stopReason } }) + "\n");
  await go;
}

async function run() {
  const agent = startAgent();
  const stream = acp.ndJsonStream(Writable.toWeb(agent.child.stdin), Readable.toWeb(agent.child.stdout));
  let done = false;
  try {
    await app().connectWith(stream, async (ctx) => {
      switch (opts.scenario) {
        case "stream":
        case "tools-allow":
        case "reject":
          await session(ctx, (s) => prompt(ctx, s.sessionId, opts.prompt));
          done = summary.stopReasons.length === 1;
          break;
        case "mode":
          await session(ctx, (s) => prompt(ctx, s.sessionId, opts.prompt));
          done = summary.stopReasons.length === 1;
          break;
        case "always":
          await session(ctx, async (s) => {
            await between(await prompt(ctx, s.sessionId, opts.prompt));
            await prompt(ctx, s.sessionId, opts.secondPrompt);
          });
          done = summary.stopReasons.length === 2;
          break;
        case "cancel":
          await session(ctx, async (s) => {
            await between(await prompt(ctx, s.sessionId, opts.prompt, armCancel(ctx)));
            await prompt(ctx, s.sessionId, opts.secondPrompt);
          });
          done = summary.stopReasons.length === 2;
          break;
        case "two-sessions": {
          await initialize(ctx);
          const a = await newSession(ctx, opts.cwd);
          const b = await newSession(ctx, opts.cwd2);
          for (const s of [a, b]) {
            if (opts.model) await setModel(ctx, s);
            if (opts.mode) await setMode(ctx, s);
          }
          await Promise.all([prompt(ctx, a.sessionId, opts.prompt), prompt(ctx, b.sessionId, opts.secondPrompt)]);
          done = summary.stopReasons.length === 2;
          break;
        }
        case "error":
          try {
            await session(ctx, (s) => prompt(ctx, s.sessionId, opts.prompt));
          } catch (e) {
            recordError(e);
          }
          done = summary.stopReasons.length + summary.errors.length > 0;
          break;
        case "load": {
          await session(ctx, (s) => prompt(ctx, s.sessionId, opts.prompt));
          const caps = summary.agent?.agentCapabilities ?? {};
          if (caps.sessionCapabilities?.list) {
            const listed = await ctx.request("session/list", { cwd: opts.cwd });
            summary.listed = (listed.sessions ?? []).map((s) => ({ sessionId: s.sessionId, cwd: s.cwd, title: s.title ?? null }));
          }
          break;
        }
      }
    });
    if (opts.scenario === "load") done = await loadOnNewConnection(agent);
  } catch (e) {
    recordError(e);
  }
  summary.agentExit = await stopAgent(agent);
  summary.ok = done;
}

/// The load scenario's second half: the first agent is stopped, a new one loads the session.
async function loadOnNewConnection(first) {
  summary.agentExitBeforeLoad = await stopAgent(first);
  if (!summary.agent?.agentCapabilities?.loadSession) {
    recordError({ code: null, message: "the agent does not announce loadSession" });
    return false;
  }
  const agent = startAgent();
  const stream = acp.ndJsonStream(Writable.toWeb(agent.child.stdin), Readable.toWeb(agent.child.stdout));
  let loaded = false;
  try {
    await app().connectWith(stream, async (ctx) => {
      await initialize(ctx);
      replaying = true;
      const res = await ctx.request("session/load", { sessionId: summary.sessionIds[0], cwd: opts.cwd, mcpServers: [] });
      replaying = false;
      summary.loadResult = Object.keys(res ?? {});
      loaded = true;
    });
  } catch (e) {
    recordError(e);
  } finally {
    replaying = false;
    await stopAgent(agent);
  }
  return loaded && summary.stopReasons.length === 1;
}

function finish(code) {
  process.stdout.write(JSON.stringify(summary) + "\n", () => process.exit(code));
}

const timer = setTimeout(() => {
  recordError({ code: null, message: `timed out after ${opts.timeout} s` });
  summary.ok = false;
  // SIGTERM: the tee forwards it to the agent's process group
  if (currentAgent && currentAgent.exitCode === null) currentAgent.kill("SIGTERM");
  finish(1);
}, opts.timeout * 1000);

run().then(
  () => {
    clearTimeout(timer);
    finish(summary.ok ? 0 : 1);
  },
  (e) => {
    clearTimeout(timer);
    recordError(e);
    summary.ok = false;
    finish(1);
  },
);
