package admin

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/adapters/handlers/httpjson"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/webhook"
)

// UnresolvedLister pages through webhook events that matched no intent, and
// reads one event with its raw body.
type UnresolvedLister interface {
	ListUnresolved(ctx context.Context, cursor string, limit int) ([]webhook.EventRecord, string, error)
	SeenEvent(ctx context.Context, provider, account, eventID string) (*webhook.EventRecord, error)
}

// Unresolved serves GET /v1/admin/webhooks/unresolved (rows without raw
// bodies) and GET /v1/admin/webhooks/unresolved/{provider}/{account}/{eventId}
// (one event with its raw body). A raw body may be as large as the webhook
// route accepts, so a page of them could pass Lambda's 6 MB response limit;
// a row carries its size (rawBytes) instead.
type Unresolved struct {
	Store UnresolvedLister
	Log   *slog.Logger
}

// UnresolvedRow is one row of the unresolved list: the event without its body
// (Raw and ClaimUntil are left empty, so they are omitted), and the body's size.
type UnresolvedRow struct {
	webhook.EventRecord
	RawBytes int `json:"rawBytes"`
}

func unresolvedRow(r webhook.EventRecord) UnresolvedRow {
	n := len(r.Raw)
	r.Raw, r.ClaimUntil = "", nil
	return UnresolvedRow{EventRecord: r, RawBytes: n}
}

// UnresolvedEventRoute serves one unresolved event with its raw body.
const UnresolvedEventRoute = "GET /v1/admin/webhooks/unresolved/{provider}/{account}/{eventId}"

// Routes returns the route handlers by route key, for Handler.Extra.
func (u *Unresolved) Routes() map[string]Route {
	return map[string]Route{
		"GET /v1/admin/webhooks/unresolved": u.Handle,
		UnresolvedEventRoute:                u.event,
	}
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
	rows := make([]UnresolvedRow, 0, len(recs))
	for _, r := range recs {
		rows = append(rows, unresolvedRow(r))
	}
	return httpjson.JSON(http.StatusOK, map[string]any{"events": rows, "next": next}, nil)
}

func (u *Unresolved) event(ctx context.Context, p core.Principal, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	if p.Kind != core.PrincipalOperator && p.Kind != core.PrincipalOrchestrator {
		return httpjson.Error(http.StatusForbidden, "forbidden", "operators only", "")
	}
	pp := req.PathParameters
	rec, err := u.Store.SeenEvent(ctx, pp["provider"], pp["account"], pp["eventId"])
	if err != nil {
		return Fail(ctx, u.Log, err)
	}
	if rec == nil || rec.State != webhook.EventUnresolved {
		return httpjson.Error(http.StatusNotFound, "not_found", "no unresolved event with this provider, account and id", "")
	}
	return httpjson.JSON(http.StatusOK, rec, nil)
}
