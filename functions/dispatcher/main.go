// Command dispatcher is the outbox's dispatcher Lambda function.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/botharness/outbox/adapters/wire"
)

func main() {
	// It only fans stream records out to the work queue: no table, payload
	// or provider access (and no grants for them in the stack).
	app := wire.MustBoot("OUTBOX_RETRY_QUEUE_URL")
	h := app.DispatcherHandler()
	h.Fanout = app.Queue
	lambda.Start(h.Handle)
}
