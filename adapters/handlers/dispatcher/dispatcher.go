// Package dispatcher handles the DynamoDB Stream records of intents entering
// pending: it claims each one and makes its attempt. Duplicate and reordered
// records are harmless because the claim is a conditional write.
package dispatcher

import (
	"context"
	"log/slog"
	"sync"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/core"
)

// Handler is the stream handler.
type Handler struct {
	D *core.Dispatcher
	// Concurrency bounds parallel attempts within one batch (default 4).
	Concurrency int
	Log         *slog.Logger
}

// Handle attempts every pending intent in the batch and reports the records
// whose processing failed, so Lambda retries from the first of them.
func (h *Handler) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	conc := h.Concurrency
	if conc <= 0 {
		conc = 4
	}
	var (
		mu       sync.Mutex
		failures []events.DynamoDBBatchItemFailure
		wg       sync.WaitGroup
		sem      = make(chan struct{}, conc)
		seen     = map[string]bool{}
	)
	for _, rec := range ev.Records {
		id, pending := intentOf(rec)
		if !pending || seen[id] {
			continue // filtered out upstream too; a repeat in one batch is one attempt
		}
		seen[id] = true
		wg.Add(1)
		sem <- struct{}{}
		go func(seq, id string) {
			defer wg.Done()
			defer func() { <-sem }()
			if err := h.D.Attempt(ctx, id, "stream"); err != nil {
				h.log().ErrorContext(ctx, "attempt failed; record will be retried", "intent", id, "err", err.Error())
				mu.Lock()
				failures = append(failures, events.DynamoDBBatchItemFailure{ItemIdentifier: seq})
				mu.Unlock()
			}
		}(rec.Change.SequenceNumber, id)
	}
	wg.Wait()
	return events.DynamoDBEventResponse{BatchItemFailures: failures}, nil
}

func intentOf(rec events.DynamoDBEventRecord) (string, bool) {
	img := rec.Change.NewImage
	if img == nil {
		return "", false
	}
	sk, ok := img["sk"]
	if !ok || sk.DataType() != events.DataTypeString || sk.String() != "INTENT" {
		return "", false
	}
	st, ok := img["status"]
	if !ok || st.DataType() != events.DataTypeString || st.String() != string(core.StatusPending) {
		return "", false
	}
	id, ok := img["id"]
	if !ok || id.DataType() != events.DataTypeString || id.String() == "" {
		return "", false
	}
	return id.String(), true
}

func (h *Handler) log() *slog.Logger {
	if h.Log == nil {
		return slog.Default()
	}
	return h.Log
}
