// Service Grants: what a bot may do with a provider account, and the operator
// operations that issue and revoke them. Revalidation (revalidate.go) reads them.
package core

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrGrantRevoked: an operation on a grant that has been revoked. Revocation
// is final for a grant id; issue a new grant under a new id instead.
var ErrGrantRevoked = errors.New("grant is revoked")

// Grant is a Service Grant: what a bot may do with a provider account.
type Grant struct {
	ID       string   `json:"id"`
	Version  int64    `json:"version"`
	Bot      string   `json:"bot"`
	Provider string   `json:"provider"`
	Account  string   `json:"account"`
	Actions  []string `json:"actions"`
	Targets  []string `json:"targets"`
	// ExpiresAt is stored as grantExpiresAt: the table's TTL attribute is
	// "expiresAt" and an expired grant must stay readable (it explains why
	// intents were blocked).
	ExpiresAt    *time.Time `json:"expiresAt,omitempty"`
	RevokedAt    *time.Time `json:"revokedAt,omitempty"`
	RevokedBy    string     `json:"revokedBy,omitempty"`
	RevokeReason string     `json:"revokeReason,omitempty"`
	CreatedAt    time.Time  `json:"createdAt"`
	UpdatedAt    time.Time  `json:"updatedAt"`
	UpdatedBy    string     `json:"updatedBy,omitempty"`
}

// MatchScope reports whether value is allowed by pattern: "*" allows every
// value, "prefix*" every value that starts with prefix, anything else only
// itself.
func MatchScope(pattern, value string) bool {
	if strings.HasSuffix(pattern, "*") {
		return strings.HasPrefix(value, pattern[:len(pattern)-1])
	}
	return pattern == value
}

func matchAny(patterns []string, value string) bool {
	for _, p := range patterns {
		if MatchScope(p, value) {
			return true
		}
	}
	return false
}

// Problem says why the grant does not authorise the intent at now, or ""
// when it does. Version ordering is the caller's concern (intake and attempt
// treat it differently).
func (g *Grant) Problem(in *Intent, now time.Time) string {
	switch {
	case !MatchScope(g.Bot, in.Bot):
		return fmt.Sprintf("grant %q does not exist or is not issued to bot %q", g.ID, in.Bot)
	case g.RevokedAt != nil:
		r := fmt.Sprintf("grant %q was revoked at %s", g.ID, g.RevokedAt.UTC().Format(time.RFC3339))
		if g.RevokedBy != "" {
			r += " by " + g.RevokedBy
		}
		if g.RevokeReason != "" {
			r += ": " + g.RevokeReason
		}
		return r
	case g.ExpiresAt != nil && !now.Before(*g.ExpiresAt):
		return fmt.Sprintf("grant %q expired at %s", g.ID, g.ExpiresAt.UTC().Format(time.RFC3339))
	case g.Provider != in.Provider:
		return fmt.Sprintf("grant %q (version %d) is for provider %q, not %q", g.ID, g.Version, g.Provider, in.Provider)
	case !MatchScope(g.Account, in.Account):
		return fmt.Sprintf("grant %q (version %d) does not cover account %q", g.ID, g.Version, in.Account)
	case !matchAny(g.Actions, in.Action):
		return fmt.Sprintf("grant %q (version %d) does not cover action %q", g.ID, g.Version, in.Action)
	case !matchAny(g.Targets, in.Target):
		return fmt.Sprintf("grant %q (version %d) does not cover target %q", g.ID, g.Version, in.Target)
	}
	return ""
}
