package wire

import (
	"context"
	"fmt"
	"os"

	"github.com/botharness/outbox/adapters/awsconfig"
)

// MustBoot is every Lambda's cold start: read the environment (the named
// variables are required), load AWS config, assemble the app. Any failure
// exits at once with a clear message, so a misconfigured function fails at
// deploy time, not on its first request.
func MustBoot(required ...string) *App {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "cold start:", err)
		os.Exit(2)
	}
	cfg, err := FromEnv(required...)
	if err != nil {
		fail(err)
	}
	clients, err := awsconfig.LoadClients(context.Background())
	if err != nil {
		fail(err)
	}
	app, err := New(clients, cfg)
	if err != nil {
		fail(err)
	}
	return app
}
