package admin

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/adapters/handlers/httpjson"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/auth"
)

// Tokens serves the operators' token routes (operators only):
//
//	GET  /v1/admin/tokens?limit=&cursor=       list token records (never secrets or hashes)
//	POST /v1/admin/tokens/{tokenId}/revoke     {"reason": "..."}
//
// Issuing and rotating are outboxctl's (they print a secret, which no API
// answer carries; docs/decisions.md "Tokens").
type Tokens struct {
	Registry auth.TokenRegistry
	Clock    core.Clock
	Log      *slog.Logger
}

// TokenView is a token as operators see it.
type TokenView struct {
	ID           string     `json:"id"`
	Kind         string     `json:"kind"`
	Owner        string     `json:"owner"`
	Status       string     `json:"status"`
	CreatedAt    time.Time  `json:"createdAt"`
	ExpiresAt    *time.Time `json:"expiresAt,omitempty"`
	RevokedAt    *time.Time `json:"revokedAt,omitempty"`
	RevokeReason string     `json:"revokeReason,omitempty"`
	RotatedTo    string     `json:"rotatedTo,omitempty"`
}

func tokenView(t auth.Token, now time.Time) TokenView {
	return TokenView{ID: t.ID, Kind: t.Kind, Owner: t.Owner, Status: t.TokenStatus(now), CreatedAt: t.CreatedAt,
		ExpiresAt: t.ExpiresAt, RevokedAt: t.RevokedAt, RevokeReason: t.RevokeReason, RotatedTo: t.RotatedTo}
}

// RevokeTokenBody is the body of POST /v1/admin/tokens/{tokenId}/revoke.
type RevokeTokenBody struct {
	Reason string `json:"reason"`
}

// Routes returns the route handlers by route key, for Handler.Extra.
func (t *Tokens) Routes() map[string]func(ctx context.Context, p core.Principal, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	return map[string]func(ctx context.Context, p core.Principal, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse{
		"GET /v1/admin/tokens":                   t.list,
		"POST /v1/admin/tokens/{tokenId}/revoke": t.revoke,
	}
}

var errTokensOperatorsOnly = fmt.Errorf("%w: only operators manage tokens", core.ErrForbidden)

func (t *Tokens) now() time.Time {
	if t.Clock == nil {
		return time.Now()
	}
	return t.Clock.Now()
}

func (t *Tokens) list(ctx context.Context, p core.Principal, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	if p.Kind != core.PrincipalOperator {
		return Fail(ctx, t.Log, errTokensOperatorsOnly)
	}
	limit, cursor, err := httpjson.Page(req)
	if err != nil {
		return Fail(ctx, t.Log, err)
	}
	toks, next, err := t.Registry.ListTokens(ctx, cursor, limit)
	if err != nil {
		return Fail(ctx, t.Log, err)
	}
	now := t.now()
	rows := make([]TokenView, 0, len(toks))
	for _, tok := range toks {
		rows = append(rows, tokenView(tok, now))
	}
	return httpjson.JSON(http.StatusOK, map[string]any{"items": rows, "nextCursor": next}, nil)
}

func (t *Tokens) revoke(ctx context.Context, p core.Principal, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	var body RevokeTokenBody
	if resp, ok := operatorBody(ctx, t.Log, p, req, errTokensOperatorsOnly, &body); !ok {
		return resp
	}
	if body.Reason == "" {
		return Fail(ctx, t.Log, &core.ValidationError{Code: core.CodeInvalidField, Field: "reason", Message: "a reason is required"})
	}
	if len(body.Reason) > 1024 {
		return Fail(ctx, t.Log, &core.ValidationError{Code: core.CodeInvalidField, Field: "reason", Message: "reason is longer than 1024 bytes"})
	}
	tok, err := t.Registry.RevokeToken(ctx, req.PathParameters["tokenId"], t.now().UTC(), body.Reason)
	if err != nil {
		return Fail(ctx, t.Log, err)
	}
	t.logger().InfoContext(ctx, "token revoked", "token", tok.ID, "kind", tok.Kind, "owner", tok.Owner, "by", p.Name)
	return httpjson.JSON(http.StatusOK, tokenView(tok, t.now()), nil)
}

func (t *Tokens) logger() *slog.Logger {
	if t.Log == nil {
		return slog.Default()
	}
	return t.Log
}
