// Package pruner turns the table's TTL deletes of ended intents into
// tombstones and archived records (issue 27). It runs on the table stream
// with its own event source mapping, filtered (StreamFilterPattern) to the
// REMOVE records DynamoDB's TTL service writes for intent items in a
// terminal status: user deletes, tombstones (no "status"), history pages
// and every other record never invoke it.
package pruner

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/adapters/archive"
	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/retention"
)

// StreamFilterPattern selects TTL deletes of terminal intent items: AWS
// marks them eventName REMOVE with userIdentity {type: Service, principalId:
// dynamodb.amazonaws.com}. The local host presents its reaper's deletes the
// same way (localstack/lambdahost TTLReaper).
const StreamFilterPattern = `{"eventName":["REMOVE"],"userIdentity":{"type":["Service"],"principalId":["dynamodb.amazonaws.com"]},"dynamodb":{"OldImage":{"sk":{"S":["INTENT"]},"status":{"S":["succeeded","failed","source-revised","grant-revoked","abandoned","expired"]}}}}`

// The pruner's stream mapping, one setting for the stack's event source
// mapping (infra PrunerBatchSize / PrunerBatchingWindowSeconds, asserted on
// the template by infra TestRetention), the local host's poller and the
// bench that measures archive_s3_puts_per_1000_pruned with them: batches of
// up to MappingBatchSize records gathered for up to MappingBatchingWindow,
// so 1,000 pruned intents cost a few archive objects while a batch of ~2 KB
// intent images stays well under Lambda's 6 MB payload. A longer window
// (AWS allows 300 s) would write fewer objects at low prune rates, but it is
// also the time between a TTL delete and its tombstone (docs/decisions.md).
const (
	MappingBatchSize      = 500
	MappingBatchingWindow = 30 * time.Second
)

// TTLPrincipal is the userIdentity.principalId of a TTL delete.
const TTLPrincipal = "dynamodb.amazonaws.com"

// IsTTLDelete reports whether rec is a delete by DynamoDB's TTL service.
func IsTTLDelete(rec events.DynamoDBEventRecord) bool {
	return rec.EventName == "REMOVE" && rec.UserIdentity != nil &&
		rec.UserIdentity.Type == "Service" && rec.UserIdentity.PrincipalID == TTLPrincipal
}

// Handler handles the pruner's stream batches.
type Handler struct {
	Store *dynamo.Store
	// Archive receives the batch's records (nil: the archive is off).
	Archive *archive.Store
	// TombstoneRetention is how long a tombstone keeps the key (0: for ever).
	TombstoneRetention time.Duration
	Clock              core.Clock
	Log                *slog.Logger
}

// Handle archives the batch's pruned intents in one object, then puts their
// tombstones and hands their history pages to the TTL. Every step is idempotent, so
// an error retries the whole batch.
func (h *Handler) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	var work []*core.Intent
	var first events.DynamoDBEventRecord
	for _, rec := range ev.Records {
		if !IsTTLDelete(rec) {
			continue
		}
		in, err := dynamo.IntentFromImage(rec.Change.OldImage)
		if err != nil {
			return events.DynamoDBEventResponse{}, fmt.Errorf("pruner: record %s: %w", rec.EventID, err)
		}
		if in.Pruned != nil || !in.Status.Terminal() {
			continue // a tombstone's own expiry, or (never) a live intent
		}
		if len(work) == 0 {
			first = rec
		}
		work = append(work, in)
	}
	if len(work) == 0 {
		return events.DynamoDBEventResponse{}, nil
	}
	now := h.clock().Now()
	pages := make([][]core.HistoryPage, len(work))
	for i, in := range work {
		if in.History != nil && in.History.Pages > 0 {
			ps, err := h.Store.HistoryPages(ctx, in.ID, 1, in.History.Pages)
			if err != nil {
				return events.DynamoDBEventResponse{}, err
			}
			pages[i] = ps
		}
	}
	locations := make([]string, len(work))
	if h.Archive != nil {
		recs := make([]archive.Record, len(work))
		for i, in := range work {
			recs[i] = Record(in, pages[i], now)
		}
		// The partition is the first intent's expiry day: the same batch
		// retried lands on the same object.
		key := archive.BatchKey(work[0].ExpiresAt, first.EventSourceArn, first.Change.SequenceNumber)
		if err := h.Archive.PutBatch(ctx, key, recs); err != nil {
			return events.DynamoDBEventResponse{}, err
		}
		for i := range work {
			locations[i] = archive.Location(key, i+1)
		}
	}
	tombExpiry := retention.ExpiryAt(now, h.TombstoneRetention)
	written := 0
	for i, in := range work {
		item, err := dynamo.MarshalTombstone(in, locations[i], tombExpiry)
		if err != nil {
			return events.DynamoDBEventResponse{}, err
		}
		ok, raced, err := h.Store.PutTombstone(ctx, item)
		if err != nil {
			return events.DynamoDBEventResponse{}, err
		}
		if ok {
			written++
		} else if raced {
			h.log().WarnContext(ctx, "pruned intent's key already holds an item; tombstone not written", "intent", in.ID, "bot", in.Bot)
		}
		if in.History != nil && in.History.Pages > 0 {
			if err := h.Store.ExpireHistoryPages(ctx, in.ID, in.History.Pages, now); err != nil {
				return events.DynamoDBEventResponse{}, err
			}
		}
	}
	h.log().InfoContext(ctx, "pruned intents", "count", len(work), "tombstones", written, "archived", h.Archive != nil)
	return events.DynamoDBEventResponse{}, nil
}

// Record is the archived record of in with its history pages merged back.
// The payload body is not archived (its hash and reference are).
func Record(in *core.Intent, pages []core.HistoryPage, now time.Time) archive.Record {
	full := *in
	full.Attempts, full.Resolutions = core.FullHistory(in, pages)
	full.Payload = nil
	r := archive.Record{Intent: &full, WebhookBindings: []core.Attempt{}, PrunedAt: now}
	if in.EndedAt != nil {
		r.EndedAt = *in.EndedAt
	}
	for _, a := range full.Attempts {
		if a.Trigger == core.TriggerWebhook {
			r.WebhookBindings = append(r.WebhookBindings, a)
		}
	}
	return r
}

func (h *Handler) clock() core.Clock {
	if h.Clock == nil {
		return core.SystemClock
	}
	return h.Clock
}

func (h *Handler) log() *slog.Logger { return cmp.Or(h.Log, slog.Default()) }
