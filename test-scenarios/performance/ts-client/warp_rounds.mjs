// Warp's message paths through the official TypeScript MCP SDK client, for bench_warp.py.
//
// Input (argv[2]): JSON {command, a: {env, cwd}, b: {env, cwd}, b_id, n, warmup, stderr}.
// Output (stdout): JSON {floor, channel, dm, work: [ms, ...], claims_retried}.
// The rounds are the same as bench_warp's Python SDK rows; only the client differs.
import { createWriteStream } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const spec = JSON.parse(process.argv[2]);
const errlog = createWriteStream(spec.stderr, { flags: "a" });

async function connect(agent) {
  const transport = new StdioClientTransport({
    command: spec.command,
    env: agent.env,
    cwd: agent.cwd,
    stderr: "pipe",
  });
  const client = new Client({ name: "loom-bench-ts", version: "1.0.0" });
  await client.connect(transport);
  transport.stderr?.pipe(errlog);
  return client;
}

async function ok(client, name, args = {}) {
  const result = await client.callTool({ name, arguments: args });
  if (result.isError) {
    throw new Error(`${name}: ${result.content[0]?.text}`);
  }
  return result.structuredContent;
}

async function ready(client) {
  for (let i = 0; i < 200; i++) {
    const result = await client.callTool({ name: "warp_registry_get_info", arguments: {} });
    if (!result.isError) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error("warp did not become ready");
}

async function timed(round) {
  for (let i = 0; i < spec.warmup; i++) await round();
  const samples = [];
  for (let i = 0; i < spec.n; i++) {
    const start = process.hrtime.bigint();
    await round();
    samples.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  return samples;
}

function check(condition, what) {
  if (!condition) throw new Error(what);
}

const a = await connect(spec.a);
const b = await connect(spec.b);
try {
  await ready(a);
  await ready(b);

  const floor = await timed(async () => {
    await ok(a, "warp_handle_get");
    await ok(b, "warp_handle_get");
  });

  let cursor = (await ok(b, "warp_channels_read", { channel: "parallel-work" })).next_cursor;
  const channel = await timed(async () => {
    const sent = await ok(a, "warp_channels_send", { channel: "parallel-work", message: "bench" });
    const page = await ok(b, "warp_channels_read", { channel: "parallel-work", cursor });
    check(page.messages.length === 1 && page.messages[0].seq === sent.seq, "channel message not visible");
    cursor = page.next_cursor;
  });

  const dm = await timed(async () => {
    await ok(a, "warp_messages_send_direct", { recipient_id: spec.b_id, message: "bench" });
    const page = await ok(b, "warp_messages_read_direct", { limit: 10 });
    check(page.messages.length === 1, "direct message not read");
  });

  let claimsRetried = 0;
  const work = [];
  for (let i = 0; i < spec.n + spec.warmup; i++) {
    const start = process.hrtime.bigint();
    const item = (await ok(a, "warp_work_broadcast", { description: "bench", capability: "ts" })).item;
    let got = await ok(b, "warp_work_claim", { capability: "ts" });
    while (!got.claimed) {
      claimsRetried += 1; // a no-wait pull can miss a just-queued item, as in the Python rows
      got = await ok(b, "warp_work_claim", { capability: "ts" });
    }
    const elapsed = Number(process.hrtime.bigint() - start) / 1e6;
    check(got.item.id === item.id, "claimed another item");
    await ok(b, "warp_work_complete", { work_id: got.item.id });
    if (i >= spec.warmup) work.push(elapsed);
  }

  process.stdout.write(JSON.stringify({ floor, channel, dm, work, claims_retried: claimsRetried }) + "\n");
} finally {
  await a.close();
  await b.close();
  errlog.end();
}
