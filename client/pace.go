package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Pace is a send rate: at most Rate sends per Per (a Go duration such as
// "1s" or "1m"); Burst sends may go back to back after an idle spell.
type Pace struct {
	Rate  int    `json:"rate"`
	Per   string `json:"per"`
	Burst int    `json:"burst,omitempty"`
}

// PaceOverride is an operator's pace for an account.
type PaceOverride struct {
	Pace   Pace      `json:"pace"`
	Reason string    `json:"reason"`
	By     string    `json:"by"`
	At     time.Time `json:"at"`
}

// Breaker is an account's circuit breaker.
type Breaker struct {
	Open       bool       `json:"open"`
	Failures   int        `json:"failures"`
	Opens      int        `json:"opens"`
	OpenUntil  *time.Time `json:"openUntil,omitempty"`
	ProbeUntil *time.Time `json:"probeUntil,omitempty"`
	OpenedAt   *time.Time `json:"openedAt,omitempty"`
	ClosedAt   *time.Time `json:"closedAt,omitempty"`
}

// OperatorEvent is a breaker opening or closing.
type OperatorEvent struct {
	Kind     string    `json:"kind"`
	Provider string    `json:"provider"`
	Account  string    `json:"account"`
	At       time.Time `json:"at"`
	Detail   string    `json:"detail"`
}

// AccountPacing is an account's pace, pause, breaker and recent operator events.
type AccountPacing struct {
	Declared    *Pace           `json:"declared,omitempty"`
	Override    *PaceOverride   `json:"override,omitempty"`
	Effective   *Pace           `json:"effective,omitempty"`
	TargetPace  *Pace           `json:"targetPace,omitempty"` // each target's (channel, chat) own pace
	PausedUntil *time.Time      `json:"pausedUntil,omitempty"`
	Breaker     Breaker         `json:"breaker"`
	Events      []OperatorEvent `json:"events"`
}

func pacePath(provider, account string) string {
	return "/v1/admin/capabilities/" + url.PathEscape(provider) + "/" + url.PathEscape(account) + "/pace"
}

// Pace reads an account's pacing.
func (a *Admin) Pace(ctx context.Context, provider, account string) (*AccountPacing, error) {
	return fetch[AccountPacing](ctx, a.c, call{method: http.MethodGet, path: pacePath(provider, account), idempotent: true})
}

// SetPace overrides an account's pace (nil: back to the declared pace), with
// a reason. Setting the same pace again is harmless, so it is retried.
func (a *Admin) SetPace(ctx context.Context, provider, account string, p *Pace, reason string) (*AccountPacing, error) {
	return send[AccountPacing](ctx, a.c, call{method: http.MethodPut, path: pacePath(provider, account), idempotent: true}, struct {
		Pace   *Pace  `json:"pace"`
		Reason string `json:"reason"`
	}{p, reason})
}
