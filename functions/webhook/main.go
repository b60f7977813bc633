// Command webhook is the outbox's provider-webhook Lambda function
// (POST /v1/webhooks/{provider}/{account}; no authorizer, providers sign).
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/botharness/outbox/adapters/wire"
)

func main() {
	app := wire.MustBoot("OUTBOX_TABLE", "OUTBOX_INBOX_QUEUE_URL")
	lambda.Start(app.Webhook)
}
