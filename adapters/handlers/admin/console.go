package admin

import (
	"context"
	"net/http"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/adapters/handlers/httpjson"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/resolve"
)

// ConsoleRoutes are the small admin routes the web console needs besides the
// intent, grant and capability routes:
//
//	GET /v1/admin/whoami                     {kind, name}: which controls to show
//	GET /v1/admin/intents/{id}/retry-risk    {duplicateRisk, why, capabilities}
func ConsoleRoutes(r *resolve.Resolver) map[string]func(ctx context.Context, p core.Principal, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	return map[string]func(ctx context.Context, p core.Principal, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse{
		"GET /v1/admin/whoami": func(_ context.Context, p core.Principal, _ events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
			return httpjson.JSON(http.StatusOK, map[string]any{"kind": p.Kind, "name": p.Name, "canDecide": p.Kind == core.PrincipalOperator}, nil)
		},
		"GET /v1/admin/intents/{id}/retry-risk": func(ctx context.Context, p core.Principal, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
			in, risk, err := r.RetryRisk(ctx, req.PathParameters["id"])
			if err != nil {
				return Fail(ctx, nil, err)
			}
			return httpjson.JSON(http.StatusOK, map[string]any{
				"intentId":      in.ID,
				"status":        in.Status,
				"duplicateRisk": risk.DuplicateRisk,
				"why":           risk.Why,
				"capabilities": map[string]any{
					"idempotencyKeys":     risk.Capabilities.IdempotencyKeys,
					"keyRetentionSeconds": int64(risk.Capabilities.KeyRetention.Seconds()),
					"lookup":              risk.Capabilities.Lookup,
				},
			}, nil)
		},
	}
}
