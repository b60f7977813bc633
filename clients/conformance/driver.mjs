// The TypeScript client's conformance driver: one step of a scenario of
// clients/conformance/scenarios.json, given as JSON in argv[2]:
//   {baseUrl, token, retry, op: "submit"|"submitAndWait", body, key?, keyFile?, wait?, intervalMs?, timeoutMs?}
// It prints one JSON line: {ok: true, key, replayed, intent} or
// {ok: false, error: {class, status, code, key, field, retryAfter}}.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { Client, newKey } from "../typescript/dist/index.js";

const step = JSON.parse(process.argv[2]);
let key = step.key;
if (step.keyFile) {
  // Persist the key before the first send; a restarted process reads it back.
  if (existsSync(step.keyFile)) key = readFileSync(step.keyFile, "utf8").trim();
  else writeFileSync(step.keyFile, (key = newKey()) + "\n");
}
const client = new Client(step.baseUrl, step.token, { retry: step.retry });
try {
  const sub = step.op === "submitAndWait"
    ? await client.submitAndWait(step.body, { key, wait: step.wait, intervalMs: step.intervalMs, timeoutMs: step.timeoutMs })
    : await client.submit(step.body, { key });
  console.log(JSON.stringify({ ok: true, key: sub.key, replayed: sub.replayed, intent: sub.intent }));
} catch (e) {
  console.log(JSON.stringify({
    ok: false,
    error: { class: e.constructor.name, status: e.status, code: e.code, key: e.key, field: e.field, retryAfter: e.retryAfter, message: String(e.message) },
  }));
}
