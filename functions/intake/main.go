// Command intake is the outbox's intake Lambda function.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/botharness/outbox/adapters/awsconfig"
	"github.com/botharness/outbox/adapters/handlers/intake"
	"github.com/botharness/outbox/adapters/wire"
)

func main() {
	cfg, err := wire.FromEnv("OUTBOX_TABLE", "OUTBOX_PROVIDER_CONFIG")
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
	h := &intake.Handler{Intake: app.Intake, Store: app.Store, Sources: app.Sources, Log: app.Log}
	lambda.Start(h.Handle)
}
