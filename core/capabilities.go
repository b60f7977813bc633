// Provider Capabilities: operator withdrawals of an account or action, which
// revalidation (revalidate.go) turns into grant-revoked.
package core

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Withdrawal is an operator's withdrawal of a capability.
type Withdrawal struct {
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
	By     string    `json:"by"`
}

// Capability is the operator-controlled state of a provider account: the
// whole account, or single actions on it, may be withdrawn (maintenance,
// compliance). No record means nothing is withdrawn.
type Capability struct {
	Provider string `json:"provider"`
	Account  string `json:"account"`
	// AccountWithdrawal is the whole-account withdrawal, if any.
	AccountWithdrawal *Withdrawal `json:"accountWithdrawal,omitempty"`
	// Actions withdrawn individually, by action.
	Actions   map[string]Withdrawal `json:"withdrawnActions,omitempty"`
	Version   int64                 `json:"version"`
	UpdatedAt time.Time             `json:"updatedAt"`
	UpdatedBy string                `json:"updatedBy,omitempty"`
}

// Blocks says why the capability forbids action, or "".
func (c *Capability) Blocks(action string) string {
	if c == nil {
		return ""
	}
	if w := c.AccountWithdrawal; w != nil {
		return fmt.Sprintf("provider capability withdrawn for %s account %q at %s by %s: %s", c.Provider, c.Account, w.At.UTC().Format(time.RFC3339), w.By, w.Reason)
	}
	if w, ok := c.Actions[action]; ok {
		return fmt.Sprintf("provider capability withdrawn for action %q on %s account %q at %s by %s: %s", action, c.Provider, c.Account, w.At.UTC().Format(time.RFC3339), w.By, w.Reason)
	}
	return ""
}

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
func (a *Authority) GetCapability(ctx context.Context, p Principal, provider, account string) (*Capability, error) {
	if err := operatorOnly(p, "read capabilities"); err != nil {
		return nil, err
	}
	c, err := a.Capabilities.GetCapability(ctx, provider, account)
	if errors.Is(err, ErrNotFound) {
		return &Capability{Provider: provider, Account: account}, nil
	}
	return c, err
}

// SetCapability withdraws or restores an account's capability or some of its
// actions. Attempts blocked while it was withdrawn stay blocked (grant-revoked
// is terminal); restoring only lets new attempts through.
func (a *Authority) SetCapability(ctx context.Context, p Principal, provider, account string, req CapabilityChange) (*Capability, error) {
	if err := operatorOnly(p, "withdraw or restore capabilities"); err != nil {
		return nil, err
	}
	if req.Withdrawn == nil {
		return nil, invalid("withdrawn", "withdrawn (true or false) is required")
	}
	if strings.TrimSpace(req.Reason) == "" {
		return nil, invalid("reason", "a reason is required")
	}
	if err := CheckFieldLength("reason", req.Reason); err != nil {
		return nil, err
	}
	if strings.TrimSpace(account) == "" {
		return nil, invalid("account", "account must not be blank")
	}
	if err := CheckID("account", account); err != nil {
		return nil, err
	}
	if a.Providers != nil {
		prov, ok := a.Providers.Provider(provider)
		if !ok {
			return nil, &ValidationError{Code: CodeUnknownProvider, Field: "provider", Message: fmt.Sprintf("no provider named %q", provider)}
		}
		for _, act := range req.Actions {
			if !prov.SupportsAction(act) {
				return nil, &ValidationError{Code: CodeUnknownAction, Field: "actions", Message: fmt.Sprintf("provider %q has no action %q", provider, act)}
			}
		}
	}
	cur, err := a.Capabilities.GetCapability(ctx, provider, account)
	if errors.Is(err, ErrNotFound) {
		cur, err = &Capability{Provider: provider, Account: account}, nil
	}
	if err != nil {
		return nil, err
	}
	now := a.Clock.Now()
	next := *cur
	next.Actions = map[string]Withdrawal{}
	for k, v := range cur.Actions {
		next.Actions[k] = v
	}
	w := Withdrawal{Reason: req.Reason, At: now, By: p.Name}
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
