// Package authorizer is the HTTP API Lambda authorizer: a bearer token maps
// to a principal {kind, name}; only token hashes are stored.
package authorizer

import (
	"context"
	"errors"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/core/auth"
)

// Handler authorizes requests.
type Handler struct {
	Tokens auth.TokenStore
	Log    *slog.Logger
}

// Handle answers with a simple response; the principal travels in Context.
func (h *Handler) Handle(ctx context.Context, req events.APIGatewayV2CustomAuthorizerV2Request) (events.APIGatewayV2CustomAuthorizerSimpleResponse, error) {
	header := req.Headers["authorization"]
	if header == "" && len(req.IdentitySource) > 0 {
		header = req.IdentitySource[0]
	}
	p, err := auth.Authenticate(ctx, h.Tokens, header)
	if errors.Is(err, auth.ErrUnauthenticated) {
		return events.APIGatewayV2CustomAuthorizerSimpleResponse{IsAuthorized: false}, nil
	}
	if err != nil {
		// Fail closed, but let the platform report it as an error, not a 403.
		return events.APIGatewayV2CustomAuthorizerSimpleResponse{}, err
	}
	return events.APIGatewayV2CustomAuthorizerSimpleResponse{
		IsAuthorized: true,
		Context:      map[string]interface{}{"kind": p.Kind, "name": p.Name},
	}, nil
}
