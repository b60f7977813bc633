import { createHash } from "node:crypto";
import { APIError, OutboxError, RateLimitedError, RetryError, ValidationError, errorFor } from "./errors.js";
import { checkKey, newKey as defaultNewKey } from "./keys.js";
import type {
  Decision, HistorySlice, Intent, IntentPage, ResolutionRequest, SourceResult, SourceUpdate, Status, SubmitRequest, WhoAmI,
} from "./types.js";
import { isSettled } from "./types.js";

/**
 * How a call is retried (the Go client's RetryPolicy). Every retry of a call
 * re-sends the same bytes under the same Idempotency-Key.
 */
export interface RetryPolicy {
  /** Attempts per call, the first included (default 6). */
  maxAttempts?: number;
  /** Exponential backoff base and cap (defaults 200 ms, 10 s), full jitter: uniform in [0, min(cap, base*2^(n-1))]. */
  baseMs?: number;
  capMs?: number;
  /** Bounds one attempt (default 15 s); a timed-out attempt is retried like a dropped connection. */
  attemptTimeoutMs?: number;
  /** Caps how long a server's Retry-After is honoured (default 60 s). */
  maxRetryAfterMs?: number;
  /** A float in [0,1) for the jitter (default Math.random). */
  rand?: () => number;
}

export interface ClientOptions {
  retry?: RetryPolicy;
  /** Replaces newKey for the keys submit generates. */
  newKey?: () => string;
  /** The fetch to use (default globalThis.fetch). */
  fetch?: typeof fetch;
}

export interface SubmitOptions {
  /**
   * The idempotency key of this logical attempt: your own id for it (see
   * keyFor), or a key from newKey persisted before sending. Re-submitting the
   * same attempt (after a crash, a timeout, a deploy) must use the same key.
   * Absent: submit generates one and returns it (and sets it on a thrown error's `key`).
   */
  key?: string;
  /** Ask the API to attempt the intent inline and answer after it (`Prefer: wait=N`, whole seconds, at least 1). */
  preferWait?: number;
  /** Ends the call (and its retries) early. */
  signal?: AbortSignal;
}

export interface WaitOptions {
  /** Poll interval (default 500 ms), growing by half up to maxIntervalMs (default 5 s). */
  intervalMs?: number;
  maxIntervalMs?: number;
  /** Give up after this long (an AbortSignal.timeout); or pass a signal. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface SubmitAndWaitOptions extends WaitOptions {
  key?: string;
  /** The Prefer: wait asked of the server, whole seconds (default 10; the server caps it). */
  wait?: number;
}

/** The answer of submit and submitAndWait. */
export interface Submission {
  /** The Idempotency-Key used. */
  key: string;
  /** The API's intent JSON, unchanged. */
  intent: Intent;
  /** Exactly when the API answered Idempotent-Replayed: true (an earlier attempt of this call, or of a previous run, got through). */
  replayed: boolean;
  /** The API honoured the Prefer: wait (Preference-Applied): intent is its state after the inline attempt. */
  waitApplied: boolean;
}

/** The wait submitAndWait asks for by default, in seconds. */
export const DEFAULT_INLINE_WAIT = 10;
const PREFER_SLACK_MS = 5000;

interface Call {
  method: string;
  path: string;
  body?: string;
  key?: string;
  prefer?: string;
  idempotent: boolean;
  waitMs?: number;
  signal?: AbortSignal;
}

interface Answer {
  status: number;
  headers: Headers;
  text: string;
}

/** delta-seconds or an HTTP date, as seconds; undefined when absent or unreadable. */
export function parseRetryAfter(v: string | null, now = Date.now()): number | undefined {
  if (v === null || v === "") return undefined;
  if (/^\d+$/.test(v)) return Number(v);
  const t = Date.parse(v);
  if (!Number.isNaN(t) && t > now) return (t - now) / 1000;
  return undefined;
}

/** Whether a failed attempt is tried again (the Go client's shouldRetry). */
export function shouldRetry(idempotent: boolean, status: number, transport?: unknown): boolean {
  if (status === 0) {
    if (idempotent) return true;
    // Not idempotent: only when the connection was never made.
    const cause = (transport as { cause?: { code?: string } } | undefined)?.cause;
    return cause?.code === "ECONNREFUSED";
  }
  if (status === 429) return true;
  if (status >= 500) return idempotent;
  return false;
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });

/**
 * A client of the outbox's HTTP API, for bots and for operators.
 *
 * submit sends each logical attempt under one Idempotency-Key (yours, or one
 * generated once and returned) and retries connection errors, timeouts, 5xx
 * and 429 (honouring Retry-After) with that same key and byte-identical
 * body, so a retry can never create a second intent.
 */
export class Client {
  readonly baseUrl: string;
  readonly #token: string;
  readonly #retry: Required<RetryPolicy>;
  readonly #newKey: () => string;
  readonly #fetch: typeof fetch;

  constructor(baseUrl: string, token: string, options: ClientOptions = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.#token = token;
    const r = options.retry ?? {};
    this.#retry = {
      maxAttempts: r.maxAttempts && r.maxAttempts > 0 ? r.maxAttempts : 6,
      baseMs: r.baseMs && r.baseMs > 0 ? r.baseMs : 200,
      capMs: r.capMs && r.capMs > 0 ? r.capMs : 10_000,
      attemptTimeoutMs: r.attemptTimeoutMs && r.attemptTimeoutMs > 0 ? r.attemptTimeoutMs : 15_000,
      maxRetryAfterMs: r.maxRetryAfterMs && r.maxRetryAfterMs > 0 ? r.maxRetryAfterMs : 60_000,
      rand: r.rand ?? Math.random,
    };
    this.#newKey = options.newKey ?? defaultNewKey;
    this.#fetch = options.fetch ?? globalThis.fetch;
  }

  /** The delay before retry number n (1 for the first); a server's Retry-After wins, capped. */
  backoffMs(n: number, retryAfterSeconds?: number): number {
    const p = this.#retry;
    if (retryAfterSeconds !== undefined && retryAfterSeconds > 0) return Math.min(retryAfterSeconds * 1000, p.maxRetryAfterMs);
    let d = p.baseMs;
    for (let i = 1; i < n && d < p.capMs; i++) d *= 2;
    return p.rand() * Math.min(d, p.capMs);
  }

  async #once(c: Call): Promise<Answer> {
    const timeoutMs = c.waitMs ? Math.max(this.#retry.attemptTimeoutMs, c.waitMs + PREFER_SLACK_MS) : this.#retry.attemptTimeoutMs;
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = c.signal ? AbortSignal.any([c.signal, timeout]) : timeout;
    const headers: Record<string, string> = { Accept: "application/json", "User-Agent": "outbox-ts-client/1" };
    if (this.#token) headers["Authorization"] = "Bearer " + this.#token;
    if (c.body !== undefined) headers["Content-Type"] = "application/json";
    if (c.key) headers["Idempotency-Key"] = c.key;
    if (c.prefer) headers["Prefer"] = c.prefer;
    const res = await this.#fetch(this.baseUrl + c.path, { method: c.method, headers, body: c.body, signal });
    // A cut-off answer throws here: as uncertain as a dropped connection.
    const text = await res.text();
    return { status: res.status, headers: res.headers, text };
  }

  /** One call with retries; a 2xx answer's JSON and headers. */
  async #do<T>(c: Call): Promise<{ value: T; headers: Headers }> {
    let last: unknown;
    for (let attempt = 1; ; attempt++) {
      let status = 0;
      let err: unknown;
      let retryAfter: number | undefined;
      try {
        const a = await this.#once(c);
        if (a.status < 300) {
          try {
            return { value: JSON.parse(a.text) as T, headers: a.headers };
          } catch (e) {
            throw new APIError({ status: a.status, code: "", key: c.key, message: `outbox: ${a.status} answer is not the documented JSON: ${e}` });
          }
        }
        status = a.status;
        err = decodeError(a, c.key);
        retryAfter = (err as OutboxError).retryAfter;
      } catch (e) {
        if (e instanceof OutboxError) throw e;
        err = e;
      }
      if (c.signal?.aborted) throw this.#giveUp(attempt, err, c.key, `stopped: ${String(c.signal.reason)}`);
      if (!shouldRetry(c.idempotent, status, status === 0 ? err : undefined)) {
        if (status === 0) throw this.#giveUp(attempt, err, c.key, "not retried: the request may have been acted on");
        throw err; // after a retry too: the server's answer is the answer
      }
      last = err;
      if (attempt >= this.#retry.maxAttempts) throw this.#giveUp(attempt, last, c.key);
      try {
        await sleep(this.backoffMs(attempt, retryAfter), c.signal);
      } catch {
        throw this.#giveUp(attempt, last, c.key, `stopped: ${String(c.signal?.reason)}`);
      }
    }
  }

  #giveUp(attempts: number, last: unknown, key: string | undefined, why?: string): OutboxError {
    if (last instanceof RateLimitedError) {
      const e = new RateLimitedError({
        status: 429, code: last.code, field: last.field, retryAfter: last.retryAfter, key,
        message: `outbox: gave up after ${attempts} attempts, rate limited: ${last.message}`,
      });
      e.attempts = attempts;
      return e;
    }
    const o = last instanceof OutboxError ? last : undefined;
    const reason = o ? o.message : String((last as { cause?: unknown })?.cause ?? last);
    return new RetryError({
      status: o?.status ?? 0, code: o?.code ?? (isTimeout(last) ? "timeout" : "unreachable"), field: o?.field,
      retryAfter: o?.retryAfter, key, attempts, last,
      message: `outbox: gave up after ${attempts} attempts${why ? ` (${why})` : ""}; last failure: ${reason}`,
    });
  }

  /**
   * Commits an intent under one idempotency key. Connection errors, timeouts,
   * 5xx and 429 are retried with the same key and the same bytes; a 200
   * Idempotent-Replayed answer is a success like 201 (replayed true). An
   * unknown outcome is a status of the returned intent, not an exception.
   */
  async submit(body: SubmitRequest, options: SubmitOptions = {}): Promise<Submission> {
    const key = options.key ?? this.#newKey();
    try {
      checkKey(key);
      const bytes = JSON.stringify(body); // once: every attempt sends these bytes
      if (bytes === undefined) throw new ValidationError({ status: 400, code: "malformed_json", message: "the intent is not a JSON object" });
      const c: Call = { method: "POST", path: "/v1/intents", body: bytes, key, idempotent: true, signal: options.signal };
      if (options.preferWait !== undefined && options.preferWait > 0) {
        const s = Math.max(1, Math.floor(options.preferWait));
        c.prefer = `wait=${s}`;
        c.waitMs = s * 1000;
      }
      const { value, headers } = await this.#do<Intent>(c);
      return {
        key,
        intent: value,
        replayed: headers.get("Idempotent-Replayed") === "true",
        waitApplied: c.prefer !== undefined && (headers.get("Preference-Applied") ?? "").trim().startsWith("wait"),
      };
    } catch (e) {
      if (e instanceof OutboxError) e.key = key;
      throw e;
    }
  }

  /**
   * Submits asking the server to make the first attempt inside the request
   * (Prefer: wait), and returns the intent settled. When the answer is not
   * settled yet it polls with GET (never posts again) until it is, bounded
   * by timeoutMs / signal.
   */
  async submitAndWait(body: SubmitRequest, options: SubmitAndWaitOptions = {}): Promise<Submission> {
    const signal = withTimeout(options.signal, options.timeoutMs);
    const wait = options.wait !== undefined && options.wait > 0 ? options.wait : DEFAULT_INLINE_WAIT;
    const sub = await this.submit(body, { key: options.key, preferWait: Math.max(1, Math.floor(wait)), signal });
    if (isSettled(sub.intent.status)) return sub;
    try {
      sub.intent = await this.wait(sub.intent.id, { intervalMs: options.intervalMs, maxIntervalMs: options.maxIntervalMs, signal });
    } catch (e) {
      if (e instanceof OutboxError) e.key = sub.key;
      throw e;
    }
    return sub;
  }

  /** Reads one of this bot's intents. */
  get(id: string, signal?: AbortSignal): Promise<Intent> {
    return this.#fetchJSON<Intent>("GET", "/v1/intents/" + encodeURIComponent(id), signal);
  }

  /** One slice of an intent's whole history, oldest first: cursor "" first, then each slice's nextCursor until "". */
  history(id: string, cursor = "", signal?: AbortSignal): Promise<HistorySlice> {
    const q = cursor ? "?" + new URLSearchParams({ cursor }) : "";
    return this.#fetchJSON<HistorySlice>("GET", "/v1/intents/" + encodeURIComponent(id) + "/history" + q, signal);
  }

  /** Polls the intent until it is settled (a terminal status, or needs-human) and returns it. */
  async wait(id: string, options: WaitOptions = {}): Promise<Intent> {
    const signal = withTimeout(options.signal, options.timeoutMs);
    return pollUntilSettled(() => this.get(id, signal), options, signal);
  }

  /** Records the current revision of a source the bot answers; an older revision answers applied false. */
  putSource(sourceId: string, update: SourceUpdate, signal?: AbortSignal): Promise<SourceResult> {
    return this.#fetchJSON<SourceResult>("PUT", "/v1/sources/" + encodeURIComponent(sourceId), signal, JSON.stringify(update), undefined, true);
  }

  /** The operators' API (operator or orchestrator token), sharing this client's transport and retry policy. */
  get admin(): Admin {
    return new Admin((method, path, signal, body, key, idempotent) => this.#fetchJSON(method, path, signal, body, key, idempotent));
  }

  async #fetchJSON<T>(method: string, path: string, signal?: AbortSignal, body?: string, key?: string, idempotent = true): Promise<T> {
    return (await this.#do<T>({ method, path, body, key, idempotent, signal })).value;
  }
}

type FetchJSON = <T>(method: string, path: string, signal?: AbortSignal, body?: string, key?: string, idempotent?: boolean) => Promise<T>;

export interface ListOptions {
  /** Default needs-human. */
  status?: Status;
  /** 1..100, default 50. */
  limit?: number;
  cursor?: string;
  signal?: AbortSignal;
}

/** The default Idempotency-Key of a decision (the Go client's DecisionKey): the same decision sent twice is one decision. */
export function decisionKey(id: string, r: ResolutionRequest): string {
  const sum = createHash("sha256").update([id, r.decision, r.reason, r.externalId ?? ""].join("\x00")).digest("hex");
  return "cli-" + sum.slice(0, 32);
}

/** The operators' API: list, show, history, resolve, recommend, whoami. */
export class Admin {
  readonly #f: FetchJSON;
  constructor(f: FetchJSON) {
    this.#f = f;
  }

  /** Pages through intents by status. */
  list(o: ListOptions = {}): Promise<IntentPage> {
    const q = new URLSearchParams();
    if (o.status) q.set("status", o.status);
    if (o.limit) q.set("limit", String(o.limit));
    if (o.cursor) q.set("cursor", o.cursor);
    const s = q.toString();
    return this.#f<IntentPage>("GET", "/v1/admin/intents" + (s ? "?" + s : ""), o.signal);
  }

  /** An intent with every attempt, recommendation and decision. */
  show(id: string, signal?: AbortSignal): Promise<Intent> {
    return this.#f<Intent>("GET", "/v1/admin/intents/" + encodeURIComponent(id), signal);
  }

  history(id: string, cursor = "", signal?: AbortSignal): Promise<HistorySlice> {
    const q = cursor ? "?" + new URLSearchParams({ cursor }) : "";
    return this.#f<HistorySlice>("GET", "/v1/admin/intents/" + encodeURIComponent(id) + "/history" + q, signal);
  }

  /**
   * Records a human decision (with its reason) on a needs-human intent.
   * Retried like submit: same key (default decisionKey), same bytes.
   */
  resolve(id: string, r: ResolutionRequest & { key?: string }, signal?: AbortSignal): Promise<Intent> {
    const { key: k, ...req } = r;
    const key = k ?? decisionKey(id, req);
    checkKey(key);
    return this.#f<Intent>("POST", "/v1/admin/intents/" + encodeURIComponent(id) + "/resolution", signal, JSON.stringify(req), key, true);
  }

  /** Attaches a recommendation (changes no state); retried only when the server provably did not act. */
  recommend(id: string, decision: Decision, summary: string, signal?: AbortSignal): Promise<Intent> {
    return this.#f<Intent>("POST", "/v1/admin/intents/" + encodeURIComponent(id) + "/recommendation", signal,
      JSON.stringify({ decision, summary }), undefined, false);
  }

  /** The calling principal (a bot's token is refused with 403). */
  whoami(signal?: AbortSignal): Promise<WhoAmI> {
    return this.#f<WhoAmI>("GET", "/v1/admin/whoami", signal);
  }
}

function decodeError(a: Answer, key?: string): APIError {
  const retryAfter = parseRetryAfter(a.headers.get("Retry-After"));
  let code = "", message = "", field: string | undefined;
  try {
    const b = JSON.parse(a.text) as { error?: { code?: string; message?: string; field?: string }; message?: string };
    if (b && typeof b === "object") {
      if (b.error && typeof b.error === "object") {
        code = b.error.code ?? "";
        message = b.error.message ?? "";
        field = b.error.field;
      } else if (typeof b.message === "string") message = b.message;
    }
  } catch {
    // not JSON: the text below
  }
  if (message === "") message = a.text.trim().slice(0, 200);
  return errorFor({ status: a.status, code, field, retryAfter, key, message: `outbox: ${a.status} ${code || "error"}: ${message}` });
}

function isTimeout(e: unknown): boolean {
  return (e as { name?: string })?.name === "TimeoutError";
}

function withTimeout(signal?: AbortSignal, timeoutMs?: number): AbortSignal | undefined {
  if (timeoutMs === undefined || timeoutMs <= 0) return signal;
  const t = AbortSignal.timeout(timeoutMs);
  return signal ? AbortSignal.any([signal, t]) : t;
}

async function pollUntilSettled(get: () => Promise<Intent>, o: WaitOptions, signal?: AbortSignal): Promise<Intent> {
  let interval = o.intervalMs && o.intervalMs > 0 ? o.intervalMs : 500;
  let maxInterval = o.maxIntervalMs ?? 0;
  if (maxInterval < interval) maxInterval = Math.max(5000, interval);
  for (;;) {
    const intent = await get();
    if (isSettled(intent.status)) return intent;
    await sleep(interval, signal);
    interval = Math.min(interval * 1.5, maxInterval);
  }
}
