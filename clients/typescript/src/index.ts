// The TypeScript client of the outbox's HTTP API: the Go client's surface
// and discipline (one key per logical attempt, retries with the same key and
// bytes, Retry-After honoured, typed errors, submitAndWait), no runtime
// dependencies (Node >= 20's fetch and node:crypto).
export * from "./errors.js";
export * from "./keys.js";
export * from "./env.js";
export * from "./types.js";
export * from "./client.js";
export * from "./webhook.js";
