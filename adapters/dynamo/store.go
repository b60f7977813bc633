// Package dynamo implements the outbox's stores on one DynamoDB table.
//
// Item layout (pk, sk):
//
//	INTENT#<id>, INTENT        the intent, attempts and resolutions (one item)
//	TOKEN#<sha256>, TOKEN      a bearer token's principal (only the hash is stored)
//
// gsi1 is the repair index (see core/repair.go): an intent's entry is
// gsi1pk = DUE#<shard>, gsi1sk = <repairAt>#<id>, written at intake and moved
// only when core.NextRepairCheck or the sweeper moves repairAt; a finished
// intent leaves it in place (the sweeper passes it once). An intent waiting
// for a human is listed under HUMAN#<shard> instead. gsi2 lists a profile's
// items under PROFILE#<bot>#<shard> for backups. Shards come from the id.
package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/retention"
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
	// Shards spreads the low-cardinality keys (default DefaultSharding).
	Shards Sharding
	// RepairDelay is lease + grace: a new intent's repair entry is due then.
	RepairDelay time.Duration
	// RepairGrace: a retry's repair entry is due its grace after the retry.
	RepairGrace time.Duration
	// Retention is the intent retention window (retention.ApplyRetention): the
	// write that ends an intent sets its TTL to its end plus this; 0 never
	// expires anything.
	Retention time.Duration
}

func (s *Store) repairPolicy() core.RepairPolicy {
	return core.RepairPolicy{Delay: s.RepairDelay, Grace: s.RepairGrace}
}

var _ core.IntentStore = (*Store)(nil)

// New returns a store over table.
func New(db API, table string) *Store {
	return &Store{db: db, table: table, UpdateTries: 5, Shards: DefaultSharding, RepairDelay: 90 * time.Second, RepairGrace: 30 * time.Second}
}

// Table returns the table name.
func (s *Store) Table() string { return s.table }

const (
	intentSK = "INTENT"
	gsiName  = StatusIndex
	gsi2Name = ProfileIndex
	timeKey  = "2006-01-02T15:04:05.000000000Z"
	duePfx   = "DUE#"
	humanPfx = "HUMAN#"
)

// listingQuery reads one page, from start, of the listing pk on an index
// (gsiName: gsi1pk = pk; gsi2Name: gsi2pk = pk), at most limit items.
func listingQuery(table, index, pk string, start map[string]types.AttributeValue, limit int) *dynamodb.QueryInput {
	attr := "gsi1pk"
	if index == gsi2Name {
		attr = "gsi2pk"
	}
	return &dynamodb.QueryInput{
		TableName:                 aws.String(table),
		IndexName:                 aws.String(index),
		KeyConditionExpression:    aws.String(attr + " = :p"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": avS(pk)},
		ExclusiveStartKey:         start,
		Limit:                     aws.Int32(int32(limit)),
	}
}

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

// ProfilePK groups a profile's (a bot's) items in gsi2, on one of shards
// keys chosen by the item's own id.
func ProfilePK(bot, itemID string, shards int) string {
	return profileShardPK(bot, shardOf(itemID, shards))
}

func profileShardPK(bot string, s int) string { return "PROFILE#" + bot + "#" + strconv.Itoa(s) }

func intentKey(id string) map[string]types.AttributeValue {
	return key(IntentPK(id), intentSK)
}

// MarshalIntent renders an intent as its table item (default sharding).
func MarshalIntent(in *core.Intent) (map[string]types.AttributeValue, error) {
	return marshalIntent(in, DefaultSharding)
}

// MarshalIntent renders an intent as this store's table item.
func (s *Store) MarshalIntent(in *core.Intent) (map[string]types.AttributeValue, error) {
	return marshalIntent(in, s.Shards.orDefault())
}

func marshalIntent(in *core.Intent, sh Sharding) (map[string]types.AttributeValue, error) {
	item, err := attributevalue.MarshalMap(intentToItem(in))
	if err != nil {
		return nil, fmt.Errorf("marshal intent %s: %w", in.ID, err)
	}
	item["pk"] = avS(IntentPK(in.ID))
	item["sk"] = avS(intentSK)
	// Every intent is listed under its profile (its bot) for backups; the
	// index projects keys only, so later writes that leave these two
	// attributes unchanged cost no index write.
	item["gsi2pk"] = avS(ProfilePK(in.Bot, in.ID, ProfileShards))
	item["gsi2sk"] = avS(in.CreatedAt.UTC().Format(timeKey) + "#" + in.ID)
	delete(item, "repairAt")
	if !in.RepairAt.IsZero() {
		// The repair entry: its key changes only when repairAt or the human
		// hand-off does, so most writes cost no index write at all.
		pfx := duePfx
		if in.Status == core.StatusNeedsHuman {
			pfx = humanPfx
		}
		item["gsi1pk"] = avS(shardKey(pfx, shardOf(in.ID, sh.Repair)))
		item["gsi1sk"] = avS(in.RepairAt.UTC().Format(timeKey) + "#" + in.ID)
	}
	return item, nil
}

// repairAtOf reads repairAt back from an item's gsi1sk.
func repairAtOf(item map[string]types.AttributeValue) time.Time {
	sk, ok := item["gsi1sk"].(*types.AttributeValueMemberS)
	if !ok {
		return time.Time{}
	}
	at, _, _ := strings.Cut(sk.Value, "#")
	t, err := time.Parse(timeKey, at)
	if err != nil {
		return time.Time{}
	}
	return t
}

// UnmarshalIntent reads an intent item.
func UnmarshalIntent(item map[string]types.AttributeValue) (*core.Intent, error) {
	if IsTombstone(item) {
		return unmarshalTombstone(item)
	}
	var it intentItem
	if err := attributevalue.UnmarshalMap(item, &it); err != nil {
		return nil, fmt.Errorf("unmarshal intent: %w", err)
	}
	in := intentFromItem(&it)
	in.RepairAt = repairAtOf(item)
	return in, nil
}

// Create is one conditional put keyed by the idempotency identity.
func (s *Store) Create(ctx context.Context, in *core.Intent) (*core.Intent, bool, error) {
	in.RepairAt = core.NextRepairCheck("", in, in.CreatedAt, s.repairPolicy())
	item, err := s.MarshalIntent(in)
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

// copyOf is in as Get would return it had it just been read: its item,
// decoded (a deep copy, repair entry included).
func (s *Store) copyOf(in *core.Intent) (*core.Intent, error) {
	item, err := s.MarshalIntent(in)
	if err != nil {
		return nil, err
	}
	return UnmarshalIntent(item)
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
	return s.write(ctx, id, mutate, nil)
}

var _ core.KnownUpdater = (*Store)(nil)

// UpdateKnown is Update starting from known, the intent as this process
// last wrote it (its claim, or the inline intake's put): the first try
// skips the read and writes conditionally on known's version; a lost race
// re-reads as Update does.
func (s *Store) UpdateKnown(ctx context.Context, known *core.Intent, mutate func(*core.Intent) error) (*core.Intent, error) {
	return s.write(ctx, known.ID, mutate, known)
}

// Claim is Update for the write that starts an attempt: one plain
// conditional put on the intent, like every other write. The backup barrier
// is read right after it (core.BarrierCheck, BarrierUp), so a bot's claims
// share no item and cost no transaction.
func (s *Store) Claim(ctx context.Context, id string, mutate func(*core.Intent) error) (*core.Intent, error) {
	return s.write(ctx, id, mutate, nil)
}

// write is the read-decide-write loop of every intent write; known, when
// set, stands in for the first read (a copy: mutate never touches it).
func (s *Store) write(ctx context.Context, id string, mutate func(*core.Intent) error, known *core.Intent) (*core.Intent, error) {
	tries := max(s.UpdateTries, 1)
	for i := 0; i < tries; i++ {
		var cur *core.Intent
		var err error
		if i == 0 && known != nil {
			cur, err = s.copyOf(known) // what a read would return at known's version
		} else {
			cur, err = s.Get(ctx, id)
		}
		if err != nil {
			return nil, err
		}
		if cur.Pruned != nil {
			// Only a tombstone is left: nothing of the intent is writable.
			return nil, fmt.Errorf("intent %s: %w", id, core.ErrPruned)
		}
		before := cur.Status
		if err := mutate(cur); err != nil {
			return nil, err
		}
		// The write that ends the intent carries its TTL (no extra write).
		retention.ApplyRetention(cur, s.Retention)
		pages := cur.TakeSpill()
		readVersion := cur.Version
		cur.Version = readVersion + 1
		if cur.Status != before {
			cur.RepairAt = core.NextRepairCheck(before, cur, cur.UpdatedAt, s.repairPolicy())
		}
		item, err := s.MarshalIntent(cur)
		if err != nil {
			return nil, err
		}
		put := &types.Put{
			TableName:                 aws.String(s.table),
			Item:                      item,
			ConditionExpression:       aws.String("#v = :v"),
			ExpressionAttributeNames:  map[string]string{"#v": "version"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": avN(readVersion)},
		}
		if len(pages) > 0 {
			retry, err := s.writeWithHistory(ctx, put, cur, pages)
			if err != nil {
				return nil, err
			}
			if !retry {
				s.closeOpenSlot(ctx, before, cur)
				return cur, nil
			}
			continue
		}
		// Every other write, the claim included, is one plain conditional
		// put on the intent alone; the backup barrier is read after the
		// claim (see core.BarrierCheck), so a bot's claims share no item.
		_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: put.TableName, Item: put.Item, ConditionExpression: put.ConditionExpression,
			ExpressionAttributeNames: put.ExpressionAttributeNames, ExpressionAttributeValues: put.ExpressionAttributeValues,
		})
		if err == nil {
			s.closeOpenSlot(ctx, before, cur)
			return cur, nil
		}
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return nil, fmt.Errorf("write intent %s: %w", id, err)
		}
	}
	return nil, fmt.Errorf("intent %s after %d tries: %w", id, tries, core.ErrConflict)
}
