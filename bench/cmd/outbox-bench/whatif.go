package main

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/adapters/handlers/intake"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/localstack/lambdahost"
	"github.com/botharness/outbox/localstack/system"
)

// The "intake_cached" variant is a what-if, not the product: the same intake
// handler and gateway, but with the two reads intake adds to the raw put
// served from caches, to show what closing the intake_vs_raw gap would take:
//
//   - the authorizer's answer cached per identity source for authorizerTTL,
//     as API Gateway does for an HTTP API REQUEST authorizer with
//     AuthorizerResultTtlInSeconds > 0 (the local gateway does not cache);
//   - the grant read at intake cached in-process for grantTTL. Intake's grant
//     check is advisory: the dispatcher re-reads the grant strongly consistent
//     before every attempt, so a grant revoked inside the TTL is still never
//     acted on (its intent ends grant-revoked, with no side effect).
const (
	authorizerTTL = 5 * time.Minute
	grantTTL      = 5 * time.Second
)

// cachedIntakeGateway serves POST /v1/intents with both caches.
func (r *runner) cachedIntakeGateway(st *system.Stack) *lambdahost.Gateway {
	app := st.App
	clock := app.Config.Clock
	if clock == nil {
		clock = core.SystemClock
	}
	reg := dynamo.NewRegistry(app.Clients.DynamoDB, app.Store.Table())
	in := &core.Intake{
		Store: app.Store, Providers: app.Providers, Clock: clock,
		Grants: &core.Revalidation{Facts: reg, Grants: &cachedGrants{inner: reg, ttl: grantTTL}, Clock: clock},
	}
	h := &intake.Handler{Intake: in, Store: app.Store, Log: r.log}
	gw := lambdahost.NewGateway(lambdahost.GatewayOptions{Logger: r.log})
	gw.Route("POST /v1/intents", h.Handle, lambdahost.RouteOptions{
		Authorizer: cacheAuthorizer(st.Authorizer.Handle, authorizerTTL), AuthorizerFunctionName: "authorizer", FunctionName: "intake",
	})
	return gw
}

func cacheAuthorizer(inner lambdahost.Authorizer, ttl time.Duration) lambdahost.Authorizer {
	type entry struct {
		resp  events.APIGatewayV2CustomAuthorizerSimpleResponse
		until time.Time
	}
	var mu sync.Mutex
	cache := map[string]entry{}
	return func(ctx context.Context, req events.APIGatewayV2CustomAuthorizerV2Request) (events.APIGatewayV2CustomAuthorizerSimpleResponse, error) {
		key := strings.Join(req.IdentitySource, "\x00")
		mu.Lock()
		e, ok := cache[key]
		mu.Unlock()
		if ok && time.Now().Before(e.until) {
			return e.resp, nil
		}
		resp, err := inner(ctx, req)
		if err == nil {
			mu.Lock()
			cache[key] = entry{resp: resp, until: time.Now().Add(ttl)}
			mu.Unlock()
		}
		return resp, err
	}
}

type cachedGrants struct {
	inner core.GrantReader
	ttl   time.Duration
	mu    sync.Mutex
	m     map[string]cachedGrant
}

type cachedGrant struct {
	g     core.Grant
	until time.Time
}

func (c *cachedGrants) GetGrant(ctx context.Context, id string) (*core.Grant, error) {
	c.mu.Lock()
	e, ok := c.m[id]
	c.mu.Unlock()
	if ok && time.Now().Before(e.until) {
		g := e.g
		return &g, nil
	}
	g, err := c.inner.GetGrant(ctx, id)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]cachedGrant{}
	}
	c.m[id] = cachedGrant{g: *g, until: time.Now().Add(c.ttl)}
	c.mu.Unlock()
	return g, nil
}
