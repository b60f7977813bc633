package dynamo

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/core"
)

// Tokens maps bearer-token hashes to principals. The token itself is never stored.
type Tokens struct {
	db    API
	table string
}

var _ core.TokenStore = (*Tokens)(nil)

// NewTokens returns a token store over table.
func NewTokens(db API, table string) *Tokens { return &Tokens{db: db, table: table} }

func tokenKey(hash string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "TOKEN#" + hash},
		"sk": &types.AttributeValueMemberS{Value: "TOKEN"},
	}
}

// PutToken stores (or replaces) the principal for a token hash.
func (t *Tokens) PutToken(ctx context.Context, hash string, p core.Principal) error {
	item := tokenKey(hash)
	item["kind"] = &types.AttributeValueMemberS{Value: p.Kind}
	item["name"] = &types.AttributeValueMemberS{Value: p.Name}
	item["createdAt"] = &types.AttributeValueMemberS{Value: time.Now().UTC().Format(time.RFC3339)}
	if _, err := t.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(t.table), Item: item}); err != nil {
		return fmt.Errorf("put token: %w", err)
	}
	return nil
}

// LookupToken returns the principal for a token hash, or core.ErrNotFound.
func (t *Tokens) LookupToken(ctx context.Context, hash string) (core.Principal, error) {
	out, err := t.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(t.table), Key: tokenKey(hash)})
	if err != nil {
		return core.Principal{}, fmt.Errorf("get token: %w", err)
	}
	if len(out.Item) == 0 {
		return core.Principal{}, core.ErrNotFound
	}
	str := func(k string) string {
		if v, ok := out.Item[k].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	return core.Principal{Kind: str("kind"), Name: str("name")}, nil
}
