package core

import (
	"context"
	"errors"
	"time"
)

// ErrLimited is what every bot-limit refusal (botlimit.LimitError) matches
// with errors.Is.
var ErrLimited = errors.New("bot limit reached")

// IsLimitRefusal reports whether err is a limit's refusal (as opposed to a
// failure to find out).
func IsLimitRefusal(err error) bool { return errors.Is(err, ErrLimited) }

// BotLimiter admits new intents under their bot's limits.
type BotLimiter interface {
	// Admit counts in against its bot's limits at now, or refuses it with a
	// *botlimit.LimitError. Any other error means the limits could not be read.
	// release, when not nil, gives the count back; intake calls it when the
	// intent was not created after all (a replay, a reuse, a failed put).
	// Admit sets in.OpenSlot when it counted the intent as open.
	Admit(ctx context.Context, in *Intent, now time.Time) (release func(context.Context), err error)
}

// OpenRecounter is the sweeper's port to the recount: it checks the
// deployment's counter shards and corrects those that count more open
// intents than their bot holds. corrected is how many shards it lowered.
type OpenRecounter interface {
	RecountOpen(ctx context.Context, now time.Time) (corrected int, err error)
}
