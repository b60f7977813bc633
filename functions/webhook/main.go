// Command webhook is the outbox's provider-webhook Lambda function
// (POST and GET /v1/webhooks/{provider}/{account}; no authorizer, providers
// sign), also subscribed to the SNS topics providers publish events to (SES
// event publishing): an SNS event is told apart by its Records.
package main

import (
	"context"
	"encoding/json"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/botharness/outbox/adapters/wire"
)

func main() {
	app := wire.MustBoot("OUTBOX_TABLE", "OUTBOX_INBOX_QUEUE_URL")
	lambda.Start(func(ctx context.Context, raw json.RawMessage) (any, error) {
		var probe struct {
			Records []struct {
				EventSource string `json:"EventSource"`
			} `json:"Records"`
		}
		if json.Unmarshal(raw, &probe) == nil && len(probe.Records) > 0 && probe.Records[0].EventSource == "aws:sns" {
			var ev events.SNSEvent
			if err := json.Unmarshal(raw, &ev); err != nil {
				return nil, err
			}
			return nil, app.WebhookSNS(ctx, ev)
		}
		var req events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(raw, &req); err != nil {
			return nil, err
		}
		return app.Webhook(ctx, req)
	})
}
