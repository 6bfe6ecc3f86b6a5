// Drive `droid-executor mcp` with the official TypeScript SDK v2 (`@modelcontextprotocol/client`
// 2.4.0), as a real client: connect over stdio, then one scenario of ts_scenarios.mjs.
//
// Usage: node ts_client_v2.mjs [--negotiation legacy|auto] SCENARIO ARGS_JSON SERVER_CMD [ARGS...]
//
// Run by the suite tests/tests/suite/mcp_node.rs once `cargo xtask fetch-interop` installed the
// SDK in target/interop/node. `--negotiation` is the client's `versionNegotiation.mode`
// (default legacy: plain `initialize`). `auto` first probes `server/discover` in a throw-away
// sibling server process, then falls back to `initialize` when the server is not modern.

import { nodeRequire, play } from "./ts_scenarios.mjs";

const PACKAGE = "@modelcontextprotocol/client";
const { Client } = nodeRequire(PACKAGE);
const { StdioClientTransport } = nodeRequire(`${PACKAGE}/stdio`);

let argv = process.argv.slice(2);
let mode = "legacy";
if (argv[0] === "--negotiation") {
  mode = argv[1];
  argv = argv.slice(2);
}

await play({
  sdkPackage: PACKAGE,
  usage: "node ts_client_v2.mjs [--negotiation legacy|auto] SCENARIO ARGS_JSON SERVER_CMD [ARGS...]",
  argv,
  open(command, args) {
    const transport = new StdioClientTransport({
      command,
      args,
      env: process.env,
      stderr: "inherit",
    });
    const client = new Client(
      { name: "droid-executor-interop-ts-v2", version: "0.0.0" },
      { versionNegotiation: { mode } },
    );
    return {
      client,
      transport,
      callTool: (params, options) => client.callTool(params, options),
      protocolVersion: () => client.getNegotiatedProtocolVersion() ?? null,
    };
  },
});
