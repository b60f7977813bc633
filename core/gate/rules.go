package gate

import (
	"strconv"
	"time"
)

// Breaker is the shared circuit-breaker state of an account.
type Breaker struct {
	Open bool `json:"open"`
	// Failures counts consecutive transient failures (reset by a success).
	Failures int `json:"failures"`
	// Opens counts opens since the last close; each one doubles the cooldown.
	Opens      int        `json:"opens"`
	OpenUntil  *time.Time `json:"openUntil,omitempty"`  // cooldown end: then one probe
	ProbeUntil *time.Time `json:"probeUntil,omitempty"` // a half-open probe is out until then
	OpenedAt   *time.Time `json:"openedAt,omitempty"`
	ClosedAt   *time.Time `json:"closedAt,omitempty"`
}

// BreakerPolicy configures the circuit breaker.
type BreakerPolicy struct {
	// Failures: consecutive transient failures that open the breaker (0: no breaker).
	Failures int
	// Cooldown after the first open; it doubles with every failed probe up to MaxCooldown.
	Cooldown    time.Duration
	MaxCooldown time.Duration
	// ProbeLease: how long one half-open probe holds the account.
	ProbeLease time.Duration
}

// DefaultBreaker is the production breaker.
var DefaultBreaker = BreakerPolicy{Failures: 5, Cooldown: 30 * time.Second, MaxCooldown: 10 * time.Minute, ProbeLease: 30 * time.Second}

// CooldownAfter is the cooldown after the opens-th consecutive open (1-based).
func (b BreakerPolicy) CooldownAfter(opens int) time.Duration {
	d := b.Cooldown
	for i := 1; i < opens && d < b.MaxCooldown; i++ {
		d *= 2
	}
	if b.MaxCooldown > 0 && d > b.MaxCooldown {
		d = b.MaxCooldown
	}
	return d
}

// GateKey names the gate of a provider account.
func GateKey(provider, account string) string { return provider + "#" + account }

// TargetGateKey names the slot counter of one target of a provider account.
func TargetGateKey(provider, account, target string) string {
	return GateKey(provider, account) + "#T#" + target
}

// GateCleanSettle is how long past a pause's end a gate counts as clean
// (CleanGate): a little slack for workers whose clocks run behind.
const GateCleanSettle = time.Second

// CleanGate reports whether an account's gate is clean at now: the breaker
// closed and no probe out, no pause (ended at least GateCleanSettle ago), no
// operator pace. A failure streak below the breaker's threshold leaves it
// clean: Admit never reads the count. Only a clean gate may be read from a
// replica (GateStore.StateFor): such a gate admits every unpaced attempt,
// as the zero state does. Pure.
func CleanGate(st GateState, now time.Time) bool {
	return !st.Breaker.Open && st.Breaker.ProbeUntil == nil && st.Override == nil &&
		(st.PausedUntil == nil || !st.PausedUntil.After(now.Add(-GateCleanSettle)))
}

// VerdictKind is what the gate says about one attempt.
type VerdictKind int

// Verdicts.
const (
	// VerdictSend: send at Verdict.At (now, or after a short hold).
	VerdictSend VerdictKind = iota
	// VerdictProbe: the breaker is half-open and this attempt may probe it.
	VerdictProbe
	// VerdictDefer: no send now; come back at Verdict.At.
	VerdictDefer
)

// Verdict is the gate's decision for one attempt.
type Verdict struct {
	Kind VerdictKind
	At   time.Time
	// KeepSlot: the deferral holds its reserved pace slot (At); false when
	// the attempt must take a fresh slot when it comes back.
	KeepSlot bool
	Reason   string
}

// Admit decides one attempt from the slot it holds (now for an unpaced
// account), the pace's tolerance and the account's shared state. Pure. A
// pause outranks the breaker, which outranks the pace. maxHold is the
// longest wait for a slot made in-process; longer waits are deferred.
func Admit(slot time.Time, tolerance time.Duration, st GateState, now time.Time, maxHold time.Duration) Verdict {
	sendAt := slot.Add(-tolerance)
	if sendAt.Before(now) {
		sendAt = now
	}
	if p := st.PausedUntil; p != nil && p.After(sendAt) {
		return Verdict{Kind: VerdictDefer, At: *p, Reason: "account paused by the provider's Retry-After"}
	}
	if br := st.Breaker; br.Open {
		switch {
		case br.OpenUntil != nil && now.Before(*br.OpenUntil):
			return Verdict{Kind: VerdictDefer, At: *br.OpenUntil, Reason: "circuit breaker open"}
		case br.ProbeUntil != nil && now.Before(*br.ProbeUntil):
			return Verdict{Kind: VerdictDefer, At: *br.ProbeUntil, Reason: "circuit breaker half-open; another intent is probing"}
		}
		return Verdict{Kind: VerdictProbe, At: sendAt, Reason: "circuit breaker half-open: probe"}
	}
	if !sendAt.After(now.Add(maxHold)) {
		return Verdict{Kind: VerdictSend, At: sendAt}
	}
	return Verdict{Kind: VerdictDefer, At: sendAt, KeepSlot: true, Reason: "over pace; deferred to its slot"}
}

// EndsStreak reports whether a success must write to the gate: it was a
// probe, or its read showed the breaker open or a failure streak, or this
// process counted a failure for the account since its last success there
// (an unpaced account's read, a replica, does not show the count). Every
// other success writes nothing. Pure.
func EndsStreak(probe bool, read GateState, countedHere bool) bool {
	return probe || read.Breaker.Open || read.Breaker.Failures > 0 || countedHere
}

// GateResult is a send's result as the gate counts it (Permit.Report).
type GateResult int

// Gate results.
const (
	// GateSuccess closes the breaker and ends a failure streak.
	GateSuccess GateResult = iota
	// GateRateLimited (a 429) pauses the account for every worker.
	GateRateLimited
	// GateTransient (provably not sent) counts towards the breaker.
	GateTransient
	// GateOther (unknown outcomes, rejections) says nothing of the account's health.
	GateOther
)

// Breaker event kinds (Event.Kind).
const (
	EventBreakerOpened = "breaker.opened"
	EventBreakerClosed = "breaker.closed"
)

// Event is a move of an account's breaker that operators hear of once
// (the store records it with the move; Gate.Notify publishes it). Its JSON
// is the breaker history the operators' pacing lists.
type Event struct {
	// ID is stable per episode (subscribers drop repeats by it).
	ID       string    `json:"-"`
	Kind     string    `json:"kind"`
	At       time.Time `json:"at"`
	Provider string    `json:"provider"`
	Account  string    `json:"account"`
	Detail   string    `json:"detail"`
}

// BreakerEvent is the event of a breaker opening or closing (kind) at at.
func BreakerEvent(kind, provider, account string, at time.Time, detail string) Event {
	return Event{
		ID:   "gate." + provider + "/" + account + "." + kind + "." + strconv.FormatInt(at.UnixNano(), 10),
		Kind: kind, At: at, Provider: provider, Account: account, Detail: detail,
	}
}
