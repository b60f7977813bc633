package admin

import (
	"context"
	"net/http"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/adapters/handlers/httpjson"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/overview"
)

// RouteOverview is the operators' overview (the console's landing page).
const RouteOverview = "GET /v1/admin/overview"

// OverviewRoutes serves GET /v1/admin/overview: the needs-human backlog by
// provider account, the episodes per hour of the last week from the
// operator-event ledger, and each account's pause and breaker state.
func OverviewRoutes(o *overview.Overviewer) map[string]Route {
	return map[string]Route{
		RouteOverview: func(ctx context.Context, p core.Principal, _ events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
			ov, err := o.Overview(ctx, p)
			if err != nil {
				return Fail(ctx, nil, err)
			}
			return httpjson.JSON(http.StatusOK, ov, nil)
		},
	}
}
