package admin

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/adapters/handlers/httpjson"
	"github.com/botharness/outbox/core"
)

// UnresolvedLister pages through webhook events that matched no intent.
type UnresolvedLister interface {
	ListUnresolved(ctx context.Context, cursor string, limit int) ([]core.EventRecord, string, error)
}

// Unresolved serves GET /v1/admin/webhooks/unresolved.
type Unresolved struct {
	Store UnresolvedLister
	Log   *slog.Logger
}

// Handle lists unresolved events for operators and orchestrators.
func (u *Unresolved) Handle(ctx context.Context, p core.Principal, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	if p.Kind != core.PrincipalOperator && p.Kind != core.PrincipalOrchestrator {
		return httpjson.Error(http.StatusForbidden, "forbidden", "operators only", "")
	}
	limit, cursor, err := httpjson.Page(req)
	if err != nil {
		return Fail(ctx, u.Log, err)
	}
	recs, next, err := u.Store.ListUnresolved(ctx, cursor, limit)
	if err != nil {
		return Fail(ctx, u.Log, err)
	}
	return httpjson.JSON(http.StatusOK, map[string]any{"events": recs, "next": next}, nil)
}
