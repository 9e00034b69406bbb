// Tool errors as the official TypeScript MCP SDK client sees them (tests/warp/test_warp_legacy.py).
//
// argv: the SDK's package directory, the server command, a JSON object of environment
// variables, a JSON list of calls [{name, arguments}]. Prints one JSON line per call:
// {isError, text, meta} as the client returned it, or {thrown, code, data} when it threw.
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [sdk, command, envJson, callsJson] = process.argv.slice(2);
const load = (file) => import(pathToFileURL(join(sdk, "dist", "esm", "client", file)).href);
const { Client } = await load("index.js");
const { StdioClientTransport } = await load("stdio.js");

const transport = new StdioClientTransport({ command, env: JSON.parse(envJson), stderr: "ignore" });
const client = new Client({ name: "loom-ts-errors", version: "1.0.0" });
await client.connect(transport);
await client.listTools(); // so the client knows every output schema and checks results against it
for (const call of JSON.parse(callsJson)) {
  try {
    const result = await client.callTool(call);
    console.log(JSON.stringify({ isError: result.isError, text: result.content[0]?.text, meta: result._meta }));
  } catch (error) {
    console.log(JSON.stringify({ thrown: String(error.message), code: error.code, data: error.data }));
  }
}
await client.close();
