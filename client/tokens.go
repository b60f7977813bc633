package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Token is a bearer token's record as operators see it: never its secret
// or its hash. Issue and rotate tokens with outboxctl.
type Token struct {
	ID           string     `json:"id"`
	Kind         string     `json:"kind"` // bot | operator | orchestrator
	Owner        string     `json:"owner"`
	Status       string     `json:"status"` // active | expired | revoked
	CreatedAt    time.Time  `json:"createdAt"`
	ExpiresAt    *time.Time `json:"expiresAt,omitempty"`
	RevokedAt    *time.Time `json:"revokedAt,omitempty"`
	RevokeReason string     `json:"revokeReason,omitempty"`
	RotatedTo    string     `json:"rotatedTo,omitempty"`
}

// TokenPage is one page of token records.
type TokenPage struct {
	Items      []Token `json:"items"`
	NextCursor string  `json:"nextCursor"` // "" on the last page
}

// Tokens lists token records, oldest first (operators only).
func (a *Admin) Tokens(ctx context.Context, limit int, cursor string) (*TokenPage, error) {
	q := url.Values{}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	path := "/v1/admin/tokens"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return fetch[TokenPage](ctx, a.c, call{method: http.MethodGet, path: path, idempotent: true})
}

// RevokeToken revokes a token (operators only). Revoking again keeps the
// first revocation, so it is retried like a read.
func (a *Admin) RevokeToken(ctx context.Context, id, reason string) (*Token, error) {
	return send[Token](ctx, a.c, call{method: http.MethodPost, path: "/v1/admin/tokens/" + url.PathEscape(id) + "/revoke", idempotent: true}, map[string]string{"reason": reason})
}
