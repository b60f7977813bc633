// Package lambdahost is the local stand-in for the AWS plumbing around the outbox
// Lambda functions. It calls the real handlers in-process with the real
// github.com/aws/aws-lambda-go/events types, behaving like the managed
// services do in the deployed system:
//
//   - Gateway plays an API Gateway HTTP API (payload format 2.0) with Lambda
//     REQUEST authorizers (simple responses);
//   - StreamPoller plays a DynamoDB Streams event source mapping with filter
//     criteria and ReportBatchItemFailures;
//   - SQSPoller plays an SQS event source mapping with ReportBatchItemFailures;
//   - Ticker plays an EventBridge schedule.
//
// Every event and every response crosses a JSON round trip, as it would
// between the Lambda service and the function, so a handler that depends on
// something the wire format cannot carry fails here too.
//
// Nothing here logs request, record or message bodies.
package lambdahost
