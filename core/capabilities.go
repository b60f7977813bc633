// Provider Capabilities: operator withdrawals of an account or action, which
// revalidation (revalidate.go) turns into grant-revoked.
package core

import (
	"fmt"
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
