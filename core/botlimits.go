package core

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Per-bot limits (issue 24 finding 6): a rate of new intents and a cap on
// open (non-terminal) intents, per bot. Refusals are 429 with Retry-After;
// a replay of a stored key is never refused by either (ReplayFirst).

// Limit codes (api/openapi.json ErrorCode).
const (
	CodeRateLimited        = "rate_limited"
	CodeTooManyOpenIntents = "too_many_open_intents"
)

// ErrLimited is what every LimitError matches with errors.Is.
var ErrLimited = errors.New("bot limit reached")

// LimitError is a refusal by a bot limit: Code says which, RetryAfter when
// trying again can succeed.
type LimitError struct {
	Code       string
	RetryAfter time.Duration
	Message    string
}

func (e *LimitError) Error() string { return e.Code + ": " + e.Message }

// Is makes every LimitError match ErrLimited.
func (e *LimitError) Is(target error) bool { return target == ErrLimited }

// IsLimitRefusal reports whether err is a limit's refusal (as opposed to a
// failure to find out).
func IsLimitRefusal(err error) bool { return errors.Is(err, ErrLimited) }

// BotLimiter admits new intents under their bot's limits.
type BotLimiter interface {
	// Admit counts in against its bot's limits at now, or refuses it with a
	// *LimitError. Any other error means the limits could not be read.
	// release, when not nil, gives the count back; intake calls it when the
	// intent was not created after all (a replay, a reuse, a failed put).
	Admit(ctx context.Context, in *Intent, now time.Time) (release func(context.Context), err error)
}

var _ = fmt.Sprintf
