package wire

import (
	"fmt"
	"strings"
	"time"

	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/adapters/handlers/admin"
	"github.com/botharness/outbox/core/gate"
	"github.com/botharness/outbox/core/gate/pacing"
)

// PacingSettings is the "pacing" member of OUTBOX_PROVIDER_CONFIG (issue 15):
//
//	"pacing": {"accounts": {"sandbox/bench": {"rate": 20, "per": "1s", "burst": 1},
//	                        "telegram/*": {"rate": 30, "per": "1s"}},
//	           "targets":  {"slack/*": {"rate": 1, "per": "1s"}, "telegram/*": {"rate": 1, "per": "1s"}},
//	           "maxHoldMs": 500, "queueMarginMs": 1500, "leadMs": 250, "off": false}
//
// accounts keys are "<provider>/<account>" or "<provider>/*" (every account
// of the provider without its own entry). targets (same keys) gives each
// target (channel, chat) of the account a pace of its own, where the
// provider limits per target; it applies besides the account's pace. Operators override an account's
// pace through the admin API. The gate (pauses after a 429 and the circuit
// breaker, both timed by the attempt policy, EnvAttemptPolicy) applies to
// every account unless "off" is true. leadMs (default 250) is how long before its
// slot a paced attempt starts, so its claim and checks do not delay the send.
type PacingSettings struct {
	Accounts      map[string]gate.Pace `json:"accounts"`
	Targets       map[string]gate.Pace `json:"targets"`
	MaxHoldMs     int                  `json:"maxHoldMs"`
	QueueMarginMs int                  `json:"queueMarginMs"`
	LeadMs        *int                 `json:"leadMs"`
	Off           bool                 `json:"off"`
}

// validate checks the "pacing" member as ParseProviderSettings reads it.
func (ps *PacingSettings) validate() error {
	for name, m := range map[string]map[string]gate.Pace{"accounts": ps.Accounts, "targets": ps.Targets} {
		for k, p := range m {
			if prov, acct, ok := strings.Cut(k, "/"); !ok || prov == "" || acct == "" {
				return fmt.Errorf("OUTBOX_PROVIDER_CONFIG: pacing.%s key %q is not <provider>/<account> or <provider>/*", name, k)
			}
			if err := p.Validate(); err != nil {
				return fmt.Errorf("OUTBOX_PROVIDER_CONFIG: pacing.%s[%q]: %w", name, k, err)
			}
		}
	}
	return nil
}

// declared looks up an account's declared pace.
func (ps *PacingSettings) declared(provider, account string) (gate.Pace, bool) {
	return lookupPace(ps.Accounts, provider, account)
}

// declaredTarget looks up the pace of each target of an account.
func (ps *PacingSettings) declaredTarget(provider, account string) (gate.Pace, bool) {
	return lookupPace(ps.Targets, provider, account)
}

func lookupPace(m map[string]gate.Pace, provider, account string) (gate.Pace, bool) {
	if p, ok := m[provider+"/"+account]; ok {
		return p, true
	}
	p, ok := m[provider+"/*"]
	return p, ok
}

// wirePacing installs the account gate on the dispatcher (retrier and
// sweeper share it) and the operators' pace routes.
func wirePacing(a *App, ps *PacingSettings) {
	if ps.Off {
		return
	}
	gates := dynamo.NewGates(a.Clients.DynamoDB, a.Config.Table)
	g := &gate.Gate{
		Store:             gates,
		Declared:          ps.declared,
		DeclaredTarget:    ps.declaredTarget,
		Breaker:           a.Dispatcher.Policy.Breaker,
		DefaultRetryAfter: a.Dispatcher.Policy.DefaultRetryAfter,
		MaxHold:           time.Duration(ps.MaxHoldMs) * time.Millisecond,
		QueueMargin:       time.Duration(ps.QueueMarginMs) * time.Millisecond,
		Lead:              250 * time.Millisecond,
		Clock:             a.Config.Clock,
		Metrics:           a.Dispatcher.Metrics,
		Log:               a.Dispatcher.Log,
	}
	if ps.LeadMs != nil {
		g.Lead = time.Duration(*ps.LeadMs) * time.Millisecond
	}
	a.Gate = g
	a.Dispatcher.Gate = g
	for k := range ps.Accounts {
		if prov, acct, _ := strings.Cut(k, "/"); acct != "*" {
			a.pacedAccounts = append(a.pacedAccounts, gate.GateKey(prov, acct))
		}
	}
	a.pacing = &pacing.Pacing{Gate: g, Providers: a.Providers, Clock: a.Config.Clock}
	for k, f := range (&admin.Pace{Pacing: a.pacing, Log: a.Log}).Routes() {
		a.AdminExtra[k] = f
	}
}
