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
// new claim may start. The sweeper dispatches the intent once it is lifted.
var ErrProfileFrozen = errors.New("profile is behind a backup barrier")

func barrierKey(bot string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "BARRIER#" + bot},
		"sk": &types.AttributeValueMemberS{Value: "BARRIER"},
	}
}

// claim writes a claim together with a check that the profile's barrier is
// down (absent, or expired: a crashed backup cannot freeze a profile for
// ever). retry reports a lost version race.
func (s *Store) claim(ctx context.Context, put *types.Put, in *core.Intent, pages []core.HistoryPage) (retry bool, err error) {
	now := strconv.FormatInt(in.UpdatedAt.Unix(), 10)
	hist, err := s.historyPuts(in, pages)
	if err != nil {
		return false, err
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: append([]types.TransactWriteItem{
		{ConditionCheck: &types.ConditionCheck{
			TableName:                 aws.String(s.table),
			Key:                       barrierKey(in.Bot),
			ConditionExpression:       aws.String("attribute_not_exists(pk) OR #u < :now"),
			ExpressionAttributeNames:  map[string]string{"#u": "until"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":now": &types.AttributeValueMemberN{Value: now}},
		}},
		{Put: put},
	}, hist...)})
	if err == nil {
		return false, nil
	}
	var tc *types.TransactionCanceledException
	if errors.As(err, &tc) && len(tc.CancellationReasons) == 2 {
		if aws.ToString(tc.CancellationReasons[0].Code) == "ConditionalCheckFailed" {
			return false, fmt.Errorf("claim %s: %w: %w", in.ID, core.ErrNotClaimable, ErrProfileFrozen)
		}
		if aws.ToString(tc.CancellationReasons[1].Code) == "ConditionalCheckFailed" {
			return true, nil
		}
	}
	return false, fmt.Errorf("claim %s: %w", in.ID, err)
}

// RaiseBarrier stops new claims for a profile until Lift or until expiry.
// It fails if another backup holds the barrier.
func (s *Store) RaiseBarrier(ctx context.Context, bot, backupID string, now time.Time, ttl time.Duration) error {
	item := barrierKey(bot)
	item["backupId"] = &types.AttributeValueMemberS{Value: backupID}
	item["raisedAt"] = &types.AttributeValueMemberS{Value: now.UTC().Format(time.RFC3339Nano)}
	item["until"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(ttl).Unix(), 10)}
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(s.table),
		Item:                      item,
		ConditionExpression:       aws.String("attribute_not_exists(pk) OR #u < :now OR backupId = :b"),
		ExpressionAttributeNames:  map[string]string{"#u": "until"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Unix(), 10)}, ":b": &types.AttributeValueMemberS{Value: backupID}},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("raise barrier for %s: another backup holds it: %w", bot, core.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("raise barrier for %s: %w", bot, err)
	}
	return nil
}

// LiftBarrier expires the barrier this backup raised. It is an update, not
// a delete: no function of the outbox deletes items.
func (s *Store) LiftBarrier(ctx context.Context, bot, backupID string) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       barrierKey(bot),
		UpdateExpression:          aws.String("SET #u = :zero"),
		ConditionExpression:       aws.String("backupId = :b"),
		ExpressionAttributeNames:  map[string]string{"#u": "until"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":b": &types.AttributeValueMemberS{Value: backupID}, ":zero": &types.AttributeValueMemberN{Value: "0"}},
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("lift barrier for %s: %w", bot, err)
	}
	return nil
}

// ProfileKeys lists the keys of every item in a profile (gsi2 is keys-only).
func (s *Store) ProfileKeys(ctx context.Context, bot string, page func(keys []map[string]types.AttributeValue) error) error {
	var start map[string]types.AttributeValue
	for {
		out, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(s.table),
			IndexName:                 aws.String(gsi2Name),
			KeyConditionExpression:    aws.String("gsi2pk = :p"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: ProfilePK(bot)}},
			ExclusiveStartKey:         start,
			Limit:                     aws.Int32(100),
		})
		if err != nil {
			return fmt.Errorf("list profile %s: %w", bot, err)
		}
		keys := make([]map[string]types.AttributeValue, 0, len(out.Items))
		for _, it := range out.Items {
			keys = append(keys, map[string]types.AttributeValue{"pk": it["pk"], "sk": it["sk"]})
		}
		if err := page(keys); err != nil {
			return err
		}
		if len(out.LastEvaluatedKey) == 0 {
			return nil
		}
		start = out.LastEvaluatedKey
	}
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
