// Command intake is the outbox's intake Lambda function.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/botharness/outbox/adapters/wire"
)

func main() {
	app := wire.MustBoot("OUTBOX_TABLE", "OUTBOX_PROVIDER_CONFIG")
	h := app.IntakeHandler()
	lambda.Start(h.Handle)
}
