package gate

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Gate is the account gate every worker asks before a send: pace, pauses
// and breaker, over one shared GateStore.
type Gate struct {
	Store GateStore
	// Declared returns the pace declared in the provider configuration.
	Declared func(provider, account string) (Pace, bool)
	// DeclaredTarget returns the pace of each target (channel, chat) of an
	// account, where the provider limits per target (e.g. Slack: 1/s per
	// channel); false: targets have no pace of their own.
	DeclaredTarget func(provider, account string) (Pace, bool)
	// Breaker is the attempt policy's (core.AttemptPolicy.Breaker).
	Breaker BreakerPolicy
	// Notify publishes each breaker open and close (the operator-event
	// path); nil: the store's record is redriven later.
	Notify func(ctx context.Context, ev Event) error
	// MaxHold is the longest in-process wait for a fresh slot (default
	// 300 ms, the lead included); a slot further away is deferred through
	// the retry queue, so the stream's dispatcher never sits on waits and
	// the waits spread over every retrier.
	MaxHold time.Duration
	// QueueMargin is how early a deferred attempt asks the queue to bring it
	// back before its slot (default 1.5 s: SQS delays are whole seconds and
	// polling adds latency); it then waits out the rest in-process.
	QueueMargin time.Duration
	// Lead is added to every paced slot; 0 sends on the slot itself plus
	// the attempt's own latency (its claim and checks).
	Lead time.Duration
	// DefaultRetryAfter pauses the account after a 429 without Retry-After
	// (the attempt policy's, core.AttemptPolicy; 0: no pause).
	DefaultRetryAfter time.Duration
	// Sleep waits (injected for tests); nil: a timer honouring ctx.
	Sleep func(ctx context.Context, d time.Duration) error
	// Clock tells the time (nil: the wall clock in UTC).
	Clock interface{ Now() time.Time }
	// Metrics counts the gate's moves (nil: none); Log logs them (nil: slog's default).
	Metrics interface{ Count(name string, n int) }
	Log     *slog.Logger

	overrides sync.Map // gate key -> *PaceOverride last seen (nil: none)
	// counted: gate keys this process counted a transient failure for since
	// its last success there. That success ends the streak (Close), even
	// when its read of the gate (a replica) did not show the count.
	counted sync.Map
}

// Request is what an attempt tells the gate before its claim. The caller
// decides every input; the gate knows nothing of who triggered it.
type Request struct {
	// ID and Attempt name the intent and its attempt count before this
	// attempt (the claim token of Once).
	ID      string
	Attempt int
	Bot     string // for logs
	// Provider, Account and Target say whose gate and which target's pace.
	Provider, Account, Target string
	// Carried are the pace slots a deferred attempt brings back (Deferral.Slots).
	Carried Slots
	// Clean: the caller read the gate's replica for this intent and found it
	// clean (CleanGate), so an unpaced account's state is the zero state.
	Clean bool
	// Once: the attempt's trigger may arrive more than once (a stream
	// record, a sweeper's kick): its slots are taken under its claim token
	// (ClaimToken), so its repeats hold none of their own (a wasted slot is
	// a send the account never makes); a repeat gets a Duplicate deferral.
	Once bool
}

// Slots are the pace slots an attempt holds: the account's and its
// target's (nil: none).
type Slots struct {
	Account, Target *time.Time
}

// Deferral is the gate's "not now" for an attempt: nothing is sent.
type Deferral struct {
	// At is when the attempt may go: its reserved slot, or the end of a
	// pause or a breaker's cooldown.
	At time.Time
	// Wake is when a queue should bring it back: At, or a queue margin
	// before At when it carries its slot (it waits the rest in-process).
	Wake   time.Time
	Reason string
	// Slots are the reserved slots it carries back (Request.Carried).
	Slots Slots
	// Reserved: its slots were taken under its claim token (Request.Once),
	// so the intent's other triggers will not take them again: whoever does
	// not use them must hand them on.
	Reserved bool
	// Duplicate: a repeat of an attempt that already holds its slot (or is
	// being sent): that one carries the attempt; nothing to hand on.
	Duplicate bool
}

// Permit lets one attempt send: Hold right before the send, then Report.
type Permit struct {
	g   *Gate
	req Request
	key string // the account's gate key
	// sendAt is when to send (zero: now, no hold, no second read).
	sendAt time.Time
	// account and target are the pace slots the send stands on (nil: unpaced).
	account, target *slot
	// probe: this send probes a half-open breaker.
	probe bool
	// state is the account's state as last read (or as the take wrote it).
	state GateState
	// reserved: the slots were taken under the claim token (Request.Once).
	reserved bool
}

// slot is one pace counter's slot a send stands on.
type slot struct {
	key  string
	pace Pace
	at   time.Time // when the send may go on it: the counter value plus the lead, or a carried reservation
	raw  time.Time // the counter value it stands on (at less the lead; a move on from a late wake starts after it)
}

func (g *Gate) now() time.Time {
	if g.Clock == nil {
		return time.Now().UTC()
	}
	return g.Clock.Now()
}

func (g *Gate) log() *slog.Logger { return cmp.Or(g.Log, slog.Default()) }

func (g *Gate) count(name string) {
	if g.Metrics != nil {
		g.Metrics.Count(name, 1)
	}
}

func orDefault(v, def time.Duration) time.Duration {
	if v > 0 {
		return v
	}
	return def
}

func (g *Gate) maxHold() time.Duration { return orDefault(g.MaxHold, 300*time.Millisecond) }

func (g *Gate) queueMargin() time.Duration { return orDefault(g.QueueMargin, 1500*time.Millisecond) }

// holdFor is the longest wait held in-process: a fresh attempt waits up to
// MaxHold; a returning reservation, and a claimed attempt that retook a slot
// after waking late (Hold), up to the queue margin plus a second more
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
	if g.Sleep != nil {
		return g.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
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

// TargetPace is the pace of each target of the account, if it has one.
func (g *Gate) TargetPace(provider, account string) (Pace, bool) {
	if g.DeclaredTarget == nil {
		return Pace{}, false
	}
	return g.DeclaredTarget(provider, account)
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

// deferral is the Deferral of an attempt that may go at at.
func (g *Gate) deferral(at time.Time, reason string, slots Slots, reserved bool) *Deferral {
	wake := at
	if slots.Account != nil || slots.Target != nil {
		wake = at.Add(-g.queueMargin())
	}
	return &Deferral{At: at, Wake: wake, Reason: reason, Slots: slots, Reserved: reserved}
}

// Admit asks the gate for one attempt before its claim: a Permit to send
// (held until its slot by Permit.Hold), or a Deferral (nothing sent; the
// caller re-queues it). A paced account's slot is taken here; the target's
// first, so an attempt the target defers holds no slot of the account.
func (g *Gate) Admit(ctx context.Context, req Request) (*Permit, *Deferral, error) {
	now := g.now()
	key := GateKey(req.Provider, req.Account)
	p := &Permit{g: g, req: req, key: key}
	if _, declared := g.PaceFor(req.Provider, req.Account, nil); declared {
		if _, seen := g.overrides.Load(key); !seen {
			// First look at a paced account in this process: learn the
			// operator's pace before sizing a slot by it (one read per account
			// per process; an unpaced account's state is read below anyway).
			st, err := g.Store.State(ctx, key)
			if err != nil {
				return nil, nil, fmt.Errorf("gate %s: %w", key, err)
			}
			g.overrides.Store(key, st.Override)
		}
	}
	claim := ""
	if req.Once {
		claim = ClaimToken(req.ID, req.Attempt)
	}
	if tp, ok := g.TargetPace(req.Provider, req.Account); ok {
		tkey := TargetGateKey(req.Provider, req.Account, req.Target)
		ts, _, _, dup, err := g.take(ctx, tkey, tp, req.Carried.Target, claim, now)
		p.reserved = req.Once
		if err != nil {
			return nil, nil, fmt.Errorf("gate %s: %w", tkey, err)
		}
		if dup {
			return nil, g.duplicate(ctx, req, tkey), nil
		}
		if ts.at.After(now.Add(g.holdFor(req.Carried.Target != nil))) {
			// Over the target's pace: deferred to its slot, no slot of the
			// account taken.
			return nil, g.deferral(ts.at, "over the target's pace", Slots{Target: &ts.at}, p.reserved), nil
		}
		p.target = &ts
	}
	pace, paced := g.paceFor(req.Provider, req.Account, key)
	var acct slot
	at, usedResv := now, false
	var err error
	if paced {
		var dup bool
		acct, p.state, usedResv, dup, err = g.take(ctx, key, pace, req.Carried.Account, claim, now)
		p.reserved = req.Once
		at = acct.at
		if err == nil && dup {
			return nil, g.duplicate(ctx, req, key), nil
		}
	} else {
		// Unpaced: the breaker and pause state is all this attempt needs;
		// read where the store spreads it (a replica by intent id, the gate
		// itself whenever it is not clean).
		if !req.Clean {
			p.state, err = g.Store.StateFor(ctx, key, req.ID, now)
		}
		if err == nil && p.state.Override != nil {
			// Paced only by an operator: take a slot now that we know.
			pace, paced = p.state.Override.Pace, true
			acct, p.state, _, _, err = g.take(ctx, key, pace, nil, "", now)
			at = acct.at
		}
	}
	if err == nil {
		g.overrides.Store(key, p.state.Override)
		if cur, ok := g.PaceFor(req.Provider, req.Account, &p.state); ok && paced && cur.Interval() != pace.Interval() && req.Carried.Account == nil {
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
		return nil, nil, fmt.Errorf("gate %s: %w", key, err)
	}
	tol := time.Duration(0)
	if paced && !usedResv {
		tol = pace.Tolerance()
	}
	v := Admit(at, tol, p.state, now, g.holdFor(usedResv))
	if (v.Kind == VerdictSend || v.Kind == VerdictProbe) && (v.At.After(now) || usedResv || p.target != nil) {
		// A short wait for the slot, in-process, made right before the send
		// (Hold), so the claim and the checks do not blur the spacing.
		p.sendAt = v.At
		if paced {
			acct.pace, acct.at = pace, v.At
			p.account = &acct
		}
		if p.target != nil && p.target.at.After(p.sendAt) {
			p.sendAt = p.target.at
		}
		return p, nil, nil
	}
	if v.Kind == VerdictProbe {
		ok, err := g.Store.TakeProbe(ctx, key, now, now.Add(g.Breaker.ProbeLease))
		if err != nil {
			return nil, nil, fmt.Errorf("gate %s probe: %w", key, err)
		}
		if ok {
			g.log().InfoContext(ctx, "circuit breaker half-open: this attempt probes the account", "intent", req.ID, "gate", key)
			g.count("BreakerProbe")
			p.probe = true
			return p, nil, nil
		}
		v = Verdict{Kind: VerdictDefer, At: now.Add(g.Breaker.ProbeLease), Reason: "circuit breaker half-open; another intent is probing"}
	}
	if v.Kind == VerdictSend {
		return p, nil, nil
	}
	var keep Slots
	if v.KeepSlot {
		keep.Account = &v.At
	}
	return nil, g.deferral(v.At, v.Reason, keep, p.reserved), nil
}

// duplicate is the answer to a repeat of a trigger that already holds its
// slot (or is being sent): that one carries the attempt.
func (g *Gate) duplicate(ctx context.Context, req Request, key string) *Deferral {
	g.log().DebugContext(ctx, "duplicate trigger; the first one holds the slot", "intent", req.ID, "bot", req.Bot, "gate", key)
	g.count("GateDuplicateTrigger")
	return &Deferral{Duplicate: true, Reason: "a repeat of an attempt that holds its slot"}
}

// Unused is the Deferral of a permit its holder will not use (the inline
// intake put the intent pending, or found it stored): it carries the slots
// the permit stands on, at the latest of them.
func (p *Permit) Unused() *Deferral {
	now := p.g.now()
	var slots Slots
	at := now
	for _, s := range []*slot{p.account, p.target} {
		if s != nil && !s.at.IsZero() {
			t := s.at
			if s == p.account {
				slots.Account = &t
			} else {
				slots.Target = &t
			}
			if t.After(at) {
				at = t
			}
		}
	}
	return p.g.deferral(at, "the permit's holder did not send", slots, p.reserved)
}

// take is the slot one paced key gives an attempt: the reservation it
// carries back while usable (its lead already in it: used), else a fresh
// one, sent at that slot plus the lead (right before the send, so the
// claim and the checks happen inside the lead and a send goes out on its
// slot, not its slot plus their latency, which would crowd it against the
// next), under claim when one is given (dup: a repeat, which holds
// nothing). st is the key's state as the take wrote it (zero for a carried
// slot: Hold reads it).
func (g *Gate) take(ctx context.Context, key string, p Pace, carried *time.Time, claim string, now time.Time) (s slot, st GateState, used, dup bool, err error) {
	if carried != nil && ReservationUsable(*carried, p, now) {
		return slot{key: key, pace: p, at: *carried, raw: carried.Add(-g.Lead)}, GateState{}, true, false, nil
	}
	raw, st, dup, err := g.Store.Take(ctx, key, SlotTake{Interval: p.Interval(), Floor: now.Add(-p.Tolerance()), At: now, Claim: claim, Until: now.Add(ReserveOnceWindow)})
	return slot{key: key, pace: p, at: raw.Add(g.Lead), raw: raw}, st, false, dup, err
}

// moveOn moves a held send that woke too late for its slot onto a new one:
// one take whose floor is one interval past the counter value it stood on.
// When no slot was taken after its own (the counter still stands there: an
// account with little traffic) the counter slides to one interval after now
// less the lead, and the send goes now: later than its slot it crowds no
// send before it, and the slots after it follow it. Otherwise it takes a
// fresh slot at the tail and sends on it plus the lead, like every fresh
// slot (the sends of the slots before it go out at theirs plus the lead;
// without it, this send would land a lead early, on top of theirs).
func (g *Gate) moveOn(ctx context.Context, s *slot, now time.Time) error {
	stand := now.Add(-g.Lead)
	p := s.pace
	raw, _, _, err := g.Store.Take(ctx, s.key, SlotTake{Interval: p.Interval(), Floor: s.raw.Add(p.Interval() + 1), At: stand})
	if err == nil && raw.Equal(stand) {
		g.count("GateLateSlotSlid")
		s.at, s.raw = now, stand
		return nil
	}
	if err == nil && raw.Before(now.Add(-p.Tolerance())) {
		// The slots taken after its own are all past: the counter is idle
		// and starts again from now, as for any fresh take.
		raw, _, _, err = g.Store.Take(ctx, s.key, SlotTake{Interval: p.Interval(), Floor: now.Add(-p.Tolerance()), At: now})
	}
	g.count("GateLateSlotRetaken")
	s.at, s.raw = raw.Add(g.Lead), raw
	return err
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

// Hold waits for the permit's slot right before the send, then looks at the
// account again: a pause or an open breaker another worker wrote meanwhile
// wins, and Hold returns a Deferral (the caller, whose claim is on record,
// releases it: nothing sent). A paced send that reaches its slot too late
// (SendTooLate: a slow claim, queue or machine) does not send late, which
// would crowd the slots after it and take the account over its pace: it
// moves on (moveOn: one more write, only for a late attempt) and waits for
// its new slot; twice at most, and late for the third slot it is released.
// A slot beyond the hold bound is released like a paused one. A permit
// without a wait (an unpaced send) returns at once and reads nothing.
func (p *Permit) Hold(ctx context.Context) (*Deferral, error) {
	g := p.g
	if p.sendAt.IsZero() {
		return nil, nil
	}
	var now time.Time
	var st GateState
	stillLate := false
	maxWait := g.maxHold()
	ahead := time.Duration(0)
	if p.account != nil || p.target != nil {
		ahead = GateReadAhead
	}
	for late := 0; ; late++ {
		// The account's state is read shortly before the slot, not after it:
		// the read's latency (up to ~50 ms on a loaded host) would land
		// between the slot and the send, bunching sends over the pace.
		if err := g.sleep(ctx, p.sendAt.Add(-ahead).Sub(g.now())); err != nil {
			return nil, err // the lease expires; the sweeper takes it (nothing was sent)
		}
		st = p.read(ctx)
		if err := g.sleep(ctx, p.sendAt.Sub(g.now())); err != nil {
			return nil, err
		}
		now = g.now()
		acctLate := p.account != nil && SendTooLate(p.account.at, p.account.pace, now)
		targetLate := p.target != nil && SendTooLate(p.target.at, p.target.pace, now)
		if late == 2 || (!acctLate && !targetLate) {
			stillLate = acctLate || targetLate
			break
		}
		// Woke late for its slot (the claim, the checks, the queue, the read
		// or the machine were slow, or it waited for its target's slot):
		// sent now, it could crowd the slots after it and go over the pace.
		// It moves on and waits for its new slot; the checks are done.
		var err error
		if acctLate {
			err = g.moveOn(ctx, p.account, now)
		}
		if targetLate && err == nil {
			err = g.moveOn(ctx, p.target, now)
		}
		next := time.Time{}
		for _, s := range []*slot{p.account, p.target} {
			if s != nil && s.at.After(next) {
				next = s.at
			}
		}
		if err == nil && !next.After(now) {
			// Slid: it goes now, on the state it has just read (another read
			// would only make it late again on a slow store).
			p.sendAt = now
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
			p.sendAt = next // too far to wait for: Admit defers it below
			break
		}
		p.sendAt = next
		if next.Before(now) {
			p.sendAt = now
		}
	}
	p.state = st
	v := Admit(p.sendAt, 0, st, now, maxWait)
	if stillLate && v.Kind == VerdictSend {
		// Late for a third slot in a row (the machine is too slow to keep
		// the pace): sent now it would crowd the sends after it, over the
		// pace — and past the point where an opening breaker can stop it.
		// Released like a paused attempt instead.
		v = Verdict{Kind: VerdictDefer, At: now.Add(time.Second), Reason: "late for its pace slot three times"}
	}
	if v.Kind == VerdictProbe {
		ok, err := g.Store.TakeProbe(ctx, p.key, now, now.Add(g.Breaker.ProbeLease))
		if err == nil && ok {
			p.probe = true
			g.count("BreakerProbe")
			return nil, nil
		}
		v = Verdict{Kind: VerdictDefer, At: now.Add(g.Breaker.ProbeLease), Reason: "circuit breaker half-open; another intent is probing"}
	}
	if v.Kind == VerdictSend {
		return nil, nil
	}
	return &Deferral{At: v.At, Wake: v.At, Reason: v.Reason}, nil
}

// read reads the account's state right before the send. An unreadable
// gate reads as a short pause: no blind send.
func (p *Permit) read(ctx context.Context) GateState {
	g := p.g
	now := g.now()
	var st GateState
	var err error
	if p.account != nil {
		st, err = g.Store.State(ctx, p.key) // a paced account writes its gate on every attempt anyway
	} else {
		st, err = g.Store.StateFor(ctx, p.key, p.req.ID, now)
	}
	if err != nil {
		until := now.Add(time.Second)
		return GateState{PausedUntil: &until}
	}
	return st
}

// Report tells the gate how the send went: a 429 pauses the account for
// every worker (until retryAfter from now; 0: DefaultRetryAfter),
// transient failures count towards the breaker, a success closes it.
func (p *Permit) Report(ctx context.Context, r GateResult, retryAfter time.Duration) {
	g := p.g
	now := g.now()
	req := p.req
	log := g.log().With("intent", req.ID, "bot", req.Bot, "gate", p.key)
	warn := func(what string, err error) {
		if err != nil {
			log.WarnContext(ctx, "gate: "+what+" not recorded", "err", err.Error())
		}
	}
	switch r {
	case GateSuccess:
		_, countedHere := g.counted.LoadAndDelete(p.key)
		if !EndsStreak(p.probe, p.state, countedHere) {
			return // the common case writes nothing
		}
		ev := BreakerEvent(EventBreakerClosed, req.Provider, req.Account, now,
			fmt.Sprintf("a send to %s account %q succeeded (intent %s); sends resume", req.Provider, req.Account, req.ID))
		closed, err := g.Store.Close(ctx, p.key, ev)
		warn("close", err)
		if closed {
			g.publish(ctx, ev)
		}
	case GateRateLimited:
		ra := orDefault(retryAfter, g.DefaultRetryAfter)
		warn("pause", g.Store.Pause(ctx, p.key, now.Add(ra)))
		log.InfoContext(ctx, "provider rate limit: account paused for every sender", "until", now.Add(ra))
		g.count("AccountPaused")
	case GateTransient:
		if g.Breaker.Failures <= 0 {
			return
		}
		if p.probe {
			opens := p.state.Breaker.Opens + 1
			_, err := g.Store.Open(ctx, p.key, now.Add(g.Breaker.CooldownAfter(opens)), true, Event{})
			warn("re-open", err)
			log.InfoContext(ctx, "circuit breaker probe failed; open again", "cooldown", g.Breaker.CooldownAfter(opens))
			return
		}
		st, err := g.Store.Failure(ctx, p.key)
		warn("failure", err)
		if err == nil {
			g.counted.Store(p.key, struct{}{})
		}
		if err != nil || st.Breaker.Open || st.Breaker.Failures < g.Breaker.Failures {
			return
		}
		cool := g.Breaker.CooldownAfter(st.Breaker.Opens + 1)
		ev := BreakerEvent(EventBreakerOpened, req.Provider, req.Account, now,
			fmt.Sprintf("%d consecutive transient failures sending to %s account %q (last: intent %s); no sends for %s, then one probe", st.Breaker.Failures, req.Provider, req.Account, req.ID, cool))
		opened, err := g.Store.Open(ctx, p.key, now.Add(cool), false, ev)
		warn("open", err)
		if opened {
			g.publish(ctx, ev)
		}
	}
}

// publish hands the gate's move to the operator-event path; the store
// recorded it with the move, so one that is not published now is redriven.
func (g *Gate) publish(ctx context.Context, ev Event) {
	if g.Notify == nil {
		return
	}
	if err := g.Notify(ctx, ev); err != nil {
		g.log().WarnContext(ctx, "operator event not published yet", "event", ev.ID, "err", err.Error())
	}
}
