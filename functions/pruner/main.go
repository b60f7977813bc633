// Command pruner is the retention Lambda function (issue 27): it reads the
// table stream (filtered by pruner.StreamFilterPattern to TTL deletes of
// ended intents), archives the batch's records to OUTBOX_ARCHIVE_BUCKET (if
// set) and leaves a tombstone under each pruned key.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/botharness/outbox/adapters/wire"
)

func main() {
	app := wire.MustBoot("OUTBOX_TABLE")
	h := app.PrunerHandler()
	lambda.Start(h.Handle)
}
