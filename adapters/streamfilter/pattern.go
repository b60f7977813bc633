// Package streamfilter holds the event-source-mapping filter criteria for the
// dispatcher's DynamoDB Stream trigger, so the deployed mapping (infra/) and
// the local host (localstack/host) apply byte-for-byte the same pattern.
package streamfilter

// DispatcherPattern selects stream records that put an intent item into the
// pending state: new intents (INSERT) and intents re-queued by a human
// decision (MODIFY back to pending). Everything else (claims, outcomes,
// uniqueness items, principals) is filtered out before the dispatcher runs.
const DispatcherPattern = `{"eventName":["INSERT","MODIFY"],"dynamodb":{"NewImage":{"sk":{"S":["INTENT"]},"status":{"S":["pending"]}}}}`
