// Command notifier is the operator-events Lambda function: it reads the
// table stream (filtered by notifier.StreamFilterPattern) and publishes one
// operator event per needs-human episode and per failed/expired end to the
// SNS topic in OUTBOX_OPERATOR_TOPIC_ARN, once per event id.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/botharness/outbox/adapters/wire"
)

func main() {
	app := wire.MustBoot("OUTBOX_TABLE")
	h := app.NotifierHandler()
	lambda.Start(h.Handle)
}
