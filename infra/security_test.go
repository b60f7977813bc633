package infra

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/botharness/outbox/adapters/wire"
)

// Issue 24, finding 5: no provider secret in the template or in any
// function's environment. The dev stack's provider configuration uses every
// kind of secret field; each must arrive as a Secrets Manager reference,
// and nothing shaped like a credential may appear anywhere in the template.
func TestNoSecretValueInTemplateOrEnvironment(t *testing.T) {
	shapes := regexp.MustCompile(`xox[abpr]-|whsec_|[sr]k_(live|test)_|PRIVATE KEY|\b[0-9]{6,}:[A-Za-z0-9_-]{30,}|Bearer [A-Za-z0-9._~+/-]{16,}`)
	for name, tm := range map[string]template{"prod": prodT, "dev": devT, "minimal": minT} {
		b, _ := json.Marshal(tm)
		if m := shapes.Find(b); m != nil {
			t.Errorf("%s template holds something shaped like a credential: %q", name, m)
		}
		for _, fn := range tm.resources("AWS::Lambda::Function") {
			env, _ := fn.Props["Environment"].(map[string]any)
			vars, _ := env["Variables"].(map[string]any)
			cfg, ok := vars[EnvProviderConfig].(string)
			if !ok {
				continue
			}
			fields, err := wire.SecretFields(cfg)
			if err != nil {
				t.Errorf("%s %v: %v", name, fn.Props["FunctionName"], err)
			}
			for _, f := range fields {
				if !strings.HasPrefix(f.Value, wire.SecretsManagerPrefix) {
					t.Errorf("%s %v: %s is not a Secrets Manager reference", name, fn.Props["FunctionName"], f.Field)
				}
			}
			if name == "dev" && len(fields) != 11 {
				t.Errorf("dev %v: %d secret fields, want the 11 of devProviderConfig", fn.Props["FunctionName"], len(fields))
			}
		}
	}
	// What each function may read, in its own words (OUTBOX_SECRET_USES).
	want := map[string]string{"intake": "send", "retrier": "send", "sweeper": "send", "admin": "send", "webhook": "verify"}
	for fn, uses := range want {
		vars := devT.function(t, devPrefix, fn).Props["Environment"].(map[string]any)["Variables"].(map[string]any)
		if vars[EnvSecretUses] != uses {
			t.Errorf("%s %s = %v, want %s", fn, EnvSecretUses, vars[EnvSecretUses], uses)
		}
	}
}

// A secret value (literal or env:) in the provider configuration is refused
// at synthesis, naming the field and never the value; so is a reference
// that is neither a name nor a complete ARN.
func TestPropsRefuseSecretValuesInProviderConfig(t *testing.T) {
	const canary = "canary-secret-value-0123456789"
	for field, cfg := range map[string]string{
		"sandbox.tokens.acct":                 `{"sandbox":{"baseUrl":"https://s.example","tokens":{"acct":"` + canary + `"}}}`,
		"http.accounts.a.secret":              `{"http":{"accounts":{"a":{"url":"https://r.example","secret":"whsec_` + canary + `"}}}}`,
		"http.accounts.a.token":               `{"http":{"accounts":{"a":{"url":"https://r.example","secret":"secretsmanager:x","token":"` + canary + `"}}}}`,
		"slack.accounts.T1.token":             `{"slack":{"accounts":{"T1":{"token":"xoxb-` + canary + `"}}}}`,
		"slack.accounts.T1.signingSecret":     `{"slack":{"accounts":{"T1":{"token":"secretsmanager:x","signingSecret":"` + canary + `"}}}}`,
		"telegram.accounts.b.token":           `{"telegram":{"accounts":{"b":{"token":"env:TG_` + canary + `"}}}}`,
		"telegram.accounts.b.webhookSecret":   `{"telegram":{"accounts":{"b":{"token":"secretsmanager:x","webhookSecret":"` + canary + `"}}}}`,
		"stripe.accounts.s.secretKey":         `{"stripe":{"accounts":{"s":{"secretKey":"sk_live_` + canary + `"}}}}`,
		"stripe.accounts.s.webhookSecret":     `{"stripe":{"accounts":{"s":{"secretKey":"secretsmanager:x","webhookSecret":"whsec_` + canary + `"}}}}`,
		"discord.accounts.d.token":            `{"discord":{"accounts":{"d":{"token":"env:DISCORD_` + canary + `"}}}}`,
		"gcal.accounts.g.serviceAccount":      `{"gcal":{"accounts":{"g":{"serviceAccount":"{\"private_key\":\"` + canary + `\"}"}}}}`,
		"slack.accounts.T2.token: \"bad name": `{"slack":{"accounts":{"T2":{"token":"secretsmanager:bad name ` + canary + `"}}}}`,
		"telegram.accounts.c.token: \"arn:":   `{"telegram":{"accounts":{"c":{"token":"secretsmanager:arn:aws:secretsmanager:eu-west-1:111111111111:secret:partial"}}}}`,
	} {
		func() {
			defer func() {
				r := fmt.Sprint(recover())
				if !strings.Contains(r, field) {
					t.Errorf("%s: want a panic naming the field, got %q", field, r)
				}
				if strings.Contains(r, canary) && !strings.Contains(field, "bad name") {
					t.Errorf("%s: the panic quotes the secret: %q", field, r)
				}
			}()
			(&OutboxStackProps{AssetDir: "/x", ProviderConfig: cfg}).resolve()
		}()
	}
	r := (&OutboxStackProps{AssetDir: "/x", ProviderConfig: devProviderConfig}).resolve()
	got := map[string][]string{}
	for u, names := range r.secretRefs {
		got[string(u)] = names
	}
	if want := map[string][]string{"send": devSendSecrets, "verify": devVerifySecrets}; !reflect.DeepEqual(got, want) {
		t.Errorf("secret references %v, want %v", got, want)
	}
}

// Issue 24, finding 6 (API Gateway half): each route group has its own
// throttle, set per route as stage route settings, so the webhook route
// cannot use up the bots' or operators' limits.
func TestRouteGroupThrottles(t *testing.T) {
	groupOf := map[string]string{}
	for _, s := range DefaultFunctions() {
		for _, r := range s.Routes {
			groupOf[r.Key()] = s.RouteGroup
		}
		for _, r := range s.PublicRoutes {
			groupOf[r.Key()] = RouteGroupPublic
		}
	}
	for k, g := range map[string]string{
		"POST /v1/intents": RouteGroupBots, "PUT /v1/sources/{sourceId}": RouteGroupBots, "ANY /mcp": RouteGroupBots,
		"GET /v1/admin/intents": RouteGroupOperators, "POST /v1/admin/backups": RouteGroupOperators,
		"POST /v1/webhooks/{provider}/{account}": RouteGroupWebhooks,
		"GET /v1/webhooks/{provider}/{account}":  RouteGroupWebhooks,
		"GET /v1/openapi.json":                   RouteGroupPublic, "GET /console/{proxy+}": RouteGroupPublic, "$default": RouteGroupPublic,
	} {
		if groupOf[k] != g {
			t.Errorf("route %s in group %q, want %q", k, groupOf[k], g)
		}
	}
	for _, c := range []struct {
		name  string
		tm    template
		want  map[string]Throttle
		extra []string // routes with the stage default only
	}{
		{"prod", prodT, DefaultRouteThrottles, nil},
		{"dev", devT, map[string]Throttle{
			RouteGroupBots: DefaultRouteThrottles[RouteGroupBots], RouteGroupOperators: DefaultRouteThrottles[RouteGroupOperators],
			RouteGroupWebhooks: devThrottles[RouteGroupWebhooks], RouteGroupPublic: DefaultRouteThrottles[RouteGroupPublic],
		}, []string{devEchoRoute}},
	} {
		stages := c.tm.resources("AWS::ApiGatewayV2::Stage")
		if len(stages) != 1 {
			t.Fatalf("%s: %d stages", c.name, len(stages))
		}
		st := stages[0]
		drs, _ := st.Props["DefaultRouteSettings"].(map[string]any)
		if drs["ThrottlingRateLimit"] != 50.0 || drs["ThrottlingBurstLimit"] != 100.0 {
			t.Errorf("%s: default route settings %v", c.name, drs)
		}
		rs, _ := st.Props["RouteSettings"].(map[string]any)
		if len(rs) != len(groupOf) {
			t.Errorf("%s: route settings for %d routes, want %d", c.name, len(rs), len(groupOf))
		}
		for key, g := range groupOf {
			s, _ := rs[key].(map[string]any)
			w := c.want[g]
			if s["ThrottlingRateLimit"] != w.RateLimit || s["ThrottlingBurstLimit"] != w.BurstLimit {
				t.Errorf("%s: %s (%s) throttle %v, want %+v", c.name, key, g, s, w)
			}
		}
		for _, k := range c.extra {
			if _, ok := rs[k]; ok {
				t.Errorf("%s: %s has route settings, want the stage default", c.name, k)
			}
		}
		// CloudFormation refuses settings for a route key not created yet.
		deps := map[string]bool{}
		for _, d := range list(st.Raw["DependsOn"]) {
			deps[d.(string)] = true
		}
		for _, r := range c.tm.resources("AWS::ApiGatewayV2::Route") {
			if _, grouped := rs[r.Props["RouteKey"].(string)]; grouped && !deps[r.ID] {
				t.Errorf("%s: the stage does not depend on route %s", c.name, r.Props["RouteKey"])
			}
		}
	}
	if w, o := DefaultRouteThrottles[RouteGroupWebhooks], DefaultRouteThrottles[RouteGroupBots]; w.BurstLimit >= o.BurstLimit {
		t.Errorf("webhook burst %v not below the bots' %v", w.BurstLimit, o.BurstLimit)
	}
}

func TestPropsRejectBadRouteThrottles(t *testing.T) {
	for name, th := range map[string]map[string]Throttle{
		"unknown group": {"everyone": {RateLimit: 1, BurstLimit: 1}},
		"zero rate":     {RouteGroupBots: {RateLimit: 0, BurstLimit: 10}},
		"huge burst":    {RouteGroupBots: {RateLimit: 10, BurstLimit: 1e6}},
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "RouteThrottles") {
					t.Errorf("%s: want a RouteThrottles panic, got %v", name, r)
				}
			}()
			(&OutboxStackProps{AssetDir: "/x", RouteThrottles: th}).resolve()
		}()
	}
}
