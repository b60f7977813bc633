package dynamo

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/core"
)

// ListPage lists intents in a non-terminal status, oldest due first, with an
// opaque cursor for the next page ("" when there is none).
func (s *Store) ListPage(ctx context.Context, status core.Status, cursor string, limit int) ([]*core.Intent, string, error) {
	if status.Terminal() || !status.Valid() {
		return nil, "", &core.ValidationError{Code: core.CodeInvalidField, Field: "status", Message: "status must be a non-terminal status (terminal intents are not indexed)"}
	}
	start, err := decodeCursor(cursor, "gsi1pk", statusPfx+string(status))
	if err != nil {
		return nil, "", err
	}
	res, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		IndexName:                 aws.String(gsiName),
		KeyConditionExpression:    aws.String("gsi1pk = :p"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: statusPfx + string(status)}},
		ExclusiveStartKey:         start,
		Limit:                     aws.Int32(int32(min(max(limit, 1), 100))),
	})
	if err != nil {
		return nil, "", fmt.Errorf("list %s intents: %w", status, err)
	}
	items, err := hydrate(ctx, s.db, s.table, res.Items)
	if err != nil {
		return nil, "", err
	}
	out := make([]*core.Intent, 0, len(items))
	for _, item := range items {
		in, err := UnmarshalIntent(item)
		if err != nil {
			return nil, "", err
		}
		out = append(out, in)
	}
	next := encodeCursor(res.LastEvaluatedKey)
	return out, next, nil
}
