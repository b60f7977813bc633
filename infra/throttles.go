package infra

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
)

// Route groups: every HTTP API route belongs to one, and each group has its
// own API Gateway throttle (issue 24, finding 6).
const (
	// RouteGroupBots: the bot API (intake: intents, sources).
	RouteGroupBots = "bots"
	// RouteGroupOperators: the admin API.
	RouteGroupOperators = "operators"
	// RouteGroupWebhooks: the unauthenticated provider webhook route.
	RouteGroupWebhooks = "webhooks"
	// RouteGroupPublic: the OpenAPI document and the console's static files.
	RouteGroupPublic = "public"
)

// Throttle is an API Gateway throttle: steady requests per second and the
// burst (token bucket size). API Gateway applies a route's throttle to that
// route alone, so a group's limits hold for each of its routes separately.
type Throttle struct {
	RateLimit  float64 `json:"rateLimit"`
	BurstLimit float64 `json:"burstLimit"`
}

// DefaultRouteThrottles are the per-group throttles used unless
// OutboxStackProps.RouteThrottles says otherwise: bots get the old stage
// limit; operators are few; webhooks get what providers send in bursts
// (Slack retries, Telegram updates) but cannot crowd anyone out; the public
// documents are fetched rarely.
var DefaultRouteThrottles = map[string]Throttle{
	RouteGroupBots:      {RateLimit: 50, BurstLimit: 100},
	RouteGroupOperators: {RateLimit: 10, BurstLimit: 20},
	RouteGroupWebhooks:  {RateLimit: 20, BurstLimit: 40},
	RouteGroupPublic:    {RateLimit: 5, BurstLimit: 10},
}

// routeThrottles applies the defaults and checks the groups and numbers.
func routeThrottles(given map[string]Throttle) (map[string]Throttle, error) {
	out := map[string]Throttle{}
	for g, t := range DefaultRouteThrottles {
		out[g] = t
	}
	for g, t := range given {
		if _, ok := DefaultRouteThrottles[g]; !ok {
			return nil, fmt.Errorf("OutboxStackProps.RouteThrottles: unknown route group %q (want %s, %s, %s or %s)",
				g, RouteGroupBots, RouteGroupOperators, RouteGroupWebhooks, RouteGroupPublic)
		}
		if t.RateLimit <= 0 || t.BurstLimit < 1 || t.BurstLimit > 5000 {
			return nil, fmt.Errorf("OutboxStackProps.RouteThrottles[%s]: rate %v burst %v: want rate > 0 and burst 1..5000", g, t.RateLimit, t.BurstLimit)
		}
		out[g] = t
	}
	return out, nil
}

// groupedRoute is an HTTP API route created with its group.
type groupedRoute struct {
	key   string // "POST /v1/intents"
	group string // "" for none: the stage default throttle only
	route awsapigatewayv2.HttpRoute
}

// throttleRouteGroups sets the stage's route settings: each route of a
// group gets the group's throttle. The stage depends on the routes, since
// CloudFormation refuses route settings for a route key that does not
// exist yet.
func (o *outbox) throttleRouteGroups(stage awsapigatewayv2.HttpStage, routes []groupedRoute) {
	settings := map[string]interface{}{}
	for _, rt := range routes {
		if rt.group == "" {
			continue
		}
		t, ok := o.r.RouteThrottles[rt.group]
		if !ok {
			panic(fmt.Sprintf("infra: route %s: unknown route group %q", rt.key, rt.group))
		}
		// RouteSettings is untyped JSON in CloudFormation: the keys are
		// written as CloudFormation spells them (the typed
		// CfnStage_RouteSettingsProperty would be rendered camelCase).
		settings[rt.key] = map[string]interface{}{
			"ThrottlingRateLimit":  t.RateLimit,
			"ThrottlingBurstLimit": t.BurstLimit,
		}
		stage.Node().AddDependency(rt.route)
	}
	if len(settings) == 0 {
		return
	}
	stage.Node().DefaultChild().(awsapigatewayv2.CfnStage).SetRouteSettings(settings)
}
