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
}

// Sweeper repairs what crashes leave behind. Every repair is a conditional
// transition or a duplicate-safe message, so sweepers may run concurrently
// and as often as wanted.
type Sweeper struct {
	D      *Dispatcher
	List   IntentLister
	Grace  time.Duration // how late work must be before the sweeper steps in
	Limit  int           // intents per status per run
	Gauges func(name string, value int)
}

// SweepReport counts what one run did.
type SweepReport struct {
	LeasesExpired int `json:"leasesExpired"`
	RetriesQueued int `json:"retriesQueued"`
	Reconciles    int `json:"reconcilesQueued"`
	PendingKicked int `json:"pendingKicked"`
	NeedingHuman  int `json:"needingHuman"`
	Errors        int `json:"errors"`
}

// Run makes one pass.
func (s *Sweeper) Run(ctx context.Context) (SweepReport, error) {
	var rep SweepReport
	var errs []error
	now := s.D.Clock.Now()
	limit := s.Limit
	if limit <= 0 {
		limit = 100
	}
	// 1. In-flight past its lease: the request may have gone out.
	inflight, err := s.List.ListByStatus(ctx, StatusInFlight, now, limit)
	errs = append(errs, err)
	for _, in := range inflight {
		if err := s.expireLease(ctx, in.ID, now); err != nil {
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
		if err := s.D.Queue.Enqueue(ctx, RetryMessage{IntentID: in.ID, Attempt: in.AttemptCount, Op: OpAttempt}, 0); err != nil {
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
		if err := s.D.Queue.Enqueue(ctx, RetryMessage{IntentID: in.ID, Attempt: in.AttemptCount, Op: OpReconcile}, 0); err != nil {
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
		if err := s.D.Attempt(ctx, in.ID, "sweeper"); err != nil {
			rep.Errors++
			errs = append(errs, err)
		} else {
			rep.PendingKicked++
		}
	}
	human, err := s.List.ListByStatus(ctx, StatusNeedsHuman, now.Add(24*365*time.Hour), 1000)
	errs = append(errs, err)
	rep.NeedingHuman = len(human)
	if s.Gauges != nil {
		s.Gauges("IntentsNeedingHuman", rep.NeedingHuman)
	}
	return rep, errors.Join(errs...)
}

// expireLease turns an in-flight intent whose lease ran out into an Unknown
// Outcome and routes it exactly as if the provider call had timed out.
func (s *Sweeper) expireLease(ctx context.Context, id string, now time.Time) error {
	d := s.D
	var caps Capabilities
	var o outcome
	var changed bool
	stored, err := d.Store.Update(ctx, id, func(in *Intent) error {
		changed = false
		if in.Status != StatusInFlight || in.Lease == nil || now.Before(in.Lease.Until) {
			return ErrNotClaimable
		}
		if p, ok := d.Providers.Provider(in.Provider); ok {
			if c, err := p.Capabilities(ctx, in.Account, in.Action); err == nil {
				caps = c
			}
		}
		lost := &UnknownOutcomeError{
			Evidence: Evidence{Detail: fmt.Sprintf("lease held by %s expired at %s before an outcome was recorded; the request may have gone out", in.Lease.Owner, in.Lease.Until.Format(time.RFC3339))},
			Err:      ErrLeaseLost,
		}
		o = decide(in, caps, nil, lost, now, d.Backoff, d.ReconcilePolicy)
		started := now
		if in.FirstAttemptAt != nil && len(in.Attempts) == 0 {
			started = *in.FirstAttemptAt
		}
		a := Attempt{N: in.AttemptCount, Trigger: "sweeper", StartedAt: started, EndedAt: now, Result: "lease-expired", Evidence: lost.Evidence}
		if o.status == StatusRetryableFailure {
			due := now.Add(o.delay)
			a.NextDueAt = &due
		}
		in.Attempts = append(in.Attempts, a)
		if err := in.moveTo(o.status, o.reason, now); err != nil {
			return err
		}
		if o.status == StatusRetryableFailure {
			due := now.Add(o.delay)
			in.NextAttemptAt = &due
		}
		changed = true
		return nil
	})
	if errors.Is(err, ErrNotClaimable) || errors.Is(err, ErrConflict) || !changed && err == nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("expire lease of %s: %w", id, err)
	}
	d.log().InfoContext(ctx, "lease expired; unknown outcome", "intent", id, "bot", stored.Bot, "attempt", stored.AttemptCount, "status", string(stored.Status))
	if stored.Status == StatusNeedsHuman {
		d.metrics().Count("NeedsHuman", 1)
	}
	if o.enqueueOp != "" {
		if err := d.Queue.Enqueue(ctx, RetryMessage{IntentID: id, Attempt: stored.AttemptCount, Op: o.enqueueOp}, o.delay); err != nil {
			d.log().WarnContext(ctx, "enqueue after lease expiry failed; next sweep re-enqueues", "intent", id, "err", err.Error())
		}
	}
	return nil
}
