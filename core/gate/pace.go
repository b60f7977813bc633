// Package gate is the account gate (issue 15): pace, pauses after a
// provider's 429 and the circuit breaker, per provider account, shared by
// every worker through one store (GateStore).
//
// The dispatcher asks it before an attempt's claim (Gate.Admit): the answer
// is a Permit, or a Deferral with the time the attempt may come back. It
// holds the permit right before the send (Permit.Hold: the wait for its
// slot and a last look at the account) and reports the send's result
// (Permit.Report). The gate knows nothing of intents' storage, queues or
// who triggered an attempt: a deferral becomes a queue message in the
// dispatcher. The pure rules are Admit, CleanGate, ReservationUsable,
// SendTooLate, EndsStreak and the pace and breaker arithmetic.
package gate

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Pace is a declared send rate: at most Rate sends per Per; Burst (>= 1) is
// how many may go back to back after an idle spell. The slots the gate
// hands out keep any window of length Per to Rate + Burst - 1 (GCRA); a
// send leaves on its slot or, late, at most half an interval after it
// (SendTooLate), so the provider sees at most Rate + Burst sends start in
// any window of Per (MostInWindow). Rate + Burst - 1 at the provider needs
// slots wider than Per/Rate by the lateness allowed, and a lateness allowed
// that small starved 1/s accounts on a loaded host (docs/decisions.md,
// pacing). A process that stalls between its last check and the request
// can exceed either bound; no check before a send can close that window.
type Pace struct {
	Rate  int
	Per   time.Duration
	Burst int
}

type paceJSON struct {
	Rate  int    `json:"rate"`
	Per   string `json:"per"`
	Burst int    `json:"burst,omitempty"`
}

// MarshalJSON renders {"rate":20,"per":"1s","burst":1}.
func (p Pace) MarshalJSON() ([]byte, error) {
	return json.Marshal(paceJSON{Rate: p.Rate, Per: p.Per.String(), Burst: p.Burst})
}

// UnmarshalJSON reads {"rate":20,"per":"1s","burst":1} (burst defaults to 1).
func (p *Pace) UnmarshalJSON(b []byte) error {
	var j paceJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	per, err := time.ParseDuration(j.Per)
	if err != nil {
		return fmt.Errorf("pace.per: %q is not a duration like \"1s\" or \"1m\"", j.Per)
	}
	*p = Pace{Rate: j.Rate, Per: per, Burst: max(j.Burst, 1)}
	return nil
}

// InvalidPace says which field of a pace is out of range (Pace.Validate).
type InvalidPace struct {
	Field, Message string
}

func (e *InvalidPace) Error() string { return e.Message }

// Validate checks a pace: rate 1..100000, per 1ms..24h, burst 1..rate.
func (p Pace) Validate() error {
	switch {
	case p.Rate < 1 || p.Rate > 100000:
		return &InvalidPace{"pace.rate", "pace.rate must be 1 to 100000"}
	case p.Per < time.Millisecond || p.Per > 24*time.Hour:
		return &InvalidPace{"pace.per", "pace.per must be between 1ms and 24h"}
	case p.Burst < 1 || p.Burst > p.Rate:
		return &InvalidPace{"pace.burst", "pace.burst must be 1 to rate"}
	case p.Per/time.Duration(p.Rate) < time.Microsecond:
		return &InvalidPace{"pace.rate", "pace.rate is too high for pace.per"}
	}
	return nil
}

// MostInWindow is the most of the given instants (in any order) that fall
// in one window [t, t+per): the sliding-window count the provider's side of
// a pace is checked by. Pure.
func MostInWindow(times []time.Time, per time.Duration) int {
	ts := slices.Clone(times)
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	most := 0
	for i, j := 0, 0; i < len(ts); i++ {
		for j < len(ts) && ts[j].Before(ts[i].Add(per)) {
			j++
		}
		most = max(most, j-i)
	}
	return most
}

// Interval is the spacing of send slots.
func (p Pace) Interval() time.Duration { return p.Per / time.Duration(p.Rate) }

// Tolerance is how early a slot may be used (GCRA's burst tolerance).
func (p Pace) Tolerance() time.Duration { return time.Duration(max(p.Burst, 1)-1) * p.Interval() }

// PaceOverride is an operator's pace for an account, replacing the declared one.
type PaceOverride struct {
	Pace   Pace      `json:"pace"`
	Reason string    `json:"reason"`
	By     string    `json:"by"`
	At     time.Time `json:"at"`
}

// ReserveOnceWindow is how long a claim on a slot (SlotTake.Claim) turns
// its repeats away. Fanned-out duplicates arrive within seconds; a later
// repeat (e.g. a sweeper's kick after a worker crashed between its
// reservation and its deferral message) reserves afresh.
const ReserveOnceWindow = 30 * time.Second

// ClaimToken names one attempt of an intent for SlotTake.Claim.
func ClaimToken(id string, attempt int) string { return fmt.Sprintf("%s#%d", id, attempt) }

// ReservationUsable reports whether an attempt coming back from the queue
// with a reserved slot may still use it: not later than one interval past
// it (a late send would crowd the slots after it). Pure.
func ReservationUsable(resv time.Time, p Pace, now time.Time) bool {
	return !now.After(resv.Add(p.Interval()))
}

// SendTooLate reports whether a held send reaches its slot so late (the
// claim and the checks outlasted the lead) that sending now would crowd the
// slot reserved after it: more than half an interval past it. Then it moves
// on (Permit.Hold). Consecutive sends stay at least half an interval apart. Pure.
func SendTooLate(slot time.Time, p Pace, now time.Time) bool {
	return now.After(slot.Add(p.Interval() / 2))
}
