// Package retrier handles retry-queue messages: due retries and
// reconciliations. It reports partial batch failures.
package retrier

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/core"
)

// Handler is the SQS handler.
type Handler struct {
	D   *core.Dispatcher
	Log *slog.Logger
}

// Handle processes each message; failed ones are returned for redelivery.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	for _, m := range ev.Records {
		var msg core.RetryMessage
		if err := json.Unmarshal([]byte(m.Body), &msg); err != nil || msg.IntentID == "" {
			// A malformed message can never succeed; drop it rather than loop.
			h.log().ErrorContext(ctx, "malformed retry message dropped", "messageId", m.MessageId)
			continue
		}
		if err := h.D.HandleRetry(ctx, msg); err != nil {
			h.log().ErrorContext(ctx, "retry failed; message will be redelivered", "intent", msg.IntentID, "err", err.Error())
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
		}
	}
	return resp, nil
}

func (h *Handler) log() *slog.Logger {
	if h.Log == nil {
		return slog.Default()
	}
	return h.Log
}
