package auth

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/botharness/outbox/core"
)

func TestTokenUsable(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { v := now.Add(d); return &v }
	cases := []struct {
		name string
		tok  Token
		want error
	}{
		{"bot, no expiry", Token{Kind: core.PrincipalBot}, nil},
		{"operator, expires later", Token{Kind: core.PrincipalOperator, ExpiresAt: at(time.Second)}, nil},
		{"expires now", Token{Kind: core.PrincipalBot, ExpiresAt: at(0)}, ErrTokenExpired},
		{"expired", Token{Kind: core.PrincipalBot, ExpiresAt: at(-time.Hour)}, ErrTokenExpired},
		{"revoked now", Token{Kind: core.PrincipalBot, RevokedAt: at(0)}, ErrTokenRevoked},
		{"revoked and expired", Token{Kind: core.PrincipalBot, RevokedAt: at(-time.Hour), ExpiresAt: at(-time.Hour)}, ErrTokenRevoked},
		{"revocation in the future (clock skew)", Token{Kind: core.PrincipalOrchestrator, RevokedAt: at(time.Minute)}, nil},
		{"unknown kind", Token{Kind: "admin"}, ErrUnauthenticated},
		{"no kind", Token{}, ErrUnauthenticated},
	}
	for _, c := range cases {
		err := TokenUsable(c.tok, now)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if c.want != nil && !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("%s: %v does not match ErrUnauthenticated", c.name, err)
		}
	}
}

func TestRotationExpiry(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { v := now.Add(d); return &v }
	cases := []struct {
		name    string
		old     Token
		overlap time.Duration
		want    time.Time
	}{
		{"no expiry: now + overlap", Token{}, DefaultRotationOverlap, now.Add(24 * time.Hour)},
		{"later expiry is brought forward", Token{ExpiresAt: at(72 * time.Hour)}, time.Hour, now.Add(time.Hour)},
		{"sooner expiry stays (never extended)", Token{ExpiresAt: at(time.Minute)}, time.Hour, now.Add(time.Minute)},
		{"zero overlap: now", Token{}, 0, now},
		{"negative overlap: now", Token{}, -time.Hour, now},
	}
	for _, c := range cases {
		if got := RotationExpiry(c.old, now, c.overlap); !got.Equal(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// memTokens is an in-memory TokenRegistry for the lifecycle rules.
type memTokens struct {
	byHash map[string]Token
	ids    map[string]string
}

func (m *memTokens) LookupToken(_ context.Context, h string) (Token, error) {
	t, ok := m.byHash[h]
	if !ok {
		return Token{}, core.ErrNotFound
	}
	return t, nil
}
func (m *memTokens) IssueToken(_ context.Context, h string, t Token) error {
	if _, ok := m.byHash[h]; ok {
		return ErrTokenExists
	}
	m.byHash[h], m.ids[t.ID] = t, h
	return nil
}
func (m *memTokens) GetTokenByID(ctx context.Context, id string) (Token, error) {
	h, ok := m.ids[id]
	if !ok {
		return Token{}, core.ErrNotFound
	}
	return m.LookupToken(ctx, h)
}
func (m *memTokens) ListTokens(context.Context, string, int) ([]Token, string, error) {
	return nil, "", nil
}
func (m *memTokens) RevokeToken(_ context.Context, id string, at time.Time, r string) (Token, error) {
	t := m.byHash[m.ids[id]]
	if t.RevokedAt == nil {
		t.RevokedAt, t.RevokeReason = &at, r
	}
	m.byHash[m.ids[id]] = t
	return t, nil
}
func (m *memTokens) ExpireToken(_ context.Context, id string, at time.Time, to string) (Token, error) {
	t := m.byHash[m.ids[id]]
	if t.ExpiresAt == nil || t.ExpiresAt.After(at) {
		t.ExpiresAt = &at
	}
	t.RotatedTo = to
	m.byHash[m.ids[id]] = t
	return t, nil
}

func TestTokenLifecycle(t *testing.T) {
	ctx := context.Background()
	reg := &memTokens{byHash: map[string]Token{}, ids: map[string]string{}}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	auth := func(secret string, at time.Time) (core.Principal, error) {
		return AuthenticateAt(ctx, reg, "Bearer "+secret, at)
	}
	secret, tok, err := IssueToken(ctx, reg, TokenIssue{Kind: core.PrincipalBot, Owner: "bot-a"}, now)
	if err != nil || tok.ID == "" || secret == "" {
		t.Fatalf("issue: %v %+v", err, tok)
	}
	// Issuing the same secret again, as an operator, is refused: the bot's
	// token is not turned into an operator's (issue 24 finding 4).
	if _, _, err := IssueToken(ctx, reg, TokenIssue{Kind: core.PrincipalOperator, Owner: "root", Secret: secret}, now); !errors.Is(err, ErrTokenExists) {
		t.Fatalf("re-issue: %v", err)
	}
	if p, err := auth(secret, now); err != nil || p != (core.Principal{Kind: core.PrincipalBot, Name: "bot-a"}) {
		t.Fatalf("after a refused re-issue: %+v %v", p, err)
	}
	if err := SeedToken(ctx, reg, secret, core.Principal{Kind: core.PrincipalBot, Name: "bot-a"}, now); err != nil {
		t.Fatalf("a seed of the same principal is a no-op: %v", err)
	}
	if err := SeedToken(ctx, reg, secret, core.Principal{Kind: core.PrincipalOperator, Name: "bot-a"}, now); !errors.Is(err, ErrTokenExists) {
		t.Fatalf("a seed of another principal: %v", err)
	}
	// Rotation: the successor works, the old one until the overlap ends.
	s2, t2, old, err := RotateToken(ctx, reg, tok.ID, time.Hour, now)
	if err != nil || t2.Kind != core.PrincipalBot || t2.Owner != "bot-a" || old.RotatedTo != t2.ID || !old.ExpiresAt.Equal(now.Add(time.Hour)) {
		t.Fatalf("rotate: %v %+v %+v", err, t2, old)
	}
	if _, err := auth(secret, now.Add(59*time.Minute)); err != nil {
		t.Fatalf("old token within the overlap: %v", err)
	}
	if _, err := auth(secret, now.Add(time.Hour)); !errors.Is(err, ErrTokenExpired) {
		t.Fatalf("old token after the overlap: %v", err)
	}
	if _, err := auth(s2, now.Add(time.Hour)); err != nil {
		t.Fatalf("successor: %v", err)
	}
	if _, err := revokeForTest(ctx, reg, t2.ID, now); err != nil {
		t.Fatal(err)
	}
	if _, err := auth(s2, now.Add(time.Second)); !errors.Is(err, ErrTokenRevoked) {
		t.Fatalf("revoked successor: %v", err)
	}
	if _, _, _, err := RotateToken(ctx, reg, t2.ID, time.Hour, now.Add(time.Second)); !errors.Is(err, core.ErrConflict) {
		t.Fatalf("rotating a revoked token: %v", err)
	}
	if _, _, err := IssueToken(ctx, reg, TokenIssue{Kind: "root", Owner: "x"}, now); err == nil {
		t.Fatal("an unknown kind was issued")
	}
	past := now.Add(-time.Second)
	if _, _, err := IssueToken(ctx, reg, TokenIssue{Kind: core.PrincipalBot, Owner: "x", ExpiresAt: &past}, now); err == nil {
		t.Fatal("a token expiring in the past was issued")
	}
}

func revokeForTest(ctx context.Context, reg TokenRegistry, id string, now time.Time) (Token, error) {
	return reg.RevokeToken(ctx, id, now, "test")
}
