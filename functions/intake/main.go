// Command intake is the outbox's intake Lambda function.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/botharness/outbox/adapters/handlers/intake"
	"github.com/botharness/outbox/adapters/wire"
)

func main() {
	app := wire.MustBoot("OUTBOX_TABLE", "OUTBOX_PROVIDER_CONFIG")
	h := &intake.Handler{Intake: app.Intake, Store: app.Store, Sources: app.Sources, Log: app.Log}
	lambda.Start(h.Handle)
}
