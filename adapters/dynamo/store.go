// Package dynamo implements the outbox's stores on one DynamoDB table.
//
// Item layout (pk, sk):
//
//	INTENT#<id>, INTENT        the intent, attempts and resolutions (one item)
//	TOKEN#<sha256>, TOKEN      a bearer token's principal (only the hash is stored)
//
// Non-terminal intents carry gsi1pk = STATUS#<status> and gsi1sk = <due time>#<id>
// so the sweeper and the admin list can query by status and due time; terminal
// intents drop them, which keeps the index sparse.
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

// API is the part of the DynamoDB client the stores use.
type API interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// Store is the intent store.
type Store struct {
	db    API
	table string
	// UpdateTries bounds optimistic-concurrency retries inside Update.
	UpdateTries int
}

var _ core.IntentStore = (*Store)(nil)

// New returns a store over table.
func New(db API, table string) *Store { return &Store{db: db, table: table, UpdateTries: 5} }

// Table returns the table name.
func (s *Store) Table() string { return s.table }

const (
	intentSK  = "INTENT"
	gsiName   = StatusIndex
	gsi2Name  = ProfileIndex
	timeKey   = "2006-01-02T15:04:05.000000000Z"
	statusPfx = "STATUS#"
)

// IntentPK is the partition key of an intent item.
func IntentPK(id string) string { return "INTENT#" + id }

// Index names; the CDK stack builds the table from TableInput, so these and
// the key attributes exist in one place.
const (
	// StatusIndex lists non-terminal intents by status and due time (sparse).
	StatusIndex = "gsi1"
	// ProfileIndex lists every item of a profile (a bot), for backups.
	ProfileIndex = "gsi2"
)

// ProfilePK groups a profile's (a bot's) items in gsi2.
func ProfilePK(bot string) string { return "PROFILE#" + bot }

func intentKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: IntentPK(id)},
		"sk": &types.AttributeValueMemberS{Value: intentSK},
	}
}

// MarshalIntent renders an intent as its table item.
func MarshalIntent(in *core.Intent) (map[string]types.AttributeValue, error) {
	item, err := attributevalue.MarshalMap(intentToItem(in))
	if err != nil {
		return nil, fmt.Errorf("marshal intent %s: %w", in.ID, err)
	}
	item["pk"] = &types.AttributeValueMemberS{Value: IntentPK(in.ID)}
	item["sk"] = &types.AttributeValueMemberS{Value: intentSK}
	// Every intent is listed under its profile (its bot) for backups; the
	// index projects keys only, so later writes that leave these two
	// attributes unchanged cost no index write.
	item["gsi2pk"] = &types.AttributeValueMemberS{Value: ProfilePK(in.Bot)}
	item["gsi2sk"] = &types.AttributeValueMemberS{Value: in.CreatedAt.UTC().Format(timeKey) + "#" + in.ID}
	if !in.Status.Terminal() {
		item["gsi1pk"] = &types.AttributeValueMemberS{Value: statusPfx + string(in.Status)}
		item["gsi1sk"] = &types.AttributeValueMemberS{Value: DueTime(in).UTC().Format(timeKey) + "#" + in.ID}
	}
	return item, nil
}

// DueTime is when the sweeper should next look at a non-terminal intent.
func DueTime(in *core.Intent) time.Time {
	switch {
	case in.Status == core.StatusInFlight && in.Lease != nil:
		return in.Lease.Until
	case (in.Status == core.StatusRetryableFailure || in.Status == core.StatusUnknownOutcome) && in.NextAttemptAt != nil:
		// Retry: when it is due. Unknown outcome: the end of the reconcile
		// window (core.ReconcileDue); polls before then ride the queue.
		return *in.NextAttemptAt
	case in.Status == core.StatusPending:
		return in.CreatedAt
	}
	return in.UpdatedAt
}

// UnmarshalIntent reads an intent item.
func UnmarshalIntent(item map[string]types.AttributeValue) (*core.Intent, error) {
	var it intentItem
	if err := attributevalue.UnmarshalMap(item, &it); err != nil {
		return nil, fmt.Errorf("unmarshal intent: %w", err)
	}
	return intentFromItem(&it), nil
}

// Create is one conditional put keyed by the idempotency identity.
func (s *Store) Create(ctx context.Context, in *core.Intent) (*core.Intent, bool, error) {
	item, err := MarshalIntent(in)
	if err != nil {
		return nil, false, err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           aws.String(s.table),
		Item:                                item,
		ConditionExpression:                 aws.String("attribute_not_exists(pk)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return in, true, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return nil, false, fmt.Errorf("put intent %s: %w", in.ID, err)
	}
	if len(ccf.Item) > 0 {
		existing, err := UnmarshalIntent(ccf.Item)
		return existing, false, err
	}
	existing, err := s.Get(ctx, in.ID)
	if err != nil {
		return nil, false, err
	}
	return existing, false, nil
}

// Get reads an intent with a strongly consistent read.
func (s *Store) Get(ctx context.Context, id string) (*core.Intent, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            intentKey(id),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("get intent %s: %w", id, err)
	}
	if len(out.Item) == 0 {
		return nil, fmt.Errorf("intent %s: %w", id, core.ErrNotFound)
	}
	return UnmarshalIntent(out.Item)
}

// Update reads the intent, applies mutate and writes the result only if the
// version it read is still current. On a lost race it re-reads and lets
// mutate decide again on the fresh state, a bounded number of times.
func (s *Store) Update(ctx context.Context, id string, mutate func(*core.Intent) error) (*core.Intent, error) {
	return s.write(ctx, id, mutate, false)
}

// Claim is Update for the write that starts an attempt: the put goes in one
// transaction with a check that the profile's backup barrier is down, so no
// claim can slip past a raised barrier.
func (s *Store) Claim(ctx context.Context, id string, mutate func(*core.Intent) error) (*core.Intent, error) {
	return s.write(ctx, id, mutate, true)
}

func (s *Store) write(ctx context.Context, id string, mutate func(*core.Intent) error, claim bool) (*core.Intent, error) {
	tries := max(s.UpdateTries, 1)
	for i := 0; i < tries; i++ {
		cur, err := s.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if err := mutate(cur); err != nil {
			return nil, err
		}
		pages := cur.TakeSpill()
		readVersion := cur.Version
		cur.Version = readVersion + 1
		item, err := MarshalIntent(cur)
		if err != nil {
			return nil, err
		}
		put := &types.Put{
			TableName:                 aws.String(s.table),
			Item:                      item,
			ConditionExpression:       aws.String("#v = :v"),
			ExpressionAttributeNames:  map[string]string{"#v": "version"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberN{Value: strconv.FormatInt(readVersion, 10)}},
		}
		if claim {
			retry, err := s.claim(ctx, put, cur, pages)
			if err != nil {
				return nil, err
			}
			if !retry {
				return cur, nil
			}
			continue
		}
		if len(pages) > 0 {
			retry, err := s.writeWithHistory(ctx, put, cur, pages)
			if err != nil {
				return nil, err
			}
			if !retry {
				return cur, nil
			}
			continue
		}
		_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: put.TableName, Item: put.Item, ConditionExpression: put.ConditionExpression,
			ExpressionAttributeNames: put.ExpressionAttributeNames, ExpressionAttributeValues: put.ExpressionAttributeValues,
		})
		if err == nil {
			return cur, nil
		}
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return nil, fmt.Errorf("write intent %s: %w", id, err)
		}
	}
	return nil, fmt.Errorf("intent %s after %d tries: %w", id, tries, core.ErrConflict)
}

// CountByStatus counts the non-terminal intents in a status from the index
// alone (Select COUNT): no item is read.
func (s *Store) CountByStatus(ctx context.Context, status core.Status) (int, error) {
	n := 0
	var start map[string]types.AttributeValue
	for {
		res, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(s.table),
			IndexName:                 aws.String(gsiName),
			KeyConditionExpression:    aws.String("gsi1pk = :p"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: statusPfx + string(status)}},
			Select:                    types.SelectCount,
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return 0, fmt.Errorf("count %s intents: %w", status, err)
		}
		n += int(res.Count)
		if len(res.LastEvaluatedKey) == 0 {
			return n, nil
		}
		start = res.LastEvaluatedKey
	}
}

// ListByStatus returns non-terminal intents in status whose due time is at or
// before dueBefore, oldest first, up to limit.
func (s *Store) ListByStatus(ctx context.Context, status core.Status, dueBefore time.Time, limit int) ([]*core.Intent, error) {
	var out []*core.Intent
	var start map[string]types.AttributeValue
	for {
		res, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName:              aws.String(s.table),
			IndexName:              aws.String(gsiName),
			KeyConditionExpression: aws.String("gsi1pk = :p AND gsi1sk <= :t"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":p": &types.AttributeValueMemberS{Value: statusPfx + string(status)},
				":t": &types.AttributeValueMemberS{Value: dueBefore.UTC().Format(timeKey) + "#~"},
			},
			ExclusiveStartKey: start,
			Limit:             aws.Int32(int32(min(max(limit-len(out), 1), 100))),
		})
		if err != nil {
			return nil, fmt.Errorf("query %s intents: %w", status, err)
		}
		items, err := hydrate(ctx, s.db, s.table, res.Items)
		if err != nil {
			return nil, err
		}
		for _, item := range items {
			in, err := UnmarshalIntent(item)
			if err != nil {
				return nil, err
			}
			out = append(out, in)
		}
		if len(res.LastEvaluatedKey) == 0 || len(out) >= limit {
			return out, nil
		}
		start = res.LastEvaluatedKey
	}
}
