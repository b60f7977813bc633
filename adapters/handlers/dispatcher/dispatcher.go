// Package dispatcher handles the DynamoDB Stream records of intents entering
// pending. It fans them out: one dispatch message per intent on the work
// (retry) queue, sent in batches, which the retrier function consumes with
// high concurrency. A provider account that hangs to its timeout then holds
// only the workers busy with its own intents, never a stream shard and the
// other tenants' intents behind it. The claim stays the single decider, so
// duplicate and reordered records (and messages) are harmless.
package dispatcher

import (
	"cmp"
	"context"
	"log/slog"
	"sync"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/core"
)

// Handler is the stream handler.
type Handler struct {
	D *core.Dispatcher
	// Fanout, when set, receives one dispatch message per pending intent
	// instead of the attempt being made here.
	Fanout core.BatchQueue
	// Concurrency bounds parallel attempts within one batch when attempting
	// directly (default: the whole batch at once).
	Concurrency int
	Log         *slog.Logger
}

// Handle attempts every pending intent in the batch and reports the records
// whose processing failed, so Lambda retries from the first of them.
func (h *Handler) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	if h.Fanout != nil {
		return h.fanout(ctx, ev), nil
	}
	conc := h.Concurrency
	if conc <= 0 {
		conc = max(len(ev.Records), 1)
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
			if _, err := h.D.Attempt(ctx, core.AttemptRequest{ID: id, Trigger: core.TriggerStream}); err != nil {
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

// fanout sends one dispatch message per pending intent of the batch; the
// records whose message could not be sent are reported, so Lambda retries
// from the first of them.
func (h *Handler) fanout(ctx context.Context, ev events.DynamoDBEvent) events.DynamoDBEventResponse {
	var msgs []core.QueuedMessage
	var seqs []string
	seen := map[string]bool{}
	for _, rec := range ev.Records {
		id, pending := intentOf(rec)
		if !pending || seen[id] {
			continue
		}
		seen[id] = true
		msgs = append(msgs, core.QueuedMessage{Msg: core.RetryMessage{IntentID: id, Op: core.OpDispatch, Trigger: core.TriggerStream}})
		seqs = append(seqs, rec.Change.SequenceNumber)
	}
	var resp events.DynamoDBEventResponse
	if len(msgs) == 0 {
		return resp
	}
	failed, err := h.Fanout.EnqueueBatch(ctx, msgs)
	if err != nil {
		h.log().ErrorContext(ctx, "dispatch fan-out failed; records will be retried", "messages", len(msgs), "failed", len(failed), "err", err.Error())
	}
	for _, i := range failed {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: seqs[i]})
	}
	return resp
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

func (h *Handler) log() *slog.Logger { return cmp.Or(h.Log, slog.Default()) }
