package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/botharness/outbox/core/gate"
)

// MaxQueueDelay is SQS's cap on DelaySeconds; longer waits re-delay.
const MaxQueueDelay = 15 * time.Minute

// HandleRetry processes one retry-queue message. It returns an error only
// when the message should be redelivered (a store or queue failure).
func (d *Dispatcher) HandleRetry(ctx context.Context, msg RetryMessage) error {
	if msg.Op == OpDispatch {
		// Only a pending intent is dispatched: a retry waiting for its
		// backoff belongs to its own retry message (a late dispatch message
		// must not bring it forward). The claim still decides.
		trigger := msg.Trigger
		if trigger == "" {
			trigger = TriggerDispatch
		}
		in, err := d.Store.Get(ctx, msg.IntentID)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("load %s: %w", msg.IntentID, err)
		}
		if in.Status != StatusPending {
			return nil
		}
		_, err = d.Attempt(ctx, AttemptRequest{ID: msg.IntentID, Trigger: trigger, Intent: in})
		return err
	}
	in, err := d.Store.Get(ctx, msg.IntentID)
	if errors.Is(err, ErrNotFound) {
		d.log().WarnContext(ctx, "retry message for unknown intent dropped", "intent", msg.IntentID)
		return nil
	}
	if err != nil {
		return fmt.Errorf("load %s: %w", msg.IntentID, err)
	}
	if in.AttemptCount != msg.Attempt {
		// A newer attempt has happened since; this message is stale.
		return nil
	}
	now := d.Clock.Now()
	switch msg.Op {
	case OpPaced:
		if !in.Claimable(now) {
			return nil
		}
		_, err = d.Attempt(ctx, AttemptRequest{ID: in.ID, Trigger: TriggerPaced, Intent: in, Slots: gate.Slots{Account: msg.SlotAt, Target: msg.TargetSlotAt}})
		return err
	case OpReconcile:
		if in.Status != StatusUnknownOutcome {
			return nil
		}
		return d.Reconcile(ctx, in.ID)
	default:
		if in.Status != StatusRetryableFailure {
			return nil
		}
		if in.NextAttemptAt != nil && now.Before(*in.NextAttemptAt) {
			// Not due yet (backoff beyond the queue's delay cap): delay again.
			if err := d.Queue.Enqueue(ctx, msg, in.NextAttemptAt.Sub(now)); err != nil {
				return fmt.Errorf("re-delay %s: %w", in.ID, err)
			}
			return nil
		}
		_, err = d.Attempt(ctx, AttemptRequest{ID: in.ID, Trigger: TriggerRetry, Intent: in})
		return err
	}
}

// Reconcile asks a lookup-capable provider what became of the last attempt of
// an unknown-outcome intent, and decides: found -> succeeded; authoritatively
// absent and a retry cannot duplicate -> retry with the same key; pending or
// unreachable -> poll again within the window; otherwise a human decides.
//
// A poll that learns nothing (pending, absent but not yet settled, lookup
// failing, all within the window) writes nothing: the next poll is carried by
// the queue message alone, and the sweeper only steps in past the window (see
// ReconcileDue). A poll that learns something writes once.
func (d *Dispatcher) Reconcile(ctx context.Context, id string) error {
	in, err := d.Store.Get(ctx, id)
	if err != nil {
		return fmt.Errorf("load %s: %w", id, err)
	}
	if in.Status != StatusUnknownOutcome {
		return nil
	}
	log := d.log().With("intent", in.ID, "bot", in.Bot, "attempt", in.AttemptCount)
	ctx, span := startSpan(ctx, d.Tracer, "outbox.reconcile", in.TraceParent, attemptAttrs(in, TriggerReconcile))
	defer span.End()
	prov, ok := d.Providers.Provider(in.Provider)
	caps := d.Capabilities(ctx, in)
	var lr LookupResult
	var lookupErr error
	if ok && caps.Lookup {
		lr, lookupErr = prov.Lookup(ctx, d.sendRequest(in))
	} else {
		lookupErr = errors.New("provider offers no outcome lookup")
	}
	now := d.Clock.Now()
	span.SetOutcome(string(lr.State))
	if reconcileVerdict(in, lr, lookupErr, caps, now, d.Policy.Reconcile) == pollAgain {
		log.DebugContext(ctx, "reconcile poll learned nothing; polling again", "state", string(lr.State))
		d.enqueue(ctx, in, OpReconcile, d.Policy.Reconcile.Delay, log)
		return nil
	}
	var next Status
	var enqueue bool
	stored, err := d.Store.Update(ctx, id, func(cur *Intent) error {
		enqueue = false
		if cur.Status != StatusUnknownOutcome || cur.AttemptCount != in.AttemptCount {
			return ErrNotClaimable
		}
		first := now
		if cur.FirstAttemptAt != nil {
			first = *cur.FirstAttemptAt
		}
		entry := Attempt{N: cur.AttemptCount, Trigger: TriggerReconcile, StartedAt: now, EndedAt: now}
		switch reconcileVerdict(cur, lr, lookupErr, caps, now, d.Policy.Reconcile) {
		case pollFound:
			entry.Result, entry.ExternalID, entry.Evidence = ResultLookupFound, lr.ExternalID, lr.Evidence
			cur.AppendAttempt(entry)
			cur.ExternalID = lr.ExternalID
			next = StatusSucceeded
			return cur.MoveTo(next, "reconciled: the provider reports the effect", now)
		case pollAbsent:
			entry.Result, entry.Evidence = ResultLookupAbsent, lr.Evidence
			delay, ok := d.Policy.Backoff.Next(cur.AttemptCount, first, now, 0)
			if !ok {
				cur.AppendAttempt(entry)
				next = StatusNeedsHuman
				return cur.MoveTo(next, "reconciled absent, but the retry policy is exhausted", now)
			}
			due := now.Add(delay)
			entry.NextDueAt = &due
			cur.AppendAttempt(entry)
			next = StatusRetryableFailure
			if err := cur.MoveTo(next, "reconciled: the provider authoritatively reports no effect", now); err != nil {
				return err
			}
			cur.NextAttemptAt = &due
			enqueue = true
			return nil
		case pollAgain:
			// The state changed since the read (e.g. a webhook entry) but
			// still says nothing new: no write, poll again.
			next = StatusUnknownOutcome
			enqueue = true
			return errNothingLearned
		default:
			entry.Result = ResultReconcileExhausted
			if lookupErr != nil {
				entry.Evidence = Evidence{Detail: truncate(lookupErr.Error(), 512)}
			} else {
				entry.Evidence = lr.Evidence
				entry.Evidence.ProviderCode = string(lr.State)
			}
			cur.AppendAttempt(entry)
			next = StatusNeedsHuman
			return cur.MoveTo(next, "unknown outcome could not be reconciled", now)
		}
	})
	if errors.Is(err, errNothingLearned) {
		d.enqueue(ctx, in, OpReconcile, d.Policy.Reconcile.Delay, log)
		return nil
	}
	if errors.Is(err, ErrNotClaimable) || errors.Is(err, ErrConflict) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("record reconciliation of %s: %w", id, err)
	}
	log.InfoContext(ctx, "reconciled", "status", string(stored.Status))
	if next == StatusNeedsHuman {
		d.metrics().Count("NeedsHuman", 1)
	}
	if enqueue {
		d.enqueue(ctx, stored, OpAttempt, stored.NextAttemptAt.Sub(now), log)
	}
	return nil
}

var errNothingLearned = errors.New("reconcile poll learned nothing")

// pollVerdict is what one reconcile poll concludes.
type pollVerdict string

const (
	pollFound     pollVerdict = "found"      // the provider reports the effect
	pollAbsent    pollVerdict = "absent"     // authoritatively absent and a retry cannot duplicate
	pollAgain     pollVerdict = "poll-again" // learned nothing; within the window
	pollExhausted pollVerdict = "exhausted"  // past the window, or no lookup: a human decides
)

// reconcileVerdict is the rule for one reconcile poll of an unknown-outcome
// intent. Pure.
func reconcileVerdict(in *Intent, lr LookupResult, lookupErr error, caps Capabilities, now time.Time, rp ReconcilePolicy) pollVerdict {
	lastEnd := lastAttemptEnd(in)
	first := now
	if in.FirstAttemptAt != nil {
		first = *in.FirstAttemptAt
	}
	withinWindow := now.Sub(lastEnd) < rp.Window
	// Sends after uncertainty (docs/decisions.md): an "absent" answer is
	// acted on at once only while the key still covers a retry; without
	// that, only once the original request can no longer land (Settle).
	keyValid := DecideResend(ResendCase{Uncertain: true, Caps: caps, First: &first, SendBy: now}) == ResendCovered
	switch {
	case lookupErr == nil && lr.State == LookupFound:
		return pollFound
	case lookupErr == nil && lr.State == LookupAbsent && (keyValid || now.Sub(lastEnd) >= rp.Settle):
		return pollAbsent
	case withinWindow && caps.Lookup:
		return pollAgain
	}
	return pollExhausted
}

func lastAttemptEnd(in *Intent) time.Time {
	if n := len(in.Attempts); n > 0 {
		return in.Attempts[n-1].EndedAt
	}
	return time.Time{}
}

// ReconcileDue is when the sweeper should look at an unknown-outcome intent:
// the end of its reconcile window. Polls inside the window are carried by
// queue messages alone (they write nothing), so an earlier due time would
// start a second chain of polls; a lost message is repaired at the window's
// end, when one more poll decides.
func ReconcileDue(in *Intent, rp ReconcilePolicy) time.Time {
	return lastAttemptEnd(in).Add(rp.Window)
}

// ReconcileDue is when the next reconciliation of in is due under the
// dispatcher's policy (the resolver's Reconciliation port).
func (d *Dispatcher) ReconcileDue(in *Intent) time.Time { return ReconcileDue(in, d.Policy.Reconcile) }
