// Command mcp is the agents' MCP endpoint Lambda function (Streamable HTTP,
// stateless, at /mcp behind the API's authorizer). It needs no AWS access:
// its tools call the deployment's public API (OUTBOX_API_URL) with the
// caller's own token.
package main

import (
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/botharness/outbox/adapters/mcpserver"
	"github.com/botharness/outbox/adapters/wire"
)

func main() {
	log := wire.Logger()
	api := os.Getenv("OUTBOX_API_URL")
	if api == "" {
		log.Error("OUTBOX_API_URL is required: the base URL of this deployment's API")
		os.Exit(1)
	}
	lambda.Start(mcpserver.LambdaHandler(mcpserver.HTTPConfig{APIURL: func() string { return api }, Log: log}))
}
