package core

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// MaxQueueDelay is SQS's cap on DelaySeconds; longer waits re-delay.
const MaxQueueDelay = 15 * time.Minute

// HandleRetry processes one retry-queue message. It returns an error only
// when the message should be redelivered (a store or queue failure).
func (d *Dispatcher) HandleRetry(ctx context.Context, msg RetryMessage) error {
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
		return d.attempt(ctx, in.ID, "paced", msg.SlotAt)
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
		return d.Attempt(ctx, in.ID, "retry")
	}
}

// Reconcile asks a lookup-capable provider what became of the last attempt of
// an unknown-outcome intent, and decides: found -> succeeded; authoritatively
// absent and a retry cannot duplicate -> retry with the same key; pending or
// unreachable -> poll again within the window; otherwise a human decides.
func (d *Dispatcher) Reconcile(ctx context.Context, id string) error {
	in, err := d.Store.Get(ctx, id)
	if err != nil {
		return fmt.Errorf("load %s: %w", id, err)
	}
	if in.Status != StatusUnknownOutcome {
		return nil
	}
	log := d.log().With("intent", in.ID, "bot", in.Bot, "attempt", in.AttemptCount)
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
	var next Status
	var enqueue bool
	stored, err := d.Store.Update(ctx, id, func(cur *Intent) error {
		enqueue = false
		if cur.Status != StatusUnknownOutcome || cur.AttemptCount != in.AttemptCount {
			return ErrNotClaimable
		}
		var lastEnd time.Time
		if n := len(cur.Attempts); n > 0 {
			lastEnd = cur.Attempts[n-1].EndedAt
		}
		first := now
		if cur.FirstAttemptAt != nil {
			first = *cur.FirstAttemptAt
		}
		entry := Attempt{N: cur.AttemptCount, Trigger: "reconcile", StartedAt: now, EndedAt: now}
		withinWindow := now.Sub(lastEnd) < d.ReconcilePolicy.Window
		// Sends after uncertainty (docs/decisions.md): an "absent" answer is
		// acted on at once only while the key still covers a retry; without
		// that, only once the original request can no longer land (Settle).
		keyValid := DecideResend(ResendCase{Uncertain: true, Caps: caps, First: &first, SendBy: now}) == ResendCovered
		switch {
		case lookupErr == nil && lr.State == LookupFound:
			entry.Result, entry.ExternalID, entry.Evidence = ResultLookupFound, lr.ExternalID, lr.Evidence
			cur.Attempts = append(cur.Attempts, entry)
			cur.ExternalID = lr.ExternalID
			next = StatusSucceeded
			return cur.moveTo(next, "reconciled: the provider reports the effect", now)
		case lookupErr == nil && lr.State == LookupAbsent && (keyValid || now.Sub(lastEnd) >= d.ReconcilePolicy.Settle):
			entry.Result, entry.Evidence = ResultLookupAbsent, lr.Evidence
			delay, ok := d.Backoff.Next(cur.AttemptCount, first, now, 0)
			if !ok {
				cur.Attempts = append(cur.Attempts, entry)
				next = StatusNeedsHuman
				return cur.moveTo(next, "reconciled absent, but the retry policy is exhausted", now)
			}
			due := now.Add(delay)
			entry.NextDueAt = &due
			cur.Attempts = append(cur.Attempts, entry)
			next = StatusRetryableFailure
			if err := cur.moveTo(next, "reconciled: the provider authoritatively reports no effect", now); err != nil {
				return err
			}
			cur.NextAttemptAt = &due
			enqueue = true
			return nil
		case withinWindow && caps.Lookup:
			// Pending, absent but not yet settled, or lookup failing: poll again.
			next = StatusUnknownOutcome
			enqueue = true
			return nil
		default:
			entry.Result = ResultReconcileExhausted
			if lookupErr != nil {
				entry.Evidence = Evidence{Detail: truncate(lookupErr.Error(), 512)}
			} else {
				entry.Evidence = lr.Evidence
				entry.Evidence.ProviderCode = string(lr.State)
			}
			cur.Attempts = append(cur.Attempts, entry)
			next = StatusNeedsHuman
			return cur.moveTo(next, "unknown outcome could not be reconciled", now)
		}
	})
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
		op, delay := OpReconcile, d.ReconcilePolicy.Delay
		if next == StatusRetryableFailure {
			op, delay = OpAttempt, stored.NextAttemptAt.Sub(now)
		}
		d.enqueue(ctx, stored, op, delay, log)
	}
	return nil
}
