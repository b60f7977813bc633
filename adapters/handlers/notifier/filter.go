package notifier

// StreamFilterPattern selects stream records of intent items in a status an
// operator must hear about (needs-human, failed, expired); Handle decides per
// episode. The deployed mapping (infra/) and the local host apply this same
// constant.
const StreamFilterPattern = `{"eventName":["INSERT","MODIFY"],"dynamodb":{"NewImage":{"sk":{"S":["INTENT"]},"status":{"S":["needs-human","failed","expired"]}}}}`
