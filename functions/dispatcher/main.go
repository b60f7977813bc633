// Command dispatcher is the outbox's dispatcher Lambda function.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/botharness/outbox/adapters/wire"
)

func main() {
	app := wire.MustBoot("OUTBOX_TABLE", "OUTBOX_RETRY_QUEUE_URL", "OUTBOX_PROVIDER_CONFIG")
	h := app.DispatcherHandler()
	h.Fanout = app.Queue
	lambda.Start(h.Handle)
}
