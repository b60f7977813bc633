// Drives the outbox's /mcp endpoint through the official TypeScript MCP SDK
// client (Client + StreamableHTTPClientTransport, as agent hosts embed it),
// for e2e TestMCPThroughTypeScriptSDK. argv[2] is JSON:
//   {url, calls: [{token, session?, name, args, callId?} | {token, session?, list: true}]}
// Calls with the same session name share one connection; each session lists
// the tools first, as a host does (that is when the SDK caches the output
// schemas it then validates every result's structured content against).
// Prints one JSON line: [{isError, structuredContent, text, tools, protocolError: {code, message}}].
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const { url, calls } = JSON.parse(process.argv[2]);
const sessions = new Map();

async function session(token, name) {
  const id = `${token}/${name ?? Math.random()}`;
  if (sessions.has(id)) return sessions.get(id);
  const client = new Client({ name: "e2e-ts-agent", version: "1" });
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  const tools = (await client.listTools()).tools.map((t) => t.name).sort();
  const s = { client, tools };
  sessions.set(id, s);
  return s;
}

const out = [];
for (const c of calls) {
  const s = await session(c.token, c.session);
  if (c.list) {
    out.push({ tools: s.tools });
    continue;
  }
  try {
    const res = await s.client.callTool({ name: c.name, arguments: c.args, _meta: c.callId ? { toolCallId: c.callId } : undefined });
    out.push({
      isError: res.isError === true,
      structuredContent: res.structuredContent ?? null,
      text: (res.content ?? []).filter((x) => x.type === "text").map((x) => x.text).join("\n"),
    });
  } catch (e) {
    out.push({ protocolError: { code: e.code ?? null, message: String(e.message) } });
  }
}
for (const s of sessions.values()) await s.client.close();
console.log(JSON.stringify(out));
