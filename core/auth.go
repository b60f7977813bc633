package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// TokenStore maps token hashes to principals.
type TokenStore interface {
	LookupToken(ctx context.Context, hash string) (Principal, error)
	PutToken(ctx context.Context, hash string, p Principal) error
}

// TokenHash is the only form in which a bearer token is stored.
func TokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// ErrUnauthenticated means no valid bearer token was presented.
var ErrUnauthenticated = errors.New("unauthenticated")

// Authenticate resolves an Authorization header ("Bearer <token>").
func Authenticate(ctx context.Context, tokens TokenStore, header string) (Principal, error) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return Principal{}, ErrUnauthenticated
	}
	p, err := tokens.LookupToken(ctx, TokenHash(strings.TrimSpace(token)))
	if errors.Is(err, ErrNotFound) {
		return Principal{}, ErrUnauthenticated
	}
	if err != nil {
		return Principal{}, fmt.Errorf("authenticate: %w", err)
	}
	switch p.Kind {
	case PrincipalBot, PrincipalOperator, PrincipalOrchestrator:
		return p, nil
	}
	return Principal{}, ErrUnauthenticated
}
