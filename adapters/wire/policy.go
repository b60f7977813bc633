package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/botharness/outbox/core"
)

// EnvAttemptPolicy is the attempt policy's variable (core.AttemptPolicy): a
// JSON document whose members, each optional, replace the defaults'. Durations
// are Go durations. Every member, with its default:
//
//	{"backoff":   {"base": "2s", "cap": "15m", "maxAttempts": 8, "maxAge": "24h"},
//	 "reconcile": {"delay": "5s", "window": "15m", "settle": "2m"},
//	 "lease": "60s", "sweepGrace": "30s", "defaultRetryAfter": "1s", "barrierRecheck": "15s",
//	 "breaker":   {"failures": 5, "cooldown": "30s", "maxCooldown": "10m", "probeLease": "30s"}}
//
// Every function that attempts, reconciles or sweeps reads it (the stack's
// OutboxStackProps.AttemptPolicy; the local host's environment); New
// checks the result once (resolvePolicy: core.AttemptPolicy.Resolve and the
// providers' timeouts).
const EnvAttemptPolicy = "OUTBOX_ATTEMPT_POLICY"

// policyDuration is a Go duration written as a JSON string ("90s").
type policyDuration struct{ d *time.Duration }

func (p policyDuration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil // as encoding/json treats null: the default stays
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"90s\", got %s", b)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*p.d = d
	return nil
}

// ParseAttemptPolicy reads an OUTBOX_ATTEMPT_POLICY document over
// core.DefaultAttemptPolicy ("" is the default). Unknown members and
// malformed values are errors; the bounds are Resolve's to check.
func ParseAttemptPolicy(doc string) (core.AttemptPolicy, error) {
	p := core.DefaultAttemptPolicy
	if doc == "" {
		return p, nil
	}
	dur := func(d *time.Duration) policyDuration { return policyDuration{d} }
	type (
		backoff struct {
			Base        policyDuration `json:"base"`
			Cap         policyDuration `json:"cap"`
			MaxAttempts *int           `json:"maxAttempts"`
			MaxAge      policyDuration `json:"maxAge"`
		}
		reconcile struct {
			Delay  policyDuration `json:"delay"`
			Window policyDuration `json:"window"`
			Settle policyDuration `json:"settle"`
		}
		breaker struct {
			Failures    *int           `json:"failures"`
			Cooldown    policyDuration `json:"cooldown"`
			MaxCooldown policyDuration `json:"maxCooldown"`
			ProbeLease  policyDuration `json:"probeLease"`
		}
	)
	v := struct {
		Backoff           backoff        `json:"backoff"`
		Reconcile         reconcile      `json:"reconcile"`
		Lease             policyDuration `json:"lease"`
		SweepGrace        policyDuration `json:"sweepGrace"`
		DefaultRetryAfter policyDuration `json:"defaultRetryAfter"`
		Breaker           breaker        `json:"breaker"`
		BarrierRecheck    policyDuration `json:"barrierRecheck"`
	}{
		Backoff:           backoff{Base: dur(&p.Backoff.Base), Cap: dur(&p.Backoff.Cap), MaxAttempts: &p.Backoff.MaxAttempts, MaxAge: dur(&p.Backoff.MaxAge)},
		Reconcile:         reconcile{Delay: dur(&p.Reconcile.Delay), Window: dur(&p.Reconcile.Window), Settle: dur(&p.Reconcile.Settle)},
		Lease:             dur(&p.Lease),
		SweepGrace:        dur(&p.SweepGrace),
		DefaultRetryAfter: dur(&p.DefaultRetryAfter),
		Breaker:           breaker{Failures: &p.Breaker.Failures, Cooldown: dur(&p.Breaker.Cooldown), MaxCooldown: dur(&p.Breaker.MaxCooldown), ProbeLease: dur(&p.Breaker.ProbeLease)},
		BarrierRecheck:    dur(&p.BarrierRecheck),
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(doc)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return p, fmt.Errorf("%s: %w", EnvAttemptPolicy, err)
	}
	if dec.More() {
		return p, fmt.Errorf("%s: one JSON object expected", EnvAttemptPolicy)
	}
	return p, nil
}

// resolvePolicy is the attempt policy's one check (core.AttemptPolicy.Resolve)
// and the one bound only the providers' configuration can tell: the lease
// outlives every configured provider's request timeout, or a live attempt
// would be taken for a crashed one (lease-expired, an unknown outcome).
func resolvePolicy(p core.AttemptPolicy, ps *ProviderSettings) (core.AttemptPolicy, error) {
	p, err := p.Resolve()
	if err != nil {
		return p, err
	}
	for _, c := range ps.Configured {
		if t := c.Config.Timeout(); p.Lease <= t {
			return p, fmt.Errorf("attempt policy: lease %v must outlive provider %s's request timeout %v (its timeoutMs), or a live attempt is taken for a crashed one", p.Lease, c.Name, t)
		}
	}
	return p, nil
}

// CheckAttemptPolicy checks an OUTBOX_ATTEMPT_POLICY document against an
// OUTBOX_PROVIDER_CONFIG document as the functions will when they start
// (the CDK stack, at synth).
func CheckAttemptPolicy(policyDoc, providerConfig string) error {
	p, err := ParseAttemptPolicy(policyDoc)
	if err != nil {
		return err
	}
	ps, err := ParseProviderSettings(providerConfig)
	if err != nil {
		return err
	}
	_, err = resolvePolicy(p, ps)
	return err
}
