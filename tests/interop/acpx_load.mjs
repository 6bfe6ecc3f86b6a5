// acpx's own ACP client and text renderer on a `session/load`:
//
//   node acpx_load.mjs ACPX_DIR SESSION_ID CWD -- AGENT_COMMAND [ARGS...]
//
// acpx 0.19.1's CLI resumes a stored session with `session/resume` whenever the agent offers
// it, and never shows a replay; it sends `session/load` (and renders the replay as it renders a
// turn) only to agents without resume. This script does what acpx does there, with acpx's own
// code: its `AcpClient` (the class its CLI and queue owner run) starts the agent, initializes
// and loads SESSION_ID in CWD, and every message the agent sends goes through acpx's text
// renderer (`createOutputFormatter("text")`), which prints to stdout exactly as `acpx` does.
//
// The two modules are acpx's built chunks, named by the content hash of acpx 0.19.1 (the
// version `cargo xtask fetch-interop` pins); another version fails here, saying so.

import { existsSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [acpxDir, sessionId, cwd, sep, ...agent] = process.argv.slice(2);
if (!acpxDir || !sessionId || !cwd || sep !== "--" || agent.length === 0) {
  console.error("usage: node acpx_load.mjs ACPX_DIR SESSION_ID CWD -- AGENT_COMMAND [ARGS...]");
  process.exit(2);
}
const dist = path.join(acpxDir, "node_modules/acpx/dist");
const chunks = {
  client: path.join(dist, "queue-owner-runtime-C4OOosbo.js"),
  output: path.join(dist, "output-Cnuji8Bo.js"),
};
for (const file of Object.values(chunks)) {
  if (!existsSync(file)) {
    console.error(`${file} is missing: this script needs acpx 0.19.1; run \`cargo xtask fetch-interop\``);
    process.exit(2);
  }
}
const { Y: AcpClient } = await import(pathToFileURL(chunks.client).href);
const { t: createOutputFormatter } = await import(pathToFileURL(chunks.output).href);
if (typeof AcpClient !== "function" || typeof createOutputFormatter !== "function") {
  console.error("acpx's modules do not export what acpx 0.19.1's do; run `cargo xtask fetch-interop`");
  process.exit(2);
}

const out = createOutputFormatter("text");
const quote = (word) => (/\s/.test(word) ? `"${word}"` : word);
const client = new AcpClient({
  agentCommand: agent.map(quote).join(" "),
  cwd,
  permissionMode: "deny-all",
  onAcpOutputMessage: (direction, message) => out.onAcpMessage(message, direction),
});
try {
  await client.start();
  await client.loadSession(sessionId, cwd);
  out.flush();
} finally {
  await client.close();
}
