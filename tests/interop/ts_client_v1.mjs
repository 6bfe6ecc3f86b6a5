// Drive `droid-executor mcp` with the official TypeScript SDK v1 (`@modelcontextprotocol/sdk`
// 1.32.2), as a real client: initialize over stdio, then one scenario of ts_scenarios.mjs.
//
// Usage: node ts_client_v1.mjs SCENARIO ARGS_JSON SERVER_CMD [SERVER_ARGS...]
//
// Run by the suite tests/tests/suite/mcp_node.rs once `cargo xtask fetch-interop` installed the
// SDK in target/interop/node. The calls give the SDK the result schema (v1's `callTool` takes
// it), so it checks `structuredContent` against each tool's `outputSchema` as any v1 host does.

import { nodeRequire, play } from "./ts_scenarios.mjs";

const PACKAGE = "@modelcontextprotocol/sdk";
const { Client } = nodeRequire(`${PACKAGE}/client/index.js`);
const { StdioClientTransport } = nodeRequire(`${PACKAGE}/client/stdio.js`);
const { CallToolResultSchema } = nodeRequire(`${PACKAGE}/types.js`);

await play({
  sdkPackage: PACKAGE,
  usage: "node ts_client_v1.mjs SCENARIO ARGS_JSON SERVER_CMD [SERVER_ARGS...]",
  argv: process.argv.slice(2),
  open(command, args) {
    const transport = new StdioClientTransport({
      command,
      args,
      env: process.env,
      stderr: "inherit",
    });
    // v1 has no getter for the negotiated version; it hands it to transports that want it
    let negotiated = null;
    transport.setProtocolVersion = (version) => {
      negotiated = version;
    };
    const client = new Client({ name: "droid-executor-interop-ts-v1", version: "0.0.0" });
    return {
      client,
      transport,
      callTool: (params, options) => client.callTool(params, CallToolResultSchema, options),
      protocolVersion: () => negotiated,
    };
  },
});
