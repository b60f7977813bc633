package admin

import (
	"cmp"
	"context"
	"log/slog"
	"net/http"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/adapters/handlers/httpjson"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/gate"
	"github.com/botharness/outbox/core/gate/pacing"
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
	Pacing *pacing.Pacing
	Log    *slog.Logger
}

// PaceBody is the body of PUT /v1/admin/capabilities/{provider}/{account}/pace.
type PaceBody struct {
	Pace   *gate.Pace `json:"pace"`
	Reason string     `json:"reason"`
}

// Routes returns the pace routes (the capability GET shows the pacing
// itself: Grants.Pacing).
func (h *Pace) Routes() map[string]Route {
	return map[string]Route{
		"GET /v1/admin/capabilities/{provider}/{account}/pace": h.get,
		"PUT /v1/admin/capabilities/{provider}/{account}/pace": h.put,
	}
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
	ap, err := h.Pacing.Set(ctx, p, prov, acct, pacing.PaceChange{Pace: body.Pace, Reason: body.Reason})
	if err != nil {
		return Fail(ctx, h.Log, err)
	}
	h.log().InfoContext(ctx, "pace changed", "provider", prov, "account", acct, "operator", p.Name, "override", body.Pace != nil)
	return httpjson.JSON(http.StatusOK, ap, nil)
}

func (h *Pace) log() *slog.Logger { return cmp.Or(h.Log, slog.Default()) }
