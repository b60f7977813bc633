// Typed errors a program branches on with `instanceof`. Every one carries the
// HTTP status (0 when no answer arrived), the API's machine-readable code
// (the ErrorCode enum of api/openapi.json) and, where it applies, the field
// at fault, the server's Retry-After (seconds) and the Idempotency-Key the
// call used (so a call that gave up can be resubmitted later under it).

/** Fields every outbox error carries. */
export interface ErrorInit {
  status: number;
  code: string;
  message: string;
  field?: string;
  retryAfter?: number;
  key?: string;
}

/** The base class of every error this client throws. */
export class OutboxError extends Error {
  /** HTTP status of the answer; 0 when no answer arrived. */
  readonly status: number;
  /** Machine-readable code (api/openapi.json ErrorCode), or "" for a gateway's own answer. */
  readonly code: string;
  /** The request field at fault, when the API named one. */
  readonly field?: string;
  /** The server's Retry-After, in seconds, when it sent one. */
  readonly retryAfter?: number;
  /** The Idempotency-Key the call used: resubmit later with the same key. */
  key?: string;

  constructor(init: ErrorInit) {
    super(init.message);
    this.name = new.target.name;
    this.status = init.status;
    this.code = init.code;
    if (init.field !== undefined && init.field !== "") this.field = init.field;
    if (init.retryAfter !== undefined) this.retryAfter = init.retryAfter;
    if (init.key !== undefined) this.key = init.key;
  }
}

/** An error answer of the API that is none of the more specific classes (401, 403, 404, 409, 410, a 5xx after no retry). */
export class APIError extends OutboxError {}

/** 400, 413, and 422 other than a reused key: nothing was written; fix the request. `field` names the field at fault. */
export class ValidationError extends APIError {}

/**
 * 422 idempotency_key_reused: the key was already used with a different body.
 * The key belongs to another logical attempt: never re-send a changed body
 * under an old key; use a new key for a new attempt.
 */
export class IdempotencyKeyReusedError extends APIError {}

/**
 * 429: the bot is over its rate (or open-intent limit) and the retries the
 * policy allows ran out. `retryAfter` is the server's last Retry-After;
 * `attempts` how many were made. Submit again later with `key`.
 */
export class RateLimitedError extends APIError {
  attempts = 1;
}

/**
 * A call gave up on failures worth retrying (connection errors, timeouts,
 * 5xx): its attempts ran out, or the caller's signal ended it. Every attempt
 * carried the same Idempotency-Key and the same bytes, so the outcome is at
 * most one intent: submit again later with `key` to find out.
 */
export class RetryError extends OutboxError {
  readonly attempts: number;
  /** The last attempt's failure. */
  readonly last: unknown;
  constructor(init: ErrorInit & { attempts: number; last: unknown }) {
    super(init);
    this.attempts = init.attempts;
    this.last = init.last;
  }
}

/** The error class for an error answer (status, code). */
export function errorFor(init: ErrorInit): APIError {
  if (init.code === "idempotency_key_reused") return new IdempotencyKeyReusedError(init);
  if (init.status === 400 || init.status === 413 || init.status === 422) return new ValidationError(init);
  if (init.status === 429) return new RateLimitedError(init);
  return new APIError(init);
}
