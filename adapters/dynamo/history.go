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

// History pages: older attempt and resolution entries moved out of an
// intent item (core.SpillHistory) live beside it, under the intent's
// partition key with sk HIST#<seq>, written once in the same transaction as
// the intent write that moved them, and never changed. They carry the
// profile index keys, so backups take them with the intent.
const histPfx = "HIST#"

// HistorySK is the sort key of history page seq.
func HistorySK(seq int) string { return fmt.Sprintf("%s%06d", histPfx, seq) }

// MarshalHistoryPage renders page seq of intent in as its item.
func MarshalHistoryPage(in *core.Intent, p core.HistoryPage) (map[string]types.AttributeValue, error) {
	item, err := attributevalue.MarshalMap(historyPageToItem(p))
	if err != nil {
		return nil, fmt.Errorf("marshal history page %d of %s: %w", p.Seq, in.ID, err)
	}
	item["pk"] = avS(IntentPK(in.ID))
	item["sk"] = avS(HistorySK(p.Seq))
	item["intentId"] = avS(in.ID)
	item["gsi2pk"] = avS(ProfilePK(in.Bot, in.ID, ProfileShards))
	item["gsi2sk"] = avS(in.CreatedAt.UTC().Format(timeKey) + "#" + in.ID + "#" + strconv.Itoa(p.Seq))
	return item, nil
}

// historyPuts are the conditional puts of the pages a mutation moved out.
func (s *Store) historyPuts(in *core.Intent, pages []core.HistoryPage) ([]types.TransactWriteItem, error) {
	out := make([]types.TransactWriteItem, 0, len(pages))
	for _, p := range pages {
		item, err := MarshalHistoryPage(in, p)
		if err != nil {
			return nil, err
		}
		out = append(out, types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String(s.table), Item: item, ConditionExpression: aws.String("attribute_not_exists(pk)"),
		}})
	}
	return out, nil
}

// writeWithHistory writes the intent put and its new history pages in one
// transaction. retry reports that the intent's version moved on.
func (s *Store) writeWithHistory(ctx context.Context, put *types.Put, in *core.Intent, pages []core.HistoryPage) (retry bool, err error) {
	items, err := s.historyPuts(in, pages)
	if err != nil {
		return false, err
	}
	items = append(items, types.TransactWriteItem{Put: put})
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err == nil {
		return false, nil
	}
	var tc *types.TransactionCanceledException
	if errors.As(err, &tc) {
		for _, r := range tc.CancellationReasons {
			switch aws.ToString(r.Code) {
			case "ConditionalCheckFailed", "TransactionConflict":
				return true, nil
			}
		}
	}
	return false, fmt.Errorf("write intent %s with history: %w", in.ID, err)
}

var _ core.HistoryPages = (*Store)(nil)

// History returns an intent's whole attempt and resolution history, oldest
// first: its pages in order, then the entries inside the item.
func (s *Store) History(ctx context.Context, id string) (*core.Intent, []core.Attempt, []core.Resolution, error) {
	in, err := s.Get(ctx, id)
	if err != nil {
		return nil, nil, nil, err
	}
	var pages []core.HistoryPage
	if in.History != nil && in.History.Pages > 0 {
		if pages, err = s.HistoryPages(ctx, id, 1, in.History.Pages); err != nil {
			return nil, nil, nil, err
		}
	}
	as, rs := core.FullHistory(in, pages)
	return in, as, rs, nil
}

// HistoryPages reads pages from..to of an intent's moved history in order:
// one strongly consistent query of the intent's partition (pages sort by
// their zero-padded number).
func (s *Store) HistoryPages(ctx context.Context, id string, from, to int) ([]core.HistoryPage, error) {
	if from < 1 || to < from {
		return nil, nil
	}
	var pages []core.HistoryPage
	var start map[string]types.AttributeValue
	for {
		out, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName:              aws.String(s.table),
			KeyConditionExpression: aws.String("pk = :p AND sk BETWEEN :from AND :to"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":p":    avS(IntentPK(id)),
				":from": avS(HistorySK(from)),
				":to":   avS(HistorySK(to)),
			},
			ConsistentRead:    aws.Bool(true),
			ExclusiveStartKey: start,
		})
		if err != nil {
			return nil, fmt.Errorf("read history of %s: %w", id, err)
		}
		for _, item := range out.Items {
			var p historyPageItem
			if err := attributevalue.UnmarshalMap(item, &p); err != nil {
				return nil, fmt.Errorf("unmarshal history of %s: %w", id, err)
			}
			pages = append(pages, historyPageFromItem(p))
		}
		if len(out.LastEvaluatedKey) == 0 {
			return pages, nil
		}
		start = out.LastEvaluatedKey
	}
}

// RestoreIntent writes a restored intent only if the table has no item with
// its key, together with the history pages its restore plan moved out (all
// or nothing). written is false when the existing intent was kept.
//
// Its repair entry is filed afresh at the restorer's clock now
// (core.NextRepairCheck for a restored intent), never at the due time the
// snapshot carried: that one is in the past, behind the sweeper's
// checkpoint, where no sweep would ever read it again — a restored
// unknown-outcome intent whose reconciliation failed would wait forever.
func (s *Store) RestoreIntent(ctx context.Context, in *core.Intent, now time.Time) (written bool, err error) {
	in.RepairAt = core.NextRepairCheck("", in, now, s.repairPolicy())
	item, err := s.MarshalIntent(in)
	if err != nil {
		return false, err
	}
	pages := in.TakeSpill()
	if len(pages) == 0 {
		return s.PutIfAbsent(ctx, item)
	}
	items, err := s.historyPuts(in, pages)
	if err != nil {
		return false, err
	}
	items = append(items, types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(s.table), Item: item, ConditionExpression: aws.String("attribute_not_exists(pk)"),
	}})
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	var tc *types.TransactionCanceledException
	if errors.As(err, &tc) {
		if n := len(tc.CancellationReasons); n > 0 && aws.ToString(tc.CancellationReasons[n-1].Code) == "ConditionalCheckFailed" {
			return false, nil
		}
	}
	if err != nil {
		return false, fmt.Errorf("restore intent %s: %w", in.ID, err)
	}
	return true, nil
}
