// Package admin is the operators' API: list and inspect intents that need a
// human, record decisions, and take recommendations from orchestrators.
package admin

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/adapters/handlers/httpjson"
	"github.com/botharness/outbox/adapters/handlers/intake"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/overview"
	"github.com/botharness/outbox/core/resolve"
)

// Lister pages through intents by status.
type Lister interface {
	ListPage(ctx context.Context, status core.Status, cursor string, limit int) ([]*core.Intent, string, error)
}

// Handler serves /v1/admin/intents...
type Handler struct {
	Store    core.IntentStore
	List     Lister
	Resolver *resolve.Resolver
	// History reads moved history pages (GET /v1/admin/intents/{id}/history).
	History core.HistoryPages
	// Extra routes (grants, backups, ...) keyed by route key.
	Extra map[string]func(ctx context.Context, p core.Principal, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse
	Log   *slog.Logger
}

// Summary is one row of the needs-human list.
type Summary struct {
	ID           string        `json:"id"`
	Bot          string        `json:"bot"`
	Provider     string        `json:"provider"`
	Account      string        `json:"account"`
	Action       string        `json:"action"`
	Target       string        `json:"target"`
	Status       core.Status   `json:"status"`
	StatusReason string        `json:"statusReason,omitempty"`
	AttemptCount int           `json:"attemptCount"`
	LastAttempt  *core.Attempt `json:"lastAttempt,omitempty"`
	UpdatedAt    time.Time     `json:"updatedAt"`
	WaitingSince time.Time     `json:"waitingSince"`
	Recommended  string        `json:"recommended,omitempty"`
}

func summarize(in *core.Intent) Summary {
	s := Summary{ID: in.ID, Bot: in.Bot, Provider: in.Provider, Account: in.Account, Action: in.Action, Target: in.Target,
		Status: in.Status, StatusReason: in.StatusReason, AttemptCount: in.AttemptCount, UpdatedAt: in.UpdatedAt,
		WaitingSince: overview.WaitingSince(in)}
	if n := len(in.Attempts); n > 0 {
		a := in.Attempts[n-1]
		s.LastAttempt = &a
	}
	for _, r := range in.Resolutions {
		if r.Recommend {
			s.Recommended = r.Decision
		}
	}
	return s
}

// Handle routes admin requests. Bots get 403 on everything here.
func (h *Handler) Handle(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	p, ok := httpjson.Principal(req)
	if !ok {
		return httpjson.Unauthorized(), nil
	}
	if p.Kind != core.PrincipalOperator && p.Kind != core.PrincipalOrchestrator {
		return httpjson.Error(http.StatusForbidden, "forbidden", "the admin API is for operators and orchestrators", ""), nil
	}
	if resp, ok := httpjson.CheckPathIDs(req); !ok {
		return resp, nil
	}
	id := req.PathParameters["id"]
	switch req.RouteKey {
	case "GET /v1/admin/intents":
		return h.list(ctx, req), nil
	case "GET /v1/admin/intents/{id}":
		in, err := h.Store.Get(ctx, id)
		if err != nil {
			return h.fail(ctx, err), nil
		}
		if in.Pruned != nil {
			return httpjson.JSON(http.StatusOK, intake.PrunedView(in, true), nil), nil
		}
		return httpjson.JSON(http.StatusOK, in, nil), nil
	case "GET /v1/admin/intents/{id}/history":
		in, err := h.Store.Get(ctx, id)
		if err != nil {
			return h.fail(ctx, err), nil
		}
		if in.Pruned != nil {
			return h.fail(ctx, fmt.Errorf("history of %s: %w", in.ID, core.ErrPruned)), nil
		}
		s, err := core.ReadHistory(ctx, h.History, in, req.QueryStringParameters["cursor"])
		if err != nil {
			return h.fail(ctx, err), nil
		}
		return httpjson.JSON(http.StatusOK, intake.HistoryView(in.ID, s), nil), nil
	case "POST /v1/admin/intents/{id}/resolution":
		var body ResolutionBody
		if resp, ok := DecodeBody(req, &body); !ok {
			return resp, nil
		}
		key, _ := httpjson.Header(req, "Idempotency-Key")
		if key != "" {
			if err := core.ValidateIdempotencyKey(key); err != nil {
				return h.fail(ctx, err), nil
			}
		}
		in, err := h.Resolver.Resolve(ctx, p, id, key, core.Ruling{Decision: body.Decision, Reason: body.Reason, ExternalID: body.ExternalID,
			AcceptDuplicateRisk: body.AcceptDuplicateRisk})
		if err != nil {
			return h.fail(ctx, err), nil
		}
		return httpjson.JSON(http.StatusOK, in, nil), nil
	case "POST /v1/admin/intents/{id}/recommendation":
		var body RecommendationBody
		if resp, ok := DecodeBody(req, &body); !ok {
			return resp, nil
		}
		in, err := h.Resolver.Recommend(ctx, p, id, core.Recommendation{Decision: body.Decision, Summary: body.Summary})
		if err != nil {
			return h.fail(ctx, err), nil
		}
		return httpjson.JSON(http.StatusOK, in, nil), nil
	}
	if f, ok := h.Extra[req.RouteKey]; ok {
		return f(ctx, p, req), nil
	}
	return httpjson.Error(http.StatusNotFound, "not_found", "no such route", ""), nil
}

func (h *Handler) list(ctx context.Context, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	status := core.Status(req.QueryStringParameters["status"])
	if status == "" {
		status = core.StatusNeedsHuman
	}
	limit, cursor, err := httpjson.Page(req)
	if err != nil {
		return h.fail(ctx, err)
	}
	filter, resp, ok := queueFilter(req)
	if !ok {
		return resp
	}
	items, next, err := listMatching(ctx, h.List, status, cursor, limit, filter, time.Now())
	if err != nil {
		return h.fail(ctx, err)
	}
	rows := make([]Summary, 0, len(items))
	for _, in := range items {
		rows = append(rows, summarize(in))
	}
	return httpjson.JSON(http.StatusOK, map[string]any{"items": rows, "nextCursor": next}, nil)
}

// DecodeBody is the admin routes' body decoder: the one request-decoding rule
// of every JSON route (httpjson.RequestBody, httpjson.DecodeStrict) with the
// admin bodies' 64 KiB limit.
func DecodeBody(req events.APIGatewayV2HTTPRequest, v any) (events.APIGatewayV2HTTPResponse, bool) {
	body, resp, ok := httpjson.RequestBody(req)
	if !ok {
		return resp, false
	}
	if len(body) > 64<<10 {
		return httpjson.Error(http.StatusRequestEntityTooLarge, core.CodePayloadTooLarge, "the body is over 64 KiB", ""), false
	}
	if err := httpjson.DecodeStrict(body, v); err != nil {
		r, _ := httpjson.Answer(err)
		return r, false
	}
	return events.APIGatewayV2HTTPResponse{}, true
}

// operatorBody decodes an operator-only route's body into v (DecodeBody),
// refusing any other caller with denied before reading the body: no shape
// hints for others. When ok is false, resp is the answer.
func operatorBody(ctx context.Context, log *slog.Logger, p core.Principal, req events.APIGatewayV2HTTPRequest, denied error, v any) (resp events.APIGatewayV2HTTPResponse, ok bool) {
	if p.Kind != core.PrincipalOperator {
		return Fail(ctx, log, denied), false
	}
	return DecodeBody(req, v)
}

func (h *Handler) fail(ctx context.Context, err error) events.APIGatewayV2HTTPResponse {
	return Fail(ctx, h.Log, err)
}

// Fail answers an admin route's error from the one error table (httpjson).
func Fail(ctx context.Context, log *slog.Logger, err error) events.APIGatewayV2HTTPResponse {
	return httpjson.Fail(ctx, log, err, "the request could not be completed")
}
