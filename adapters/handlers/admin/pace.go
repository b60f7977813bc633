package admin

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/adapters/handlers/httpjson"
	"github.com/botharness/outbox/core"
)

// Pace serves an account's pacing (issue 15) under the capabilities endpoint:
//
//	GET /v1/admin/capabilities/{provider}/{account}/pace
//	PUT /v1/admin/capabilities/{provider}/{account}/pace   {"pace": {"rate": 20, "per": "1s", "burst": 1} | null, "reason": "..."}
//
// and adds "pacing" (declared, override, effective pace, pause, breaker,
// recent operator events) to GET /v1/admin/capabilities/{provider}/{account}.
// Operators only.
type Pace struct {
	Pacing *core.Pacing
	Log    *slog.Logger
}

// PaceBody is the body of PUT /v1/admin/capabilities/{provider}/{account}/pace.
type PaceBody struct {
	Pace   *core.Pace `json:"pace"`
	Reason string     `json:"reason"`
}

// Routes returns the pace routes and the capability GET wrapped to show pacing.
func (h *Pace) Routes(capabilityGet Route) map[string]Route {
	m := map[string]Route{
		"GET /v1/admin/capabilities/{provider}/{account}/pace": h.get,
		"PUT /v1/admin/capabilities/{provider}/{account}/pace": h.put,
	}
	if capabilityGet != nil {
		m["GET /v1/admin/capabilities/{provider}/{account}"] = h.withPacing(capabilityGet)
	}
	return m
}

func (h *Pace) get(ctx context.Context, p core.Principal, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	ap, err := h.Pacing.Get(ctx, p, req.PathParameters["provider"], req.PathParameters["account"])
	if err != nil {
		return Fail(ctx, h.Log, err)
	}
	return httpjson.JSON(http.StatusOK, ap, nil)
}

func (h *Pace) put(ctx context.Context, p core.Principal, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	var body PaceBody
	if resp, ok := operatorBody(ctx, h.Log, p, req, errOperatorsOnly, &body); !ok {
		return resp
	}
	prov, acct := req.PathParameters["provider"], req.PathParameters["account"]
	ap, err := h.Pacing.Set(ctx, p, prov, acct, core.PaceChange{Pace: body.Pace, Reason: body.Reason})
	if err != nil {
		return Fail(ctx, h.Log, err)
	}
	h.log().InfoContext(ctx, "pace changed", "provider", prov, "account", acct, "operator", p.Name, "override", body.Pace != nil)
	return httpjson.JSON(http.StatusOK, ap, nil)
}

// withPacing adds "pacing" to the capability document.
func (h *Pace) withPacing(get Route) Route {
	return func(ctx context.Context, p core.Principal, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
		resp := get(ctx, p, req)
		if resp.StatusCode != http.StatusOK {
			return resp
		}
		ap, err := h.Pacing.Get(ctx, p, req.PathParameters["provider"], req.PathParameters["account"])
		if err != nil {
			return Fail(ctx, h.Log, err)
		}
		var doc map[string]json.RawMessage
		if err := json.Unmarshal([]byte(resp.Body), &doc); err != nil {
			return Fail(ctx, h.Log, err)
		}
		raw, err := json.Marshal(ap)
		if err != nil {
			return Fail(ctx, h.Log, err)
		}
		doc["pacing"] = raw
		return httpjson.JSON(http.StatusOK, doc, nil)
	}
}

func (h *Pace) log() *slog.Logger {
	if h.Log == nil {
		return slog.Default()
	}
	return h.Log
}
