package chaos

// Pacing and the circuit breaker (issue 15) in the schedules: some accounts
// are paced (declared in the provider configuration, drawn from the seed),
// every worker runs the account gate (429 pauses, a breaker that opens after
// two consecutive transient failures), and steps put the sandbox into
// outage or rate-limit mode and have an operator override an account's
// pace. The invariants are unchanged.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"

	"github.com/botharness/outbox/sandbox"
)

// drawPacing decides which intents' accounts are paced, from its own stream
// of the seed (so the rest of the plan is drawn as before).
func drawPacing(seed uint64, specs []*IntentSpec) {
	r := rand.New(rand.NewPCG(seed, 0x9ace))
	for _, s := range specs {
		if r.IntN(3) == 0 {
			s.PaceRate = 1 + r.IntN(5)
		}
	}
}

// pacingConfig is the "pacing" member of the workers' provider configuration.
// Holds and the queue margin are 1 ms: the fake clock does not move while a
// handler runs, so waits for a slot go through the retry queue instead.
func pacingConfig(specs []*IntentSpec) string {
	accounts := map[string]any{}
	for _, s := range specs {
		if s.PaceRate > 0 {
			accounts["sandbox/"+s.Account] = map[string]any{"rate": s.PaceRate, "per": "1s", "burst": 1}
		}
	}
	b, _ := json.Marshal(map[string]any{
		"accounts":  accounts,
		"maxHoldMs": 1, "queueMarginMs": 1, "leadMs": 0,
	})
	return string(b)
}

func genOutage(g *Gen) Step {
	s := g.intent()
	d := g.between(200, 3000)
	return Step{Desc: fmt.Sprintf("provider outage (503) for %dms on the account of intent %d", d, s.N), Run: func(ctx context.Context, w *World) {
		w.configureSandbox(s, sandbox.Config{Outage: &sandbox.OutageMode{DurationMs: d}}, "outage")
	}}
}

func genRateLimitMode(g *Gen) Step {
	s := g.intent()
	rate := g.between(1, 2)
	return Step{Desc: fmt.Sprintf("provider rate-limit mode %d/s on the account of intent %d", rate, s.N), Run: func(ctx context.Context, w *World) {
		w.configureSandbox(s, sandbox.Config{RateLimit: &sandbox.RateLimitMode{RequestsPerSecond: rate}}, "rate limit mode")
	}}
}

func genPaceOverride(g *Gen) Step {
	s, wk := g.intent(), g.worker()
	body := `{"pace":null,"reason":"chaos: back to the declared pace"}`
	if g.R.IntN(3) > 0 {
		body = fmt.Sprintf(`{"pace":{"rate":%d,"per":"1s"},"reason":"chaos: the provider asked us to slow down"}`, g.between(1, 3))
	}
	return Step{Desc: fmt.Sprintf("operator sets the pace of the account of intent %d: %s", s.N, body), Run: func(ctx context.Context, w *World) {
		const route = "PUT /v1/admin/capabilities/{provider}/{account}/pace"
		if _, ok := w.worker(wk).St.App.AdminExtra[route]; !ok {
			return
		}
		st, resp := w.admin(ctx, w.worker(wk), route, map[string]string{"provider": "sandbox", "account": s.Account}, body)
		w.note("  pace of intent %d's account -> %d %s", s.N, st, truncateNote(resp))
	}}
}

func truncateNote(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// modesOff ends the sandbox's outage and rate-limit modes (the drain).
func modesOff() (*sandbox.RateLimitMode, *sandbox.OutageMode) {
	return &sandbox.RateLimitMode{}, &sandbox.OutageMode{}
}
