package dynamo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/gate"
	"github.com/botharness/outbox/core/notify"
	"github.com/botharness/outbox/core/overview"
)

// Operator event ledger items (one per event id):
//
//	OPEVENT#<id>, OPEVENT                  state claimed|published, owner, leaseUntil, the event
//	GATE#<provider>#<account>, EVENT#<t>#<type>  the same, for a breaker's open or close
//
// A breaker event's record lives in its gate's partition: the gate's open
// or close writes it, in the same transaction, as a claim whose lease is
// already over (Gates.Open, Gates.Close), so the move and its event are one
// write, GET .../pace lists the gate's history from the same records
// (Gates.Events) and the worker that moved the gate, or else the sweeper,
// publishes it through the ledger like any other event.
//
// An unpublished claim is listed in gsi1 under OPEVENTS#UNPUBLISHED (sort key:
// lease end), so the sweeper finds claims a crash left behind; publishing
// drops the two attributes, which keeps that partition as small as the
// backlog. Published records expire (TTL) after OperatorEventRetention.
const (
	opEventSK          = "OPEVENT"
	opEventUnpublished = "OPEVENTS#UNPUBLISHED"
	opStateClaimed     = "claimed"
	opStatePublished   = "published"
)

// The ledger is also the timeline of episodes the operators' overview
// charts (core.EpisodeHours): every record is listed in gsi2 (keys only)
// under OPEVENTS#<shard> with sort key <episode start>#<type>#<id>, set by
// the claim's own PutItem (no extra write) and kept after publishing; the
// record's TTL removes it from the listing. OpEventShards spreads that
// listing: a storm of 10,000 episodes/s (every intent handed to a human)
// is ~310 index writes/s per key, under a third of a partition's 1,000;
// the overview reads the window with one keys-only Query per shard.
const (
	opEventsTimeline = "OPEVENTS#"
	OpEventShards    = 32
)

func opEventTimelineSK(ev core.OperatorEvent) string {
	return ev.At.UTC().Format(timeKey) + "#" + ev.Type + "#" + ev.ID
}

// OperatorEventRetention is how long a published event's record is kept: far
// longer than any stream record (24 h) or queue message can be re-delivered.
const OperatorEventRetention = 30 * 24 * time.Hour

// OperatorEventLedger implements core.OperatorEventLedger on the table.
type OperatorEventLedger struct {
	db    API
	table string
}

var _ notify.OperatorEventLedger = (*OperatorEventLedger)(nil)

// NewOperatorEventLedger returns the ledger over table.
func NewOperatorEventLedger(db API, table string) *OperatorEventLedger {
	return &OperatorEventLedger{db: db, table: table}
}

// opEventItem is the stored shape of a ledger record.
type opEventItem struct {
	State      string            `dynamodbav:"state"`
	Owner      string            `dynamodbav:"owner"`
	LeaseUntil string            `dynamodbav:"leaseUntil"`
	GSI1PK     string            `dynamodbav:"gsi1pk,omitempty"`
	GSI1SK     string            `dynamodbav:"gsi1sk,omitempty"`
	GSI2PK     string            `dynamodbav:"gsi2pk,omitempty"`
	GSI2SK     string            `dynamodbav:"gsi2sk,omitempty"`
	ID         string            `dynamodbav:"eventId"`
	Type       string            `dynamodbav:"eventType"`
	At         time.Time         `dynamodbav:"at"`
	IntentID   string            `dynamodbav:"intentId,omitempty"`
	Bot        string            `dynamodbav:"bot,omitempty"`
	Provider   string            `dynamodbav:"provider,omitempty"`
	Account    string            `dynamodbav:"account,omitempty"`
	Action     string            `dynamodbav:"action,omitempty"`
	Reason     string            `dynamodbav:"reason,omitempty"`
	Attempts   int               `dynamodbav:"attempts,omitempty"`
	Fields     map[string]string `dynamodbav:"fields,omitempty"`
}

// opEventKey is the key of ev's record (see the layout above).
func opEventKey(ev core.OperatorEvent) map[string]types.AttributeValue {
	if ev.Type == core.EventBreakerOpened || ev.Type == core.EventBreakerClosed {
		return map[string]types.AttributeValue{"pk": avS(GatePK(gate.GateKey(ev.Provider, ev.Account))),
			"sk": avS(gateEvtPfx + ev.At.UTC().Format(timeKey) + "#" + ev.Type)}
	}
	return map[string]types.AttributeValue{"pk": avS("OPEVENT#" + ev.ID), "sk": avS(opEventSK)}
}

func (it opEventItem) event() core.OperatorEvent {
	return core.OperatorEvent{ID: it.ID, Type: it.Type, At: it.At, IntentID: it.IntentID, Bot: it.Bot, Provider: it.Provider,
		Account: it.Account, Action: it.Action, Reason: it.Reason, Attempts: it.Attempts, Fields: it.Fields}
}

// claimItem is ev's record claimed by owner until until.
func claimItem(ev core.OperatorEvent, owner string, until time.Time) (map[string]types.AttributeValue, error) {
	lease := until.UTC().Format(timeKey)
	it := opEventItem{State: opStateClaimed, Owner: owner, LeaseUntil: lease,
		GSI1PK: opEventUnpublished, GSI1SK: lease + "#" + ev.ID,
		GSI2PK: shardKey(opEventsTimeline, shardOf(ev.ID, OpEventShards)), GSI2SK: opEventTimelineSK(ev),
		ID: ev.ID, Type: ev.Type, At: ev.At, IntentID: ev.IntentID, Bot: ev.Bot, Provider: ev.Provider, Account: ev.Account,
		Action: ev.Action, Reason: ev.Reason, Attempts: ev.Attempts, Fields: ev.Fields}
	item, err := attributevalue.MarshalMap(it)
	if err != nil {
		return nil, fmt.Errorf("marshal operator event %s: %w", ev.ID, err)
	}
	maps.Copy(item, opEventKey(ev))
	return item, nil
}

// Claim writes a claimed record if none exists, or takes over a claim whose
// lease ran out unpublished. One conditional write either way.
func (l *OperatorEventLedger) Claim(ctx context.Context, ev core.OperatorEvent, owner string, now, until time.Time) (notify.ClaimResult, error) {
	item, err := claimItem(ev, owner, until)
	if err != nil {
		return 0, err
	}
	_, err = l.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           aws.String(l.table),
		Item:                                item,
		ConditionExpression:                 aws.String("attribute_not_exists(pk) OR (#s = :claimed AND leaseUntil <= :now)"),
		ExpressionAttributeNames:            map[string]string{"#s": "state"},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":claimed": &types.AttributeValueMemberS{Value: opStateClaimed}, ":now": &types.AttributeValueMemberS{Value: now.UTC().Format(timeKey)}},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return notify.ClaimedToPublish, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return 0, fmt.Errorf("claim operator event %s: %w", ev.ID, err)
	}
	if st, ok := ccf.Item["state"].(*types.AttributeValueMemberS); ok && st.Value == opStatePublished {
		return notify.AlreadyPublished, nil
	}
	return notify.HeldByOther, nil
}

// MarkPublished completes owner's claim; it drops the record from the
// unpublished listing and lets it expire after OperatorEventRetention.
func (l *OperatorEventLedger) MarkPublished(ctx context.Context, ev core.OperatorEvent, owner string, now time.Time) error {
	_, err := l.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(l.table),
		Key:                 opEventKey(ev),
		UpdateExpression:    aws.String("SET #s = :published, publishedAt = :now, " + TTLAttribute + " = :ttl REMOVE gsi1pk, gsi1sk"),
		ConditionExpression: aws.String("#o = :owner AND #s = :claimed"),
		ExpressionAttributeNames: map[string]string{
			"#s": "state", "#o": "owner",
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":published": &types.AttributeValueMemberS{Value: opStatePublished},
			":claimed":   &types.AttributeValueMemberS{Value: opStateClaimed},
			":owner":     &types.AttributeValueMemberS{Value: owner},
			":now":       &types.AttributeValueMemberS{Value: now.UTC().Format(timeKey)},
			":ttl":       &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(OperatorEventRetention).Unix(), 10)},
		},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		// Someone took over after our lease ran out and published (or will):
		// the event went out at least once under its stable id.
		return nil
	}
	if err != nil {
		return fmt.Errorf("mark operator event %s: %w", ev.ID, err)
	}
	return nil
}

// Release ends owner's claim now, so the next try need not wait the lease.
func (l *OperatorEventLedger) Release(ctx context.Context, ev core.OperatorEvent, owner string, now time.Time) error {
	t := now.UTC().Format(timeKey)
	_, err := l.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(l.table),
		Key:                       opEventKey(ev),
		UpdateExpression:          aws.String("SET leaseUntil = :now, gsi1sk = :sk"),
		ConditionExpression:       aws.String("#o = :owner AND #s = :claimed"),
		ExpressionAttributeNames:  map[string]string{"#s": "state", "#o": "owner"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": &types.AttributeValueMemberS{Value: t}, ":sk": &types.AttributeValueMemberS{Value: t + "#" + ev.ID}, ":owner": &types.AttributeValueMemberS{Value: owner}, ":claimed": &types.AttributeValueMemberS{Value: opStateClaimed}},
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("release operator event %s: %w", ev.ID, err)
	}
	return nil
}

// dueQuery lists the gsi1 partition pk up to the time upTo (sort keys
// "<time>#…", timeKey), from start, at most limit items.
func dueQuery(table, pk string, upTo time.Time, start map[string]types.AttributeValue, limit int) *dynamodb.QueryInput {
	return &dynamodb.QueryInput{
		TableName:              aws.String(table),
		IndexName:              aws.String(gsiName),
		KeyConditionExpression: aws.String("gsi1pk = :p AND gsi1sk <= :t"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":p": &types.AttributeValueMemberS{Value: pk},
			":t": &types.AttributeValueMemberS{Value: upTo.UTC().Format(timeKey) + "#~"},
		},
		ExclusiveStartKey: start,
		Limit:             aws.Int32(int32(limit)),
	}
}

// Unpublished lists claims whose lease ended before they were published.
func (l *OperatorEventLedger) Unpublished(ctx context.Context, now time.Time, limit int) ([]core.OperatorEvent, error) {
	res, err := l.db.Query(ctx, dueQuery(l.table, opEventUnpublished, now, nil, min(max(limit, 1), 100)))
	if err != nil {
		return nil, fmt.Errorf("list unpublished operator events: %w", err)
	}
	items, err := hydrate(ctx, l.db, l.table, res.Items)
	if err != nil {
		return nil, err
	}
	out := make([]core.OperatorEvent, 0, len(items))
	for _, item := range items {
		var it opEventItem
		if err := attributevalue.UnmarshalMap(item, &it); err != nil {
			return nil, fmt.Errorf("unmarshal operator event: %w", err)
		}
		if it.State == opStateClaimed {
			out = append(out, it.event())
		}
	}
	return out, nil
}

// EpisodesSince lists the ledger's episodes that began at or after since
// (type and start only, from the timeline's keys: no item is read), up to
// limit in all (newest first per shard, so a capped read drops the oldest);
// truncated reports that more exist. One keys-only Query per shard, eight at
// a time, each paged at 1 MB.
func (l *OperatorEventLedger) EpisodesSince(ctx context.Context, since time.Time, limit int) ([]overview.EpisodeMark, bool, error) {
	type result struct {
		marks     []overview.EpisodeMark
		truncated bool
	}
	per := max(limit/OpEventShards, 1)
	res := make([]result, OpEventShards)
	err := eachShard(OpEventShards, 8, func(s int) error {
		r := &res[s]
		var start map[string]types.AttributeValue
		for {
			out, err := l.db.Query(ctx, &dynamodb.QueryInput{
				TableName:              aws.String(l.table),
				IndexName:              aws.String(gsi2Name),
				KeyConditionExpression: aws.String("gsi2pk = :p AND gsi2sk >= :t"),
				ExpressionAttributeValues: map[string]types.AttributeValue{
					":p": &types.AttributeValueMemberS{Value: shardKey(opEventsTimeline, s)},
					":t": &types.AttributeValueMemberS{Value: since.UTC().Format(timeKey)},
				},
				// Newest first: a capped read keeps the recent hours whole.
				ScanIndexForward:  aws.Bool(false),
				ExclusiveStartKey: start,
			})
			if err != nil {
				return fmt.Errorf("list operator events since %s: %w", since.Format(time.RFC3339), err)
			}
			for _, it := range out.Items {
				if len(r.marks) == per {
					r.truncated = true
					return nil
				}
				if m, ok := parseTimelineSK(attrS(it, "gsi2sk")); ok {
					r.marks = append(r.marks, m)
				}
			}
			if out.LastEvaluatedKey == nil {
				return nil
			}
			start = out.LastEvaluatedKey
		}
	})
	if err != nil {
		return nil, false, err
	}
	var out []overview.EpisodeMark
	truncated := false
	for _, r := range res {
		out = append(out, r.marks...)
		truncated = truncated || r.truncated
	}
	return out, truncated, nil
}

func parseTimelineSK(sk string) (overview.EpisodeMark, bool) {
	at, rest, ok := strings.Cut(sk, "#")
	if !ok {
		return overview.EpisodeMark{}, false
	}
	typ, id, ok := strings.Cut(rest, "#")
	if !ok {
		return overview.EpisodeMark{}, false
	}
	t, err := time.Parse(timeKey, at)
	if err != nil {
		return overview.EpisodeMark{}, false
	}
	return overview.EpisodeMark{At: t, Type: typ, ID: id}, true
}
