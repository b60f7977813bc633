package admin

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/adapters/handlers/httpjson"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/botlimit"
)

// BotLimitsRoute is GET /v1/admin/bots/{bot}/limits: a bot's configured
// limits (issue 24) and what its counter shards hold now. Operators only.
const BotLimitsRoute = "GET /v1/admin/bots/{bot}/limits"

// BotCounters reads a bot's limit counters.
type BotCounters interface {
	Limits() botlimit.BotLimitConfig
	Counters(ctx context.Context, bot string) ([]botlimit.LimitCounter, error)
}

// BotLimits serves BotLimitsRoute.
type BotLimits struct {
	Counters BotCounters
	Clock    core.Clock
	Log      *slog.Logger
}

// BotLimitsBody is what the route answers.
type BotLimitsBody struct {
	Bot string `json:"bot"`
	// Rate is "<n>/<window>", "" without a rate limit; MaxOpen 0 is no cap.
	Rate    string `json:"rate"`
	MaxOpen int    `json:"maxOpen"`
	// Shards is how many counter items carry the limits; each holds
	// RateQuotaPerShard and OpenQuotaPerShard of them.
	Shards            int `json:"shards"`
	RateQuotaPerShard int `json:"rateQuotaPerShard"`
	OpenQuotaPerShard int `json:"openQuotaPerShard"`
	// InWindow counts the bot's new intents in the current rate window;
	// Open its counted open intents (an upper bound, see docs/decisions.md).
	InWindow int `json:"inWindow"`
	Open     int `json:"open"`
}

// Route returns the handler by route key, for Handler.Extra.
func (b *BotLimits) Route() func(ctx context.Context, p core.Principal, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	return func(ctx context.Context, p core.Principal, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
		if p.Kind != core.PrincipalOperator {
			return Fail(ctx, b.Log, fmt.Errorf("%w: only operators read bot limits", core.ErrForbidden))
		}
		bot := req.PathParameters["bot"]
		l := b.Counters.Limits().For(bot)
		body := BotLimitsBody{Bot: bot, Rate: l.Rate.String(), MaxOpen: l.MaxOpen}
		if l.Enabled() {
			plan := botlimit.PlanLimit(l, "", b.Clock.Now())
			body.Shards, body.RateQuotaPerShard, body.OpenQuotaPerShard = plan.Shards, plan.RateQuota, plan.OpenQuota
			cs, err := b.Counters.Counters(ctx, bot)
			if err != nil {
				return Fail(ctx, b.Log, err)
			}
			for _, c := range cs {
				if plan.RateQuota > 0 && c.Window == plan.Window {
					body.InWindow += c.InWindow
				}
				body.Open += c.Open
			}
		}
		return httpjson.JSON(http.StatusOK, body, nil)
	}
}
