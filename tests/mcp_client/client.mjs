// A client of `ember mcp` on the TypeScript MCP SDK, over stdio: lists the tools, calls each call
// given as JSON on the command line, and prints one JSON document with what came back.
// node client.mjs <ember> '<json array of server args>' '<json array of [tool, arguments]>'
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [command, serverArgs, calls] = process.argv.slice(2);
const transport = new StdioClientTransport({
  command,
  args: JSON.parse(serverArgs),
  env: process.env,
  stderr: "inherit",
});
const client = new Client({ name: "ember-test-client", version: "1.0.0" });
await client.connect(transport);
const listed = await client.listTools();
const results = [];
for (const [name, args] of JSON.parse(calls)) {
  try {
    const result = await client.callTool({ name, arguments: args });
    results.push({ name, isError: Boolean(result.isError), text: result.content.map((c) => c.text).join("\n") });
  } catch (error) {
    results.push({ name, protocolError: { code: error.code, message: error.message } });
  }
}
console.log(JSON.stringify({ tools: listed.tools.map((t) => ({ name: t.name, inputSchema: t.inputSchema })), results }));
await client.close();
