// Package notifier is the stream handler that turns intent changes into
// operator events: one per needs-human episode, and one when an intent ends
// failed or expired after attempts. The stream delivers records at least
// once and may repeat or reorder them; the event id depends only on the
// episode and notify.OperatorNotifier publishes each id once (ledger claim,
// publish, mark), so repeats are harmless.
package notifier

import (
	"context"
	"errors"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/notify"
)

// Handler handles the notifier's stream batches.
type Handler struct {
	N   *notify.OperatorNotifier
	Log *slog.Logger
}

// Handle publishes the batch's events in order and reports the first record
// that could not be finished, so the event source mapping retries from it
// (records before it are done; the ones after it are retried too, which the
// ledger makes harmless).
func (h *Handler) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	done := map[string]bool{}
	for _, rec := range ev.Records {
		oe, ok, err := EventOf(rec)
		if err != nil {
			// A record we cannot read will not read better on a retry.
			h.log().ErrorContext(ctx, "notifier: unreadable stream record skipped", "err", err.Error(), "seq", rec.Change.SequenceNumber)
			continue
		}
		if !ok || done[oe.ID] {
			continue
		}
		if err := h.N.Publish(ctx, oe); err != nil {
			level := slog.LevelError
			if errors.Is(err, notify.ErrOperatorEventHeld) {
				level = slog.LevelInfo
			}
			h.log().Log(ctx, level, "operator event not published yet; record will be retried", "intent", oe.IntentID, "bot", oe.Bot, "attempt", oe.Attempts, "event", oe.ID, "err", err.Error())
			return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{{ItemIdentifier: rec.Change.SequenceNumber}}}, nil
		}
		done[oe.ID] = true // published now (the notifier logs it) or before
	}
	return events.DynamoDBEventResponse{}, nil
}

// EventOf reads a stream record's images and asks core whether it carries an
// operator event.
func EventOf(rec events.DynamoDBEventRecord) (core.OperatorEvent, bool, error) {
	newImg := rec.Change.NewImage
	if len(newImg) == 0 {
		return core.OperatorEvent{}, false, nil
	}
	if sk, ok := newImg["sk"]; !ok || sk.DataType() != events.DataTypeString || sk.String() != "INTENT" {
		return core.OperatorEvent{}, false, nil
	}
	cur, err := dynamo.IntentFromImage(newImg)
	if err != nil {
		return core.OperatorEvent{}, false, err
	}
	var old *core.Intent
	if len(rec.Change.OldImage) > 0 {
		if old, err = dynamo.IntentFromImage(rec.Change.OldImage); err != nil {
			return core.OperatorEvent{}, false, err
		}
	}
	oe, ok := notify.OperatorEventFor(old, cur)
	return oe, ok, nil
}

func (h *Handler) log() *slog.Logger {
	if h.Log == nil {
		return slog.Default()
	}
	return h.Log
}
