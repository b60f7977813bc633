package admin

import (
	"time"

	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/registry"
)

// Request bodies of the admin API. They are the HTTP shapes; core receives
// the commands they map to.

// GrantBody is the body of PUT /v1/admin/grants/{grantId}.
type GrantBody struct {
	Bot       string     `json:"bot"`
	Provider  string     `json:"provider"`
	Account   string     `json:"account"`
	Actions   []string   `json:"actions"`
	Targets   []string   `json:"targets"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	// ExpectedVersion, when given, must equal the stored version (0: the
	// grant must not exist yet).
	ExpectedVersion *int64 `json:"expectedVersion,omitempty"`
}

func (b GrantBody) spec() registry.GrantSpec {
	return registry.GrantSpec{Bot: b.Bot, Provider: b.Provider, Account: b.Account, Actions: b.Actions, Targets: b.Targets,
		ExpiresAt: b.ExpiresAt, ExpectedVersion: b.ExpectedVersion}
}

// RevokeBody is the body of POST /v1/admin/grants/{grantId}/revoke.
type RevokeBody struct {
	Reason          string `json:"reason"`
	ExpectedVersion *int64 `json:"expectedVersion,omitempty"`
}

// CapabilityBody is the body of PUT /v1/admin/capabilities/{provider}/{account}.
type CapabilityBody struct {
	Withdrawn *bool    `json:"withdrawn"`
	Actions   []string `json:"actions,omitempty"`
	Reason    string   `json:"reason"`
}

// ResolutionBody is the body of POST /v1/admin/intents/{id}/resolution.
type ResolutionBody struct {
	Decision   core.Decision `json:"decision"`
	Reason     string        `json:"reason"`
	ExternalID string        `json:"externalId,omitempty"`
	// AcceptDuplicateRisk: the operator's explicit answer for a retry the
	// provider cannot deduplicate; false refuses it (409
	// duplicate_risk_not_accepted), omitted records the risk as accepted.
	AcceptDuplicateRisk *bool `json:"acceptDuplicateRisk,omitempty"`
}

// RecommendationBody is the body of POST /v1/admin/intents/{id}/recommendation.
type RecommendationBody struct {
	Decision core.Decision `json:"decision"`
	Summary  string        `json:"summary"`
}
