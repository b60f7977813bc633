package client

import (
	"context"
	"net/http"
	"time"
)

// Overview is the operators' overview (GET /v1/admin/overview): the
// needs-human backlog by provider account, episodes per hour over the last
// week (from the operator-event ledger) and every known account's pause and
// breaker state.
type Overview struct {
	GeneratedAt       time.Time         `json:"generatedAt"`
	NeedsHuman        NeedsHumanSummary `json:"needsHuman"`
	Episodes          EpisodeSummary    `json:"episodes"`
	Accounts          []AccountState    `json:"accounts"`
	AccountsTruncated bool              `json:"accountsTruncated"`
	Pacing            bool              `json:"pacing"`
}

// NeedsHumanSummary counts the intents waiting for a person.
type NeedsHumanSummary struct {
	Total        int               `json:"total"`
	Truncated    bool              `json:"truncated"`
	OldestSince  *time.Time        `json:"oldestSince,omitempty"`
	OldestIntent string            `json:"oldestIntent,omitempty"`
	ByAccount    []NeedsHumanGroup `json:"byAccount"`
}

// NeedsHumanGroup is one provider account's needs-human backlog.
type NeedsHumanGroup struct {
	Provider     string    `json:"provider"`
	Account      string    `json:"account"`
	Count        int       `json:"count"`
	OldestSince  time.Time `json:"oldestSince"`
	OldestIntent string    `json:"oldestIntent"`
}

// EpisodeCounts counts operator-event episodes by type.
type EpisodeCounts struct {
	NeedsHuman    int `json:"needsHuman"`
	Failed        int `json:"failed"`
	Expired       int `json:"expired"`
	BreakerOpened int `json:"breakerOpened"`
}

// EpisodeHour is one hour of the episode chart.
type EpisodeHour struct {
	Start         time.Time `json:"start"`
	NeedsHuman    int       `json:"needsHuman"`
	Failed        int       `json:"failed"`
	Expired       int       `json:"expired"`
	BreakerOpened int       `json:"breakerOpened"`
}

// EpisodeSummary is the episode chart, one entry per hour, oldest first.
type EpisodeSummary struct {
	Recorded  bool          `json:"recorded"`
	Since     time.Time     `json:"since"`
	Hours     []EpisodeHour `json:"hours"`
	Totals    EpisodeCounts `json:"totals"`
	Truncated bool          `json:"truncated"`
	Recent    []EpisodeRef  `json:"recent"`
}

// EpisodeRef is one recent episode (IntentID empty for an account's event).
type EpisodeRef struct {
	At       time.Time `json:"at"`
	Type     string    `json:"type"`
	IntentID string    `json:"intentId,omitempty"`
}

// AccountState is one provider account's gate.
type AccountState struct {
	Provider     string     `json:"provider"`
	Account      string     `json:"account"`
	Pace         *Pace      `json:"pace,omitempty"`
	Paused       bool       `json:"paused"`
	PausedUntil  *time.Time `json:"pausedUntil,omitempty"`
	BreakerState string     `json:"breakerState"`
	Breaker      Breaker    `json:"breaker"`
	LastChange   *GateMove  `json:"lastChange,omitempty"`
	NeedsHuman   int        `json:"needsHuman"`
	OldestSince  *time.Time `json:"oldestSince,omitempty"`
}

// GateMove is the last recorded change of an account's gate.
type GateMove struct {
	Kind   string    `json:"kind"`
	At     time.Time `json:"at"`
	Detail string    `json:"detail,omitempty"`
}

// Overview reads the operators' overview.
func (a *Admin) Overview(ctx context.Context) (*Overview, error) {
	return fetch[Overview](ctx, a.c, call{method: http.MethodGet, path: "/v1/admin/overview", idempotent: true})
}
