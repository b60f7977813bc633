// Command dispatcher is the outbox's dispatcher Lambda function.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/botharness/outbox/adapters/handlers/dispatcher"
	"github.com/botharness/outbox/adapters/wire"
)

func main() {
	app := wire.MustBoot("OUTBOX_TABLE", "OUTBOX_RETRY_QUEUE_URL", "OUTBOX_PROVIDER_CONFIG")
	h := &dispatcher.Handler{D: app.Dispatcher, Log: app.Log}
	lambda.Start(h.Handle)
}
