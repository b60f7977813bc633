package dynamo

// Webhook items (same table as intents):
//
//	WHEVT#<provider>#<account>#<eventId>, WHEVT        one per provider event: the uniqueness
//	                                                   constraint (conditional put), its state
//	                                                   and, when unresolved, the raw event
//	EXTMSG#<provider>#<account>#<messageId>, EXTMSG    provider message id -> intent id
//
// Key parts are escaped ('%' and '#') so no two (provider, account, id)
// triples share a key. Unresolved events carry gsi1pk =
// WEBHOOK#UNRESOLVED#<shard of pk> (gsi1sk = <received time>#<pk>) so
// operators can list them (merged across shards); every other
// webhook item stays out of the index. Bound, ignored and forwarded events
// and mappings expire through TTL (expiresAt); unresolved ones do not.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/retention"
	"github.com/botharness/outbox/core/webhook"
)

const (
	eventSK         = "WHEVT"
	mappingSK       = "EXTMSG"
	unresolvedGSIPK = "WEBHOOK#UNRESOLVED"
)

// Webhooks implements core.WebhookStore.
type Webhooks struct {
	db    API
	table string
	// EventTTL keeps uniqueness items of handled events (default 30 days,
	// well past any provider's redelivery window).
	EventTTL time.Duration
	// MappingTTL keeps message id -> intent mappings (default 90 days).
	MappingTTL time.Duration
	// Tries bounds optimistic-concurrency retries of a bind.
	Tries int
	// Shards is the table's sharding (zero: DefaultSharding), the intent
	// store's: the intents a bind rewrites keep their repair entries where
	// the sweeper reads them.
	Shards Sharding
	// Retention is the intent retention window (see Store.Retention).
	Retention time.Duration
}

var _ webhook.WebhookStore = (*Webhooks)(nil)

// NewWebhooks returns the webhook store over table.
func NewWebhooks(db API, table string) *Webhooks {
	return &Webhooks{db: db, table: table, EventTTL: 30 * 24 * time.Hour, MappingTTL: 90 * 24 * time.Hour, Tries: 8}
}

var keyEscaper = strings.NewReplacer("%", "%25", "#", "%23")

func keyPart(s string) string { return keyEscaper.Replace(s) }

// EventPK is the partition key of an event's uniqueness item.
func EventPK(provider, account, eventID string) string {
	return "WHEVT#" + keyPart(provider) + "#" + keyPart(account) + "#" + keyPart(eventID)
}

// MappingPK is the partition key of a provider message id's mapping item.
func MappingPK(provider, account, messageID string) string {
	return "EXTMSG#" + keyPart(provider) + "#" + keyPart(account) + "#" + keyPart(messageID)
}

// key is an item's primary key.
func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": avS(pk), "sk": avS(sk)}
}

func (w *Webhooks) eventItem(rec webhook.EventRecord) (map[string]types.AttributeValue, error) {
	item, err := attributevalue.MarshalMap(eventToItem(rec))
	if err != nil {
		return nil, fmt.Errorf("marshal event %s: %w", rec.EventID, err)
	}
	pk := EventPK(rec.Provider, rec.Account, rec.EventID)
	item["pk"] = avS(pk)
	item["sk"] = avS(eventSK)
	if rec.State == webhook.EventUnresolved {
		item["gsi1pk"] = avS(shardKey(unresolvedGSIPK+"#", shardOf(pk, WebhookShards)))
		item["gsi1sk"] = avS(rec.ReceivedAt.UTC().Format(timeKey) + "#" + pk)
	} else {
		item[TTLAttribute] = avN(rec.ReceivedAt.Add(w.EventTTL).Unix())
	}
	return item, nil
}

func unmarshalEvent(item map[string]types.AttributeValue) (*webhook.EventRecord, error) {
	return unmarshalAs(item, "event", eventFromItem)
}

func notExists() *string { return aws.String("attribute_not_exists(pk)") }

// SeenEvent reads an event's uniqueness item (strongly consistent).
func (w *Webhooks) SeenEvent(ctx context.Context, provider, account, eventID string) (*webhook.EventRecord, error) {
	out, err := w.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(w.table), Key: key(EventPK(provider, account, eventID), eventSK), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("get event %s: %w", eventID, err)
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	return unmarshalEvent(out.Item)
}

// RecordEvent is one conditional put.
func (w *Webhooks) RecordEvent(ctx context.Context, rec webhook.EventRecord) error {
	item, err := w.eventItem(rec)
	if err != nil {
		return err
	}
	_, err = w.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(w.table), Item: item, ConditionExpression: notExists()})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("event %s: %w", rec.EventID, webhook.ErrDuplicateEvent)
	}
	if err != nil {
		return fmt.Errorf("put event %s: %w", rec.EventID, err)
	}
	return nil
}

// BindEvent writes the uniqueness item, the intent and the mapping in one
// transaction (a single PutItem when only the uniqueness item is due).
func (w *Webhooks) BindEvent(ctx context.Context, rec webhook.EventRecord, mutate func(*core.Intent) (webhook.BindPlan, error)) (*core.Intent, error) {
	tries := max(w.Tries, 1)
	store := New(w.db, w.table)
	store.Shards = w.Shards
	for i := 0; i < tries; i++ {
		if i > 0 {
			// Lost a race (version or a concurrent transaction): back off a little.
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Duration(i*i*10) * time.Millisecond):
			}
		}
		cur, err := store.Get(ctx, rec.IntentID)
		if err != nil {
			return nil, err
		}
		if cur.Pruned != nil {
			// A late event for an intent past its window: its tombstone is
			// never rewritten; the event is recorded (deduplicated) only.
			if err := w.RecordEvent(ctx, rec); err != nil {
				return nil, err
			}
			return cur, nil
		}
		before := cur.Status
		plan, err := mutate(cur)
		if err != nil {
			return nil, err
		}
		evItem, err := w.eventItem(rec)
		if err != nil {
			return nil, err
		}
		if !plan.Changed && !plan.MapMessage {
			if err := w.RecordEvent(ctx, rec); err != nil {
				return nil, err
			}
			return cur, nil
		}
		items := []types.TransactWriteItem{{Put: &types.Put{TableName: aws.String(w.table), Item: evItem, ConditionExpression: notExists()}}}
		intentIdx, mapIdx := -1, -1
		if plan.Changed {
			readVersion := cur.Version
			cur.Version++
			// An acknowledgement that ends the intent carries its TTL.
			retention.ApplyRetention(cur, w.Retention)
			item, err := store.MarshalIntent(cur)
			if err != nil {
				return nil, err
			}
			// History pages the event's entry moved out go in first, so the
			// indexes of the event, intent and mapping puts are unchanged
			// relative to each other.
			hist, err := store.historyPuts(cur, cur.TakeSpill())
			if err != nil {
				return nil, err
			}
			items = append(items, hist...)
			intentIdx = len(items)
			items = append(items, types.TransactWriteItem{Put: &types.Put{
				TableName: aws.String(w.table), Item: item,
				ConditionExpression:       aws.String("#v = :v"),
				ExpressionAttributeNames:  map[string]string{"#v": "version"},
				ExpressionAttributeValues: map[string]types.AttributeValue{":v": avN(readVersion)},
			}})
		}
		if plan.MapMessage {
			m := key(MappingPK(rec.Provider, rec.Account, rec.MessageID), mappingSK)
			m["intentId"] = avS(rec.IntentID)
			m["eventId"] = avS(rec.EventID)
			m["createdAt"] = avS(rec.ReceivedAt.UTC().Format(time.RFC3339Nano))
			m[TTLAttribute] = avN(rec.ReceivedAt.Add(w.MappingTTL).Unix())
			mapIdx = len(items)
			items = append(items, types.TransactWriteItem{Put: &types.Put{
				TableName: aws.String(w.table), Item: m,
				ConditionExpression:       aws.String("attribute_not_exists(pk) OR intentId = :id"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":id": avS(rec.IntentID)},
			}})
		}
		_, err = w.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		if err == nil {
			if plan.Changed {
				store.closeOpenSlot(ctx, before, cur)
			}
			return cur, nil
		}
		var tc *types.TransactionCanceledException
		if !errors.As(err, &tc) {
			var tip *types.TransactionInProgressException
			if errors.As(err, &tip) {
				continue
			}
			return nil, fmt.Errorf("bind event %s to %s: %w", rec.EventID, rec.IntentID, err)
		}
		code := func(i int) string {
			if i < 0 || i >= len(tc.CancellationReasons) {
				return ""
			}
			return aws.ToString(tc.CancellationReasons[i].Code)
		}
		switch {
		case code(0) == "ConditionalCheckFailed":
			return nil, fmt.Errorf("event %s: %w", rec.EventID, webhook.ErrDuplicateEvent)
		case code(mapIdx) == "ConditionalCheckFailed":
			return nil, fmt.Errorf("message %s: %w", rec.MessageID, webhook.ErrMappingTaken)
		case code(intentIdx) == "ConditionalCheckFailed":
			continue // the intent moved on: re-read and decide again
		case len(tc.CancellationReasons) == 0 || strings.Contains(aws.ToString(tc.Message), "TransactionConflict"):
			continue
		}
		conflict := false
		for _, r := range tc.CancellationReasons {
			if aws.ToString(r.Code) == "TransactionConflict" {
				conflict = true
			}
		}
		if conflict {
			continue
		}
		return nil, fmt.Errorf("bind event %s to %s: %w", rec.EventID, rec.IntentID, err)
	}
	return nil, fmt.Errorf("bind event %s to %s after %d tries: %w", rec.EventID, rec.IntentID, tries, core.ErrConflict)
}

// IntentForMessage reads a mapping item (strongly consistent).
func (w *Webhooks) IntentForMessage(ctx context.Context, provider, account, messageID string) (string, error) {
	out, err := w.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(w.table), Key: key(MappingPK(provider, account, messageID), mappingSK), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return "", fmt.Errorf("get mapping %s: %w", messageID, err)
	}
	v, ok := out.Item["intentId"].(*types.AttributeValueMemberS)
	if !ok || v.Value == "" {
		return "", fmt.Errorf("message %s: %w", messageID, core.ErrNotFound)
	}
	return v.Value, nil
}

// ClaimInbound puts the event in state forwarding, or takes over a claim
// that expired (its handler died between claim and mark).
func (w *Webhooks) ClaimInbound(ctx context.Context, rec webhook.EventRecord, now, until time.Time) (webhook.InboundClaim, error) {
	rec.State, rec.ClaimUntil = webhook.EventForwarding, &until
	item, err := w.eventItem(rec)
	if err != nil {
		return 0, err
	}
	_, err = w.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(w.table), Item: item, ConditionExpression: notExists(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return webhook.ClaimNew, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return 0, fmt.Errorf("claim event %s: %w", rec.EventID, err)
	}
	var old *webhook.EventRecord
	if len(ccf.Item) > 0 {
		old, err = unmarshalEvent(ccf.Item)
	} else {
		old, err = w.SeenEvent(ctx, rec.Provider, rec.Account, rec.EventID)
	}
	if err != nil {
		return 0, err
	}
	if old == nil || old.State != webhook.EventForwarding {
		return webhook.ClaimDone, nil
	}
	if old.ClaimUntil != nil && now.Before(*old.ClaimUntil) {
		return webhook.ClaimBusy, nil
	}
	cond := "#s = :f AND attribute_not_exists(claimUntil)"
	vals := map[string]types.AttributeValue{
		":f": avS(webhook.EventForwarding),
		":u": avS(until.UTC().Format(time.RFC3339Nano)),
	}
	if old.ClaimUntil != nil {
		cond = "#s = :f AND claimUntil = :old"
		vals[":old"] = avS(old.ClaimUntil.UTC().Format(time.RFC3339Nano))
	}
	_, err = w.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(w.table), Key: key(EventPK(rec.Provider, rec.Account, rec.EventID), eventSK),
		UpdateExpression:          aws.String("SET claimUntil = :u ADD takeovers :one"),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  map[string]string{"#s": "state"},
		ExpressionAttributeValues: withOne(vals),
	})
	if errors.As(err, &ccf) {
		return webhook.ClaimBusy, nil // someone else took it over first
	}
	if err != nil {
		return 0, fmt.Errorf("take over event %s: %w", rec.EventID, err)
	}
	return webhook.ClaimTakenOver, nil
}

func withOne(m map[string]types.AttributeValue) map[string]types.AttributeValue {
	m[":one"] = &types.AttributeValueMemberN{Value: "1"}
	return m
}

// MarkForwarded records that the inbound event is in the inbox queue.
func (w *Webhooks) MarkForwarded(ctx context.Context, rec webhook.EventRecord, now time.Time) error {
	_, err := w.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(w.table), Key: key(EventPK(rec.Provider, rec.Account, rec.EventID), eventSK),
		UpdateExpression:         aws.String("SET #s = :done, forwardedAt = :now REMOVE claimUntil"),
		ConditionExpression:      aws.String("#s = :f"),
		ExpressionAttributeNames: map[string]string{"#s": "state"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":done": avS(webhook.EventForwarded),
			":f":    avS(webhook.EventForwarding),
			":now":  avS(now.UTC().Format(time.RFC3339Nano)),
		},
	})
	if err != nil {
		return fmt.Errorf("mark event %s forwarded: %w", rec.EventID, err)
	}
	return nil
}

// ListUnresolved pages through unresolved events, oldest first, with an
// opaque cursor ("" when there is no next page).
func (w *Webhooks) ListUnresolved(ctx context.Context, cursor string, limit int) ([]webhook.EventRecord, string, error) {
	entries, next, err := mergedPage(ctx, w.db, w.table, mergedShape{listing: "unresolved-webhooks", shards: WebhookShards, pkPrefix: "WHEVT#", sk: eventSK}, unresolvedGSIPK+"#", cursor, limit)
	if err != nil {
		return nil, "", fmt.Errorf("list unresolved webhook events: %w", err)
	}
	items, err := hydrate(ctx, w.db, w.table, entries)
	if err != nil {
		return nil, "", err
	}
	recs := make([]webhook.EventRecord, 0, len(items))
	for _, item := range items {
		rec, err := unmarshalEvent(item)
		if err != nil {
			return nil, "", err
		}
		recs = append(recs, *rec)
	}
	return recs, next, nil
}
