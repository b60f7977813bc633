// Command authorizer is the HTTP API's Lambda authorizer.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/botharness/outbox/adapters/wire"
)

func main() {
	app := wire.MustBoot("OUTBOX_TABLE")
	h := app.AuthorizerHandler()
	lambda.Start(h.Handle)
}
