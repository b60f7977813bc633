import { createHmac, timingSafeEqual } from "node:crypto";

// Standard Webhooks (https://www.standardwebhooks.com) verification of the
// outbox's operator events: headers webhook-id, webhook-timestamp and
// webhook-signature; the signature is base64 HMAC-SHA256, under the base64
// key of a "whsec_" secret, of "<id>.<timestamp>.<body>", sent as
// space-separated "v1,<base64>" entries.

/** Why a delivery was refused. */
export class WebhookVerificationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "WebhookVerificationError";
  }
}

export interface VerifyOptions {
  /** How far the timestamp may be from now, either way, in seconds (default 300). */
  toleranceSeconds?: number;
  /** The clock, in milliseconds (default Date.now). */
  now?: () => number;
}

/** The verified delivery: its id (deduplicate by it) and timestamp. */
export interface VerifiedWebhook {
  id: string;
  timestamp: Date;
}

function header(headers: Headers | Record<string, string | string[] | undefined>, name: string): string {
  if (typeof (headers as Headers).get === "function") return (headers as Headers).get(name) ?? "";
  for (const [k, v] of Object.entries(headers)) {
    if (k.toLowerCase() === name) return Array.isArray(v) ? (v[0] ?? "") : (v ?? "");
  }
  return "";
}

/**
 * Verifies an operator event delivery: throws WebhookVerificationError
 * unless one of the offered v1 signatures is the HMAC of the raw body under
 * `secret` ("whsec_<base64>") and the timestamp is within the tolerance.
 * Pass the raw body exactly as received (string or bytes).
 */
export function verifyWebhook(
  secret: string,
  headers: Headers | Record<string, string | string[] | undefined>,
  body: string | Uint8Array,
  options: VerifyOptions = {},
): VerifiedWebhook {
  const id = header(headers, "webhook-id"), ts = header(headers, "webhook-timestamp"), sig = header(headers, "webhook-signature");
  if (!id || !ts || !sig) throw new WebhookVerificationError("missing webhook-id, webhook-timestamp or webhook-signature");
  if (!/^\d+$/.test(ts)) throw new WebhookVerificationError("webhook-timestamp is not a unix time");
  const secs = Number(ts);
  const now = (options.now ?? Date.now)() / 1000;
  const tolerance = options.toleranceSeconds ?? 300;
  if (Math.abs(now - secs) > tolerance) throw new WebhookVerificationError("webhook-timestamp outside the tolerance");
  if (!secret.startsWith("whsec_")) throw new WebhookVerificationError('a secret must start with "whsec_"');
  const key = Buffer.from(secret.slice("whsec_".length), "base64");
  if (key.length === 0) throw new WebhookVerificationError("a secret must be whsec_ followed by standard base64 of a non-empty key");
  const mac = createHmac("sha256", key).update(`${id}.${ts}.`).update(body).digest();
  for (const entry of sig.split(" ")) {
    const [version, value] = entry.split(",", 2);
    if (version !== "v1" || !value) continue;
    const offered = Buffer.from(value, "base64");
    if (offered.length === mac.length && timingSafeEqual(offered, mac)) return { id, timestamp: new Date(secs * 1000) };
  }
  throw new WebhookVerificationError("no signature matches");
}
