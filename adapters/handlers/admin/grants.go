package admin

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/adapters/handlers/httpjson"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/gate/pacing"
	"github.com/botharness/outbox/core/registry"
)

// Grants serves the operators' grant and capability routes:
//
//	PUT  /v1/admin/grants/{grantId}                   create (201) or replace with version+1 (200)
//	GET  /v1/admin/grants/{grantId}
//	GET  /v1/admin/grants?bot=&limit=&cursor=         list by id
//	POST /v1/admin/grants/{grantId}/revoke            {"reason": "...", "expectedVersion"?: n}
//	PUT  /v1/admin/capabilities/{provider}/{account}  {"withdrawn": bool, "actions"?: [...], "reason": "..."}
//	GET  /v1/admin/capabilities/{provider}/{account}
//
// Operators only: orchestrators and bots get 403.
type Grants struct {
	Authority *registry.Authority
	// Pacing, when the gate is on, adds the account's "pacing" (pace,
	// pause, breaker) to the capability GET.
	Pacing *pacing.Pacing
	Log    *slog.Logger
}

// Routes returns the route handlers by route key, for Handler.Extra.
func (g *Grants) Routes() map[string]func(ctx context.Context, p core.Principal, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	return map[string]func(ctx context.Context, p core.Principal, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse{
		"PUT /v1/admin/grants/{grantId}":                  g.put,
		"GET /v1/admin/grants/{grantId}":                  g.get,
		"GET /v1/admin/grants":                            g.list,
		"POST /v1/admin/grants/{grantId}/revoke":          g.revoke,
		"PUT /v1/admin/capabilities/{provider}/{account}": g.putCapability,
		"GET /v1/admin/capabilities/{provider}/{account}": g.getCapability,
	}
}

var errOperatorsOnly = fmt.Errorf("%w: only operators manage grants and capabilities", core.ErrForbidden)

func (g *Grants) fail(ctx context.Context, err error) events.APIGatewayV2HTTPResponse {
	return Fail(ctx, g.Log, err)
}

func (g *Grants) put(ctx context.Context, p core.Principal, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	var body GrantBody
	if resp, ok := operatorBody(ctx, g.Log, p, req, errOperatorsOnly, &body); !ok {
		return resp
	}
	gr, created, err := g.Authority.PutGrant(ctx, p, req.PathParameters["grantId"], body.spec())
	if err != nil {
		return g.fail(ctx, err)
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	g.log().InfoContext(ctx, "grant written", "grant", gr.ID, "version", gr.Version, "bot", gr.Bot, "operator", p.Name)
	return httpjson.JSON(status, gr, nil)
}

func (g *Grants) get(ctx context.Context, p core.Principal, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	gr, err := g.Authority.GetGrant(ctx, p, req.PathParameters["grantId"])
	if err != nil {
		return g.fail(ctx, err)
	}
	return httpjson.JSON(http.StatusOK, gr, nil)
}

func (g *Grants) list(ctx context.Context, p core.Principal, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	limit, cursor, err := httpjson.Page(req)
	if err != nil {
		return g.fail(ctx, err)
	}
	items, next, err := g.Authority.ListGrants(ctx, p, req.QueryStringParameters["bot"], cursor, limit)
	if err != nil {
		return g.fail(ctx, err)
	}
	if items == nil {
		items = []*core.Grant{}
	}
	return httpjson.JSON(http.StatusOK, map[string]any{"items": items, "nextCursor": next}, nil)
}

func (g *Grants) revoke(ctx context.Context, p core.Principal, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	var body RevokeBody
	if resp, ok := operatorBody(ctx, g.Log, p, req, errOperatorsOnly, &body); !ok {
		return resp
	}
	gr, err := g.Authority.RevokeGrant(ctx, p, req.PathParameters["grantId"], registry.Revocation{Reason: body.Reason, ExpectedVersion: body.ExpectedVersion})
	if err != nil {
		return g.fail(ctx, err)
	}
	g.log().InfoContext(ctx, "grant revoked", "grant", gr.ID, "version", gr.Version, "operator", p.Name)
	return httpjson.JSON(http.StatusOK, gr, nil)
}

func (g *Grants) putCapability(ctx context.Context, p core.Principal, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	var body CapabilityBody
	if resp, ok := operatorBody(ctx, g.Log, p, req, errOperatorsOnly, &body); !ok {
		return resp
	}
	c, err := g.Authority.SetCapability(ctx, p, req.PathParameters["provider"], req.PathParameters["account"], registry.CapabilityChange{Withdrawn: body.Withdrawn, Actions: body.Actions, Reason: body.Reason})
	if err != nil {
		return g.fail(ctx, err)
	}
	g.log().InfoContext(ctx, "capability changed", "provider", c.Provider, "account", c.Account, "version", c.Version, "operator", p.Name)
	return httpjson.JSON(http.StatusOK, c, nil)
}

func (g *Grants) getCapability(ctx context.Context, p core.Principal, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	prov, acct := req.PathParameters["provider"], req.PathParameters["account"]
	c, err := g.Authority.GetCapability(ctx, p, prov, acct)
	if err != nil {
		return g.fail(ctx, err)
	}
	if g.Pacing == nil {
		return httpjson.JSON(http.StatusOK, c, nil)
	}
	ap, err := g.Pacing.Get(ctx, p, prov, acct)
	if err != nil {
		return g.fail(ctx, err)
	}
	return httpjson.JSON(http.StatusOK, capabilityWithPacing{Capability: c, Pacing: ap}, nil)
}

// capabilityWithPacing is the capability document with the account's pacing.
type capabilityWithPacing struct {
	*core.Capability
	Pacing *pacing.AccountPacing `json:"pacing"`
}

func (g *Grants) log() *slog.Logger { return cmp.Or(g.Log, slog.Default()) }
