package registry

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/botharness/outbox/core"
)

// CapabilityChange withdraws or restores a provider account's capability.
// Withdrawn true with no actions withdraws the whole account; with actions,
// only those. Withdrawn false with no actions restores the whole account and
// every action; with actions, only those actions.
type CapabilityChange struct {
	Withdrawn *bool
	Actions   []string
	Reason    string
}

// GetCapability returns the capability state of an account (an empty state,
// version 0, when nothing was ever withdrawn).
func (a *Authority) GetCapability(ctx context.Context, p core.Principal, provider, account string) (*core.Capability, error) {
	if err := operatorOnly(p, "read capabilities"); err != nil {
		return nil, err
	}
	c, err := a.Capabilities.GetCapability(ctx, provider, account)
	if errors.Is(err, core.ErrNotFound) {
		return &core.Capability{Provider: provider, Account: account}, nil
	}
	return c, err
}

// SetCapability withdraws or restores an account's capability or some of its
// actions. Attempts blocked while it was withdrawn stay blocked (grant-revoked
// is terminal); restoring only lets new attempts through.
func (a *Authority) SetCapability(ctx context.Context, p core.Principal, provider, account string, req CapabilityChange) (*core.Capability, error) {
	if err := operatorOnly(p, "withdraw or restore capabilities"); err != nil {
		return nil, err
	}
	if req.Withdrawn == nil {
		return nil, invalid("withdrawn", "withdrawn (true or false) is required")
	}
	if strings.TrimSpace(req.Reason) == "" {
		return nil, invalid("reason", "a reason is required")
	}
	if err := core.CheckFieldLength("reason", req.Reason); err != nil {
		return nil, err
	}
	if strings.TrimSpace(account) == "" {
		return nil, invalid("account", "account must not be blank")
	}
	if err := core.CheckID("account", account); err != nil {
		return nil, err
	}
	if a.Providers != nil {
		prov, ok := a.Providers.Provider(provider)
		if !ok {
			return nil, &core.ValidationError{Code: core.CodeUnknownProvider, Field: "provider", Message: fmt.Sprintf("no provider named %q", provider)}
		}
		for _, act := range req.Actions {
			if !prov.SupportsAction(act) {
				return nil, &core.ValidationError{Code: core.CodeUnknownAction, Field: "actions", Message: fmt.Sprintf("provider %q has no action %q", provider, act)}
			}
		}
	}
	cur, err := a.Capabilities.GetCapability(ctx, provider, account)
	if errors.Is(err, core.ErrNotFound) {
		cur, err = &core.Capability{Provider: provider, Account: account}, nil
	}
	if err != nil {
		return nil, err
	}
	now := a.Clock.Now()
	next := *cur
	next.Actions = map[string]core.Withdrawal{}
	for k, v := range cur.Actions {
		next.Actions[k] = v
	}
	w := core.Withdrawal{Reason: req.Reason, At: now, By: p.Name}
	switch {
	case *req.Withdrawn && len(req.Actions) == 0:
		next.AccountWithdrawal = &w
	case *req.Withdrawn:
		for _, act := range req.Actions {
			next.Actions[act] = w
		}
	case len(req.Actions) == 0:
		next.AccountWithdrawal = nil
		next.Actions = nil
	default:
		for _, act := range req.Actions {
			delete(next.Actions, act)
		}
	}
	if len(next.Actions) == 0 {
		next.Actions = nil
	}
	next.Version = cur.Version + 1
	next.UpdatedAt, next.UpdatedBy = now, p.Name
	if err := a.Capabilities.PutCapability(ctx, &next, cur.Version); err != nil {
		return nil, err
	}
	return &next, nil
}
