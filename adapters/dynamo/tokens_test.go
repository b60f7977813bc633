package dynamo

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/auth"
)

// Issue 24 finding 4: issuing a token whose secret is already issued
// replaced the record (PutItem without a condition), so a bot's token became
// an operator's. Issuing is now conditional and refused; the record stays.
func TestIssuingNeverOverwritesAToken(t *testing.T) {
	db, table := testTable(t, "tokens")
	ctx := context.Background()
	tokens := NewTokens(db, table)
	now := time.Now().UTC().Truncate(time.Millisecond)
	secret, bot, err := auth.IssueToken(ctx, tokens, auth.TokenIssue{Kind: core.PrincipalBot, Owner: "bot-a", Secret: "shared-secret"}, now)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = auth.IssueToken(ctx, tokens, auth.TokenIssue{Kind: core.PrincipalOperator, Owner: "mallory", Secret: secret}, now)
	if !errors.Is(err, auth.ErrTokenExists) {
		t.Fatalf("issuing over an existing token: %v, want ErrTokenExists", err)
	}
	got, err := tokens.LookupToken(ctx, auth.TokenHash(secret))
	if err != nil || got.Kind != core.PrincipalBot || got.Owner != "bot-a" || got.ID != bot.ID {
		t.Fatalf("the token changed: %+v %v", got, err)
	}
	// The stored record is keyed by the hash and holds no secret.
	raw, err := New(db, table).GetRaw(ctx, tokenKey(auth.TokenHash(secret)))
	if err != nil || len(raw) == 0 {
		t.Fatal(err)
	}
	for k, v := range raw {
		if s, ok := v.(*types.AttributeValueMemberS); ok && s.Value == secret {
			t.Fatalf("attribute %s holds the secret", k)
		}
	}
}

func TestTokenRevokeExpireAndList(t *testing.T) {
	db, table := testTable(t, "tokens")
	ctx := context.Background()
	tokens := NewTokens(db, table)
	now := time.Now().UTC().Truncate(time.Millisecond)
	var ids []string
	for i, kind := range []string{core.PrincipalBot, core.PrincipalOperator, core.PrincipalOrchestrator} {
		_, tok, err := auth.IssueToken(ctx, tokens, auth.TokenIssue{Kind: kind, Owner: "o-" + kind}, now.Add(time.Duration(i)*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, tok.ID)
	}
	r1, err := tokens.RevokeToken(ctx, ids[0], now.Add(time.Second), "leaked")
	if err != nil || r1.RevokedAt == nil || r1.RevokeReason != "leaked" {
		t.Fatalf("revoke: %+v %v", r1, err)
	}
	r2, err := tokens.RevokeToken(ctx, ids[0], now.Add(time.Hour), "again")
	if err != nil || !r2.RevokedAt.Equal(*r1.RevokedAt) || r2.RevokeReason != "leaked" {
		t.Fatalf("a second revocation changed the first: %+v %v", r2, err)
	}
	if _, err := tokens.RevokeToken(ctx, "tok_missing", now, "x"); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("revoking a missing token: %v", err)
	}
	e1, err := tokens.ExpireToken(ctx, ids[1], now.Add(time.Hour), "tok_next")
	if err != nil || !e1.ExpiresAt.Equal(now.Add(time.Hour)) || e1.RotatedTo != "tok_next" {
		t.Fatalf("expire: %+v %v", e1, err)
	}
	if e2, err := tokens.ExpireToken(ctx, ids[1], now.Add(48*time.Hour), "tok_later"); err != nil || !e2.ExpiresAt.Equal(now.Add(time.Hour)) {
		t.Fatalf("expiry was extended: %+v %v", e2, err)
	}
	var listed []auth.Token
	cursor := ""
	for {
		page, next, err := tokens.ListTokens(ctx, cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, page...)
		if next == "" {
			break
		}
		cursor = next
	}
	if len(listed) != 3 || listed[0].ID != ids[0] || listed[2].ID != ids[2] || listed[0].TokenStatus(now.Add(2*time.Second)) != "revoked" {
		t.Fatalf("listed %+v", listed)
	}
}

// A record written before token ids (kind and name only) still
// authenticates, and adopting it makes it listable and revocable.
func TestLegacyTokensAreAdopted(t *testing.T) {
	db, table := testTable(t, "tokens")
	ctx := context.Background()
	tokens := NewTokens(db, table)
	now := time.Now().UTC()
	legacy := func(secret, kind, name string) {
		item := tokenKey(auth.TokenHash(secret))
		item["kind"], item["name"], item["createdAt"] = avS(kind), avS(name), avS(now.Format(time.RFC3339))
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	legacy("old-bot", core.PrincipalBot, "bot-a")
	legacy("old-op", core.PrincipalOperator, "ann")
	if p, err := auth.AuthenticateAt(ctx, tokens, "Bearer old-bot", now); err != nil || p.Name != "bot-a" {
		t.Fatalf("legacy token: %+v %v", p, err)
	}
	hashes, err := LegacyTokenHashes(ctx, db, table)
	if err != nil || len(hashes) != 2 {
		t.Fatalf("legacy hashes %v %v", hashes, err)
	}
	adopted, err := tokens.AdoptToken(ctx, auth.TokenHash("old-bot"), now)
	if err != nil || adopted.ID == "" || adopted.Kind != core.PrincipalBot {
		t.Fatalf("adopt: %+v %v", adopted, err)
	}
	if again, err := tokens.AdoptToken(ctx, auth.TokenHash("old-bot"), now); err != nil || again.ID != adopted.ID {
		t.Fatalf("adopting twice: %+v %v", again, err)
	}
	// A seed of the same principal adopts the record too.
	if err := auth.SeedToken(ctx, tokens, "old-op", core.Principal{Kind: core.PrincipalOperator, Name: "ann"}, now); err != nil {
		t.Fatal(err)
	}
	if hashes, _ := LegacyTokenHashes(ctx, db, table); len(hashes) != 0 {
		t.Fatalf("still legacy: %v", hashes)
	}
	page, _, err := tokens.ListTokens(ctx, "", 10)
	if err != nil || len(page) != 2 {
		t.Fatalf("listed %+v %v", page, err)
	}
	if _, err := tokens.RevokeToken(ctx, adopted.ID, now, "old"); err != nil {
		t.Fatal(err)
	}
	if _, err := auth.AuthenticateAt(ctx, tokens, "Bearer old-bot", now.Add(time.Second)); !errors.Is(err, auth.ErrTokenRevoked) {
		t.Fatalf("revoked legacy token: %v", err)
	}
}
