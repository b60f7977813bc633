// Command authorizer is the HTTP API's Lambda authorizer.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/botharness/outbox/adapters/awsconfig"
	"github.com/botharness/outbox/adapters/handlers/authorizer"
	"github.com/botharness/outbox/adapters/wire"
)

func main() {
	cfg, err := wire.FromEnv("OUTBOX_TABLE")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	clients, err := awsconfig.LoadClients(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	app, err := wire.New(clients, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	h := &authorizer.Handler{Tokens: app.Tokens, Log: app.Log}
	lambda.Start(h.Handle)
}
