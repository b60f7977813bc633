package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/core"
)

// Operator event ledger items (one per event id):
//
//	OPEVENT#<id>, OPEVENT   state claimed|published, owner, leaseUntil, the event
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

// OperatorEventRetention is how long a published event's record is kept: far
// longer than any stream record (24 h) or queue message can be re-delivered.
const OperatorEventRetention = 30 * 24 * time.Hour

// OperatorEventLedger implements core.OperatorEventLedger on the table.
type OperatorEventLedger struct {
	db    API
	table string
}

var _ core.OperatorEventLedger = (*OperatorEventLedger)(nil)

// NewOperatorEventLedger returns the ledger over table.
func NewOperatorEventLedger(db API, table string) *OperatorEventLedger {
	return &OperatorEventLedger{db: db, table: table}
}

// opEventItem is the stored shape of a ledger record.
type opEventItem struct {
	PK         string            `dynamodbav:"pk"`
	SK         string            `dynamodbav:"sk"`
	State      string            `dynamodbav:"state"`
	Owner      string            `dynamodbav:"owner"`
	LeaseUntil string            `dynamodbav:"leaseUntil"`
	GSI1PK     string            `dynamodbav:"gsi1pk,omitempty"`
	GSI1SK     string            `dynamodbav:"gsi1sk,omitempty"`
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

func opEventKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "OPEVENT#" + id},
		"sk": &types.AttributeValueMemberS{Value: opEventSK},
	}
}

func (it opEventItem) event() core.OperatorNotice {
	return core.OperatorNotice{ID: it.ID, Type: it.Type, At: it.At, IntentID: it.IntentID, Bot: it.Bot, Provider: it.Provider,
		Account: it.Account, Action: it.Action, Reason: it.Reason, Attempts: it.Attempts, Fields: it.Fields}
}

// Claim writes a claimed record if none exists, or takes over a claim whose
// lease ran out unpublished. One conditional write either way.
func (l *OperatorEventLedger) Claim(ctx context.Context, ev core.OperatorNotice, owner string, now, until time.Time) (core.ClaimResult, error) {
	lease := until.UTC().Format(timeKey)
	it := opEventItem{PK: "OPEVENT#" + ev.ID, SK: opEventSK, State: opStateClaimed, Owner: owner, LeaseUntil: lease,
		GSI1PK: opEventUnpublished, GSI1SK: lease + "#" + ev.ID,
		ID: ev.ID, Type: ev.Type, At: ev.At, IntentID: ev.IntentID, Bot: ev.Bot, Provider: ev.Provider, Account: ev.Account,
		Action: ev.Action, Reason: ev.Reason, Attempts: ev.Attempts, Fields: ev.Fields}
	item, err := attributevalue.MarshalMap(it)
	if err != nil {
		return 0, fmt.Errorf("marshal operator event %s: %w", ev.ID, err)
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
		return core.ClaimedToPublish, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return 0, fmt.Errorf("claim operator event %s: %w", ev.ID, err)
	}
	if st, ok := ccf.Item["state"].(*types.AttributeValueMemberS); ok && st.Value == opStatePublished {
		return core.AlreadyPublished, nil
	}
	return core.HeldByOther, nil
}

// MarkPublished completes owner's claim; it drops the record from the
// unpublished listing and lets it expire after OperatorEventRetention.
func (l *OperatorEventLedger) MarkPublished(ctx context.Context, id, owner string, now time.Time) error {
	_, err := l.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(l.table),
		Key:                 opEventKey(id),
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
		return fmt.Errorf("mark operator event %s: %w", id, err)
	}
	return nil
}

// Release ends owner's claim now, so the next try need not wait the lease.
func (l *OperatorEventLedger) Release(ctx context.Context, id, owner string, now time.Time) error {
	t := now.UTC().Format(timeKey)
	_, err := l.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(l.table),
		Key:                       opEventKey(id),
		UpdateExpression:          aws.String("SET leaseUntil = :now, gsi1sk = :sk"),
		ConditionExpression:       aws.String("#o = :owner AND #s = :claimed"),
		ExpressionAttributeNames:  map[string]string{"#s": "state", "#o": "owner"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": &types.AttributeValueMemberS{Value: t}, ":sk": &types.AttributeValueMemberS{Value: t + "#" + id}, ":owner": &types.AttributeValueMemberS{Value: owner}, ":claimed": &types.AttributeValueMemberS{Value: opStateClaimed}},
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("release operator event %s: %w", id, err)
	}
	return nil
}

// Unpublished lists claims whose lease ended before they were published.
func (l *OperatorEventLedger) Unpublished(ctx context.Context, now time.Time, limit int) ([]core.OperatorNotice, error) {
	res, err := l.db.Query(ctx, &dynamodb.QueryInput{
		TableName:              aws.String(l.table),
		IndexName:              aws.String(gsiName),
		KeyConditionExpression: aws.String("gsi1pk = :p AND gsi1sk <= :t"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":p": &types.AttributeValueMemberS{Value: opEventUnpublished},
			":t": &types.AttributeValueMemberS{Value: now.UTC().Format(timeKey) + "#~"},
		},
		Limit: aws.Int32(int32(min(max(limit, 1), 100))),
	})
	if err != nil {
		return nil, fmt.Errorf("list unpublished operator events: %w", err)
	}
	items, err := hydrate(ctx, l.db, l.table, res.Items)
	if err != nil {
		return nil, err
	}
	out := make([]core.OperatorNotice, 0, len(items))
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
