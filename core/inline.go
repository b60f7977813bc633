package core

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Inline delivery (issue 26). A bot that asks to wait (POST /v1/intents with
// Prefer: wait=N) gets the provider's answer in the response, at the floor of
// two durable writes: the intake writes the intent already claimed (in
// flight, attempt 1, under a lease) in its one conditional put, makes the
// attempt through the dispatcher's own code after the claim
// (Dispatcher.afterClaim: barrier, checks, gate hold, send, outcome) and
// answers with the intent as the outcome left it.
//
// Whether the intent can be attempted now is decided before the put, by the
// rules of every attempt: revalidation (grant, capability, source, target;
// the deadline by the claim's own rule), no raised backup barrier for the
// profile, and the account's gate (unpaced or a paced slot within the
// gate's hold bound, breaker closed or this intent its probe, no pause).
// When any of them says no, the put is the ordinary pending intent and the
// asynchronous road takes it: a bot never gets a weaker guarantee by asking
// to wait. The three reads run side by side (one round trip).
//
// The barrier read before the put also stands for the read after the claim
// ("claim, then check the barrier", BarrierCheck) when the put returned
// within InlineBarrierFresh of the moment that read was issued: a backup
// waits BarrierSettle after its raise before it reads any intent, so such a
// put is linearised before the backup's first read, and the backup reads
// the intent in flight (recorded in flight at the cutoff), exactly as for a
// claim whose barrier read preceded the raise. A slower put reads the
// barrier again after it, as every claim does. The revalidation read before the put is
// the attempt's revalidation (recorded on the attempt): it happens before
// the send, as the dispatcher's does, so a revocation acknowledged before it
// is seen.
//
// A crash mid-send leaves the lease: the put filed the intent's repair entry
// (every put of a new intent does, NextRepairCheck), so the sweeper finds the
// expired lease and takes the attempt down the unknown-outcome path, exactly
// as for a crashed dispatcher. The stream filter passes only pending intents
// (dispatcher.StreamFilterPattern), so an intent inserted in flight is never
// dispatched a second time.

// TriggerInline is the attempt trigger of an inline intake attempt.
const TriggerInline = "inline"

// BarrierSettle is how long a backup waits after its barrier raise
// committed before it reads any intent of the profile. InlineBarrierFresh is
// how long an inline put may take, counted from the moment its barrier read
// was issued, for that read to stand for the read after the claim (half the
// settle: a margin for the two clocks' rates and the backup's own timer).
const (
	BarrierSettle      = time.Second
	InlineBarrierFresh = BarrierSettle / 2
)

// DefaultInlineMaxWait caps Prefer: wait (below the API's and the intake
// function's timeouts).
const DefaultInlineMaxWait = 10 * time.Second

// Inline polling of a replay waiting for an inline attempt: the first poll
// after InlinePollFirst, doubling up to InlinePollMax.
const (
	InlinePollFirst = 20 * time.Millisecond
	InlinePollMax   = 500 * time.Millisecond
)

// InlinePreflight reads, in one round trip, what an inline attempt decides
// before its put: the revalidation facts (as FactReader reads them), the
// backup barrier shard covering the intent (as BarrierCheck reads it) and
// the account gate's replica for the intent (as GateStore.StateFor reads
// it first). adapters/dynamo: one BatchGetItem. Without it the three are
// read side by side.
type InlinePreflight interface {
	Preflight(ctx context.Context, in *Intent, gateKey string) (Preflight, error)
}

// Preflight is what InlinePreflight read.
type Preflight struct {
	Facts     RevalidationFacts
	BarrierUp bool
	// GateClean: the gate's replica says the gate is clean (no pause, no
	// breaker, no operator pace), so an unpaced account's state is empty;
	// otherwise the gate itself is read, as StateFor does.
	GateClean bool
}

// Inline makes first attempts inside the intake request that asks to wait.
type Inline struct {
	D *Dispatcher
	// Preflight, when set (with the dispatcher's Revalidator, Barrier and
	// Gate), reads the three in one request.
	Preflight InlinePreflight
	// MaxWait caps the wait a request may ask for (default DefaultInlineMaxWait).
	MaxWait time.Duration
	// Sleep waits between a replay's polls (tests inject it); nil: a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Monotonic times the barrier read before the put against
	// InlineBarrierFresh (tests inject it); nil: time.Now, whose monotonic
	// reading measures real latency whatever the Dispatcher's Clock says.
	Monotonic func() time.Time
}

func (l *Inline) mono() time.Time {
	if l.Monotonic != nil {
		return l.Monotonic()
	}
	return time.Now()
}

// SubmitOptions are the caller's preferences for one submission.
type SubmitOptions struct {
	// Wait is Prefer: wait (0: answer at once, the asynchronous road).
	Wait time.Duration
}

// Wait caps the wait a request asked for; 0 when inline delivery is off.
func (l *Inline) Wait(asked time.Duration) time.Duration {
	if l == nil || l.D == nil || asked <= 0 {
		return 0
	}
	return min(asked, OrDefault(l.MaxWait, DefaultInlineMaxWait))
}

// inlinePlan is the intake's decision for one intent that asked to wait.
type inlinePlan struct {
	claimed bool // the intent is written already claimed
	ticket  ticket
	checks  *Checks
	now     time.Time
	why     string // why not claimed ("" when claimed)
	// barrierAsked is when the barrier read before the put was issued
	// (monotonic; zero without a barrier check).
	barrierAsked time.Time
}

// plan decides, before the put, whether in can be attempted now, and if so
// makes the claim's change to it (in flight, attempt 1, lease).
func (l *Inline) plan(ctx context.Context, in *Intent) (*inlinePlan, error) {
	d := l.D
	p := &inlinePlan{}
	var (
		wg                sync.WaitGroup
		checks            *Checks
		blocked           *Blocked
		rvErr, bErr, gErr error
		up                bool
	)
	known := gateKnown{}
	if l.Preflight != nil && d.Revalidator != nil && d.Barrier != nil && d.Gate != nil {
		p.barrierAsked = l.mono() // real latency, not d.Clock
		pf, err := l.Preflight.Preflight(ctx, in, GateKey(in.Provider, in.Account))
		if err != nil {
			p.why = "the checks before the put could not be read: " + err.Error()
			return p, nil
		}
		checks, blocked = Evaluate(in, pf.Facts, d.Clock.Now())
		up, known.clean = pf.BarrierUp, pf.GateClean
	} else {
		if d.Revalidator != nil {
			wg.Add(1)
			go func() { defer wg.Done(); checks, blocked, rvErr = d.Revalidator.Revalidate(ctx, in) }()
		}
		if d.Barrier != nil {
			p.barrierAsked = l.mono() // real latency, not d.Clock
			wg.Add(1)
			go func() { defer wg.Done(); _, up, bErr = d.Barrier.BarrierUp(ctx, in) }()
		}
	}
	// The gate last, in this goroutine: a gate error must not leak a slot
	// reservation unseen, and admit's own reads are the slowest.
	t, gErr := d.admit(ctx, in.ID, TriggerInline, known, in)
	wg.Wait()
	p.ticket = t
	switch {
	case gErr != nil:
		p.why = "the account gate could not be read: " + gErr.Error()
	case !t.send && t.later != nil:
		p.why = "the account gate defers it: " + t.later.reason
	case !t.send:
		p.why = "the account gate holds its slot for another trigger"
	case rvErr != nil:
		p.why = "revalidation could not be read"
	case blocked != nil:
		p.why = "revalidation blocks it: " + blocked.Reason
	case bErr != nil:
		p.why = "the backup barrier could not be read"
	case up:
		p.why = "a backup barrier is up for the profile"
	}
	if p.why != "" {
		return p, nil
	}
	now := d.Clock.Now()
	if err := d.startAttempt(in, now); err != nil {
		if errors.Is(err, errDeadlinePassed) || errors.Is(err, ErrNotClaimable) {
			p.why = err.Error()
			return p, nil
		}
		return nil, err
	}
	p.claimed, p.checks, p.now = true, checks, now
	return p, nil
}

// attempt makes the claimed attempt of in, which the put just stored, and
// returns the intent as its outcome left it (nil if it cannot tell).
func (l *Inline) attempt(ctx context.Context, in *Intent, p *inlinePlan) (*Intent, error) {
	d := l.D
	log := d.log().With("intent", in.ID, "bot", in.Bot, "attempt", in.AttemptCount)
	att := Attempt{N: in.AttemptCount, Trigger: TriggerInline, StartedAt: p.now}
	d.metrics().Count("InlineAttempt", 1)
	pre := preClaim{checks: p.checks}
	if !p.barrierAsked.IsZero() && l.mono().Sub(p.barrierAsked) < InlineBarrierFresh {
		pre.barrierRead = true
	} else if !p.barrierAsked.IsZero() {
		d.metrics().Count("InlineBarrierReread", 1)
	}
	return d.afterClaim(ctx, in, att, p.ticket, pre, log)
}

// handOn passes on what the gate gave an intent that was not attempted
// inline (put pending, or found stored): a slot reserved under its claim
// token, which its stream record will not take again, goes with a paced
// message (a stale or unclaimable one is dropped by the retrier). An
// unpaced deferral needs nothing: the stream dispatches the pending intent
// and the gate defers it there.
func (l *Inline) handOn(ctx context.Context, in *Intent, p *inlinePlan) {
	if p == nil || p.claimed || !p.ticket.reservedOnce {
		return
	}
	d := l.D
	now := d.Clock.Now()
	msg := RetryMessage{IntentID: in.ID, Attempt: 0, Op: OpPaced, Trigger: TriggerInline}
	at := now
	if !p.ticket.slot.IsZero() {
		s := p.ticket.slot
		msg.SlotAt, at = &s, s
	}
	if p.ticket.tkey != "" && !p.ticket.tslot.IsZero() {
		s := p.ticket.tslot
		msg.TargetSlotAt = &s
		if s.After(at) {
			at = s
		}
	}
	if lt := p.ticket.later; lt != nil {
		switch lt.keep {
		case keepAccountSlot:
			msg.SlotAt = &lt.at
		case keepTargetSlot:
			msg.TargetSlotAt = &lt.at
		}
		at = lt.at
	}
	delay := at.Sub(now)
	if msg.SlotAt != nil || msg.TargetSlotAt != nil {
		delay -= d.Gate.queueMargin()
	}
	if in.Deadline != nil && in.Deadline.Sub(now) < delay {
		delay = in.Deadline.Sub(now)
	}
	if err := d.Queue.Enqueue(ctx, msg, max(delay, 0)); err != nil {
		// The sweeper's kick of the pending intent reserves afresh once the
		// claim token's window is over.
		d.log().WarnContext(ctx, "inline: handing on the reserved slot failed; the sweeper takes the intent", "intent", in.ID, "err", err.Error())
	}
}

// await waits, bounded by wait, for the attempt in flight on a stored intent
// to end (a replay of a request that is still sending), polling the intent
// with backoff. It returns the last state read and whether it ended.
func (l *Inline) await(ctx context.Context, in *Intent, wait time.Duration) (*Intent, bool) {
	if in.Status != StatusInFlight {
		return in, true
	}
	// The bound is the sum of the pauses, not the clock: a clock that
	// stands still (tests, chaos) must not make the wait endless.
	step, waited := InlinePollFirst, time.Duration(0)
	for {
		left := wait - waited
		if left <= 0 {
			return in, false
		}
		d := min(step, left)
		if err := l.sleep(ctx, d); err != nil {
			return in, false
		}
		waited += d
		step = min(step*2, InlinePollMax)
		cur, err := l.D.Store.Get(ctx, in.ID)
		if err != nil {
			continue // keep what we have; try again until the bound
		}
		in = cur
		if in.Status != StatusInFlight {
			return in, true
		}
	}
}

func (l *Inline) sleep(ctx context.Context, d time.Duration) error { return sleep(ctx, d, l.Sleep) }

// submitInline is the intake's step for a submission that asked to wait,
// after it decided to accept in and before its put: it plans the inline
// attempt, puts, and makes the attempt (or hands the intent to the
// asynchronous road). created=false returns the stored intent for the
// caller's replay rules.
func (s *Intake) submitInline(ctx context.Context, in *Intent, wait time.Duration) (res SubmitResult, existing *Intent, err error) {
	l := s.Inline
	p, err := l.plan(ctx, in)
	if err != nil {
		return SubmitResult{}, nil, err
	}
	existing, created, err := s.Store.Create(ctx, in)
	if err != nil {
		// Nothing stored, nothing sent. A reserved slot is lost to the pace.
		return SubmitResult{}, nil, err
	}
	if !created {
		l.handOn(ctx, existing, p)
		return SubmitResult{}, existing, nil
	}
	if !p.claimed {
		l.handOn(ctx, in, p)
		l.D.log().DebugContext(ctx, "inline: not attempted now; the asynchronous road takes it", "intent", in.ID, "why", p.why)
		l.D.metrics().Count("InlineFallback", 1)
		return SubmitResult{Intent: in}, nil, nil
	}
	stored, err := l.attempt(ctx, in, p)
	if err != nil || stored == nil {
		// The outcome is not known here (a store failure recording it, or a
		// release by the gate): answer with what is stored; the lease and
		// the sweeper cover a lost outcome, as for the dispatcher.
		if err != nil {
			l.D.log().WarnContext(ctx, "inline: attempt ended without a recorded outcome", "intent", in.ID, "err", err.Error())
		}
		cur, gerr := s.Store.Get(ctx, in.ID)
		if gerr != nil {
			return SubmitResult{Intent: in}, nil, nil
		}
		return SubmitResult{Intent: cur, Waited: cur.Status != StatusInFlight}, nil, nil
	}
	return SubmitResult{Intent: stored, Waited: true}, nil, nil
}
