// Command sweeper is the outbox's sweeper Lambda function.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/botharness/outbox/adapters/wire"
)

func main() {
	app := wire.MustBoot("OUTBOX_TABLE", "OUTBOX_RETRY_QUEUE_URL", "OUTBOX_PROVIDER_CONFIG")
	h := app.SweeperHandler()
	lambda.Start(h.Handle)
}
