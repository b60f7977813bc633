package wire

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/adapters/handlers/admin"
	"github.com/botharness/outbox/core/botlimit"
)

// Per-bot limits (issue 24): OUTBOX_BOT_RATE ("50/1s") and
// OUTBOX_BOT_MAX_OPEN (a count) are every bot's defaults; OUTBOX_BOT_LIMITS
// overrides them per bot: {"bot-a":{"rate":"10/1s","maxOpen":100}} (a
// member left out keeps the default; "rate":"" or "maxOpen":0 lifts that
// limit for the bot). Unset: no limits.

// botLimitOverride is one bot's entry in OUTBOX_BOT_LIMITS.
type botLimitOverride struct {
	Rate    *string `json:"rate"`
	MaxOpen *int    `json:"maxOpen"`
}

// ParseBotLimits reads the three settings.
func ParseBotLimits(rate, maxOpen, perBot string) (botlimit.BotLimitConfig, error) {
	var c botlimit.BotLimitConfig
	r, err := botlimit.ParseBotRate(rate)
	if err != nil {
		return c, fmt.Errorf("OUTBOX_BOT_RATE: %w", err)
	}
	c.Default.Rate = r
	if strings.TrimSpace(maxOpen) != "" {
		n, err := strconv.Atoi(strings.TrimSpace(maxOpen))
		if err != nil || n < 0 {
			return c, fmt.Errorf("OUTBOX_BOT_MAX_OPEN: %q is not a whole number >= 0", maxOpen)
		}
		c.Default.MaxOpen = n
	}
	if strings.TrimSpace(perBot) == "" {
		return c, nil
	}
	var m map[string]botLimitOverride
	dec := json.NewDecoder(strings.NewReader(perBot))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return c, fmt.Errorf("OUTBOX_BOT_LIMITS: %w", err)
	}
	c.PerBot = map[string]botlimit.BotLimits{}
	bots := make([]string, 0, len(m))
	for b := range m {
		bots = append(bots, b)
	}
	sort.Strings(bots)
	for _, b := range bots {
		o, l := m[b], c.Default
		if o.Rate != nil {
			if l.Rate, err = botlimit.ParseBotRate(*o.Rate); err != nil {
				return c, fmt.Errorf("OUTBOX_BOT_LIMITS %s: %w", b, err)
			}
		}
		if o.MaxOpen != nil {
			if *o.MaxOpen < 0 {
				return c, fmt.Errorf("OUTBOX_BOT_LIMITS %s: maxOpen must be >= 0", b)
			}
			l.MaxOpen = *o.MaxOpen
		}
		c.PerBot[b] = l
	}
	return c, nil
}

// botLimitsFromEnv reads OUTBOX_BOT_RATE, OUTBOX_BOT_MAX_OPEN and
// OUTBOX_BOT_LIMITS.
func botLimitsFromEnv() (botlimit.BotLimitConfig, error) {
	return ParseBotLimits(os.Getenv("OUTBOX_BOT_RATE"), os.Getenv("OUTBOX_BOT_MAX_OPEN"), os.Getenv("OUTBOX_BOT_LIMITS"))
}

// wireBotLimits puts the limiter in front of intake when any bot has a
// limit, and serves the limits to operators (admin.BotLimitsRoute).
func wireBotLimits(a *App) {
	a.BotLimiter = dynamo.NewBotLimiter(a.Clients.DynamoDB, a.Config.Table, a.Config.BotLimits)
	if a.Config.BotLimits.Enabled() {
		a.Intake.Limits = a.BotLimiter
	}
	a.AdminExtra[admin.BotLimitsRoute] = (&admin.BotLimits{Counters: a.BotLimiter, Clock: a.Config.Clock, Log: a.Log}).Route()
}
