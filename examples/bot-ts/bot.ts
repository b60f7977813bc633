// A runnable example bot on the TypeScript client, Node only (no framework):
// it answers three inbound messages, each reply under a key derived from the
// message it answers, delivered inline and waited for (submitAndWait).
// Start the outbox with `make run`, paste its export lines, then:
//
//   node examples/bot-ts/bot.ts          # Node >= 22.18 runs TypeScript as is (make deps installs Node 22)
//   node examples/bot-ts/bot.ts          # again: every reply is already held (replayed), nothing is sent twice
//   RUN=other node examples/bot-ts/bot.ts  # a new conversation sends new replies
//
// In your own bot: `npm install <path to>/clients/typescript` and import from
// "@botharness/outbox-client".
import { Client, IdempotencyKeyReusedError, RetryError, ValidationError, baseUrlFromEnv, keyFor } from "../../clients/typescript/dist/index.js";

// What a chat platform delivers: an event id that is the same on every redelivery.
interface InboundMessage {
  id: string;
  channel: string;
  text: string;
}

const outbox = new Client(baseUrlFromEnv(), process.env.OUTBOX_BOT_TOKEN || "dev-bot-token");
const run = process.env.RUN || "demo";

async function answer(msg: InboundMessage): Promise<void> {
  // One key per logical attempt, "the reply to this message": a redelivered
  // event, a retry or a restart derives the same key, so the reply is sent once.
  const key = keyFor("example-bot-ts", msg.id, "reply");
  try {
    const sub = await outbox.submitAndWait(
      {
        kind: "reply", provider: "sandbox", account: "acct-1", action: "send_message", target: msg.channel,
        payload: { text: `you said: ${msg.text}` }, grant: { id: "dev-grant", version: 1 },
      },
      { key, intervalMs: 200, timeoutMs: 60_000 },
    );
    const what = sub.replayed ? "already held (replayed)" : sub.waitApplied ? "delivered inline" : "accepted";
    console.log(`${msg.id}: intent ${sub.intent.id} ${what}, key ${sub.key}`);
    console.log(`${msg.id}: ${sub.intent.status} after ${sub.intent.attemptCount} attempt(s) ${sub.intent.externalId ?? ""}`);
  } catch (e) {
    if (e instanceof IdempotencyKeyReusedError) console.error(`${msg.id}: this key already holds a different reply (use a new RUN)`);
    else if (e instanceof ValidationError) console.error(`${msg.id}: refused: ${e.message} (${e.field ?? "-"})`);
    else if (e instanceof RetryError) console.error(`${msg.id}: gave up after ${e.attempts} attempts; resubmit later under key ${e.key}`);
    throw e;
  }
}

for (let i = 1; i <= 3; i++) {
  await answer({ id: `${run}-ts-msg-${i}`, channel: "chan-1", text: `message ${i}` });
}
