import { createHash, randomBytes } from "node:crypto";
import { ValidationError } from "./errors.js";

const encoder = new TextEncoder();

/** validKey mirrors the server's rule: 1 to 255 printable ASCII characters. */
export function checkKey(key: string): void {
  const b = encoder.encode(key);
  if (b.length === 0 || b.length > 255) {
    throw new ValidationError({
      status: 400, code: "invalid_idempotency_key", field: "Idempotency-Key",
      message: "an idempotency key has 1 to 255 printable ASCII characters (checked before sending)",
    });
  }
  for (let i = 0; i < b.length; i++) {
    if (b[i]! < 0x20 || b[i]! > 0x7e) {
      throw new ValidationError({
        status: 400, code: "invalid_idempotency_key", field: "Idempotency-Key",
        message: `the idempotency key has a non-printable or non-ASCII byte at ${i} (checked before sending)`,
      });
    }
  }
}

function isValidKey(key: string): boolean {
  try {
    checkKey(key);
    return true;
  } catch {
    return false;
  }
}

/**
 * A stable idempotency key derived from a logical attempt's identity, e.g.
 * keyFor("slack", event.event_id, "reply"). The same parts always give the
 * same key, and the same key as the Go and Python clients' KeyFor/key_for:
 * the parts joined by "/" when that is 1-255 printable ASCII bytes and no
 * part holds a "/", else "obx-" + hex(sha256 of "<UTF-8 byte length>:<part>"
 * for each part).
 */
export function keyFor(...parts: string[]): string {
  const joined = parts.join("/");
  if (isValidKey(joined) && !parts.some((p) => p.includes("/"))) return joined;
  const h = createHash("sha256");
  for (const p of parts) {
    const b = encoder.encode(p);
    h.update(`${b.length}:`);
    h.update(b);
  }
  return "obx-" + h.digest("hex");
}

const base32 = "abcdefghijklmnopqrstuvwxyz234567";

/**
 * A fresh random idempotency key ("obx-" + 32 base32 characters, as Go's
 * NewKey). Persist it with the work it belongs to before the first submit,
 * and reuse it for every retry of that work, even after a restart.
 */
export function newKey(): string {
  const b = randomBytes(20);
  let out = "", bits = 0, acc = 0;
  for (const byte of b) {
    acc = (acc << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += base32[(acc >>> (bits - 5)) & 31];
      bits -= 5;
    }
    acc &= (1 << bits) - 1;
  }
  return "obx-" + out;
}
