// Package retrier handles retry-queue messages: due retries and
// reconciliations. It reports partial batch failures.
package retrier

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"sync"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/core"
)

// Handler is the SQS handler.
type Handler struct {
	D *core.Dispatcher
	// Concurrency bounds messages handled at once within a batch (default
	// 10): a paced attempt may wait for its slot in-process, and its
	// neighbours in the batch must not wait behind it.
	Concurrency int
	// Coalesce, when set, scopes one batch: what it collects under the
	// context it returns (the bot-limit give-backs of the intents the batch
	// ends, dynamo.Store.CoalesceGiveBacks) is written by flush once every
	// message is done, one write per counter shard instead of one per intent.
	Coalesce func(ctx context.Context) (context.Context, func(context.Context))
	Log      *slog.Logger
}

// Handle processes the messages (concurrently); failed ones are returned for redelivery.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	conc := h.Concurrency
	if conc <= 0 {
		conc = 10
	}
	var (
		resp events.SQSEventResponse
		mu   sync.Mutex
		wg   sync.WaitGroup
		sem  = make(chan struct{}, conc)
	)
	if h.Coalesce != nil {
		var flush func(context.Context)
		ctx, flush = h.Coalesce(ctx)
		defer flush(ctx)
	}
	for _, m := range ev.Records {
		var msg core.RetryMessage
		if err := json.Unmarshal([]byte(m.Body), &msg); err != nil || msg.IntentID == "" {
			// A malformed message can never succeed; drop it rather than loop.
			h.log().ErrorContext(ctx, "malformed retry message dropped", "messageId", m.MessageId)
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func(id string, msg core.RetryMessage) {
			defer wg.Done()
			defer func() { <-sem }()
			if err := h.D.HandleRetry(ctx, msg); err != nil {
				h.log().ErrorContext(ctx, "retry failed; message will be redelivered", "intent", msg.IntentID, "err", err.Error())
				mu.Lock()
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
				mu.Unlock()
			}
		}(m.MessageId, msg)
	}
	wg.Wait()
	return resp, nil
}

func (h *Handler) log() *slog.Logger { return cmp.Or(h.Log, slog.Default()) }
