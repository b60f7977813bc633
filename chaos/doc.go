// Package chaos is the outbox's fault-injection suite. It proves the promise
// by counting side effects at the provider, not local calls.
//
// A run is N seeded, reproducible, randomized schedules. Each schedule:
//
//   - starts W workers (several "processes", each the real assembly from
//     localstack/system: real handlers, real DynamoDB store on DynamoDB Local,
//     the real sandbox provider adapter over real HTTP, with keep-alive
//     connections) on one table, all on one fake clock;
//   - submits a few intents through the real intake handler, each to its own
//     sandbox account with random capabilities (idempotency keys with a short
//     retention, outcome lookup, both, neither) and sometimes a deadline;
//   - runs a random sequence of steps drawn from the fault registry (Faults):
//     provider faults (commit then drop the response, hang past the client
//     timeout, 429 with Retry-After, 5xx before and after commit, rejection,
//     401), crashes between each pair of steps of a handler (claim, provider
//     call, outcome write, queue send), a worker stalled after the send while
//     its lease expires, duplicate/reordered/stale stream records, duplicate,
//     reordered and stale retry-queue deliveries, failed queue sends,
//     concurrent dispatchers, retriers and sweepers, DynamoDB errors and
//     throttling injected at the SDK (adapters/faultdb), provider webhooks
//     (duplicated, reordered, early, late, unmatched echoes, user messages),
//     a profile backup mid-flight and a loss restored from it, source
//     revisions and grant revocations, human decisions on needs-human
//     intents, and clock jumps (lease expiry, backoff, deadline, key
//     retention, a backup barrier's TTL);
//   - drains to quiescence (sweeper + retrier + stream until nothing but
//     terminal and needs-human intents remain, bounded);
//   - checks the invariants (see check.go): (a) provider effects per intent
//     <= 1 + human-authorised retries; (b) nothing lost, nothing stuck;
//     (c) every success has provider evidence or an operator's acceptance;
//     (d) history only grew (every version of every intent, read from the
//     real DynamoDB stream); (e) no provider request after source-revised,
//     grant-revoked, expired or abandoned; plus (f) a failed intent has no
//     effect at the provider.
//
// Time: every worker and the sandbox read one fake clock per schedule, which
// moves only between steps (never while a handler runs, so the real-time
// assumptions the product documents — client timeout << lease, "absent" is
// trusted only after Settle — hold), and ticks a nanosecond per reading so
// that the order of events is total. Provider holds and client timeouts are
// real time and short.
//
// Adding a fault kind is one entry in Faults (faults.go). README.md beside
// this file is the user's guide.
package chaos
