package core

// Pacing and the circuit breaker per provider account (issue 15).
//
// Every worker (dispatcher, retrier, sweeper, in any number of instances)
// asks the same shared AccountGate before a send. The gate holds, per
// account, the next free send slot (a GCRA "theoretical arrival time" kept
// as one counter), a pause set by a provider's 429 Retry-After, and the
// circuit breaker. The decision for one attempt is the pure rule Admit; the
// shared state lives behind the GateStore port (adapters/dynamo/pace.go).
//
// An attempt the gate does not let through now is deferred before the claim:
// no provider call, no attempt counted, no intent write. It goes back on the
// retry queue (OpPaced) with a delay; when the deferral is for pace, the
// message carries the slot it reserved, so deferred attempts fill the slots
// in order instead of stampeding back together.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// OpPaced is the retry-queue operation of an attempt the gate deferred.
const OpPaced = "paced"

// AttemptDeferred is the result of a claimed attempt the gate stopped before
// the send (a pause or an open breaker seen after waiting for the slot).
const AttemptDeferred AttemptResult = "deferred"

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

// Validate checks a pace: rate 1..100000, per 1ms..24h, burst 1..rate.
func (p Pace) Validate() error {
	switch {
	case p.Rate < 1 || p.Rate > 100000:
		return invalid("pace.rate", "pace.rate must be 1 to 100000")
	case p.Per < time.Millisecond || p.Per > 24*time.Hour:
		return invalid("pace.per", "pace.per must be between 1ms and 24h")
	case p.Burst < 1 || p.Burst > p.Rate:
		return invalid("pace.burst", "pace.burst must be 1 to rate")
	case p.Per/time.Duration(p.Rate) < time.Microsecond:
		return invalid("pace.rate", "pace.rate is too high for pace.per")
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
	Open(ctx context.Context, key string, until time.Time, reopen bool, ev OperatorEvent) (bool, error)
	// TakeProbe lets one caller probe an open breaker whose cooldown is over
	// and whose last probe (if any) has ended; the probe holds until until.
	TakeProbe(ctx context.Context, key string, now, until time.Time) (bool, error)
	// Close resets the failure count and, if the breaker is open, closes it
	// recording ev; it reports whether this call closed it.
	Close(ctx context.Context, key string, ev OperatorEvent) (bool, error)
	// SetOverride stores (nil: removes) the operator's pace.
	SetOverride(ctx context.Context, key string, o *PaceOverride) error
	// Events lists the key's operator events, newest first.
	Events(ctx context.Context, key string, limit int) ([]OperatorEvent, error)
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

// GateKey names the gate of a provider account.
func GateKey(provider, account string) string { return provider + "#" + account }

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

// VerdictKind is what the gate says about one attempt.
type VerdictKind int

// Verdicts.
const (
	// VerdictSend: send at Verdict.At (now, or after a short hold).
	VerdictSend VerdictKind = iota
	// VerdictProbe: the breaker is half-open and this intent may probe it.
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
// account), the pace's tolerance, the account's shared state and whether an
// earlier attempt of the intent may have taken effect. Pure. A pause
// outranks the breaker, which outranks the pace. maxHold is the longest
// wait for a slot made in-process; longer waits are deferred.
func Admit(slot time.Time, tolerance time.Duration, st GateState, mayHaveTakenEffect bool, now time.Time, b BreakerPolicy, maxHold time.Duration) Verdict {
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
		case mayHaveTakenEffect:
			// Only an intent whose retry is provably safe may probe.
			return Verdict{Kind: VerdictDefer, At: now.Add(b.ProbeLease), Reason: "circuit breaker half-open; this intent's retry is not provably safe, so it may not probe"}
		}
		return Verdict{Kind: VerdictProbe, At: sendAt, Reason: "circuit breaker half-open: probe"}
	}
	if !sendAt.After(now.Add(maxHold)) {
		return Verdict{Kind: VerdictSend, At: sendAt}
	}
	return Verdict{Kind: VerdictDefer, At: sendAt, KeepSlot: true, Reason: "over pace; deferred to its slot"}
}

// DuplicateProneTrigger reports whether an attempt's trigger may arrive
// more than once for the same attempt: the stream's dispatch (every record
// is delivered at least once, and each stream consumer fans it out) and the
// sweeper's kick of a pending intent. Such an attempt takes its pace slot
// under its claim token (SlotTake.Claim), so its duplicates hold no slot of
// their own (a wasted slot is a send the account never makes). Pure.
func DuplicateProneTrigger(trigger string) bool {
	switch trigger {
	case "stream", "sweeper", OpDispatch, TriggerInline:
		// The inline intake's reservation comes first: if it falls back to
		// the pending road, its stream record finds the slot taken and the
		// intake hands it on (Intake.handOn, inline.go).
		return true
	}
	return false
}

// ClaimToken names one attempt of an intent for SlotTake.Claim.
func ClaimToken(id string, attempt int) string { return fmt.Sprintf("%s#%d", id, attempt) }

// ReserveOnceWindow is how long a duplicate-prone trigger's claim on a slot
// turns its repeats away. Fanned-out duplicates arrive within seconds; a
// later repeat (e.g. a sweeper's kick after a worker crashed between its
// reservation and its deferral message) reserves afresh.
const ReserveOnceWindow = 30 * time.Second

// ReservationUsable reports whether an attempt coming back from the queue
// with a reserved slot may still use it: not later than one interval past
// it (a late send would crowd the slots after it). Pure.
func ReservationUsable(resv time.Time, p Pace, now time.Time) bool {
	return !now.After(resv.Add(p.Interval()))
}

// SendTooLate reports whether a held send reaches its slot so late (the
// claim and the checks outlasted the lead) that sending now would crowd the
// slot reserved after it: more than half an interval past it. Then it moves
// on (late). Consecutive sends stay at least half an interval apart. Pure.
func SendTooLate(slot time.Time, p Pace, now time.Time) bool {
	return now.After(slot.Add(p.Interval() / 2))
}

// EndsStreak reports whether a success must write to the gate: it was a
// probe, or its read showed the breaker open or a failure streak, or this
// process counted a failure for the account since its last success there
// (an unpaced account's read, a replica, does not show the count). Every
// other success writes nothing. Pure.
func EndsStreak(probe bool, read GateState, countedHere bool) bool {
	return probe || read.Breaker.Open || read.Breaker.Failures > 0 || countedHere
}

// GateResult classifies a send's result for the gate. Pure.
type GateResult int

// Gate results.
const (
	GateSuccess GateResult = iota
	GateRateLimited
	GateTransient
	GateOther
)

// ClassifyForGate maps a send's error to what the gate counts: a 429 pauses
// the account, a transient failure (provably not sent) counts towards the
// breaker, a success closes it; unknown outcomes and rejections say nothing
// about the account's health.
func ClassifyForGate(sendErr error) GateResult {
	if sendErr == nil {
		return GateSuccess
	}
	switch ClassOf(sendErr) {
	case ClassRateLimited:
		return GateRateLimited
	case ClassTransient:
		return GateTransient
	}
	return GateOther
}

// Gate is the dispatcher's account gate: pace, pauses and breaker.
type Gate struct {
	Store GateStore
	// Declared returns the pace declared in the provider configuration.
	Declared func(provider, account string) (Pace, bool)
	Breaker  BreakerPolicy
	// Events publishes each breaker open and close (an OperatorNotifier).
	Events OperatorEvents
	// MaxHold is the longest in-process wait for a fresh slot (default
	// 300 ms, the lead included); a slot further away is deferred through
	// the retry queue, so the stream's dispatcher never sits on waits and
	// the waits spread over every retrier.
	MaxHold time.Duration
	// QueueMargin is how early a deferred attempt asks the queue to bring it
	// back before its slot (default 1.5 s: SQS delays are whole seconds and
	// polling adds latency); it then waits out the rest in-process.
	QueueMargin time.Duration
	// Sleep waits (injected for tests); nil: a timer honouring ctx.
	Sleep func(ctx context.Context, d time.Duration) error
	// Lead is added to every paced slot (see admit); 0 sends on the slot
	// itself plus the attempt's own latency.
	Lead time.Duration
	// DefaultRetryAfter pauses the account after a 429 without Retry-After (default 1 s).
	DefaultRetryAfter time.Duration

	// DeclaredTarget returns the pace of each target (channel, chat) of an
	// account, where the provider limits per target (e.g. Slack: 1/s per
	// channel); false: targets have no pace of their own.
	DeclaredTarget func(provider, account string) (Pace, bool)

	overrides sync.Map // gate key -> *PaceOverride last seen (nil: none)
	// counted: gate keys this process counted a transient failure for since
	// its last success there. That success ends the streak (Close), even
	// when its read of the gate (a replica) did not show the count.
	counted sync.Map
}

// targetPace is the pace of each target of the account, if it has one.
func (g *Gate) targetPace(provider, account string) (Pace, bool) {
	if g.DeclaredTarget == nil {
		return Pace{}, false
	}
	return g.DeclaredTarget(provider, account)
}

// TargetGateKey names the slot counter of one target of a provider account.
func TargetGateKey(provider, account, target string) string {
	return GateKey(provider, account) + "#T#" + target
}

// paceFor is PaceFor with the operator's override this worker last saw for key.
func (g *Gate) paceFor(provider, account, key string) (Pace, bool) {
	if v, ok := g.overrides.Load(key); ok {
		if o, _ := v.(*PaceOverride); o != nil {
			return o.Pace, true
		}
	}
	return g.PaceFor(provider, account, nil)
}

func (g *Gate) maxHold() time.Duration { return OrDefault(g.MaxHold, 300*time.Millisecond) }

// queueMargin is how early a deferred attempt asks the queue to bring it
// back before its slot (QueueMargin, default 1.5 s).
func (g *Gate) queueMargin() time.Duration {
	return OrDefault(g.QueueMargin, 1500*time.Millisecond)
}

// holdFor is the longest wait held in-process: a fresh attempt waits up to
// MaxHold; a returning reservation, and a claimed attempt that retook a slot
// after waking late (hold), up to the queue margin plus a second more
// (SQS rounds a delay up and polling only adds, so a return is never more
// than the margin early; the second spares late claimed attempts a release:
// measured side by side in the pace bench, docs/decisions.md).
func (g *Gate) holdFor(returning bool) time.Duration {
	if returning {
		return g.queueMargin() + time.Second + g.maxHold()
	}
	return g.maxHold()
}

func (g *Gate) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	return sleep(ctx, d, g.Sleep)
}

// PaceFor is the pace that applies: the operator's override, else the declared one.
func (g *Gate) PaceFor(provider, account string, st *GateState) (Pace, bool) {
	if st != nil && st.Override != nil {
		return st.Override.Pace, true
	}
	if g.Declared == nil {
		return Pace{}, false
	}
	return g.Declared(provider, account)
}

// ticket is the gate's answer for one attempt, carried to the send's result.
type ticket struct {
	send   bool
	sendAt time.Time // a slot to wait for right before the send (zero: none)
	pace   Pace      // the pace the slot belongs to (zero: unpaced)
	slot   time.Time // the account's pace slot (zero: unpaced)
	tkey   string    // the target's gate (empty: the target has no pace of its own)
	tpace  Pace
	tslot  time.Time // the target's pace slot
	// raw, traw: the counter values the slots stand on (the slot less the
	// lead; at most that for a returning reservation), for late.
	raw, traw time.Time
	gated     bool // the gate was consulted: report the result
	probe     bool
	key       string
	state     GateState
	// reservedOnce: a slot was taken under the attempt's claim token, so
	// the intent's duplicate-prone triggers (its stream record) will hold
	// none: whoever does not send hands the slot on.
	reservedOnce bool
	// later: the inline intake's deferral, handed on after its put.
	later *deferral
}

// admit runs the gate for the attempt of id before its claim. It returns
// send=false when the attempt was deferred (re-queued) and must stop here.
// Intents that are not claimable now (or are past their deadline) pass
// without the gate: the claim turns them away (or expires them) with no send.
func (d *Dispatcher) admit(ctx context.Context, id, trigger string, known gateKnown, in *Intent) (ticket, error) {
	resv := known.account
	g := d.Gate
	if g == nil {
		return ticket{send: true}, nil
	}
	var err error
	if in == nil { // the retrier passes the intent it just read
		in, err = d.Store.Get(ctx, id)
		if errors.Is(err, ErrNotFound) {
			return ticket{send: true}, nil // the claim logs it
		}
		if err != nil {
			return ticket{}, fmt.Errorf("gate: read %s: %w", id, err)
		}
	}
	now := d.Clock.Now()
	if !in.Claimable(now) || (in.Deadline != nil && !now.Before(*in.Deadline)) {
		return ticket{send: true}, nil
	}
	if MayHaveTakenEffect(in) {
		if !DecideResend(resendCase(in, d.Capabilities(ctx, in), now.Add(d.Lease))).Allowed() {
			// It cannot be sent again anyway: the check before the send takes it
			// to a human. Holding it at the gate would only leave it waiting
			// for a breaker it may never probe.
			return ticket{send: true}, nil
		}
		// Its retry is provably safe (the provider's key covers it, or an
		// operator authorised it), so it may probe a half-open breaker.
	}
	key := GateKey(in.Provider, in.Account)
	t := ticket{gated: true, key: key}
	if _, declared := g.PaceFor(in.Provider, in.Account, nil); declared && !seenKey(&g.overrides, key) {
		// First look at a paced account in this process: learn the operator's
		// pace before sizing a slot by it (one read per account per process;
		// an unpaced account's state is read below anyway).
		st, err := g.Store.State(ctx, key)
		if err != nil {
			return ticket{}, fmt.Errorf("gate %s: %w", key, err)
		}
		g.overrides.Store(key, st.Override)
	}
	// A duplicate-prone trigger's first reservations go under the attempt's
	// claim token (a repeat holds no slot); a returning attempt carries its.
	once := known.account == nil && known.target == nil && DuplicateProneTrigger(trigger)
	claim := ""
	if once {
		claim = ClaimToken(in.ID, in.AttemptCount)
	}
	duplicate := func(key string) (ticket, error) {
		// A duplicate of a trigger that already holds a slot (or is being
		// sent): that one carries the attempt; this one holds nothing.
		d.log().DebugContext(ctx, "duplicate trigger; the first one holds the slot",
			"intent", in.ID, "bot", in.Bot, "attempt", in.AttemptCount, "gate", key, "trigger", trigger)
		d.metrics().Count("GateDuplicateTrigger", 1)
		return t, nil
	}
	if tp, ok := g.targetPace(in.Provider, in.Account); ok {
		// The target (channel, chat) has a pace of its own: its slot first,
		// so an attempt the target defers holds no slot of the account.
		tkey := TargetGateKey(in.Provider, in.Account, in.Target)
		tslot, traw, _, _, dup, err := d.take(ctx, tkey, tp, known.target, claim, now)
		t.reservedOnce = once
		if err != nil {
			return ticket{}, fmt.Errorf("gate %s: %w", tkey, err)
		}
		if dup {
			return duplicate(tkey)
		}
		if tslot.After(now.Add(g.holdFor(known.target != nil))) {
			// Over the target's pace: deferred to its slot, no provider call,
			// no attempt counted, no slot of the account taken.
			log := d.log().With("intent", in.ID, "bot", in.Bot, "attempt", in.AttemptCount, "gate", tkey)
			return d.deferTicket(ctx, t, in, trigger, now, tslot, keepTargetSlot, "over the target's pace", log)
		}
		t.tkey, t.tpace, t.tslot, t.traw = tkey, tp, tslot, traw
	}
	pace, paced := g.paceFor(in.Provider, in.Account, key)
	slot, usedResv := now, false
	if paced {
		var dup bool
		slot, t.raw, t.state, usedResv, dup, err = d.take(ctx, key, pace, resv, claim, now)
		t.reservedOnce = once // once: nothing carried, so take reserved under the claim
		if err == nil && dup {
			return duplicate(key)
		}
	} else {
		// Unpaced: the breaker and pause state is all this attempt needs;
		// read where the store spreads it (a replica by intent id, the gate
		// itself whenever it is not clean).
		if !known.clean {
			t.state, err = g.Store.StateFor(ctx, key, in.ID, now)
		}
		if err == nil && t.state.Override != nil {
			// Paced only by an operator: take a slot now that we know.
			pace, paced = t.state.Override.Pace, true
			slot, t.raw, t.state, _, _, err = d.take(ctx, key, pace, nil, "", now)
		}
	}
	if err == nil {
		g.overrides.Store(key, t.state.Override)
		if cur, ok := g.PaceFor(in.Provider, in.Account, &t.state); ok && paced && cur.Interval() != pace.Interval() && resv == nil {
			// An operator changed the pace since this worker last looked: the
			// slot was sized by the old one. A slower pace widens it by the
			// difference; a faster one leaves the counter where it is, since
			// moving it back could hand out a slot another worker already
			// took by the new pace (the next send then waits at most one old
			// interval more, once).
			if grow := cur.Interval() - pace.Interval(); grow > 0 {
				_, _, _, err = g.Store.Take(ctx, key, SlotTake{Interval: grow, Floor: now.Add(-cur.Tolerance()), At: now})
			}
			pace = cur
		}
	}
	if err != nil {
		return ticket{}, fmt.Errorf("gate %s: %w", key, err)
	}
	tol := time.Duration(0)
	if paced && !usedResv {
		tol = pace.Tolerance()
	}
	v := Admit(slot, tol, t.state, false, now, g.Breaker, g.holdFor(usedResv))
	log := d.log().With("intent", in.ID, "bot", in.Bot, "attempt", in.AttemptCount, "gate", key)
	if (v.Kind == VerdictSend || v.Kind == VerdictProbe) && (v.At.After(now) || usedResv || t.tkey != "") {
		// A short wait for the slot, in-process, made right before the send
		// (hold), so the claim and the checks do not blur the spacing.
		t.send, t.sendAt = true, v.At
		if paced {
			t.pace, t.slot = pace, v.At
		}
		if t.tkey != "" && t.tslot.After(t.sendAt) {
			t.sendAt = t.tslot
		}
		return t, nil
	}
	if v.Kind == VerdictProbe {
		ok, err := g.Store.TakeProbe(ctx, key, now, now.Add(g.Breaker.ProbeLease))
		if err != nil {
			return ticket{}, fmt.Errorf("gate %s probe: %w", key, err)
		}
		if ok {
			log.InfoContext(ctx, "circuit breaker half-open: this attempt probes the account")
			d.metrics().Count("BreakerProbe", 1)
			t.send, t.probe = true, true
			return t, nil
		}
		v = Verdict{Kind: VerdictDefer, At: now.Add(g.Breaker.ProbeLease), Reason: "circuit breaker half-open; another intent is probing"}
	}
	if v.Kind == VerdictSend {
		t.send = true
		return t, nil
	}
	keep := keepNoSlot
	if v.KeepSlot {
		keep = keepAccountSlot
	}
	return d.deferTicket(ctx, t, in, trigger, now, v.At, keep, v.Reason, log)
}

// deferTicket defers the attempt the gate turned away: through the retry
// queue (deferAttempt), or, for the inline intake, whose intent is not
// stored yet, on the ticket: the intake hands it on once its put is in
// (Intake.handOn, inline.go), so no message can arrive before its intent.
func (d *Dispatcher) deferTicket(ctx context.Context, t ticket, in *Intent, trigger string, now, at time.Time, keep keptSlot, reason string, log *slog.Logger) (ticket, error) {
	if trigger == TriggerInline {
		t.send = false
		t.later = &deferral{at: at, keep: keep, reason: reason}
		return t, nil
	}
	return t, d.deferAttempt(ctx, in, now, at, keep, reason, log)
}

// deferral is a deferral the inline intake hands on after its put.
type deferral struct {
	at     time.Time
	keep   keptSlot
	reason string
}

// keptSlot says which reserved slot a deferred attempt carries back.
type keptSlot int

const (
	keepNoSlot keptSlot = iota
	keepAccountSlot
	keepTargetSlot
)

// deferAttempt re-queues an attempt the gate turned away before its claim:
// nothing sent, nothing counted, no intent write. It comes back at at,
// carrying its reserved slot (keep) — then early (queue delays are whole
// seconds and the poll adds latency), to wait the rest in-process — or at
// the intent's deadline if that comes first, to expire it, never to send it
// late.
func (d *Dispatcher) deferAttempt(ctx context.Context, in *Intent, now, at time.Time, keep keptSlot, reason string, log *slog.Logger) error {
	msg := RetryMessage{IntentID: in.ID, Attempt: in.AttemptCount, Op: OpPaced}
	delay := at.Sub(now)
	switch {
	case in.Deadline != nil && in.Deadline.Before(at):
		at, delay = *in.Deadline, in.Deadline.Sub(now)
	case keep == keepAccountSlot:
		msg.SlotAt = &at
		delay -= d.Gate.queueMargin()
	case keep == keepTargetSlot:
		msg.TargetSlotAt = &at
		delay -= d.Gate.queueMargin()
	}
	if err := d.Queue.Enqueue(ctx, msg, max(delay, 0)); err != nil {
		return fmt.Errorf("defer %s: %w", in.ID, err)
	}
	log.InfoContext(ctx, "attempt deferred; nothing sent", "until", at, "reason", reason)
	d.metrics().Count("AttemptDeferred", 1)
	return nil
}

// hold waits for the ticket's slot right before the send, then looks at the
// account again: a pause or an open breaker another worker wrote meanwhile
// wins. Then the claim ends with an attempt recorded as "deferred" (nothing
// sent; the intent goes to retryable-failure, due when the gate says) and
// is re-queued. This is the only deferral that counts an attempt: the race
// of a pause or an open breaker with an attempt already claimed. A paced
// attempt that reaches its slot too late (SendTooLate: a slow claim, queue
// or machine) does not send late, which would crowd the slots after
// it and take the account over its pace: it moves on (late: it slides the
// counter and goes now when no slot was taken after its own, else takes a
// fresh slot and waits for it; one more write either way); if that slot is
// beyond MaxHold it is released like a paused one. It reports whether the
// send must not happen.
func (d *Dispatcher) hold(ctx context.Context, claimed *Intent, t *ticket, n int) (bool, error) {
	g := d.Gate
	if g == nil || t.sendAt.IsZero() {
		return false, nil
	}
	var v Verdict
	var now time.Time
	var st GateState
	stillLate := false
	maxWait := g.maxHold()
	ahead := time.Duration(0)
	if t.pace.Rate > 0 || t.tkey != "" {
		ahead = GateReadAhead
	}
	for late := 0; ; late++ {
		// The account's state is read shortly before the slot, not after it:
		// the read's latency (up to ~50 ms on a loaded host) would land
		// between the slot and the send, bunching sends over the pace.
		if err := g.sleep(ctx, t.sendAt.Add(-ahead).Sub(d.Clock.Now())); err != nil {
			return true, err // the lease expires; the sweeper takes it (nothing was sent)
		}
		st = d.readGate(ctx, t, claimed.ID)
		if err := g.sleep(ctx, t.sendAt.Sub(d.Clock.Now())); err != nil {
			return true, err
		}
		now = d.Clock.Now()
		acctLate := t.pace.Rate > 0 && SendTooLate(t.slot, t.pace, now)
		targetLate := t.tkey != "" && SendTooLate(t.tslot, t.tpace, now)
		if late == 2 || (!acctLate && !targetLate) {
			stillLate = acctLate || targetLate
			break
		}
		// Woke late for its slot (the claim, the checks, the queue, the read
		// or the machine were slow, or it waited for its target's slot):
		// sent now, it could crowd the slots after it and go over the pace.
		// It moves on (late: one more write, only for a late attempt) and
		// waits for its new slot; the checks are done. Twice at most: late
		// for the third slot, it is released (below), not sent.
		var err error
		if acctLate {
			t.slot, t.raw, err = d.late(ctx, t.key, t.pace, t.raw, now)
		}
		if targetLate && err == nil {
			t.tslot, t.traw, err = d.late(ctx, t.tkey, t.tpace, t.traw, now)
		}
		next := t.slot
		if t.tkey != "" && t.tslot.After(next) {
			next = t.tslot
		}
		if err == nil && !next.After(now) {
			// Slid: it goes now, on the state it has just read (another read
			// would only make it late again on a slow store).
			t.sendAt = now
			break
		}
		// A claimed attempt waits longer for its fresh slot than a fresh one
		// would (as long as a returning reservation may): releasing it would
		// count an attempt and churn, and late workers would keep re-queuing
		// each other at the tail.
		maxWait = g.holdFor(true)
		if err != nil || next.After(now.Add(maxWait)) {
			if err != nil {
				next = now.Add(time.Second) // cannot take a slot: release, retry soon
			}
			t.sendAt = next // too far to wait for: Admit defers it below
			break
		}
		t.sendAt = next
		if t.sendAt.Before(now) {
			t.sendAt = now
		}
	}
	t.state = st
	v = Admit(t.sendAt, 0, st, false, now, g.Breaker, maxWait)
	if stillLate && v.Kind == VerdictSend {
		// Late for a third slot in a row (the machine is too slow to keep
		// the pace): sent now it would crowd the sends after it, over the
		// pace — and past the point where an opening breaker can stop it.
		// Released like a paused attempt instead.
		v = Verdict{Kind: VerdictDefer, At: now.Add(time.Second), Reason: "late for its pace slot three times"}
	}
	if v.Kind == VerdictProbe {
		ok, err := g.Store.TakeProbe(ctx, t.key, now, now.Add(g.Breaker.ProbeLease))
		if err == nil && ok {
			t.probe = true
			d.metrics().Count("BreakerProbe", 1)
			return false, nil
		}
		v = Verdict{Kind: VerdictDefer, At: now.Add(g.Breaker.ProbeLease), Reason: "circuit breaker half-open; another intent is probing"}
	}
	if v.Kind == VerdictSend {
		return false, nil
	}
	until := v.At
	stored, err := d.updateClaimed(ctx, claimed, func(in *Intent) error {
		if !in.HeldBy(d.Owner, n) {
			return ErrLeaseLost
		}
		// The claim is on record, so is this: an attempt that sent nothing
		// (attempt counts never go down; "deferred" proves no effect).
		in.Attempts = append(in.Attempts, Attempt{N: n, Trigger: "gate", StartedAt: t.sendAt, EndedAt: now, Result: AttemptDeferred,
			Evidence: Evidence{Detail: "not sent: " + v.Reason}})
		if err := in.MoveTo(StatusRetryableFailure, "deferred by the account gate before sending: "+v.Reason, now); err != nil {
			return err
		}
		in.NextAttemptAt = &until
		return nil
	})
	if err != nil {
		return true, fmt.Errorf("release %s after the gate deferred it: %w", claimed.ID, err)
	}
	d.log().InfoContext(ctx, "attempt deferred after its claim; nothing sent", "intent", claimed.ID, "until", until, "reason", v.Reason)
	d.metrics().Count("AttemptDeferred", 1)
	d.enqueue(ctx, stored, OpAttempt, until.Sub(now), d.log())
	return true, nil
}

func ptrTime(t time.Time) *time.Time { return &t }

// readGate reads the account's state for the attempt of id right before its
// send. An unreadable gate reads as a short pause: no blind send.
func (d *Dispatcher) readGate(ctx context.Context, t *ticket, id string) GateState {
	now := d.Clock.Now()
	var st GateState
	var err error
	if t.pace.Rate > 0 {
		st, err = d.Gate.Store.State(ctx, t.key) // a paced account writes its gate on every attempt anyway
	} else {
		st, err = d.Gate.Store.StateFor(ctx, t.key, id, now)
	}
	if err != nil {
		return GateState{PausedUntil: ptrTime(now.Add(time.Second))}
	}
	return st
}

// GateReadAhead is how long before its slot a held send reads the
// account's state: longer than the read takes on a loaded host (p99 108 ms
// in the pace bench), or the read's latency falls between the slot and the
// send and makes it late. It was capped at half the interval, so that a
// pause or an open written after one send's result would be seen by the
// next send's read; that holds only where the send's round trip and the
// gate write fit into half an interval, and at 200/s (2.5 ms) every read
// slower than that made the send late: the pace bench's warm-up delivered
// 52 of 200 in a minute. Now a move written less than this before a send's
// slot reaches the send after it (docs/decisions.md, pacing).
const GateReadAhead = 100 * time.Millisecond

func seenKey(m *sync.Map, key string) bool {
	_, ok := m.Load(key)
	return ok
}

// take is the slot one paced key gives an attempt: the reservation it
// carries back while usable (its lead already in it: used), else a fresh
// one (slot), sent at that slot plus the lead (right before the send, so
// the claim and the checks happen inside the lead and a send goes out on
// its slot, not its slot plus their latency, which would crowd it against
// the next), under claim when one is given (dup: a repeat, which holds
// nothing).
// raw is the counter value the send stands on (late); st the key's state as
// the take wrote it (zero for a carried slot: hold reads it).
func (d *Dispatcher) take(ctx context.Context, key string, p Pace, carried *time.Time, claim string, now time.Time) (at, raw time.Time, st GateState, used, dup bool, err error) {
	if carried != nil && ReservationUsable(*carried, p, now) {
		return *carried, carried.Add(-d.Gate.Lead), GateState{}, true, false, nil
	}
	raw, st, dup, err = d.slot(ctx, key, p, now.Add(-p.Tolerance()), now, claim)
	return raw.Add(d.Gate.Lead), raw, st, false, dup, err
}

// slot takes the next slot of a paced key (GateStore.Take): a counter
// behind floor is idle and restarts at at (a lagging counter used as it is
// would let a burst through).
func (d *Dispatcher) slot(ctx context.Context, key string, p Pace, floor, at time.Time, claim string) (time.Time, GateState, bool, error) {
	return d.Gate.Store.Take(ctx, key, SlotTake{Interval: p.Interval(), Floor: floor, At: at, Claim: claim, Until: at.Add(ReserveOnceWindow)})
}

// late moves a held send that woke too late for its slot (raw: the counter
// value it stands on) onto a new one, and returns when to send and the raw
// slot of that send: one take whose floor is one interval past raw. When no
// slot was taken after its own (the counter still stands there: an account
// with little traffic) the counter slides to one interval after now less
// the lead, and the send goes now: later than its slot it crowds no send
// before it, and the slots after it follow it. Otherwise it takes a fresh
// slot at the tail and sends on it plus the lead, like every fresh slot (the
// sends of the slots before it go out at theirs plus the lead; without it,
// this send would land a lead early, on top of theirs).
func (d *Dispatcher) late(ctx context.Context, key string, p Pace, raw, now time.Time) (time.Time, time.Time, error) {
	stand := now.Add(-d.Gate.Lead)
	slot, _, _, err := d.slot(ctx, key, p, raw.Add(p.Interval()+1), stand, "")
	if err == nil && slot.Equal(stand) {
		d.metrics().Count("GateLateSlotSlid", 1)
		return now, stand, nil
	}
	if err == nil && slot.Before(now.Add(-p.Tolerance())) {
		// The slots taken after its own are all past: the counter is idle
		// and starts again from now, as for any fresh take.
		slot, _, _, err = d.slot(ctx, key, p, now.Add(-p.Tolerance()), now, "")
	}
	d.metrics().Count("GateLateSlotRetaken", 1)
	return slot.Add(d.Gate.Lead), slot, err
}

// sent tells the gate how a send went: a 429 pauses the account for every
// worker, transient failures count towards the breaker, a success closes it.
func (d *Dispatcher) sent(ctx context.Context, in *Intent, t ticket, sendErr error) {
	g := d.Gate
	if g == nil || !t.gated {
		return
	}
	now := d.Clock.Now()
	log := d.log().With("intent", in.ID, "bot", in.Bot, "attempt", in.AttemptCount, "gate", t.key)
	warn := func(what string, err error) {
		if err != nil {
			log.WarnContext(ctx, "gate: "+what+" not recorded", "err", err.Error())
		}
	}
	switch ClassifyForGate(sendErr) {
	case GateSuccess:
		_, countedHere := g.counted.LoadAndDelete(t.key)
		if !EndsStreak(t.probe, t.state, countedHere) {
			return // the common case writes nothing
		}
		ev := BreakerEvent(EventBreakerClosed, in.Provider, in.Account, now,
			fmt.Sprintf("a send to %s account %q succeeded (intent %s); sends resume", in.Provider, in.Account, in.ID))
		closed, err := g.Store.Close(ctx, t.key, ev)
		warn("close", err)
		if closed {
			d.publish(ctx, ev)
		}
	case GateRateLimited:
		ra := g.DefaultRetryAfter
		if ra <= 0 {
			ra = time.Second
		}
		var re *RetryableError
		if errors.As(sendErr, &re) && re.RetryAfter > 0 {
			ra = re.RetryAfter
		}
		warn("pause", g.Store.Pause(ctx, t.key, now.Add(ra)))
		log.InfoContext(ctx, "provider rate limit: account paused for every sender", "until", now.Add(ra))
		d.metrics().Count("AccountPaused", 1)
	case GateTransient:
		if g.Breaker.Failures <= 0 {
			return
		}
		if t.probe {
			opens := t.state.Breaker.Opens + 1
			_, err := g.Store.Open(ctx, t.key, now.Add(g.Breaker.CooldownAfter(opens)), true, OperatorEvent{})
			warn("re-open", err)
			log.InfoContext(ctx, "circuit breaker probe failed; open again", "cooldown", g.Breaker.CooldownAfter(opens))
			return
		}
		st, err := g.Store.Failure(ctx, t.key)
		warn("failure", err)
		if err == nil {
			g.counted.Store(t.key, struct{}{})
		}
		if err != nil || st.Breaker.Open || st.Breaker.Failures < g.Breaker.Failures {
			return
		}
		cool := g.Breaker.CooldownAfter(st.Breaker.Opens + 1)
		ev := BreakerEvent(EventBreakerOpened, in.Provider, in.Account, now,
			fmt.Sprintf("%d consecutive transient failures sending to %s account %q (last: intent %s); no sends for %s, then one probe", st.Breaker.Failures, in.Provider, in.Account, in.ID, cool))
		opened, err := g.Store.Open(ctx, t.key, now.Add(cool), false, ev)
		warn("open", err)
		if opened {
			d.publish(ctx, ev)
		}
	}
}

// publish hands the gate's move to the operator-event path; the store
// recorded it with the move, so one that is not published now is redriven.
func (d *Dispatcher) publish(ctx context.Context, ev OperatorEvent) {
	if d.Gate.Events == nil {
		return
	}
	if err := d.Gate.Events.Publish(ctx, ev); err != nil {
		d.log().WarnContext(ctx, "operator event not published yet", "event", ev.ID, "err", err.Error())
	}
}

// ---- operators: pace overrides and the gate's state ----

// PaceChange is an operator's change of an account's pace: Pace replaces
// the declared one; nil returns to the declared pace.
type PaceChange struct {
	Pace   *Pace
	Reason string
}

// AccountPacing is what operators see of an account's gate.
type AccountPacing struct {
	Declared  *Pace         `json:"declared,omitempty"`
	Override  *PaceOverride `json:"override,omitempty"`
	Effective *Pace         `json:"effective,omitempty"`
	// TargetPace is the pace of each target (channel, chat) of the account
	// where the provider limits per target; declared in the configuration.
	TargetPace *Pace           `json:"targetPace,omitempty"`
	Paused     *time.Time      `json:"pausedUntil,omitempty"`
	Breaker    Breaker         `json:"breaker"`
	Events     []OperatorEvent `json:"events"`
}

// Pacing serves operators: read an account's gate, set or clear its pace.
type Pacing struct {
	Gate      *Gate
	Providers Providers
	Clock     Clock
}

// Get returns an account's pace, pause, breaker and recent operator events.
func (p *Pacing) Get(ctx context.Context, pr Principal, provider, account string) (*AccountPacing, error) {
	if err := operatorOnly(pr, "read pacing"); err != nil {
		return nil, err
	}
	key := GateKey(provider, account)
	st, err := p.Gate.Store.State(ctx, key)
	if err != nil {
		return nil, err
	}
	evs, err := p.Gate.Store.Events(ctx, key, 20)
	if err != nil {
		return nil, err
	}
	out := &AccountPacing{Override: st.Override, Paused: st.PausedUntil, Breaker: st.Breaker, Events: evs}
	if out.Events == nil {
		out.Events = []OperatorEvent{}
	}
	if p.Gate.Declared != nil {
		if d, ok := p.Gate.Declared(provider, account); ok {
			out.Declared = &d
		}
	}
	if e, ok := p.Gate.PaceFor(provider, account, &st); ok {
		out.Effective = &e
	}
	if tp, ok := p.Gate.targetPace(provider, account); ok {
		out.TargetPace = &tp
	}
	return out, nil
}

// Set stores or clears the operator's pace for an account, with a reason.
func (p *Pacing) Set(ctx context.Context, pr Principal, provider, account string, req PaceChange) (*AccountPacing, error) {
	if err := operatorOnly(pr, "change pacing"); err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Reason) == "" {
		return nil, invalid("reason", "a reason is required")
	}
	if strings.TrimSpace(account) == "" || len(account) > 512 {
		return nil, invalid("account", "account must have 1 to 512 bytes")
	}
	if p.Providers != nil {
		if _, ok := p.Providers.Provider(provider); !ok {
			return nil, &ValidationError{Code: CodeUnknownProvider, Field: "provider", Message: fmt.Sprintf("no provider named %q", provider)}
		}
	}
	var o *PaceOverride
	if req.Pace != nil {
		pc := *req.Pace
		pc.Burst = max(pc.Burst, 1)
		if err := pc.Validate(); err != nil {
			return nil, err
		}
		o = &PaceOverride{Pace: pc, Reason: req.Reason, By: pr.Name, At: p.Clock.Now()}
	}
	if err := p.Gate.Store.SetOverride(ctx, GateKey(provider, account), o); err != nil {
		return nil, err
	}
	return p.Get(ctx, pr, provider, account)
}

// gateKnown is what an attempt's trigger already knows of the account's
// gate: the pace slots a deferred attempt carries back from the queue
// (account, target), and whether the caller read the gate's replica for the
// intent and found it clean (Preflight.GateClean: then an unpaced
// account's state is the zero state, without another read).
type gateKnown struct {
	account, target *time.Time
	clean           bool
}
