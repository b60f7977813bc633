// Unit tests of the TypeScript client against a local HTTP server (127.0.0.1)
// that plays the API: what each request carried is recorded there.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { readFileSync } from "node:fs";
import { createHmac } from "node:crypto";
import {
  Client, keyFor, newKey, baseUrlFromEnv, IdempotencyKeyReusedError, ValidationError, RateLimitedError, RetryError,
  APIError, verifyWebhook, WebhookVerificationError, decisionKey,
} from "../dist/index.js";

const vectors = JSON.parse(readFileSync(new URL("../../keyvectors.json", import.meta.url), "utf8"));

test("keyFor agrees with the shared vectors", () => {
  assert.ok(vectors.keyFor.length >= 10);
  for (const v of vectors.keyFor) assert.equal(keyFor(...v.parts), v.key, JSON.stringify(v.parts));
});

test("newKey has the shared format and never repeats", () => {
  const re = new RegExp(vectors.newKeyPattern);
  const seen = new Set();
  for (let i = 0; i < 200; i++) {
    const k = newKey();
    assert.match(k, re);
    assert.ok(!seen.has(k));
    seen.add(k);
  }
});

test("baseUrlFromEnv reads the environment as Go's BaseURLFromEnv", () => {
  const cases = [
    [{}, "http://127.0.0.1:4000"],
    [{ OUTBOX_API_URL: "", OUTBOX_HTTP_ADDR: "" }, "http://127.0.0.1:4000"],
    [{ OUTBOX_API_URL: "  http://h:1//  " }, "http://h:1"],
    [{ OUTBOX_API_URL: "http://a:1", OUTBOX_HTTP_ADDR: "b:2" }, "http://a:1"],
    [{ OUTBOX_API_URL: "   ", OUTBOX_HTTP_ADDR: "127.0.0.1:4100" }, "http://127.0.0.1:4100"],
    [{ OUTBOX_HTTP_ADDR: "https://x:3/" }, "https://x:3"],
  ];
  for (const [env, want] of cases) assert.equal(baseUrlFromEnv(env), want, JSON.stringify(env));
  // At call time, from process.env by default.
  const saved = process.env.OUTBOX_API_URL;
  process.env.OUTBOX_API_URL = "http://later:9/";
  try {
    assert.equal(baseUrlFromEnv(), "http://later:9");
  } finally {
    if (saved === undefined) delete process.env.OUTBOX_API_URL;
    else process.env.OUTBOX_API_URL = saved;
  }
});

// A scripted API: each request is recorded and answered by the next step.
async function fakeAPI(steps) {
  const seen = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      seen.push({ method: req.method, url: req.url, headers: req.headers, body, at: Date.now() });
      const step = steps[Math.min(seen.length - 1, steps.length - 1)];
      if (step.hang) return; // never answers: the client's attempt timeout fires
      res.writeHead(step.status, { "Content-Type": "application/json", ...(step.headers ?? {}) });
      res.end(typeof step.body === "string" ? step.body : JSON.stringify(step.body ?? {}));
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${server.address().port}`;
  return { url, seen, close: () => new Promise((r) => server.close(r)) };
}

const intent = (status = "pending", extra = {}) => ({ id: "it_1", status, idempotencyKey: "k", attempts: [], ...extra });
const req = { kind: "reply", provider: "sandbox", account: "acct-1", action: "send_message", target: "chan-1",
  payload: { text: "héllo" }, grant: { id: "g-1", version: 1 } };
const fast = { retry: { baseMs: 10, capMs: 20, rand: () => 1 } };

test("submit retries 503 and a lost answer with the same key and the same bytes", async () => {
  const api = await fakeAPI([{ status: 503 }, { hang: true }, { status: 201, body: intent() }]);
  try {
    const c = new Client(api.url + "/", "tok", { retry: { ...fast.retry, attemptTimeoutMs: 200 } });
    const sub = await c.submit(req, { key: "slack/E1/reply" });
    assert.equal(sub.key, "slack/E1/reply");
    assert.equal(sub.replayed, false);
    assert.deepEqual(sub.intent, intent());
    assert.equal(api.seen.length, 3);
    for (const s of api.seen) {
      assert.equal(s.headers["idempotency-key"], "slack/E1/reply");
      assert.equal(s.headers.authorization, "Bearer tok");
      assert.equal(s.body, api.seen[0].body);
    }
    assert.deepEqual(JSON.parse(api.seen[0].body), req);
  } finally {
    await api.close();
  }
});

test("replayed is exactly Idempotent-Replayed: true", async () => {
  const api = await fakeAPI([{ status: 200, body: intent("succeeded"), headers: { "Idempotent-Replayed": "true" } },
    { status: 200, body: intent("succeeded"), headers: { "Idempotent-Replayed": "TRUE" } }]);
  try {
    const c = new Client(api.url, "tok");
    assert.equal((await c.submit(req, { key: "k1" })).replayed, true);
    assert.equal((await c.submit(req, { key: "k1" })).replayed, false);
  } finally {
    await api.close();
  }
});

test("429 waits its Retry-After before the retry", async () => {
  const api = await fakeAPI([{ status: 429, body: { error: { code: "rate_limited", message: "slow" } }, headers: { "Retry-After": "1" } },
    { status: 201, body: intent() }]);
  try {
    const c = new Client(api.url, "tok", fast);
    await c.submit(req, { key: "k2" });
    assert.equal(api.seen.length, 2);
    assert.ok(api.seen[1].at - api.seen[0].at >= 950, `retried after ${api.seen[1].at - api.seen[0].at} ms`);
  } finally {
    await api.close();
  }
});

test("429 until the attempts run out is a RateLimitedError with retryAfter and key", async () => {
  const api = await fakeAPI([{ status: 429, body: { error: { code: "rate_limited", message: "slow" } }, headers: { "Retry-After": "0" } }]);
  try {
    const c = new Client(api.url, "tok", { retry: { ...fast.retry, maxAttempts: 3 } });
    const err = await c.submit(req, { key: "k3" }).catch((e) => e);
    assert.ok(err instanceof RateLimitedError, String(err));
    assert.equal(err.status, 429);
    assert.equal(err.code, "rate_limited");
    assert.equal(err.retryAfter, 0);
    assert.equal(err.key, "k3");
    assert.equal(err.attempts, 3);
    assert.equal(api.seen.length, 3);
  } finally {
    await api.close();
  }
});

test("4xx other than 429 is never retried, and is typed", async () => {
  const api = await fakeAPI([
    { status: 422, body: { error: { code: "idempotency_key_reused", message: "other body" } } },
    { status: 400, body: { error: { code: "invalid_field", message: "blank", field: "target" } } },
    { status: 404, body: { error: { code: "not_found", message: "no" } } },
  ]);
  try {
    const c = new Client(api.url, "tok", fast);
    const reused = await c.submit(req, { key: "k4" }).catch((e) => e);
    assert.ok(reused instanceof IdempotencyKeyReusedError);
    assert.ok(!(reused instanceof ValidationError));
    assert.equal(reused.status, 422);
    assert.equal(reused.key, "k4");
    const invalid = await c.submit(req).catch((e) => e);
    assert.ok(invalid instanceof ValidationError);
    assert.equal(invalid.field, "target");
    assert.equal(invalid.code, "invalid_field");
    assert.match(invalid.key, new RegExp(vectors.newKeyPattern));
    const missing = await c.get("it_x").catch((e) => e);
    assert.ok(missing instanceof APIError);
    assert.equal(missing.status, 404);
    assert.equal(api.seen.length, 3);
  } finally {
    await api.close();
  }
});

test("an invalid key is refused before sending", async () => {
  const c = new Client("http://127.0.0.1:9", "tok");
  const err = await c.submit(req, { key: "naïve" }).catch((e) => e);
  assert.ok(err instanceof ValidationError);
  assert.equal(err.code, "invalid_idempotency_key");
});

test("5xx until the attempts run out is a RetryError with the key to resubmit", async () => {
  const api = await fakeAPI([{ status: 500, body: { error: { code: "internal", message: "x" } } }]);
  try {
    const c = new Client(api.url, "tok", { retry: { ...fast.retry, maxAttempts: 4 } });
    const err = await c.submit(req, { key: "k5" }).catch((e) => e);
    assert.ok(err instanceof RetryError, String(err));
    assert.equal(err.attempts, 4);
    assert.equal(err.key, "k5");
    assert.equal(err.status, 500);
    assert.equal(api.seen.length, 4);
  } finally {
    await api.close();
  }
});

test("a refused connection is retried, then a RetryError", async () => {
  const api = await fakeAPI([{ status: 201 }]);
  const url = api.url;
  await api.close();
  const c = new Client(url, "tok", { retry: { ...fast.retry, maxAttempts: 2 } });
  const err = await c.submit(req, { key: "k6" }).catch((e) => e);
  assert.ok(err instanceof RetryError);
  assert.equal(err.status, 0);
  assert.equal(err.code, "unreachable");
  assert.equal(err.attempts, 2);
});

test("submitAndWait sends Prefer: wait, then polls with GET, never posting again", async () => {
  const api = await fakeAPI([{ status: 202, body: intent("pending") }, { status: 200, body: intent("in-flight") },
    { status: 200, body: intent("unknown-outcome") }, { status: 200, body: intent("succeeded", { externalId: "m-1" }) }]);
  try {
    const c = new Client(api.url, "tok", fast);
    const sub = await c.submitAndWait(req, { key: "k7", wait: 2, intervalMs: 10 });
    assert.equal(sub.intent.status, "succeeded");
    assert.equal(sub.intent.externalId, "m-1");
    assert.equal(api.seen[0].headers.prefer, "wait=2");
    assert.deepEqual(api.seen.map((s) => s.method), ["POST", "GET", "GET", "GET"]);
    assert.equal(api.seen[1].url, "/v1/intents/it_1");
  } finally {
    await api.close();
  }
});

test("wait stops at needs-human", async () => {
  const api = await fakeAPI([{ status: 200, body: intent("pending") }, { status: 200, body: intent("needs-human") }]);
  try {
    const c = new Client(api.url, "tok", fast);
    assert.equal((await c.wait("it_1", { intervalMs: 10 })).status, "needs-human");
  } finally {
    await api.close();
  }
});

test("admin resolve sends the decision under its default key", async () => {
  const api = await fakeAPI([{ status: 200, body: intent("succeeded") }]);
  try {
    const c = new Client(api.url, "op");
    await c.admin.resolve("it_9", { decision: "accept-success", reason: "seen in the channel", externalId: "m-9" });
    const s = api.seen[0];
    assert.equal(s.url, "/v1/admin/intents/it_9/resolution");
    assert.equal(s.headers["idempotency-key"], decisionKey("it_9", { decision: "accept-success", reason: "seen in the channel", externalId: "m-9" }));
    assert.match(s.headers["idempotency-key"], /^cli-[0-9a-f]{32}$/);
    assert.deepEqual(JSON.parse(s.body), { decision: "accept-success", reason: "seen in the channel", externalId: "m-9" });
  } finally {
    await api.close();
  }
});

test("verifyWebhook accepts a Standard Webhooks signature and refuses others", () => {
  const secret = "whsec_" + Buffer.from("operator-events-test-secret").toString("base64");
  const body = '{"type":"intent.needs_human"}';
  const ts = String(Math.floor(Date.now() / 1000));
  const sig = createHmac("sha256", Buffer.from("operator-events-test-secret")).update(`msg_1.${ts}.${body}`).digest("base64");
  const headers = { "Webhook-Id": "msg_1", "webhook-timestamp": ts, "webhook-signature": `v1,bm9wZQ== v1,${sig}` };
  assert.equal(verifyWebhook(secret, headers, body).id, "msg_1");
  assert.throws(() => verifyWebhook(secret, headers, body + " "), WebhookVerificationError);
  assert.throws(() => verifyWebhook(secret, { ...headers, "webhook-timestamp": String(Number(ts) - 600) }, body), WebhookVerificationError);
  assert.throws(() => verifyWebhook(secret, { ...headers, "webhook-signature": "" }, body), WebhookVerificationError);
});

test("verifyWebhook agrees with the outbox's signer (clients/webhookvectors.json)", () => {
  const doc = JSON.parse(readFileSync(new URL("../../webhookvectors.json", import.meta.url), "utf8"));
  for (const c of doc.cases) {
    const verify = () => verifyWebhook(doc.secret, c.headers, c.body, { now: () => c.now * 1000 });
    if (c.valid) assert.equal(verify().id, c.headers["webhook-id"], c.name);
    else assert.throws(verify, WebhookVerificationError, c.name);
  }
});
