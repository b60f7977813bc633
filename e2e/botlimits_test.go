package e2e

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/botharness/outbox/adapters/wire"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/botlimit"
)

// Issue 24, finding 6 (per bot): on main 500 intents from one bot in 32 s
// were all accepted. A bot over its rate gets 429 rate_limited with
// Retry-After; a replay of one of its stored keys is still 200; another
// bot is not affected.
func TestBotRateLimitAnswers429AndReplays(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{
		Config: wire.Config{
			BotLimits: botlimit.BotLimitConfig{PerBot: map[string]botlimit.BotLimits{
				testBot: {Rate: botlimit.BotRate{N: 5, Per: time.Hour}, MaxOpen: 100},
			}},
		},
	})
	// The rate window is a fixed hour: do not straddle its end.
	if end := time.Now().Truncate(time.Hour).Add(time.Hour); time.Until(end) < 30*time.Second {
		e.waitUntil(end)
	}
	// The first intent, delivered: with both limits on it costs the three
	// writes plus the count at intake and the give-back at its end.
	first := e.mustSubmit("rl-0", intentBody("acct-rl", "chan-1", "m0"))
	e.waitStatus(first, 10*time.Second, core.StatusSucceeded)
	e.eventually(5*time.Second, "the open count is given back", func() bool { return e.writes.n.Load() == 5 })
	for i := 1; i < 5; i++ {
		e.mustSubmit(fmt.Sprintf("rl-%d", i), intentBody("acct-rl", "chan-1", fmt.Sprintf("m%d", i)))
	}
	r := e.submit(botToken, "rl-5", intentBody("acct-rl", "chan-1", "m5"))
	if r.status != http.StatusTooManyRequests || r.errorCode() != "rate_limited" {
		t.Fatalf("sixth intent in the hour: %d %s, want 429 rate_limited", r.status, r.body)
	}
	ra, err := strconv.Atoi(r.headers.Get("Retry-After"))
	if err != nil || ra < 1 || ra > 3600 {
		t.Fatalf("Retry-After %q, want 1..3600 seconds (the rest of the window)", r.headers.Get("Retry-After"))
	}
	// Limited, and still a replay of a stored key is answered.
	e.expectReplay("rl-0", intentBody("acct-rl", "chan-1", "m0"), first)
	// Another bot has no limit.
	if r := e.submit(bot2Token, "rl-5", intentBody("acct-rl", "chan-1", "m5")); r.status != http.StatusCreated {
		t.Fatalf("another bot: %d %s", r.status, r.body)
	}
	if n := e.effects("?account=acct-rl"); n > 6 {
		t.Fatalf("%d effects, at most 6 intents were accepted", n)
	}
	// Operators see the limits and the counts (validated against the spec).
	var lim struct {
		Rate                                               string
		MaxOpen, Shards, RateQuotaPerShard, InWindow, Open int
	}
	lr := e.do("GET", "/v1/admin/bots/"+testBot+"/limits", opToken, nil, "")
	lr.json(t, &lim)
	if lr.status != http.StatusOK || lim.Rate != "5/1h0m0s" || lim.MaxOpen != 100 || lim.Shards != 1 || lim.RateQuotaPerShard != 5 || lim.InWindow != 5 || lim.Open > 4 {
		t.Fatalf("admin limits: %d %s", lr.status, lr.body)
	}
	if r := e.do("GET", "/v1/admin/bots/"+testBot+"/limits", orchToken, nil, ""); r.status != http.StatusForbidden {
		t.Fatalf("orchestrator reads limits: %d %s", r.status, r.body)
	}

	// The console shows them where an operator looks: the bot on an
	// intent's page leads to its limits, the same figures as the API's.
	e.eventually(20*time.Second, "the five intents are delivered and their open counts given back", func() bool {
		e.do("GET", "/v1/admin/bots/"+testBot+"/limits", opToken, nil, "").json(t, &lim)
		return lim.Open == 0
	})
	ctx, problems := browser(t)
	step(t, ctx, "sign in and open the first intent", 30*time.Second,
		chromedp.Navigate(e.api.URL+"/console"),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), opToken),
		chromedp.Click(chromedp.CSS(`#signin`)),
		chromedp.WaitVisible(chromedp.CSS(`#overview`)),
		chromedp.Navigate(e.api.URL+"/console#/intents/"+first),
		chromedp.WaitVisible(chromedp.CSS(`#intent-id`)))
	step(t, ctx, "follow the bot to its limits", 20*time.Second,
		chromedp.Click(chromedp.CSS(`#intent a.bot-link`)),
		chromedp.WaitVisible(chromedp.CSS(`#bot-limits-table tr[data-bot="`+testBot+`"][data-rate]`)),
		chromedp.WaitVisible(chromedp.CSS(`#bot-limits-table tr[data-bot="`+testBot2+`"][data-rate]`)))
	row := func(bot, key string) string {
		return eval[string](t, ctx, `document.querySelector('#bot-limits-table tr[data-bot="`+bot+`"]').dataset.`+key)
	}
	page := fmt.Sprintf("rate=%s maxOpen=%s inWindow=%s open=%s shards=%s", row(testBot, "rate"), row(testBot, "maxOpen"), row(testBot, "inWindow"), row(testBot, "open"), row(testBot, "shards"))
	api := fmt.Sprintf("rate=%s maxOpen=%d inWindow=%d open=%d shards=%d", lim.Rate, lim.MaxOpen, lim.InWindow, lim.Open, lim.Shards)
	if page != api || lim.InWindow != 5 {
		t.Fatalf("the console shows %s, the API %s", page, api)
	}
	if got := textOf(t, ctx, `#bot-limits-table tr[data-bot="`+testBot+`"] .bl-rate`); got != "5 per 1h0m0s" {
		t.Fatalf("rate cell %q", got)
	}
	if got := textOf(t, ctx, `#bot-limits-table tr[data-bot="`+testBot+`"] .bl-in-window`); got != "5 (admits up to 5)" {
		t.Fatalf("window cell %q", got)
	}
	// The other bot (listed from its token) has no limit.
	if row(testBot2, "rate") != "" || row(testBot2, "maxOpen") != "0" || textOf(t, ctx, `#bot-limits-table tr[data-bot="`+testBot2+`"] .bl-rate`) != "no limit" {
		t.Fatalf("bot-2 row: %q", textOf(t, ctx, `#bot-limits-table tr[data-bot="`+testBot2+`"]`))
	}
	screenshot(t, ctx, "bot-limits.png")
	if p := problems(); len(p) > 0 {
		t.Fatalf("the page reported errors (CSP violations or script errors): %v", p)
	}
}

// TestBotOpenCapAnswers429AndReplays: with nothing delivered (no stream),
// a bot's open intents stop at its cap (16, one per counter shard): the
// next is 429 too_many_open_intents, a replay is still 200.
func TestBotOpenCapAnswers429AndReplays(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{
		Config: wire.Config{
			BotLimits: botlimit.BotLimitConfig{Default: botlimit.BotLimits{MaxOpen: 16}},
		},
		DisableStream: true, DisableQueue: true,
	})
	var accepted []string
	var refused response
	for i := 0; i < 17 && refused.status == 0; i++ {
		r := e.submit(botToken, fmt.Sprintf("oc-%d", i), intentBody("acct-oc", "chan-1", fmt.Sprintf("m%d", i)))
		switch r.status {
		case http.StatusCreated:
			accepted = append(accepted, fmt.Sprintf("oc-%d", i))
		case http.StatusTooManyRequests:
			refused = r
		default:
			t.Fatalf("submit %d: %d %s", i, r.status, r.body)
		}
	}
	if refused.status == 0 || refused.errorCode() != "too_many_open_intents" || refused.headers.Get("Retry-After") == "" {
		t.Fatalf("%d open intents accepted and no 429 too_many_open_intents (cap 16): %+v", len(accepted), refused)
	}
	if len(accepted) > 16 || e.itemCount() != len(accepted) {
		t.Fatalf("accepted %d, stored %d: over the cap of 16", len(accepted), e.itemCount())
	}
	var in core.Intent
	r := e.submit(botToken, accepted[0], intentBody("acct-oc", "chan-1", "m0"))
	r.json(t, &in)
	if r.status != http.StatusOK || r.headers.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay at the cap: %d %s", r.status, r.body)
	}
}
