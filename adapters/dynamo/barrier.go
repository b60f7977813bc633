package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/core"
)

// ErrProfileFrozen: a backup barrier is up for the intent's profile, so no
// new attempt may start.
var ErrProfileFrozen = errors.New("profile is behind a backup barrier")

// Barrier items: BARRIER#<bot>#<k>, BARRIER for k in 0..BarrierShards-1. A
// backup raises all of a profile's shards in one transaction; a claim reads
// only the shard of its intent (core.BarrierCheck), so no item is read by
// every claim of a bot.
func barrierKey(bot string, k int) map[string]types.AttributeValue {
	return key("BARRIER#"+bot+"#"+strconv.Itoa(k), "BARRIER")
}

var _ core.BarrierCheck = (*Store)(nil)

// BarrierUp reads the barrier shard covering the intent (strongly
// consistent). A barrier counts as up until its expiry, so a crashed backup
// cannot freeze a profile for ever.
func (s *Store) BarrierUp(ctx context.Context, in *core.Intent) (time.Time, bool, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            barrierKey(in.Bot, shardOf(in.ID, BarrierShards)),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read barrier of %s: %w", in.Bot, err)
	}
	return barrierFrom(out.Item, in)
}

// barrierFrom reads a barrier shard's item (nil: none) as BarrierUp answers.
func barrierFrom(item map[string]types.AttributeValue, in *core.Intent) (time.Time, bool, error) {
	u, ok := item["until"].(*types.AttributeValueMemberN)
	if !ok {
		return time.Time{}, false, nil
	}
	sec, err := strconv.ParseInt(u.Value, 10, 64)
	if err != nil {
		return time.Time{}, true, fmt.Errorf("barrier of %s: until %q: %w", in.Bot, u.Value, err)
	}
	until := time.Unix(sec, 0)
	// Same rule as the raise: expired once until < now (whole seconds).
	return until, sec >= in.UpdatedAt.Unix(), nil
}

// RaiseBarrier stops new attempts for a profile until Lift or until expiry:
// every barrier shard in one transaction, so there is no moment at which
// some shards are up and the backup already reads. It fails if another
// backup holds the barrier.
func (s *Store) RaiseBarrier(ctx context.Context, bot, backupID string, now time.Time, ttl time.Duration) error {
	k := BarrierShards
	items := make([]types.TransactWriteItem, 0, k)
	for i := 0; i < k; i++ {
		item := barrierKey(bot, i)
		item["backupId"] = avS(backupID)
		item["raisedAt"] = avS(now.UTC().Format(time.RFC3339Nano))
		item["until"] = avN(now.Add(ttl).Unix())
		items = append(items, types.TransactWriteItem{Put: &types.Put{
			TableName:                 aws.String(s.table),
			Item:                      item,
			ConditionExpression:       aws.String("attribute_not_exists(pk) OR #u < :now OR backupId = :b"),
			ExpressionAttributeNames:  map[string]string{"#u": "until"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":now": avN(now.Unix()), ":b": avS(backupID)},
		}})
	}
	_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	var tc *types.TransactionCanceledException
	if errors.As(err, &tc) {
		for _, r := range tc.CancellationReasons {
			if aws.ToString(r.Code) == "ConditionalCheckFailed" {
				return fmt.Errorf("raise barrier for %s: another backup holds it: %w", bot, core.ErrConflict)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("raise barrier for %s: %w", bot, err)
	}
	return nil
}

// LiftBarrier expires every barrier shard this backup raised. It is an
// update per shard, not a delete (no function of the outbox deletes items);
// a shard held by another backup is left alone.
func (s *Store) LiftBarrier(ctx context.Context, bot, backupID string) error {
	err := eachShard(BarrierShards, BarrierShards, func(i int) error {
		_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(s.table),
			Key:                       barrierKey(bot, i),
			UpdateExpression:          aws.String("SET #u = :zero"),
			ConditionExpression:       aws.String("backupId = :b"),
			ExpressionAttributeNames:  map[string]string{"#u": "until"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":b": avS(backupID), ":zero": &types.AttributeValueMemberN{Value: "0"}},
		})
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("lift barrier for %s: %w", bot, err)
	}
	return nil
}

// ProfileKeys lists the keys of every item in a profile (gsi2 is
// keys-only): every shard is read at once, pages are handed over one by one.
func (s *Store) ProfileKeys(ctx context.Context, bot string, page func(keys []map[string]types.AttributeValue) error) error {
	pages := make([][][]map[string]types.AttributeValue, ProfileShards)
	err := eachShard(ProfileShards, ProfileShards, func(shard int) error {
		var start map[string]types.AttributeValue
		for {
			out, err := s.db.Query(ctx, listingQuery(s.table, gsi2Name, profileShardPK(bot, shard), start, 100))
			if err != nil {
				return fmt.Errorf("list profile %s: %w", bot, err)
			}
			keys := make([]map[string]types.AttributeValue, 0, len(out.Items))
			for _, it := range out.Items {
				keys = append(keys, map[string]types.AttributeValue{"pk": it["pk"], "sk": it["sk"]})
			}
			pages[shard] = append(pages[shard], keys)
			if len(out.LastEvaluatedKey) == 0 {
				return nil
			}
			start = out.LastEvaluatedKey
		}
	})
	if err != nil {
		return err
	}
	for _, ps := range pages {
		for _, keys := range ps {
			if err := page(keys); err != nil {
				return err
			}
		}
	}
	return nil
}

// GetRaw reads one item as stored (strongly consistent).
func (s *Store) GetRaw(ctx context.Context, key map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("get item: %w", err)
	}
	return out.Item, nil
}

// PutIfAbsent writes an item only if the table has no item with its key:
// an existing item holds the same or newer facts, and restore never rewrites
// history. written is false when the existing item was kept.
func (s *Store) PutIfAbsent(ctx context.Context, item map[string]types.AttributeValue) (written bool, err error) {
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: item, ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("restore item: %w", err)
	}
	return true, nil
}
