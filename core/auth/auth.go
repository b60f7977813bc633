package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/botharness/outbox/core"
)

// Token is a bearer token's record: who it speaks for and for how long. The
// secret itself is never stored, only TokenHash of it (the store's key);
// neither the secret nor the hash is part of this record, so a Token can be
// listed to operators as it is.
type Token struct {
	ID        string     `json:"id"`
	Kind      string     `json:"kind"`  // bot | operator | orchestrator
	Owner     string     `json:"owner"` // the principal's name
	CreatedAt time.Time  `json:"createdAt"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	RevokedAt *time.Time `json:"revokedAt,omitempty"`
	// RevokeReason says why, when revoked.
	RevokeReason string `json:"revokeReason,omitempty"`
	// RotatedTo is the id of the token that replaced this one, when rotated.
	RotatedTo string `json:"rotatedTo,omitempty"`
}

// Principal is the caller a token speaks for.
func (t Token) Principal() core.Principal { return core.Principal{Kind: t.Kind, Name: t.Owner} }

// TokenStatus names a token's state at a time: active, expired or revoked.
func (t Token) TokenStatus(now time.Time) string {
	switch {
	case t.RevokedAt != nil && !now.Before(*t.RevokedAt):
		return "revoked"
	case t.ExpiresAt != nil && !now.Before(*t.ExpiresAt):
		return "expired"
	}
	return "active"
}

// TokenStore maps token hashes to token records (ErrNotFound when none).
type TokenStore interface {
	LookupToken(ctx context.Context, hash string) (Token, error)
}

// TokenRegistry is the token lifecycle's store: issuing never overwrites
// (ErrTokenExists), revocation and expiry are set once, by token id.
type TokenRegistry interface {
	TokenStore
	IssueToken(ctx context.Context, hash string, t Token) error
	GetTokenByID(ctx context.Context, id string) (Token, error)
	ListTokens(ctx context.Context, cursor string, limit int) ([]Token, string, error)
	// RevokeToken sets revokedAt (and the reason) unless already set, and
	// returns the record as stored.
	RevokeToken(ctx context.Context, id string, at time.Time, reason string) (Token, error)
	// ExpireToken brings expiresAt forward to at (never later than it is)
	// and records the successor's id.
	ExpireToken(ctx context.Context, id string, at time.Time, rotatedTo string) (Token, error)
}

// TokenHash is the only form in which a bearer token is stored.
func TokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Token lifecycle conditions.
var (
	// ErrUnauthenticated means no valid bearer token was presented.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrTokenExpired and ErrTokenRevoked are refusals of a known token;
	// both match ErrUnauthenticated.
	ErrTokenExpired = fmt.Errorf("%w: token expired", ErrUnauthenticated)
	ErrTokenRevoked = fmt.Errorf("%w: token revoked", ErrUnauthenticated)
	// ErrTokenExists: a token with this secret (or id) is already issued;
	// issuing never replaces it. Matches ErrConflict.
	ErrTokenExists = fmt.Errorf("%w: token already issued", core.ErrConflict)
)

// TokenUsable is the rule the authorizer applies to a token record at now:
// a revoked token is refused from its revocation on, an expired one from
// its expiry on, and a record of an unknown kind is never a principal.
func TokenUsable(t Token, now time.Time) error {
	switch {
	case t.RevokedAt != nil && !now.Before(*t.RevokedAt):
		return ErrTokenRevoked
	case t.ExpiresAt != nil && !now.Before(*t.ExpiresAt):
		return ErrTokenExpired
	}
	switch t.Kind {
	case core.PrincipalBot, core.PrincipalOperator, core.PrincipalOrchestrator:
		return nil
	}
	return ErrUnauthenticated
}

// Authenticate resolves an Authorization header ("Bearer <token>") now.
func Authenticate(ctx context.Context, tokens TokenStore, header string) (core.Principal, error) {
	return AuthenticateAt(ctx, tokens, header, time.Now())
}

// AuthenticateAt resolves an Authorization header at now. The store may be a
// cache (ttlcache.Tokens): expiry is decided here at every request, so a
// cached record expires on time; a revocation is seen once the cached record
// is read again (within the cache's TTL).
func AuthenticateAt(ctx context.Context, tokens TokenStore, header string, now time.Time) (core.Principal, error) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return core.Principal{}, ErrUnauthenticated
	}
	t, err := tokens.LookupToken(ctx, TokenHash(strings.TrimSpace(token)))
	if errors.Is(err, core.ErrNotFound) {
		return core.Principal{}, ErrUnauthenticated
	}
	if err != nil {
		return core.Principal{}, fmt.Errorf("authenticate: %w", err)
	}
	if err := TokenUsable(t, now); err != nil {
		return core.Principal{}, err
	}
	return t.Principal(), nil
}

// DefaultRotationOverlap is how long a rotated token keeps working after its
// successor is issued (docs/decisions.md "Tokens").
const DefaultRotationOverlap = 24 * time.Hour

// RotationExpiry is when a rotated token stops working: overlap after now,
// or its own expiry if that is sooner (rotation never extends a token).
func RotationExpiry(old Token, now time.Time, overlap time.Duration) time.Time {
	at := now.Add(max(overlap, 0))
	if old.ExpiresAt != nil && old.ExpiresAt.Before(at) {
		return *old.ExpiresAt
	}
	return at
}

// TokenIssue is a request to issue a token.
type TokenIssue struct {
	Kind      string
	Owner     string
	ExpiresAt *time.Time
	// Secret, when set, is used instead of a generated one (dev seeds only).
	Secret string
}

// NewTokenSecret returns a fresh bearer token (256 random bits).
func NewTokenSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "obx_" + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// NewTokenID returns a fresh token id (tok_ + 80 random bits): it names the
// token in listings and revocations and reveals nothing of its secret.
func NewTokenID() (string, error) {
	var b [10]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "tok_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:])), nil
}

// IssueToken validates req, stores a new token (never replacing one) and
// returns its secret, shown once to whoever asked, and its record.
func IssueToken(ctx context.Context, reg TokenRegistry, req TokenIssue, now time.Time) (string, Token, error) {
	switch req.Kind {
	case core.PrincipalBot, core.PrincipalOperator, core.PrincipalOrchestrator:
	default:
		return "", Token{}, &core.ValidationError{Code: core.CodeInvalidField, Field: "kind", Message: "kind is bot, operator or orchestrator"}
	}
	if err := core.CheckID("owner", req.Owner); err != nil {
		return "", Token{}, err
	}
	if req.ExpiresAt != nil && !req.ExpiresAt.After(now) {
		return "", Token{}, &core.ValidationError{Code: core.CodeInvalidField, Field: "expiresAt", Message: "expiresAt must be in the future"}
	}
	secret := req.Secret
	if secret == "" {
		var err error
		if secret, err = NewTokenSecret(); err != nil {
			return "", Token{}, err
		}
	}
	id, err := NewTokenID()
	if err != nil {
		return "", Token{}, err
	}
	t := Token{ID: id, Kind: req.Kind, Owner: req.Owner, CreatedAt: now.UTC(), ExpiresAt: req.ExpiresAt}
	if err := reg.IssueToken(ctx, TokenHash(secret), t); err != nil {
		return "", Token{}, err
	}
	return secret, t, nil
}

// RotateToken issues a successor for the same owner and kind and lets the
// old token work for overlap more (RotationExpiry). A revoked token is not
// rotated (revocation is final; issue a new one).
func RotateToken(ctx context.Context, reg TokenRegistry, id string, overlap time.Duration, now time.Time) (string, Token, Token, error) {
	old, err := reg.GetTokenByID(ctx, id)
	if err != nil {
		return "", Token{}, Token{}, err
	}
	if st := old.TokenStatus(now); st != "active" {
		return "", Token{}, Token{}, fmt.Errorf("%w: token %s is %s", core.ErrConflict, id, st)
	}
	secret, nt, err := IssueToken(ctx, reg, TokenIssue{Kind: old.Kind, Owner: old.Owner}, now)
	if err != nil {
		return "", Token{}, Token{}, err
	}
	old, err = reg.ExpireToken(ctx, id, RotationExpiry(old, now, overlap), nt.ID)
	if err != nil {
		return "", Token{}, Token{}, fmt.Errorf("successor %s issued, but the old token's expiry was not set (run rotate again or revoke %s): %w", nt.ID, id, err)
	}
	return secret, nt, old, nil
}

// SeedToken issues a token with a known secret (dev and test seeds) unless
// it is already issued to the same principal. Issued to another principal,
// it is refused (ErrTokenExists): a seed never changes what a token is.
func SeedToken(ctx context.Context, reg TokenRegistry, secret string, p core.Principal, now time.Time) error {
	_, _, err := IssueToken(ctx, reg, TokenIssue{Kind: p.Kind, Owner: p.Name, Secret: secret}, now)
	if !errors.Is(err, ErrTokenExists) {
		return err
	}
	cur, lerr := reg.LookupToken(ctx, TokenHash(secret))
	if lerr != nil {
		return lerr
	}
	if cur.Principal() != p {
		return fmt.Errorf("%w to %s %s, not %s %s", err, cur.Kind, cur.Owner, p.Kind, p.Name)
	}
	if a, ok := reg.(interface {
		AdoptToken(ctx context.Context, hash string, now time.Time) (Token, error)
	}); ok && cur.ID == "" {
		// A record from before token ids: give it one, so it can be revoked.
		_, err := a.AdoptToken(ctx, TokenHash(secret), now)
		return err
	}
	return nil
}
