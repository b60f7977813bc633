package core

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// IntentLister finds non-terminal intents by status and due time.
type IntentLister interface {
	ListByStatus(ctx context.Context, status Status, dueBefore time.Time, limit int) ([]*Intent, error)
	// CountByStatus counts without reading the intents (the alarm gauge).
	CountByStatus(ctx context.Context, status Status) (int, error)
}

// Attempts is what the sweeper asks of the dispatcher: start the attempt of
// a pending intent, and record an expired lease as the attempt's outcome.
type Attempts interface {
	Attempt(ctx context.Context, id, trigger string) error
	ExpireLease(ctx context.Context, listed *Intent, now time.Time) error
}

// Sweeper repairs what crashes leave behind. Every repair is a conditional
// transition or a duplicate-safe message, so sweepers may run concurrently
// and as often as wanted.
type Sweeper struct {
	List     IntentLister
	Attempts Attempts
	Queue    RetryQueue
	Clock    Clock
	Grace    time.Duration // how late work must be before the sweeper steps in
	Limit    int           // intents per status per run
	Gauges   func(name string, value int)
	// OperatorEvents, when set, is asked to publish operator events a crash
	// left claimed but unpublished.
	OperatorEvents *OperatorNotifier
}

// SweepReport counts what one run did.
type SweepReport struct {
	LeasesExpired int `json:"leasesExpired"`
	RetriesQueued int `json:"retriesQueued"`
	Reconciles    int `json:"reconcilesQueued"`
	PendingKicked int `json:"pendingKicked"`
	NeedingHuman  int `json:"needingHuman"`
	EventsRedrive int `json:"operatorEventsRedriven"`
	Errors        int `json:"errors"`
}

// Run makes one pass.
func (s *Sweeper) Run(ctx context.Context) (SweepReport, error) {
	var rep SweepReport
	var errs []error
	now := s.Clock.Now()
	limit := s.Limit
	if limit <= 0 {
		limit = 100
	}
	// 1. In-flight past its lease: the request may have gone out.
	inflight, err := s.List.ListByStatus(ctx, StatusInFlight, now, limit)
	errs = append(errs, err)
	for _, in := range inflight {
		if err := s.Attempts.ExpireLease(ctx, in, now); err != nil {
			rep.Errors++
			errs = append(errs, err)
		} else {
			rep.LeasesExpired++
		}
	}
	// 2. Retries whose queue message was lost (or never sent).
	due, err := s.List.ListByStatus(ctx, StatusRetryableFailure, now.Add(-s.Grace), limit)
	errs = append(errs, err)
	for _, in := range due {
		if err := s.Queue.Enqueue(ctx, RetryMessage{IntentID: in.ID, Attempt: in.AttemptCount, Op: OpAttempt}, 0); err != nil {
			rep.Errors++
			errs = append(errs, err)
		} else {
			rep.RetriesQueued++
		}
	}
	// 3. Reconciliations whose message was lost.
	unknown, err := s.List.ListByStatus(ctx, StatusUnknownOutcome, now.Add(-s.Grace), limit)
	errs = append(errs, err)
	for _, in := range unknown {
		if err := s.Queue.Enqueue(ctx, RetryMessage{IntentID: in.ID, Attempt: in.AttemptCount, Op: OpReconcile}, 0); err != nil {
			rep.Errors++
			errs = append(errs, err)
		} else {
			rep.Reconciles++
		}
	}
	// 4. Pending intents the stream trigger never delivered (or past deadline).
	pending, err := s.List.ListByStatus(ctx, StatusPending, now.Add(-s.Grace), limit)
	errs = append(errs, err)
	for _, in := range pending {
		if err := s.Attempts.Attempt(ctx, in.ID, "sweeper"); err != nil {
			rep.Errors++
			errs = append(errs, err)
		} else {
			rep.PendingKicked++
		}
	}
	rep.NeedingHuman, err = s.List.CountByStatus(ctx, StatusNeedsHuman)
	errs = append(errs, err)
	if s.Gauges != nil {
		s.Gauges("IntentsNeedingHuman", rep.NeedingHuman)
	}
	if s.OperatorEvents != nil {
		rep.EventsRedrive, err = s.OperatorEvents.Redrive(ctx, limit)
		errs = append(errs, err)
	}
	return rep, errors.Join(errs...)
}

// ExpireLease turns an in-flight intent whose lease ran out into an Unknown
// Outcome and routes it exactly as if the provider call had timed out.
func (d *Dispatcher) ExpireLease(ctx context.Context, listed *Intent, now time.Time) error {
	// Provider I/O stays outside the conditional write (which may re-run).
	caps := d.Capabilities(ctx, listed)
	var o outcome
	stored, err := d.Store.Update(ctx, listed.ID, func(in *Intent) error {
		if in.Status != StatusInFlight || in.Lease == nil || now.Before(in.Lease.Until) {
			return ErrNotClaimable
		}
		lost := &UnknownOutcomeError{
			Evidence: Evidence{Detail: fmt.Sprintf("lease held by %s expired at %s before an outcome was recorded; the request may have gone out", in.Lease.Owner, in.Lease.Until.Format(time.RFC3339))},
			Err:      ErrLeaseLost,
		}
		o = decide(in, caps, nil, lost, now, d.Backoff, d.ReconcilePolicy)
		// The attempt started at its claim: evidence must say when it really
		// began (a retry's claim, not the sweep). Leases written before the
		// claim time was recorded fall back to the first attempt's time.
		started := in.Lease.Since
		if started.IsZero() {
			started = now
			if in.FirstAttemptAt != nil && len(in.Attempts) == 0 {
				started = *in.FirstAttemptAt
			}
		}
		return o.apply(in, Attempt{N: in.AttemptCount, Trigger: "sweeper", StartedAt: started, EndedAt: now, Result: ResultLeaseExpired, Evidence: lost.Evidence}, now)
	})
	if errors.Is(err, ErrNotClaimable) || errors.Is(err, ErrConflict) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("expire lease of %s: %w", listed.ID, err)
	}
	log := d.log().With("intent", listed.ID, "bot", stored.Bot, "attempt", stored.AttemptCount)
	log.InfoContext(ctx, "lease expired; unknown outcome", "status", string(stored.Status))
	if stored.Status == StatusNeedsHuman {
		d.metrics().Count("NeedsHuman", 1)
	}
	d.enqueue(ctx, stored, o.enqueueOp, o.delay, log)
	return nil
}
