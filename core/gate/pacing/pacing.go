// Package pacing is the operators' side of the account gate: read an
// account's gate, set or clear its pace (the admin API's pace routes).
package pacing

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/gate"
)

// PaceChange is an operator's change of an account's pace: Pace replaces
// the declared one; nil returns to the declared pace.
type PaceChange struct {
	Pace   *gate.Pace
	Reason string
}

// AccountPacing is what operators see of an account's gate.
type AccountPacing struct {
	Declared  *gate.Pace         `json:"declared,omitempty"`
	Override  *gate.PaceOverride `json:"override,omitempty"`
	Effective *gate.Pace         `json:"effective,omitempty"`
	// TargetPace is the pace of each target (channel, chat) of the account
	// where the provider limits per target; declared in the configuration.
	TargetPace *gate.Pace   `json:"targetPace,omitempty"`
	Paused     *time.Time   `json:"pausedUntil,omitempty"`
	Breaker    gate.Breaker `json:"breaker"`
	Events     []gate.Event `json:"events"`
}

// Pacing serves operators: read an account's gate, set or clear its pace.
type Pacing struct {
	Gate      *gate.Gate
	Providers core.Providers
	Clock     core.Clock
}

func operatorOnly(p core.Principal, what string) error {
	if p.Kind != core.PrincipalOperator {
		return fmt.Errorf("%w: only operators %s", core.ErrForbidden, what)
	}
	return nil
}

func invalid(field, msg string) error {
	return &core.ValidationError{Code: core.CodeInvalidField, Field: field, Message: msg}
}

// Get returns an account's pace, pause, breaker and recent breaker events.
func (p *Pacing) Get(ctx context.Context, pr core.Principal, provider, account string) (*AccountPacing, error) {
	if err := operatorOnly(pr, "read pacing"); err != nil {
		return nil, err
	}
	key := gate.GateKey(provider, account)
	st, err := p.Gate.Store.State(ctx, key)
	if err != nil {
		return nil, err
	}
	evs, err := p.Gate.Store.Events(ctx, key, 20)
	if err != nil {
		return nil, err
	}
	out := &AccountPacing{Override: st.Override, Paused: st.PausedUntil, Breaker: st.Breaker, Events: evs}
	if out.Events == nil {
		out.Events = []gate.Event{}
	}
	if p.Gate.Declared != nil {
		if d, ok := p.Gate.Declared(provider, account); ok {
			out.Declared = &d
		}
	}
	if e, ok := p.Gate.PaceFor(provider, account, &st); ok {
		out.Effective = &e
	}
	if tp, ok := p.Gate.TargetPace(provider, account); ok {
		out.TargetPace = &tp
	}
	return out, nil
}

// Set stores or clears the operator's pace for an account, with a reason.
func (p *Pacing) Set(ctx context.Context, pr core.Principal, provider, account string, req PaceChange) (*AccountPacing, error) {
	if err := operatorOnly(pr, "change pacing"); err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Reason) == "" {
		return nil, invalid("reason", "a reason is required")
	}
	if strings.TrimSpace(account) == "" || len(account) > 512 {
		return nil, invalid("account", "account must have 1 to 512 bytes")
	}
	if p.Providers != nil {
		if _, ok := p.Providers.Provider(provider); !ok {
			return nil, &core.ValidationError{Code: core.CodeUnknownProvider, Field: "provider", Message: fmt.Sprintf("no provider named %q", provider)}
		}
	}
	var o *gate.PaceOverride
	if req.Pace != nil {
		pc := *req.Pace
		pc.Burst = max(pc.Burst, 1)
		if err := pc.Validate(); err != nil {
			var ip *gate.InvalidPace
			if errors.As(err, &ip) {
				return nil, invalid(ip.Field, ip.Message)
			}
			return nil, err
		}
		o = &gate.PaceOverride{Pace: pc, Reason: req.Reason, By: pr.Name, At: p.Clock.Now()}
	}
	if err := p.Gate.Store.SetOverride(ctx, gate.GateKey(provider, account), o); err != nil {
		return nil, err
	}
	return p.Get(ctx, pr, provider, account)
}
