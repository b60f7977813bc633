package overview

import (
	"time"

	"github.com/botharness/outbox/core"
)

// IntentFilter narrows the operators' queue (and bulk decisions): each set
// field must match exactly; MinWaiting keeps intents that have waited at
// least that long.
type IntentFilter struct {
	Provider   string
	Account    string
	Bot        string
	MinWaiting time.Duration
}

// WaitingSince is when an intent started waiting in its current status: for
// needs-human the start of the episode, otherwise its last change.
func WaitingSince(in *core.Intent) time.Time {
	if in.Status == core.StatusNeedsHuman {
		return core.NeedsHumanSince(in)
	}
	return in.UpdatedAt
}

// Matches decides whether in passes the filter at now.
func (f IntentFilter) Matches(in *core.Intent, now time.Time) bool {
	switch {
	case f.Provider != "" && in.Provider != f.Provider,
		f.Account != "" && in.Account != f.Account,
		f.Bot != "" && in.Bot != f.Bot:
		return false
	case f.MinWaiting > 0 && now.Sub(WaitingSince(in)) < f.MinWaiting:
		return false
	}
	return true
}
