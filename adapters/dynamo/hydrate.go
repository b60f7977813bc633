package dynamo

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// hydratedPage reads one page (at most limit, 1..100) of the gsi1 listing
// shape.partition from cursor, hydrated, and the cursor of the next page
// ("" after the last); what names the listing in errors.
func hydratedPage(ctx context.Context, db API, table, what string, shape cursorShape, cursor string, limit int) ([]map[string]types.AttributeValue, string, error) {
	start, err := decodeCursor(cursor, shape)
	if err != nil {
		return nil, "", err
	}
	res, err := db.Query(ctx, listingQuery(table, gsiName, shape.partition, start, min(max(limit, 1), 100)))
	if err != nil {
		return nil, "", fmt.Errorf("list %s: %w", what, err)
	}
	items, err := hydrate(ctx, db, table, res.Items)
	if err != nil {
		return nil, "", err
	}
	return items, encodeCursor(res.LastEvaluatedKey), nil
}

// hydrate reads the full items behind index entries. The indexes project
// keys only: every status change moves an intent between gsi1 partitions,
// and copying the whole item into the index on each move would more than
// double the write capacity an intent costs. Listings pay with a batched,
// strongly consistent read instead. Order is preserved; items deleted since
// the index was read are skipped.
func hydrate(ctx context.Context, db API, table string, entries []map[string]types.AttributeValue) ([]map[string]types.AttributeValue, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	byKey := make(map[string]map[string]types.AttributeValue, len(entries))
	keyOf := func(item map[string]types.AttributeValue) string {
		pk, _ := item["pk"].(*types.AttributeValueMemberS)
		sk, _ := item["sk"].(*types.AttributeValueMemberS)
		if pk == nil || sk == nil {
			return ""
		}
		return pk.Value + "\x00" + sk.Value
	}
	for start := 0; start < len(entries); start += 100 {
		end := min(start+100, len(entries))
		keys := make([]map[string]types.AttributeValue, 0, end-start)
		for _, e := range entries[start:end] {
			keys = append(keys, map[string]types.AttributeValue{"pk": e["pk"], "sk": e["sk"]})
		}
		req := map[string]types.KeysAndAttributes{table: {Keys: keys, ConsistentRead: aws.Bool(true)}}
		for tries := 0; len(req) > 0; tries++ {
			if tries == 10 {
				return nil, fmt.Errorf("hydrate %d items: unprocessed keys remain", len(keys))
			}
			out, err := db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, fmt.Errorf("hydrate: %w", err)
			}
			for _, item := range out.Responses[table] {
				byKey[keyOf(item)] = item
			}
			req = out.UnprocessedKeys
		}
	}
	items := make([]map[string]types.AttributeValue, 0, len(entries))
	for _, e := range entries {
		if item, ok := byKey[keyOf(e)]; ok {
			items = append(items, item)
		}
	}
	return items, nil
}
