package core

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/botharness/outbox/core/gate"
)

// Revalidator checks, right before each attempt, that the intent is still
// authorised and current (source revision, grant, capability, target).
// It returns a non-nil *Blocked when the attempt must not be made.
type Revalidator interface {
	Revalidate(ctx context.Context, in *Intent) (*Checks, *Blocked, error)
}

// Blocked says why an attempt may not go out and where the intent goes.
type Blocked struct {
	Status Status // StatusSourceRevised, StatusGrantRevoked or StatusExpired
	Reason string
	// Settled: Status stands even after an uncertain earlier attempt (a
	// newer update of the same value went out since: setvalue.go); without
	// it such an intent goes to a human.
	Settled bool
}

// Metrics receives counters (CloudWatch EMF in production).
type Metrics interface {
	Count(name string, n int)
}

// LatencyMetrics is implemented by a Metrics that also records latencies
// per provider (adapters/emf: AttemptLatency, dimension Provider), which
// the stack's dashboard charts as p50/p99.
type LatencyMetrics interface {
	Latency(name, provider string, d time.Duration)
}

type noMetrics struct{}

func (noMetrics) Count(string, int) {}

// Dispatcher claims intents and makes attempts. The dispatcher function
// (stream), the retrier (queue) and the sweeper all use it.
type Dispatcher struct {
	Store     IntentStore
	Queue     RetryQueue
	Providers Providers
	Clock     Clock
	// Policy is the attempt policy, resolved (AttemptPolicy.Resolve).
	Policy      AttemptPolicy
	Owner       string
	Revalidator Revalidator
	// Marks orders the sends of set-to-value actions per target
	// (setvalue.go); nil: no ordering.
	Marks ValueMarks
	// Gate paces sends per provider account and holds its pauses and
	// circuit breaker across every worker (package core/gate); nil: no gate.
	Gate *gate.Gate
	// Payloads reads payloads kept out of the item (nil: every payload is inline).
	Payloads PayloadStore
	// Barrier, when set, is read right after every claim (see BarrierCheck).
	Barrier BarrierCheck
	Metrics Metrics
	// Tracer continues each intent's trace in its attempts and
	// reconciliations (nil: no spans).
	Tracer Tracer
	Log    *slog.Logger
}

// BarrierCheck reads the backup barrier that covers an intent (its profile's
// barrier shard for that intent), strongly consistently.
//
// Rule "claim, then check the barrier": the claim is a plain conditional
// write on the intent alone, and the barrier is read after it. A backup
// raises the barrier (every shard, in one transaction) before it reads any
// intent. So either this read sees the barrier, and the attempt is not made,
// or it ran before the raise, and then the claim was written before the
// raise too: the backup reads the intent in flight and records it as in
// flight at the cutoff. No attempt claimed behind a raised barrier is ever
// sent, and no claim shares an item with another claim of the same bot.
type BarrierCheck interface {
	BarrierUp(ctx context.Context, in *Intent) (until time.Time, up bool, err error)
}

func (d *Dispatcher) metrics() Metrics {
	if d.Metrics == nil {
		return noMetrics{}
	}
	return d.Metrics
}

func (d *Dispatcher) log() *slog.Logger { return cmp.Or(d.Log, slog.Default()) }

// errDeadlinePassed: the claim found the intent's deadline passed; it is
// expired with an ordinary update instead.
var errDeadlinePassed = errors.New("deadline passed before the attempt")

// preClaim is what the inline intake read right before its put for the
// attempt it made (inline.go); the dispatcher's claims carry none.
type preClaim struct {
	// checks is the attempt's revalidation (nil: revalidate after the claim).
	checks *Checks
	// barrierRead: the barrier read before the put stands for the read after
	// the claim (InlineBarrierFresh).
	barrierRead bool
}

// startAttempt is the claim's change to the intent: in flight under this
// worker's lease, one more attempt. The dispatcher's claim (a conditional
// write on a stored intent) and the inline intake's put (an intent written
// already claimed, inline.go) both make it. Pure but for the receiver.
func (d *Dispatcher) startAttempt(in *Intent, now time.Time) error {
	if !in.Claimable(now) {
		return ErrNotClaimable
	}
	if in.Deadline != nil && !now.Before(*in.Deadline) {
		return errDeadlinePassed
	}
	if err := in.MoveTo(StatusInFlight, "", now); err != nil {
		return err
	}
	in.AttemptCount++
	if in.FirstAttemptAt == nil {
		t := now
		in.FirstAttemptAt = &t
	}
	in.Lease = &Lease{Owner: d.Owner, Since: now, Until: now.Add(d.Policy.Lease)}
	return nil
}

// afterClaim is the attempt after its claim: the barrier (unless the inline
// intake's read before its put stands for it, preClaim), the revalidation
// (unless checked carries one made for this attempt right before its claim:
// the inline intake's, inline.go), the checks before the send, the gate's
// hold, the send and its outcome. Every attempt goes through it, the inline
// one included: one path. It returns the intent as its last write stored it
// (nil when that write was the gate's release after a hold).
func (d *Dispatcher) afterClaim(ctx context.Context, in *Intent, att Attempt, permit *gate.Permit, pre preClaim, log *slog.Logger) (*Intent, error) {
	ctx, span := startSpan(ctx, d.Tracer, "outbox.attempt", in.TraceParent, attemptAttrs(in, att.Trigger))
	defer span.End()
	checked := pre.checks
	if d.Barrier != nil && !pre.barrierRead {
		until, up, err := d.Barrier.BarrierUp(ctx, in)
		if err != nil || up {
			// Fail closed: an unreadable barrier holds the attempt too.
			return d.holdForBarrier(ctx, in, att, until, err, log)
		}
	}
	if ack, ok := ProviderAcknowledged(in); ok {
		// A provider webhook already proved the effect (e.g. a late
		// acknowledgement after a human-authorised retry): never send again.
		res := SendResult{ExternalID: ack.ExternalID, Evidence: Evidence{Detail: "not sent: provider webhook " + ack.Evidence.Extra["eventId"] + " already proves the effect"}}
		return d.record(ctx, in, att, &res, nil, Capabilities{}, log)
	}

	if checked != nil {
		att.Checks = checked // read right before the claim, for this attempt (inline.go)
	} else if d.Revalidator != nil {
		checks, blocked, err := d.Revalidator.Revalidate(ctx, in)
		if err != nil {
			// Could not revalidate: no send. Leave the lease to expire? No:
			// nothing was sent, so this is proof of no effect; retry later.
			return d.record(ctx, in, att, nil, &RetryableError{Class: ClassTransient, Err: fmt.Errorf("revalidate: %w", err)}, Capabilities{}, log)
		}
		att.Checks = checks
		if blocked != nil {
			return d.recordBlocked(ctx, in, att, blocked, log)
		}
	}

	prov, ok := d.Providers.Provider(in.Provider)
	if !ok {
		return d.record(ctx, in, att, nil, &PermanentError{Class: ClassRejectedInput, Err: fmt.Errorf("%w: %s", ErrUnknownProvider, in.Provider)}, Capabilities{}, log)
	}
	var caps Capabilities
	capsOf := func() Capabilities { return caps }
	if MayHaveTakenEffect(in) {
		caps = d.Capabilities(ctx, in)
		// Sends after uncertainty (docs/decisions.md): decided right before the
		// send, not only when the retry was scheduled (a queue, a sweep or a slow
		// retrier can deliver it late). The request must also finish inside the
		// key's retention: allow it the lease.
		if v := DecideResend(resendCase(in, caps, d.Clock.Now().Add(d.Policy.Lease))); !v.Allowed() {
			// An earlier attempt may have taken effect and nothing would stop the
			// provider from doing it again: stop before sending, not after.
			return d.recordBlocked(ctx, in, att, &Blocked{Status: StatusNeedsHuman, Reason: v.Reason()}, log)
		}
	} else {
		// Nothing can have taken effect yet, so the send is safe whatever the
		// provider declares (DecideResend: ResendSafe); the declaration only
		// decides the outcome, and is read side by side with the payload and
		// the send instead of one round trip before them (issue 26).
		ch := make(chan Capabilities, 1)
		go func() { ch <- d.Capabilities(ctx, in) }()
		var once sync.Once
		capsOf = func() Capabilities { once.Do(func() { caps = <-ch }); return caps }
	}
	payload, err := d.loadPayload(ctx, in)
	switch {
	case errors.Is(err, ErrPayloadTampered), errors.Is(err, ErrPayloadMissing):
		// Never send bytes other than those accepted; nothing can fix this
		// automatically, so a human sees the evidence.
		log.ErrorContext(ctx, "payload failed verification; not sent", "ref", in.PayloadRef, "err", err.Error())
		d.metrics().Count("PayloadRejected", 1)
		return d.recordBlocked(ctx, in, att, &Blocked{Status: StatusNeedsHuman,
			Reason: fmt.Sprintf("payload %s not sent: %v", in.PayloadRef, err)}, log)
	case err != nil:
		// Nothing was sent: proof of no effect; try again later.
		return d.record(ctx, in, att, nil, &RetryableError{Class: ClassTransient, Err: fmt.Errorf("read payload %s: %w", in.PayloadRef, err)}, capsOf(), log)
	}
	subject := ValueSubject(prov, in.Action, in.Target, payload)
	if subject != "" {
		newer, err := d.supersededBy(ctx, in, subject)
		if err != nil {
			// Could not tell: nothing was sent, proof of no effect; later.
			return d.record(ctx, in, att, nil, &RetryableError{Class: ClassTransient, Err: err}, capsOf(), log)
		}
		if newer != "" {
			// Whatever this one may have set before, the newer value was set
			// after it: superseded, never a human's question.
			return d.recordBlocked(ctx, in, att, &Blocked{Status: StatusSourceRevised, Settled: true,
				Reason: fmt.Sprintf("superseded: a newer update of the same target (%s) went out; this older value is not sent again", newer)}, log)
		}
	}
	if permit != nil {
		def, err := permit.Hold(ctx)
		if err != nil {
			return nil, err // the lease expires; the sweeper takes it (nothing was sent)
		}
		if def != nil {
			return nil, d.release(ctx, in, att, *def, log) // the account gate said wait after all: nothing sent
		}
	}
	req := d.sendRequest(in)
	req.Payload = payload
	res, sendErr := prov.Send(ctx, req)
	if permit != nil {
		var retryAfter time.Duration
		if re := (*RetryableError)(nil); errors.As(sendErr, &re) {
			retryAfter = re.RetryAfter
		}
		permit.Report(ctx, classifyForGate(sendErr), retryAfter)
	}
	if subject != "" && WentOut(sendErr) {
		d.markSent(ctx, in, subject, log)
	}
	return d.record(ctx, in, att, &res, sendErr, capsOf(), log)
}

// Capabilities asks the intent's provider what it declares for the
// intent's account and action. An unknown provider or a failed declaration
// counts as neither keys nor lookup: when we cannot tell, we assume the
// least protection.
func (d *Dispatcher) Capabilities(ctx context.Context, in *Intent) Capabilities {
	prov, ok := d.Providers.Provider(in.Provider)
	if !ok {
		return Capabilities{}
	}
	caps, err := prov.Capabilities(ctx, in.Account, in.Action)
	if err != nil {
		d.log().WarnContext(ctx, "capabilities unavailable; assuming neither keys nor lookup", "intent", in.ID, "err", err.Error())
		return Capabilities{}
	}
	return caps
}

func (d *Dispatcher) sendRequest(in *Intent) SendRequest {
	started := d.Clock.Now()
	switch {
	case in.Status == StatusInFlight:
		started = in.UpdatedAt // the claim
	case in.FirstAttemptAt != nil:
		// Reconciling: the window starts at the earliest attempt that may
		// have taken effect (a lookup must cover every attempt under the key).
		started = *in.FirstAttemptAt
	}
	return SendRequest{
		IntentID: in.ID, IdempotencyKey: in.ID, Bot: in.Bot, Account: in.Account, Action: in.Action,
		Target: in.Target, Payload: in.Payload, PayloadHash: in.PayloadHash, Attempt: in.AttemptCount,
		AttemptStartedAt: started,
	}
}

// outcome is the decision for one attempt result, computed purely.
type outcome struct {
	status    Status
	reason    string
	result    AttemptResult
	external  string
	evidence  Evidence
	delay     time.Duration // retry or reconcile delay
	window    time.Duration // reconcile window (unknown outcome)
	enqueueOp string
}

// decide maps an attempt result to the next status. Pure.
func decide(in *Intent, caps Capabilities, res *SendResult, sendErr error, now time.Time, bp BackoffPolicy, rp ReconcilePolicy) outcome {
	if sendErr == nil {
		o := outcome{status: StatusSucceeded, result: ResultSucceeded}
		if res != nil {
			o.external, o.evidence = res.ExternalID, res.Evidence
		}
		return o
	}
	class := ClassOf(sendErr)
	o := outcome{result: AttemptResult(class), evidence: EvidenceOf(sendErr), reason: string(class)}
	if ack, ok := ProviderAcknowledged(in); ok {
		// A webhook that arrived while the attempt was in flight proves the
		// effect; the outcome must agree with it whichever came first.
		o.status = StatusSucceeded
		o.reason = fmt.Sprintf("provider webhook %s proves the effect; the attempt itself saw %s", ack.Evidence.Extra["eventId"], class)
		return o
	}
	first := now
	if in.FirstAttemptAt != nil {
		first = *in.FirstAttemptAt
	}
	var retryAfter time.Duration
	var re *RetryableError
	if errors.As(sendErr, &re) {
		retryAfter = re.RetryAfter
	}
	switch class {
	case ClassRejectedInput, ClassUnauthorized:
		o.status = StatusFailed
		if MayHaveTakenEffect(in) {
			// "failed" would claim nothing happened; an earlier attempt may have.
			o.status, o.reason = StatusNeedsHuman, string(class)+" now, but an earlier attempt may have taken effect"
		}
	case ClassRateLimited, ClassTransient:
		if delay, ok := bp.Next(in.AttemptCount, first, now, retryAfter); ok {
			o.status, o.delay, o.enqueueOp = StatusRetryableFailure, delay, OpAttempt
		} else if MayHaveTakenEffect(in) {
			o.status, o.reason = StatusNeedsHuman, "retries exhausted, and an earlier attempt may have taken effect"
		} else {
			o.status, o.reason = StatusFailed, "retries exhausted; every attempt failed with proof of no effect"
		}
	default: // unknown outcome
		switch {
		case caps.Lookup:
			o.status, o.delay, o.enqueueOp, o.window = StatusUnknownOutcome, rp.Delay, OpReconcile, rp.Window
			o.reason = "unknown outcome; reconciling with the provider's lookup"
		case caps.NaturallyIdempotent && !caps.IdempotencyKeys && !caps.Lookup:
			// The action sets a value: a repeat changes nothing (DecideResend:
			// ResendHarmless), so retry under the usual bounds.
			if delay, ok := bp.Next(in.AttemptCount, first, now, retryAfter); ok {
				o.status, o.delay, o.enqueueOp = StatusRetryableFailure, delay, OpAttempt
				o.reason = "unknown outcome; the action sets a value, so repeating it changes nothing: retrying"
			} else {
				o.status = StatusNeedsHuman
				o.reason = "unknown outcome; retries of this set-to-value action are exhausted"
			}
		case caps.IdempotencyKeys:
			delay, ok := bp.Next(in.AttemptCount, first, now, retryAfter)
			// Sends after uncertainty (docs/decisions.md): this attempt is the
			// uncertain one; its retry must arrive while the key is retained.
			retry := DecideResend(ResendCase{Uncertain: true, Caps: caps, First: &first, SendBy: now.Add(delay)})
			if ok && (retry == ResendCovered || retry == ResendHarmless) {
				o.status, o.delay, o.enqueueOp = StatusRetryableFailure, delay, OpAttempt
				o.reason = "unknown outcome covered by the provider's idempotency key; retrying with the same key"
			} else {
				o.status = StatusNeedsHuman
				o.reason = "unknown outcome; a retry would fall outside the provider's key retention or the retry policy"
			}
		default:
			o.status = StatusNeedsHuman
			o.reason = "unknown outcome; the provider offers neither idempotency keys nor lookup"
		}
	}
	return o
}

// updateClaimed is Update of an intent this worker just claimed (or put
// already claimed), starting from that write's state where the store can
// (KnownUpdater): no read before the outcome unless someone else wrote.
func (d *Dispatcher) updateClaimed(ctx context.Context, claimed *Intent, mutate func(*Intent) error) (*Intent, error) {
	if ku, ok := d.Store.(KnownUpdater); ok && claimed.Version > 0 {
		return ku.UpdateKnown(ctx, claimed, mutate)
	}
	return d.Store.Update(ctx, claimed.ID, mutate)
}

// record writes the attempt's outcome if this worker still holds the claim.
func (d *Dispatcher) record(ctx context.Context, claimed *Intent, att Attempt, res *SendResult, sendErr error, caps Capabilities, log *slog.Logger) (*Intent, error) {
	now := d.Clock.Now()
	var o outcome
	var late bool
	stored, err := d.updateClaimed(ctx, claimed, func(in *Intent) error {
		a := att
		a.EndedAt = now
		late = !in.HeldBy(d.Owner, att.N)
		if late {
			// The sweeper declared our lease lost. Keep the fact: a success is
			// provider evidence that resolves the uncertainty; anything else is
			// appended as evidence without changing the decision already made.
			if in.AttemptCount != att.N {
				return ErrLeaseLost
			}
			o = decide(in, caps, res, sendErr, now, d.Policy.Backoff, d.Policy.Reconcile)
			a.Trigger = att.Trigger + "+late"
			a.Result, a.ExternalID, a.Evidence = o.result, o.external, o.evidence
			in.AppendAttempt(a)
			in.UpdatedAt = now
			if o.status == StatusSucceeded && (in.Status == StatusUnknownOutcome || in.Status == StatusNeedsHuman) {
				if o.external != "" {
					in.ExternalID = o.external
				}
				return in.MoveTo(StatusSucceeded, "late provider acknowledgement of the attempt", now)
			}
			if o.status == StatusSucceeded && o.external != "" && in.ExternalID == "" {
				// The provider's message id is a fact whatever the status
				// (e.g. a retry is already scheduled under the key): keep it,
				// so a later success, even one an operator accepts without an
				// id, names the effect that happened (chaos seed 100652059).
				in.ExternalID = o.external
			}
			o.enqueueOp = ""
			return nil
		}
		o = decide(in, caps, res, sendErr, now, d.Policy.Backoff, d.Policy.Reconcile)
		a.Result, a.ExternalID, a.Evidence = o.result, o.external, o.evidence
		spanOf(ctx).SetOutcome(string(o.result))
		return o.apply(in, a, now)
	})
	if err != nil {
		// The outcome fact could not be written. The lease will expire and the
		// sweeper takes it down the unknown-outcome path: never a blind retry.
		return nil, fmt.Errorf("record outcome of %s attempt %d: %w", claimed.ID, att.N, err)
	}
	log.InfoContext(ctx, "attempt recorded", "status", string(stored.Status), "result", o.result, "late", late)
	d.metrics().Count("Attempt_"+string(o.result), 1)
	if lm, ok := d.metrics().(LatencyMetrics); ok {
		lm.Latency("AttemptLatency", claimed.Provider, now.Sub(att.StartedAt))
	}
	if stored.Status == StatusNeedsHuman && !late {
		d.metrics().Count("NeedsHuman", 1)
	}
	d.enqueue(ctx, stored, o.enqueueOp, o.delay, log)
	return stored, nil
}

// apply appends attempt a and moves the intent as the outcome says. Pure.
func (o outcome) apply(in *Intent, a Attempt, now time.Time) error {
	var due *time.Time
	if o.status == StatusRetryableFailure {
		t := now.Add(o.delay)
		due, a.NextDueAt = &t, &t
	}
	if o.status == StatusUnknownOutcome {
		// The sweeper's due time: the end of the reconcile window.
		t := a.EndedAt.Add(o.window)
		due = &t
	}
	in.AppendAttempt(a)
	if err := in.MoveTo(o.status, o.reason, now); err != nil {
		return err
	}
	if o.external != "" {
		in.ExternalID = o.external
	}
	in.NextAttemptAt = due
	return nil
}

// enqueue sends the follow-up message (a retry or a reconciliation) for the
// stored intent. A failed send is only logged: the intent records its due
// time and the sweeper re-enqueues overdue work.
func (d *Dispatcher) enqueue(ctx context.Context, stored *Intent, op string, delay time.Duration, log *slog.Logger) {
	if op == "" {
		return
	}
	msg := RetryMessage{IntentID: stored.ID, Attempt: stored.AttemptCount, Op: op}
	if err := d.Queue.Enqueue(ctx, msg, delay); err != nil {
		log.WarnContext(ctx, "enqueue failed; the sweeper re-enqueues it", "err", err.Error())
	}
}

func (d *Dispatcher) recordBlocked(ctx context.Context, claimed *Intent, att Attempt, b *Blocked, log *slog.Logger) (*Intent, error) {
	now := d.Clock.Now()
	stored, err := d.updateHeld(ctx, claimed, att.N, func(in *Intent) error {
		a := att
		a.EndedAt = now
		a.Result = AttemptResult(b.Status)
		a.Evidence = Evidence{Detail: b.Reason}
		in.AppendAttempt(a)
		if MayHaveTakenEffect(in) && !b.Settled {
			// Blocking this attempt must not hide an earlier one that may have
			// reached the provider: a terminal "revoked" would read as "never sent".
			return in.MoveTo(StatusNeedsHuman, b.Reason+"; an earlier attempt may have reached the provider", now)
		}
		return in.MoveTo(b.Status, b.Reason, now)
	})
	if err != nil {
		return nil, fmt.Errorf("record blocked attempt of %s: %w", claimed.ID, err)
	}
	log.InfoContext(ctx, "attempt blocked; nothing sent", "status", string(b.Status), "reason", b.Reason)
	d.metrics().Count("AttemptBlocked", 1)
	if b.Status == StatusNeedsHuman || (MayHaveTakenEffect(claimed) && !b.Settled) {
		d.metrics().Count("NeedsHuman", 1)
	}
	return stored, nil
}

// ResultHeldByBarrier is the attempt result of a claim a backup barrier held:
// nothing was sent.
const ResultHeldByBarrier AttemptResult = "held-by-barrier"

// holdForBarrier gives back a claim that a backup barrier (or an unreadable one) stops:
// nothing was sent, so the intent waits as a retryable failure until the
// barrier can have been lifted, and a queue message brings it back.
func (d *Dispatcher) holdForBarrier(ctx context.Context, claimed *Intent, att Attempt, until time.Time, cause error, log *slog.Logger) (*Intent, error) {
	now := d.Clock.Now()
	next := now.Add(d.Policy.BarrierRecheck)
	if !until.IsZero() && until.Before(next) && until.After(now) {
		next = until
	}
	detail := "a backup barrier is up for this profile; the claim was given back before anything was sent"
	if cause != nil {
		detail = "the backup barrier could not be read; the claim was given back before anything was sent"
	}
	stored, err := d.updateHeld(ctx, claimed, att.N, func(in *Intent) error {
		a := att
		a.EndedAt, a.Result, a.Evidence = now, ResultHeldByBarrier, Evidence{Detail: detail}
		t := next
		a.NextDueAt = &t
		in.Attempts = append(in.Attempts, a)
		if err := in.MoveTo(StatusRetryableFailure, "held by a backup barrier", now); err != nil {
			return err
		}
		in.NextAttemptAt = &t
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("give back claim of %s held by a barrier: %w", claimed.ID, err)
	}
	log.InfoContext(ctx, "claim held by a backup barrier; nothing sent", "next", next)
	d.metrics().Count("AttemptHeldByBarrier", 1)
	d.enqueue(ctx, stored, OpAttempt, next.Sub(now), log)
	return stored, nil
}

func attemptAttrs(in *Intent, trigger Trigger) map[string]string {
	a := IntentSpanAttrs(in)
	a["outbox.attempt"] = strconv.Itoa(in.AttemptCount)
	a["outbox.trigger"] = string(trigger)
	return a
}
