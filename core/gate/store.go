package gate

import (
	"context"
	"errors"
	"time"
)

// GateState is the shared state of one account's gate.
type GateState struct {
	Override    *PaceOverride `json:"override,omitempty"`
	PausedUntil *time.Time    `json:"pausedUntil,omitempty"`
	Breaker     Breaker       `json:"breaker"`
}

// GateStore is the shared state of account gates, one key per account.
// Every method is one conditional or atomic write (or one read); the
// DynamoDB adapter is adapters/dynamo/pace.go, MemoryGates the in-process one.
type GateStore interface {
	// Take hands out the next pace slot of key (GCRA's one conditional
	// write, SlotTake) and returns it with the key's state after the write
	// (pause, breaker, operator's pace). A repeat of a claim within its
	// window takes nothing and reports dup.
	Take(ctx context.Context, key string, r SlotTake) (slot time.Time, st GateState, dup bool, err error)
	// State reads the key's state, strongly consistent (the zero state for a new key).
	State(ctx context.Context, key string) (GateState, error)
	// StateFor is State as an attempt of intent id reads it right before
	// its send (an unpaced account's only per-attempt access, so its
	// busiest): the store may serve it from a replica chosen by id. It must
	// be exactly as safe as State at the instant of the read: it may return
	// the zero state only when the gate itself is clean then (CleanGate:
	// closed, no probe, no pause, no operator pace: it admits what the zero
	// state admits); otherwise it returns the gate's own state. The failure
	// count of a streak may read as zero: successes learn of a streak from
	// the worker that counted its failure (Gate), not from this read.
	StateFor(ctx context.Context, key, id string, now time.Time) (GateState, error)
	// Pause holds every send until until (a pause is never shortened) and
	// moves the next free slot to at least until.
	Pause(ctx context.Context, key string, until time.Time) error
	// Failure counts one more consecutive transient failure.
	Failure(ctx context.Context, key string) (GateState, error)
	// Open opens a closed breaker until until, recording ev with it, and
	// reports whether this call opened it. With reopen it instead extends an
	// open breaker whose probe failed (no event).
	Open(ctx context.Context, key string, until time.Time, reopen bool, ev Event) (bool, error)
	// TakeProbe lets one caller probe an open breaker whose cooldown is over
	// and whose last probe (if any) has ended; the probe holds until until.
	TakeProbe(ctx context.Context, key string, now, until time.Time) (bool, error)
	// Close resets the failure count and, if the breaker is open, closes it
	// recording ev; it reports whether this call closed it.
	Close(ctx context.Context, key string, ev Event) (bool, error)
	// SetOverride stores (nil: removes) the operator's pace.
	SetOverride(ctx context.Context, key string, o *PaceOverride) error
	// Events lists the key's breaker events, newest first.
	Events(ctx context.Context, key string, limit int) ([]Event, error)
}

// SlotTake is one request for a pace slot (GateStore.Take). When the key's
// counter stands at or after Floor, the slot is the counter; when it lags
// behind Floor (an idle spell, a new key), the slot is At. Either way the
// counter moves to the slot plus Interval. At + Interval must not be before
// Floor (Valid), so the counter never moves back.
type SlotTake struct {
	Interval  time.Duration
	Floor, At time.Time
	// Claim (ClaimToken), when set, takes at most one slot until Until: a
	// repeat before then, by At, takes nothing (dup).
	Claim string
	Until time.Time
}

// ErrInvalidTake: a SlotTake whose At + Interval is before its Floor (it
// could move the counter back).
var ErrInvalidTake = errors.New("invalid slot take: At + Interval before Floor")

// Valid reports ErrInvalidTake for a take that could move a counter back.
func (r SlotTake) Valid() error {
	if r.At.Add(r.Interval).Before(r.Floor) {
		return ErrInvalidTake
	}
	return nil
}
