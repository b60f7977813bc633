package core

// One public entry for every attempt (issue 47): the stream's dispatcher,
// the retrier's queue messages (retries, paced returns, dispatch fan-out,
// the sweeper's kicks, a human's retry through the pending road) and the
// inline intake all start attempts through Dispatcher.Attempt. It asks the
// account gate (package core/gate) before the claim; a deferral becomes a
// queue message in one place (deferAttempt).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/botharness/outbox/core/gate"
)

// Trigger names who asked for an attempt (the attempt history records it).
type Trigger string

// Triggers.
const (
	// TriggerStream: the intent's stream record (dispatcher function).
	TriggerStream Trigger = "stream"
	// TriggerDispatch: a dispatch message without a trigger of its own.
	TriggerDispatch Trigger = OpDispatch
	// TriggerSweeper: the sweeper's kick of an orphaned pending intent.
	TriggerSweeper Trigger = "sweeper"
	// TriggerRetry: a retry message after a failed attempt's backoff.
	TriggerRetry Trigger = "retry"
	// TriggerPaced: an attempt the account gate deferred comes back.
	TriggerPaced Trigger = OpPaced
	// TriggerInline: the intake's attempt inside a request that asks to wait.
	TriggerInline Trigger = "inline"
	// TriggerGate: the record of a claimed attempt the gate released.
	TriggerGate Trigger = "gate"
	// TriggerRestore and TriggerReconcile: history entries of a restore
	// and of a reconciliation (no send).
	TriggerRestore   Trigger = "restore"
	TriggerReconcile Trigger = "reconcile"
)

// duplicateProneTrigger reports whether an attempt's trigger may arrive
// more than once for the same attempt: the stream's dispatch (every record
// is delivered at least once, and each stream consumer fans it out) and the
// sweeper's kick of a pending intent; and the inline intake, whose
// reservation comes first: if it falls back to the pending road, its stream
// record finds the slot taken and the intake hands it on. Such an attempt
// takes its pace slot under its claim token (gate.Request.Once). Pure.
func duplicateProneTrigger(t Trigger) bool {
	switch t {
	case TriggerStream, TriggerSweeper, TriggerDispatch, TriggerInline:
		return true
	}
	return false
}

// OpPaced is the retry-queue operation of an attempt the gate deferred.
const OpPaced = "paced"

// AttemptDeferred is the result of a claimed attempt the gate stopped before
// the send (a pause or an open breaker seen after waiting for the slot).
const AttemptDeferred AttemptResult = "deferred"

// classifyForGate maps a send's error to what the gate counts: a 429 pauses
// the account, a transient failure (provably not sent) counts towards the
// breaker, a success closes it; unknown outcomes and rejections say nothing
// about the account's health. Pure.
func classifyForGate(sendErr error) gate.GateResult {
	if sendErr == nil {
		return gate.GateSuccess
	}
	switch ClassOf(sendErr) {
	case ClassRateLimited:
		return gate.GateRateLimited
	case ClassTransient:
		return gate.GateTransient
	}
	return gate.GateOther
}

// GateOperatorEvent is the operator event of a breaker's move.
func GateOperatorEvent(ev gate.Event) OperatorEvent {
	return OperatorEvent{ID: ev.ID, Type: ev.Kind, At: ev.At, Provider: ev.Provider, Account: ev.Account, Reason: ev.Detail}
}

// AttemptRequest asks for one attempt of an intent.
type AttemptRequest struct {
	ID      string
	Trigger Trigger
	// Intent is the intent as the caller just read it (nil: Attempt reads it);
	// with New, the intent the intake is about to put.
	Intent *Intent
	// Slots are the pace slots a deferred attempt carries back (OpPaced).
	Slots gate.Slots
	// New is the inline intake's part when the intent is not stored yet.
	New *NewIntent
}

// NewIntent is the inline intake's part of the attempt of an intent it has
// not stored yet: what it read before its put, and the put.
type NewIntent struct {
	// Checked waits for the reads the intake made before its put and
	// returns the attempt's revalidation (nil: none made) and why they do
	// not let it go now ("": they do).
	Checked func() (checks *Checks, why string)
	// GateClean: the intake read the gate's replica and found it clean.
	GateClean bool
	// BarrierFresh, when the intake read the backup barrier, says after the
	// put whether that read still stands for the read after the claim
	// (InlineBarrierFresh).
	BarrierFresh func() bool
	// Put stores the intent (claimed, or pending when it cannot be
	// attempted now) in the intake's one conditional put; created=false
	// returns the intent stored under its ID.
	Put func(ctx context.Context, in *Intent) (stored *Intent, created bool, err error)
}

// AttemptOutcome is what Attempt did.
type AttemptOutcome struct {
	// Intent is the intent as the attempt's last write left it (nil: not
	// known, e.g. the gate's release after a hold).
	Intent *Intent
	// Existing (New only): the put found this intent stored; nothing attempted.
	Existing *Intent
	// Attempted (New only): the attempt was made; false: the intent was
	// put pending and the asynchronous road takes it.
	Attempted bool
}

// Attempt claims the intent and, if the claim wins, makes one attempt and
// records its outcome; every road starts its attempts here. A lost claim
// (duplicate record, stale message, another worker) does nothing.
func (d *Dispatcher) Attempt(ctx context.Context, req AttemptRequest) (AttemptOutcome, error) {
	if req.New != nil {
		return d.attemptNew(ctx, req)
	}
	in, permit, def, err := d.askGate(ctx, req)
	if err != nil {
		return AttemptOutcome{}, err
	}
	if def != nil {
		if def.Duplicate {
			return AttemptOutcome{}, nil
		}
		// Deferred by the account gate (pace, pause, breaker): nothing sent.
		return AttemptOutcome{}, d.deferAttempt(ctx, in, in.AttemptCount, OpPaced, req.Trigger, *def)
	}
	id, trigger := req.ID, req.Trigger
	now := d.Clock.Now()
	var expired bool
	in, err = d.Store.Claim(ctx, id, func(in *Intent) error { return d.startAttempt(in, now) })
	if errors.Is(err, errDeadlinePassed) {
		// Not a claim: an ordinary write moves it to expired (a backup
		// barrier does not hold it back, as it holds back no send).
		expired = true
		in, err = d.Store.Update(ctx, id, func(in *Intent) error {
			if !in.Claimable(now) {
				return ErrNotClaimable
			}
			return in.MoveTo(StatusExpired, "deadline passed before the attempt", now)
		})
	}
	switch {
	case errors.Is(err, ErrNotClaimable), errors.Is(err, ErrConflict):
		// Someone else holds or finished it; a duplicate trigger is harmless.
		d.log().DebugContext(ctx, "claim not taken", "intent", id, "trigger", trigger, "why", err.Error())
		return AttemptOutcome{}, nil
	case errors.Is(err, ErrNotFound):
		d.log().WarnContext(ctx, "intent to attempt not found", "intent", id, "trigger", trigger)
		return AttemptOutcome{}, nil
	case err != nil:
		return AttemptOutcome{}, fmt.Errorf("claim %s: %w", id, err)
	}
	log := d.log().With("intent", in.ID, "bot", in.Bot, "attempt", in.AttemptCount)
	if expired {
		log.InfoContext(ctx, "intent expired before its attempt")
		d.metrics().Count("IntentsExpired", 1)
		return AttemptOutcome{Intent: in}, nil
	}
	att := Attempt{N: in.AttemptCount, Trigger: trigger, StartedAt: now}
	stored, err := d.afterClaim(ctx, in, att, permit, preClaim{}, log)
	return AttemptOutcome{Intent: stored}, err
}

// attemptNew is Attempt for the inline intake: the gate and the intake's
// reads decide before the put whether the intent is written already
// claimed (then attempted here, after the put) or pending (the
// asynchronous road takes it, and the gate's reserved slots go with it).
func (d *Dispatcher) attemptNew(ctx context.Context, req AttemptRequest) (AttemptOutcome, error) {
	in, nw := req.Intent, req.New
	before := in.AttemptCount
	// The gate first, in this goroutine, while the intake's reads run: a
	// gate error must not leak a slot reservation unseen.
	_, permit, def, gErr := d.askGate(ctx, req)
	checks, why := nw.Checked()
	switch {
	case gErr != nil:
		why = "the account gate could not be read: " + gErr.Error()
	case def != nil && def.Duplicate:
		why = "the account gate holds its slot for another trigger"
	case def != nil:
		why = "the account gate defers it: " + def.Reason
	}
	now := d.Clock.Now()
	if why == "" {
		if err := d.startAttempt(in, now); errors.Is(err, errDeadlinePassed) || errors.Is(err, ErrNotClaimable) {
			why = err.Error()
		} else if err != nil {
			return AttemptOutcome{}, err
		}
	}
	stored, created, err := nw.Put(ctx, in)
	if err != nil {
		return AttemptOutcome{}, err // nothing stored, nothing sent; a reserved slot is lost to the pace
	}
	if !created || why != "" {
		if def == nil && permit != nil {
			def = permit.Unused()
		}
		if def != nil && def.Reserved && !def.Duplicate {
			// Slots reserved under the claim token, which the intent's stream
			// record will not take again, go with a paced message (a stale or
			// unclaimable one is dropped by the retrier). Otherwise the stream
			// dispatches the pending intent and the gate decides there.
			if err := d.deferAttempt(ctx, in, before, OpPaced, req.Trigger, *def); err != nil {
				d.log().WarnContext(ctx, "inline: handing on the reserved slot failed; the sweeper takes the intent", "intent", in.ID, "err", err.Error())
			}
		}
		if !created {
			return AttemptOutcome{Existing: stored}, nil
		}
		d.log().DebugContext(ctx, "inline: not attempted now; the asynchronous road takes it", "intent", in.ID, "why", why)
		d.metrics().Count("InlineFallback", 1)
		return AttemptOutcome{Intent: in}, nil
	}
	d.metrics().Count("InlineAttempt", 1)
	pre := preClaim{checks: checks}
	if nw.BarrierFresh != nil {
		if pre.barrierRead = nw.BarrierFresh(); !pre.barrierRead {
			d.metrics().Count("InlineBarrierReread", 1)
		}
	}
	log := d.log().With("intent", in.ID, "bot", in.Bot, "attempt", in.AttemptCount)
	att := Attempt{N: in.AttemptCount, Trigger: req.Trigger, StartedAt: now}
	out, err := d.afterClaim(ctx, in, att, permit, pre, log)
	if err != nil {
		// The outcome is not known here (a store failure recording it): the
		// lease and the sweeper cover a lost outcome, as for any attempt.
		log.WarnContext(ctx, "inline: attempt ended without a recorded outcome", "err", err.Error())
	}
	return AttemptOutcome{Intent: out, Attempted: true}, nil
}

// askGate asks the account gate for the attempt (reading the intent when
// the caller did not): a permit (nil: ungated, send), or a deferral.
// Intents that are not claimable now (or are past their deadline) pass
// without the gate: the claim turns them away (or expires them) with no
// send; so does one that may not be sent again anyway.
func (d *Dispatcher) askGate(ctx context.Context, req AttemptRequest) (*Intent, *gate.Permit, *gate.Deferral, error) {
	in := req.Intent
	if d.Gate == nil {
		return in, nil, nil, nil
	}
	if in == nil {
		var err error
		in, err = d.Store.Get(ctx, req.ID)
		if errors.Is(err, ErrNotFound) {
			return nil, nil, nil, nil // the claim logs it
		}
		if err != nil {
			return nil, nil, nil, fmt.Errorf("gate: read %s: %w", req.ID, err)
		}
	}
	now := d.Clock.Now()
	if !in.Claimable(now) || (in.Deadline != nil && !now.Before(*in.Deadline)) {
		return in, nil, nil, nil
	}
	if MayHaveTakenEffect(in) && !DecideResend(resendCase(in, d.Capabilities(ctx, in), now.Add(d.Policy.Lease))).Allowed() {
		// It cannot be sent again anyway: the check before the send takes it
		// to a human. Holding it at the gate would only leave it waiting
		// for a breaker it may never probe. (One whose retry is provably
		// safe may probe a half-open breaker.)
		return in, nil, nil, nil
	}
	clean := req.New != nil && req.New.GateClean
	carried := req.Slots.Account != nil || req.Slots.Target != nil
	permit, def, err := d.Gate.Admit(ctx, gate.Request{
		ID: in.ID, Attempt: in.AttemptCount, Bot: in.Bot,
		Provider: in.Provider, Account: in.Account, Target: in.Target,
		Carried: req.Slots, Clean: clean,
		Once: !carried && duplicateProneTrigger(req.Trigger),
	})
	return in, permit, def, err
}

// deferAttempt turns a deferral by the account gate into a queue message:
// the one place a deferral becomes one. The attempt of in (attempt: its
// count then) comes back at the deferral's Wake, carrying its reserved
// slots (op OpPaced) — or at the intent's deadline if that comes first, to
// expire it, never to send it late. A claimed attempt the gate released
// after its hold comes back as an ordinary retry (OpAttempt).
func (d *Dispatcher) deferAttempt(ctx context.Context, in *Intent, attempt int, op string, trigger Trigger, def gate.Deferral) error {
	now := d.Clock.Now()
	msg := RetryMessage{IntentID: in.ID, Attempt: attempt, Op: op, Trigger: trigger}
	at, wake := def.At, def.Wake
	if in.Deadline != nil && in.Deadline.Before(at) {
		at, wake = *in.Deadline, *in.Deadline
	} else {
		msg.SlotAt, msg.TargetSlotAt = def.Slots.Account, def.Slots.Target
	}
	if err := d.Queue.Enqueue(ctx, msg, max(wake.Sub(now), 0)); err != nil {
		return fmt.Errorf("defer %s: %w", in.ID, err)
	}
	d.log().InfoContext(ctx, "attempt deferred; nothing sent", "intent", in.ID, "until", at, "reason", def.Reason)
	d.metrics().Count("AttemptDeferred", 1)
	return nil
}

// release ends a claimed attempt the gate deferred after its hold: the
// claim is on record, so is this: an attempt that sent nothing (attempt
// counts never go down; "deferred" proves no effect). The intent waits as a
// retryable failure until the gate's time.
func (d *Dispatcher) release(ctx context.Context, claimed *Intent, att Attempt, def gate.Deferral, log *slog.Logger) error {
	now := d.Clock.Now()
	until := def.At
	stored, err := d.updateHeld(ctx, claimed, att.N, func(in *Intent) error {
		in.Attempts = append(in.Attempts, Attempt{N: att.N, Trigger: TriggerGate, StartedAt: att.StartedAt, EndedAt: now, Result: AttemptDeferred,
			Evidence: Evidence{Detail: "not sent: " + def.Reason}})
		if err := in.MoveTo(StatusRetryableFailure, "deferred by the account gate before sending: "+def.Reason, now); err != nil {
			return err
		}
		in.NextAttemptAt = &until
		return nil
	})
	if err != nil {
		return fmt.Errorf("release %s after the gate deferred it: %w", claimed.ID, err)
	}
	log.InfoContext(ctx, "attempt deferred after its claim; nothing sent", "until", until, "reason", def.Reason)
	if err := d.deferAttempt(ctx, stored, stored.AttemptCount, OpAttempt, TriggerGate, gate.Deferral{At: until, Wake: until, Reason: def.Reason}); err != nil {
		log.WarnContext(ctx, "enqueue failed; the sweeper re-enqueues it", "err", err.Error())
	}
	return nil
}

// updateHeld is updateClaimed for a write that needs this worker to still
// hold attempt n of the intent (Intent.HeldBy): otherwise ErrLeaseLost.
func (d *Dispatcher) updateHeld(ctx context.Context, claimed *Intent, n int, mutate func(*Intent) error) (*Intent, error) {
	return d.updateClaimed(ctx, claimed, func(in *Intent) error {
		if !in.HeldBy(d.Owner, n) {
			return ErrLeaseLost
		}
		return mutate(in)
	})
}
