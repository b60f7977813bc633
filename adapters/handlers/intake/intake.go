// Package intake is the bot API: POST /v1/intents, GET /v1/intents/{id} and
// its history, PUT /v1/sources/{sourceId}.
package intake

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/adapters/handlers/httpjson"
	"github.com/botharness/outbox/adapters/routes"
	"github.com/botharness/outbox/api"
	"github.com/botharness/outbox/core"
)

// Handler serves the bot API.
type Handler struct {
	Intake *core.Intake
	Store  core.IntentStore
	// History reads the pages an intent's older history moved to
	// (GET /v1/intents/{id}/history).
	History core.HistoryPages
	// Sources, when set, serves PUT /v1/sources/{sourceId}.
	Sources SourceUpdater
	Log     *slog.Logger
	// Tracer starts the intake's span under the request's traceparent (or
	// a new trace); the intent stores the span's traceparent. Nil: none.
	Tracer ServerTracer
	// Metrics counts IntentsAccepted (a new intent answered 201): the
	// stack's silent-stall alarm compares it with deliveries.
	Metrics core.Metrics
}

// ServerTracer starts the intake's server span (adapters/tracing.Tracer).
type ServerTracer interface {
	StartServer(ctx context.Context, name, incoming string, attrs map[string]string) (context.Context, core.Span, string)
}

// SourceUpdater records a source's current revision.
type SourceUpdater interface {
	PutSourceRevision(ctx context.Context, p core.Principal, sourceID string, body []byte) (any, error)
}

// Handle routes by API Gateway route key.
func (h *Handler) Handle(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	if req.RouteKey == routes.OpenAPI {
		// Public: the contract is no secret (served without a token).
		return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusOK, Body: string(api.OpenAPI),
			Headers: map[string]string{"Content-Type": "application/json", "Cache-Control": "public, max-age=300"}}, nil
	}
	p, ok := httpjson.Principal(req)
	if !ok {
		return httpjson.Unauthorized(), nil
	}
	if resp, ok := httpjson.CheckPathIDs(req); !ok {
		return resp, nil
	}
	switch req.RouteKey {
	case "POST /v1/intents":
		return h.submit(ctx, p, req), nil
	case "GET /v1/intents/{id}":
		return h.get(ctx, p, req.PathParameters["id"]), nil
	case "GET /v1/intents/{id}/history":
		return h.history(ctx, p, req), nil
	case "PUT /v1/sources/{sourceId}":
		if h.Sources == nil {
			break
		}
		body, resp, ok := httpjson.RequestBody(req)
		if !ok {
			return resp, nil
		}
		out, err := h.Sources.PutSourceRevision(ctx, p, req.PathParameters["sourceId"], body)
		if err != nil {
			return h.fail(ctx, err), nil
		}
		return httpjson.JSON(http.StatusOK, out, nil), nil
	}
	return httpjson.Error(http.StatusNotFound, "not_found", "no such route", ""), nil
}

func (h *Handler) submit(ctx context.Context, p core.Principal, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	if p.Kind != core.PrincipalBot {
		return httpjson.Error(http.StatusForbidden, "forbidden", "only bots submit intents", "")
	}
	body, resp, ok := httpjson.RequestBody(req)
	if !ok {
		return resp
	}
	// Field names are exact (httpjson's decoding rule); core decodes the rest.
	if json.Valid(body) {
		if f := httpjson.InexactField(body, reflect.TypeFor[core.SubmitRequest]()); f != "" {
			return h.fail(ctx, &core.ValidationError{Code: core.CodeInvalidField, Field: f, Message: fmt.Sprintf("unknown field %q (field names are case-sensitive)", f)})
		}
	}
	key, _ := httpjson.Header(req, "Idempotency-Key")
	if h.Tracer != nil {
		incoming, _ := httpjson.Header(req, "traceparent")
		var span core.Span
		var tp string
		ctx, span, tp = h.Tracer.StartServer(ctx, "outbox.intake", incoming, map[string]string{"outbox.bot": p.Name})
		defer span.End()
		ctx = core.WithTraceParent(ctx, tp)
	}
	prefer, _ := httpjson.Header(req, "Prefer")
	res, err := h.Intake.SubmitWith(ctx, p.Name, key, body, core.SubmitOptions{Wait: PreferWait(prefer)})
	if err != nil {
		return h.fail(ctx, err)
	}
	location := "/v1/intents/" + res.Intent.ID
	if res.Replayed && res.Intent.Pruned != nil {
		// The key's intent ended and was pruned: its tombstone answers with
		// the original outcome, marked as pruned.
		return httpjson.JSON(http.StatusOK, PrunedView(res.Intent, false), map[string]string{"Idempotent-Replayed": "true", "Location": location})
	}
	headers := map[string]string{"Location": location}
	if res.Waited {
		// RFC 7240: the answer is the intent after its attempt.
		headers["Preference-Applied"] = "wait=" + strconv.Itoa(int(res.Wait/time.Second))
	}
	if res.Replayed {
		headers["Idempotent-Replayed"] = "true"
		return httpjson.JSON(http.StatusOK, View(res.Intent), headers)
	}
	h.log().InfoContext(ctx, "intent accepted", "intent", res.Intent.ID, "bot", p.Name, "provider", res.Intent.Provider, "action", res.Intent.Action, "status", string(res.Intent.Status))
	if h.Metrics != nil {
		h.Metrics.Count("IntentsAccepted", 1)
	}
	return httpjson.JSON(http.StatusCreated, View(res.Intent), headers)
}

// PreferWait reads the wait preference of a Prefer header (RFC 7240:
// comma-separated preferences, names case-insensitive, "wait=<seconds>";
// several Prefer headers arrive joined by commas). A missing, malformed or
// zero wait is 0: preferences the server does not understand are ignored,
// never refused. The first wait wins. Pure.
func PreferWait(header string) time.Duration {
	for _, pref := range strings.Split(header, ",") {
		pref, _, _ = strings.Cut(pref, ";") // parameters of a preference: none for wait
		name, val, ok := strings.Cut(strings.TrimSpace(pref), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(name), "wait") {
			continue
		}
		val = strings.Trim(strings.TrimSpace(val), `"`)
		n, err := strconv.ParseUint(val, 10, 32)
		if err != nil {
			return 0
		}
		return time.Duration(min(n, 3600)) * time.Second
	}
	return 0
}

func (h *Handler) get(ctx context.Context, p core.Principal, id string) events.APIGatewayV2HTTPResponse {
	in, resp, ok := h.own(ctx, p, id)
	if !ok {
		return resp
	}
	if in.Pruned != nil {
		return httpjson.JSON(http.StatusOK, PrunedView(in, false), nil)
	}
	return httpjson.JSON(http.StatusOK, View(in), nil)
}

// own reads one of the calling bot's intents; otherwise the answer to give.
func (h *Handler) own(ctx context.Context, p core.Principal, id string) (*core.Intent, events.APIGatewayV2HTTPResponse, bool) {
	if p.Kind != core.PrincipalBot {
		return nil, httpjson.Error(http.StatusForbidden, "forbidden", "this is the bot API; operators use /v1/admin", ""), false
	}
	in, err := h.Store.Get(ctx, id)
	if errors.Is(err, core.ErrNotFound) || (err == nil && in.Bot != p.Name) {
		// Another bot's intent is indistinguishable from a missing one.
		return nil, httpjson.Error(http.StatusNotFound, "not_found", "no intent with that id", ""), false
	}
	if err != nil {
		return nil, h.fail(ctx, err), false
	}
	return in, events.APIGatewayV2HTTPResponse{}, true
}

// history serves one slice of the bot's intent's whole history.
func (h *Handler) history(ctx context.Context, p core.Principal, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	in, resp, ok := h.own(ctx, p, req.PathParameters["id"])
	if !ok {
		return resp
	}
	if in.Pruned != nil {
		return h.fail(ctx, fmt.Errorf("history of %s: %w", in.ID, core.ErrPruned))
	}
	s, err := core.ReadHistory(ctx, h.History, in, req.QueryStringParameters["cursor"])
	if err != nil {
		return h.fail(ctx, err)
	}
	return httpjson.JSON(http.StatusOK, HistoryView(in.ID, s), nil)
}

// HistoryBody is one slice of an intent's history as the API shows it
// (bot and admin routes alike).
type HistoryBody struct {
	IntentID    string            `json:"intentId"`
	Attempts    []core.Attempt    `json:"attempts"`
	Resolutions []core.Resolution `json:"resolutions"`
	// NextCursor is opaque; "" after the last slice.
	NextCursor string `json:"nextCursor"`
}

// HistoryView renders a history slice (empty lists, never null).
func HistoryView(id string, s core.HistorySlice) HistoryBody {
	b := HistoryBody{IntentID: id, Attempts: s.Attempts, Resolutions: s.Resolutions, NextCursor: s.Next}
	if b.Attempts == nil {
		b.Attempts = []core.Attempt{}
	}
	if b.Resolutions == nil {
		b.Resolutions = []core.Resolution{}
	}
	return b
}

func (h *Handler) log() *slog.Logger { return cmp.Or(h.Log, slog.Default()) }

// fail answers from the one error table (httpjson).
func (h *Handler) fail(ctx context.Context, err error) events.APIGatewayV2HTTPResponse {
	return httpjson.Fail(ctx, h.log(), err, "the request could not be completed; it is safe to retry with the same Idempotency-Key")
}

// IntentView is what the API shows of an intent.
type IntentView struct {
	*core.Intent
	RequestHash string `json:"requestHash,omitempty"`
}

// PrunedIntentView is what the API shows of a pruned intent (its
// tombstone): identity, final outcome and where its record was archived.
type PrunedIntentView struct {
	ID          string       `json:"id"`
	Bot         string       `json:"bot"`
	Status      core.Status  `json:"status"`
	PayloadHash string       `json:"payloadHash,omitempty"`
	RequestHash string       `json:"requestHash,omitempty"`
	ExternalID  string       `json:"externalId,omitempty"`
	Pruned      *core.Pruned `json:"pruned"`
}

// PrunedView renders a tombstone (requestHash for the admin API only).
func PrunedView(in *core.Intent, withRequestHash bool) PrunedIntentView {
	v := PrunedIntentView{ID: in.ID, Bot: in.Bot, Status: in.Status, PayloadHash: in.PayloadHash, ExternalID: in.ExternalID, Pruned: in.Pruned}
	if withRequestHash {
		v.RequestHash = in.RequestHash
	}
	return v
}

// View hides storage-only fields.
func View(in *core.Intent) IntentView {
	return IntentView{Intent: in}
}
