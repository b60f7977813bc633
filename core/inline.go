package core

import (
	"context"
	"sync"
	"time"
)

// Inline delivery (issue 26). A bot that asks to wait (POST /v1/intents with
// Prefer: wait=N) gets the provider's answer in the response, at the floor of
// two durable writes: the intake writes the intent already claimed (in
// flight, attempt 1, under a lease) in its one conditional put, makes the
// attempt through the dispatcher's one entry (Dispatcher.Attempt with
// NewIntent: the gate, the claim's change, the put, then barrier, checks,
// gate hold, send, outcome, as for every attempt) and answers with the
// intent as the outcome left it.
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
// the account gate's replica for the intent (as gate.GateStore.StateFor
// reads it first). adapters/dynamo: one BatchGetItem. Without it the three
// are read side by side.
type InlinePreflight interface {
	Preflight(ctx context.Context, in *Intent) (Preflight, error)
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
	// Wait is Prefer: wait as asked (0: answer at once, the asynchronous
	// road); the intake caps it (Inline.MaxWait) and says what it applied
	// (SubmitResult.Wait).
	Wait time.Duration
}

// wait caps the wait a request asked for; 0 when inline delivery is off.
// The one place the cap is applied.
func (l *Inline) wait(asked time.Duration) time.Duration {
	if l == nil || l.D == nil || asked <= 0 {
		return 0
	}
	return min(asked, OrDefault(l.MaxWait, DefaultInlineMaxWait))
}

// inlineReads are the reads an inline attempt makes before its put: the
// revalidation and the backup barrier (side by side, or with the gate's
// replica in one Preflight).
type inlineReads struct {
	wg      sync.WaitGroup
	checks  *Checks
	blocked *Blocked
	up      bool
	clean   bool // the gate's replica read clean (Preflight.GateClean)
	// pfErr, rvErr, bErr: the reads that failed.
	pfErr, rvErr, bErr error
	// asked is when the barrier read was issued (monotonic; zero without one).
	asked time.Time
}

// read starts the reads before the put; the Preflight one is done when it returns.
func (l *Inline) read(ctx context.Context, in *Intent) *inlineReads {
	d, r := l.D, &inlineReads{}
	if l.Preflight != nil && d.Revalidator != nil && d.Barrier != nil && d.Gate != nil {
		r.asked = l.mono() // real latency, not d.Clock
		pf, err := l.Preflight.Preflight(ctx, in)
		if err != nil {
			r.pfErr = err
			return r
		}
		r.checks, r.blocked = Evaluate(in, pf.Facts, d.Clock.Now())
		r.up, r.clean = pf.BarrierUp, pf.GateClean
		return r
	}
	if d.Revalidator != nil {
		r.wg.Add(1)
		go func() { defer r.wg.Done(); r.checks, r.blocked, r.rvErr = d.Revalidator.Revalidate(ctx, in) }()
	}
	if d.Barrier != nil {
		r.asked = l.mono() // real latency, not d.Clock
		r.wg.Add(1)
		go func() { defer r.wg.Done(); _, r.up, r.bErr = d.Barrier.BarrierUp(ctx, in) }()
	}
	return r
}

// checked waits for the reads and says why they do not let the attempt go
// now ("": they do).
func (r *inlineReads) checked() (*Checks, string) {
	r.wg.Wait()
	why := ""
	switch {
	case r.pfErr != nil:
		why = "the checks before the put could not be read: " + r.pfErr.Error()
	case r.rvErr != nil:
		why = "revalidation could not be read"
	case r.blocked != nil:
		why = "revalidation blocks it: " + r.blocked.Reason
	case r.bErr != nil:
		why = "the backup barrier could not be read"
	case r.up:
		why = "a backup barrier is up for the profile"
	}
	return r.checks, why
}

// submit is the intake's step for a submission that asked to wait, after
// it decided to accept in: the reads before the put, then the attempt
// through the dispatcher's one entry, whose put is the intake's (put).
// existing is the intent the put found stored, for the caller's replay
// rules.
func (l *Inline) submit(ctx context.Context, in *Intent, put func(context.Context, *Intent) (*Intent, bool, error)) (res SubmitResult, existing *Intent, err error) {
	reads := l.read(ctx, in)
	nw := &NewIntent{Checked: reads.checked, GateClean: reads.clean, Put: put}
	if !reads.asked.IsZero() {
		nw.BarrierFresh = func() bool { return l.mono().Sub(reads.asked) < InlineBarrierFresh }
	}
	out, err := l.D.Attempt(ctx, AttemptRequest{ID: in.ID, Trigger: TriggerInline, Intent: in, New: nw})
	switch {
	case err != nil:
		return SubmitResult{}, nil, err
	case out.Existing != nil:
		return SubmitResult{}, out.Existing, nil
	case !out.Attempted:
		return SubmitResult{Intent: in}, nil, nil
	case out.Intent == nil:
		// The outcome is not known here (a store failure recording it, or a
		// release by the gate): answer with what is stored.
		cur, gerr := l.D.Store.Get(ctx, in.ID)
		if gerr != nil {
			return SubmitResult{Intent: in}, nil, nil
		}
		return SubmitResult{Intent: cur, Waited: cur.Status != StatusInFlight}, nil, nil
	}
	return SubmitResult{Intent: out.Intent, Waited: true}, nil, nil
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
		if err := sleep(ctx, d, l.Sleep); err != nil {
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
