package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/auth"
)

// Tokens stores bearer-token records. The token itself is never stored:
//
//	TOKEN#<sha256 of the token>, TOKEN   the record the authorizer reads (one GetItem);
//	                                      gsi1pk = TOKENS, gsi1sk = <createdAt>#<id> for the admin list
//	TOKENID#<id>, TOKENID                 the hash for an id (revoke and rotate by id)
//
// Both are written in one transaction, each conditional on its absence, so
// issuing never replaces a token (core.ErrTokenExists).
type Tokens struct {
	db    API
	table string
}

var _ auth.TokenRegistry = (*Tokens)(nil)

// NewTokens returns a token store over table.
func NewTokens(db API, table string) *Tokens { return &Tokens{db: db, table: table} }

const (
	tokenPfx   = "TOKEN#"
	tokenIDPfx = "TOKENID#"
	tokensGSI  = "TOKENS"
)

func tokenKey(hash string) map[string]types.AttributeValue {
	return key(tokenPfx+hash, "TOKEN")
}

func tokenIDKey(id string) map[string]types.AttributeValue {
	return key(tokenIDPfx+id, "TOKENID")
}

// IssueToken stores a new token record; it never overwrites one.
func (t *Tokens) IssueToken(ctx context.Context, hash string, tok auth.Token) error {
	item := tokenKey(hash)
	item["id"] = avS(tok.ID)
	item["kind"] = avS(tok.Kind)
	item["name"] = avS(tok.Owner)
	item["createdAt"] = avS(tok.CreatedAt.UTC().Format(time.RFC3339Nano))
	if tok.ExpiresAt != nil {
		item["expiresAt"] = avS(tok.ExpiresAt.UTC().Format(time.RFC3339Nano))
	}
	item["gsi1pk"] = avS(tokensGSI)
	item["gsi1sk"] = avS(tok.CreatedAt.UTC().Format(timeKey) + "#" + tok.ID)
	byID := tokenIDKey(tok.ID)
	byID["hash"] = avS(hash)
	cond := aws.String("attribute_not_exists(pk)")
	_, err := t.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String(t.table), Item: item, ConditionExpression: cond}},
		{Put: &types.Put{TableName: aws.String(t.table), Item: byID, ConditionExpression: cond}},
	}})
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		for _, r := range tce.CancellationReasons {
			if aws.ToString(r.Code) == "ConditionalCheckFailed" {
				return auth.ErrTokenExists
			}
		}
	}
	if err != nil {
		return fmt.Errorf("issue token: %w", err)
	}
	return nil
}

func tokenFromItem(item map[string]types.AttributeValue) auth.Token {
	str := func(k string) string {
		if v, ok := item[k].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	tm := func(k string) *time.Time {
		if v := str(k); v != "" {
			if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
				return &t
			}
		}
		return nil
	}
	tok := auth.Token{ID: str("id"), Kind: str("kind"), Owner: str("name"), ExpiresAt: tm("expiresAt"), RevokedAt: tm("revokedAt"),
		RevokeReason: str("revokeReason"), RotatedTo: str("rotatedTo")}
	if c := tm("createdAt"); c != nil {
		tok.CreatedAt = *c
	}
	return tok
}

// LookupToken returns the record for a token hash, or core.ErrNotFound.
func (t *Tokens) LookupToken(ctx context.Context, hash string) (auth.Token, error) {
	out, err := t.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(t.table), Key: tokenKey(hash)})
	if err != nil {
		return auth.Token{}, fmt.Errorf("get token: %w", err)
	}
	if len(out.Item) == 0 {
		return auth.Token{}, core.ErrNotFound
	}
	return tokenFromItem(out.Item), nil
}

func (t *Tokens) hashOf(ctx context.Context, id string) (string, error) {
	if !strings.HasPrefix(id, "tok_") {
		return "", fmt.Errorf("token %s: %w", id, core.ErrNotFound)
	}
	out, err := t.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(t.table), Key: tokenIDKey(id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return "", fmt.Errorf("get token %s: %w", id, err)
	}
	h, _ := out.Item["hash"].(*types.AttributeValueMemberS)
	if h == nil || h.Value == "" {
		return "", fmt.Errorf("token %s: %w", id, core.ErrNotFound)
	}
	return h.Value, nil
}

// GetTokenByID reads a token record by its id (strongly consistent).
func (t *Tokens) GetTokenByID(ctx context.Context, id string) (auth.Token, error) {
	hash, err := t.hashOf(ctx, id)
	if err != nil {
		return auth.Token{}, err
	}
	out, err := t.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(t.table), Key: tokenKey(hash), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return auth.Token{}, fmt.Errorf("get token %s: %w", id, err)
	}
	if len(out.Item) == 0 {
		return auth.Token{}, fmt.Errorf("token %s: %w", id, core.ErrNotFound)
	}
	return tokenFromItem(out.Item), nil
}

// RevokeToken sets revokedAt once; revoking again keeps the first revocation.
func (t *Tokens) RevokeToken(ctx context.Context, id string, at time.Time, reason string) (auth.Token, error) {
	hash, err := t.hashOf(ctx, id)
	if err != nil {
		return auth.Token{}, err
	}
	out, err := t.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(t.table), Key: tokenKey(hash),
		UpdateExpression:          aws.String("SET revokedAt = if_not_exists(revokedAt, :at), revokeReason = if_not_exists(revokeReason, :r)"),
		ConditionExpression:       aws.String("attribute_exists(pk) AND id = :id"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":at": avS(at.UTC().Format(time.RFC3339Nano)), ":r": avS(reason), ":id": avS(id)},
		ReturnValues:              types.ReturnValueAllNew,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return auth.Token{}, fmt.Errorf("token %s: %w", id, core.ErrNotFound)
	}
	if err != nil {
		return auth.Token{}, fmt.Errorf("revoke token %s: %w", id, err)
	}
	return tokenFromItem(out.Attributes), nil
}

// ExpireToken brings expiresAt forward to at (a sooner expiry stays) and
// records the successor; conditional on the expiry it read, so a
// concurrent change is never overwritten (core.ErrConflict).
func (t *Tokens) ExpireToken(ctx context.Context, id string, at time.Time, rotatedTo string) (auth.Token, error) {
	hash, err := t.hashOf(ctx, id)
	if err != nil {
		return auth.Token{}, err
	}
	cur, err := t.GetTokenByID(ctx, id)
	if err != nil {
		return auth.Token{}, err
	}
	vals := map[string]types.AttributeValue{":at": avS(at.UTC().Format(time.RFC3339Nano)), ":to": avS(rotatedTo), ":id": avS(id)}
	cond := "id = :id AND attribute_not_exists(expiresAt)"
	if cur.ExpiresAt != nil {
		if !cur.ExpiresAt.After(at) {
			vals[":at"] = avS(cur.ExpiresAt.UTC().Format(time.RFC3339Nano))
		}
		cond = "id = :id AND expiresAt = :cur"
		vals[":cur"] = avS(cur.ExpiresAt.UTC().Format(time.RFC3339Nano))
	}
	out, err := t.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(t.table), Key: tokenKey(hash),
		UpdateExpression:          aws.String("SET expiresAt = :at, rotatedTo = :to"),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeValues: vals,
		ReturnValues:              types.ReturnValueAllNew,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return auth.Token{}, fmt.Errorf("%w: token %s changed while its expiry was set", core.ErrConflict, id)
	}
	if err != nil {
		return auth.Token{}, fmt.Errorf("expire token %s: %w", id, err)
	}
	return tokenFromItem(out.Attributes), nil
}

// ListTokens lists token records, oldest first, with an opaque cursor.
func (t *Tokens) ListTokens(ctx context.Context, cursor string, limit int) ([]auth.Token, string, error) {
	items, next, err := hydratedPage(ctx, t.db, t.table, "tokens", cursorShape{partitionAttr: "gsi1pk", partition: tokensGSI, pkPrefix: tokenPfx, sk: "TOKEN"}, cursor, limit)
	if err != nil {
		return nil, "", err
	}
	out := make([]auth.Token, 0, len(items))
	for _, item := range items {
		out = append(out, tokenFromItem(item))
	}
	return out, next, nil
}

// AdoptToken gives a record written before tokens had ids (kind and name
// only) an id, a creation time if it has none, and its listing entry, so it
// can be listed, revoked and rotated. A record that has an id is returned
// as it is.
func (t *Tokens) AdoptToken(ctx context.Context, hash string, now time.Time) (auth.Token, error) {
	cur, err := t.LookupToken(ctx, hash)
	if err != nil || cur.ID != "" {
		return cur, err
	}
	id, err := auth.NewTokenID()
	if err != nil {
		return auth.Token{}, err
	}
	created := cur.CreatedAt
	if created.IsZero() {
		created = now.UTC()
	}
	byID := tokenIDKey(id)
	byID["hash"] = avS(hash)
	_, err = t.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: &types.Update{TableName: aws.String(t.table), Key: tokenKey(hash),
			UpdateExpression:    aws.String("SET id = :id, createdAt = :c, gsi1pk = :p, gsi1sk = :s"),
			ConditionExpression: aws.String("attribute_exists(pk) AND attribute_not_exists(id)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":id": avS(id), ":c": avS(created.Format(time.RFC3339Nano)),
				":p": avS(tokensGSI), ":s": avS(created.Format(timeKey) + "#" + id)}}},
		{Put: &types.Put{TableName: aws.String(t.table), Item: byID, ConditionExpression: aws.String("attribute_not_exists(pk)")}},
	}})
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		// Adopted concurrently: read what won.
		return t.LookupToken(ctx, hash)
	}
	if err != nil {
		return auth.Token{}, fmt.Errorf("adopt token: %w", err)
	}
	return t.LookupToken(ctx, hash)
}

// LegacyTokenHashes lists the hashes of token records without an id (a
// scan: run once, by outboxctl token adopt).
func LegacyTokenHashes(ctx context.Context, db interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}, table string) ([]string, error) {
	var out []string
	var start map[string]types.AttributeValue
	for {
		res, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ExclusiveStartKey: start,
			FilterExpression:          aws.String("begins_with(pk, :p) AND sk = :s AND attribute_not_exists(id)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": avS(tokenPfx), ":s": avS("TOKEN")},
			ProjectionExpression:      aws.String("pk")})
		if err != nil {
			return nil, fmt.Errorf("scan for legacy tokens: %w", err)
		}
		for _, it := range res.Items {
			if pk, ok := it["pk"].(*types.AttributeValueMemberS); ok {
				out = append(out, strings.TrimPrefix(pk.Value, tokenPfx))
			}
		}
		if len(res.LastEvaluatedKey) == 0 {
			return out, nil
		}
		start = res.LastEvaluatedKey
	}
}
