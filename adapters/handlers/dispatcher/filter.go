package dispatcher

// StreamFilterPattern is the event-source-mapping filter criteria for the
// dispatcher's DynamoDB Stream trigger. The deployed mapping (infra/) and the
// Docker-free local host (localstack/lambdahost) apply byte-for-byte this
// pattern. It selects stream records that put an intent item into the pending
// state: new intents (INSERT) and intents re-queued by a human decision
// (MODIFY back to pending). Everything else (claims, outcomes, uniqueness
// items, principals) is filtered out before the dispatcher runs.
const StreamFilterPattern = `{"eventName":["INSERT","MODIFY"],"dynamodb":{"NewImage":{"sk":{"S":["INTENT"]},"status":{"S":["pending"]}}}}`
