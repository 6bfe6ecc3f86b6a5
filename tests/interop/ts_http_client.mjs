// Drive the bridge's `/mcp` (MCP over Streamable HTTP) with an official TypeScript SDK, as a real
// remote client, then one scenario of ts_scenarios.mjs:
// - v1 (`@modelcontextprotocol/sdk` 1.32.2): `initialize`, a session (`Mcp-Session-Id`), event
//   streams for the calls;
// - v2 (`@modelcontextprotocol/client` 2.4.0) with `--negotiation auto`: a `server/discover`
//   probe, then the stateless revision 2026-07-28 (no session; the mirrored headers
//   `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name` on every request).
//
// Usage: node ts_http_client.mjs v1|v2 [--negotiation legacy|auto] SCENARIO ARGS_JSON URL
//
// The bridge's bearer token, when it has one, is read from DROID_EXECUTOR_TEST_TOKEN (never from
// argv, which other users can read) and sent on every request. Run by the suite
// tests/tests/suite/mcp_http.rs once `cargo xtask fetch-interop` installed the SDKs in
// target/interop/node.

import { nodeRequire, play } from "./ts_scenarios.mjs";

const usage = "node ts_http_client.mjs v1|v2 [--negotiation legacy|auto] SCENARIO ARGS_JSON URL";
let [sdk, ...argv] = process.argv.slice(2);
let mode = "legacy";
if (argv[0] === "--negotiation") {
  mode = argv[1];
  argv = argv.slice(2);
}
const token = process.env.DROID_EXECUTOR_TEST_TOKEN;
const requestInit = token ? { headers: { Authorization: `Bearer ${token}` } } : {};

const sdks = {
  v1: {
    sdkPackage: "@modelcontextprotocol/sdk",
    open(url) {
      const PACKAGE = "@modelcontextprotocol/sdk";
      const { Client } = nodeRequire(`${PACKAGE}/client/index.js`);
      const { StreamableHTTPClientTransport } = nodeRequire(`${PACKAGE}/client/streamableHttp.js`);
      const { CallToolResultSchema } = nodeRequire(`${PACKAGE}/types.js`);
      const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit });
      // v1 has no getter for the negotiated version; it hands it to the transport
      let negotiated = null;
      const setVersion = transport.setProtocolVersion.bind(transport);
      transport.setProtocolVersion = (version) => {
        negotiated = version;
        setVersion(version);
      };
      const client = new Client({ name: "droid-executor-interop-ts-v1-http", version: "0.0.0" });
      return {
        client,
        transport,
        callTool: (params, options) => client.callTool(params, CallToolResultSchema, options),
        protocolVersion: () => negotiated,
        sessionId: () => transport.sessionId ?? null,
      };
    },
  },
  v2: {
    sdkPackage: "@modelcontextprotocol/client",
    open(url) {
      const { Client, StreamableHTTPClientTransport } = nodeRequire("@modelcontextprotocol/client");
      const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit });
      const client = new Client(
        { name: "droid-executor-interop-ts-v2-http", version: "0.0.0" },
        { versionNegotiation: { mode } },
      );
      return {
        client,
        transport,
        callTool: (params, options) => client.callTool(params, options),
        protocolVersion: () => client.getNegotiatedProtocolVersion() ?? null,
        sessionId: () => transport.sessionId ?? null,
      };
    },
  },
};

const chosen = sdks[sdk];
if (!chosen) {
  console.error(`usage: ${usage}`);
  process.exit(2);
}
await play({
  sdkPackage: chosen.sdkPackage,
  usage,
  argv,
  open: (url) => chosen.open(url),
});
