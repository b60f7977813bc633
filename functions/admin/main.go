// Command admin is the operators' admin API Lambda function.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/botharness/outbox/adapters/handlers/console"
	"github.com/botharness/outbox/adapters/wire"
)

func main() {
	app := wire.MustBoot("OUTBOX_TABLE", "OUTBOX_RETRY_QUEUE_URL", "OUTBOX_PROVIDER_CONFIG")
	h := app.AdminHandler()
	// One function serves the admin API and the console's static files.
	lambda.Start(console.Wrap(h.Handle))
}
